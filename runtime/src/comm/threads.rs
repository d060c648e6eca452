//! Ranks as threads of one process, exchanging owned buffers through a shared mailbox.
//!
//! A rank that returns an error, panics or finishes early marks itself failed (or departed);
//! every rank waiting for it then gets [`CommError::PeerFailed`] instead of hanging. A wait also
//! ends with [`CommError::Timeout`] after the world's timeout.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{CommError, Communicator};

/// Default time a collective waits for a peer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Default)]
struct Mailbox {
    /// `(sequence, source, destination) → payload`.
    mail: HashMap<(u64, usize, usize), Vec<u8>>,
    /// Ranks that failed (`true`) or finished (`false`), with why and in which order.
    gone: HashMap<usize, Gone>,
}

/// Why and when a rank left.
struct Gone {
    reason: String,
    failed: bool,
    /// Position in the order ranks left: the first failure is the cause of the others.
    order: usize,
}

struct Hub {
    world: usize,
    timeout: Duration,
    mailbox: Mutex<Mailbox>,
    arrived: Condvar,
}

/// One rank's handle on a thread world.
pub struct ThreadComm {
    hub: Arc<Hub>,
    rank: usize,
    sequence: AtomicU64,
}

impl ThreadComm {
    /// `world` connected ranks; hand one to each thread. Waits time out after `timeout`.
    pub fn world(world: usize, timeout: Duration) -> Vec<ThreadComm> {
        let hub = Arc::new(Hub {
            world,
            timeout,
            mailbox: Mutex::default(),
            arrived: Condvar::new(),
        });
        (0..world)
            .map(|rank| ThreadComm {
                hub: hub.clone(),
                rank,
                sequence: AtomicU64::new(0),
            })
            .collect()
    }

    fn mark_gone(&self, reason: String, failed: bool) {
        let mut mailbox = self.hub.mailbox.lock().unwrap_or_else(|p| p.into_inner());
        let order = mailbox.gone.len();
        mailbox.gone.entry(self.rank).or_insert(Gone {
            reason,
            failed,
            order,
        });
        self.hub.arrived.notify_all();
    }

    /// Posts `outgoing` (destination, payload) and waits for a payload from each of `sources`.
    fn exchange(
        &self,
        outgoing: Vec<(usize, Vec<u8>)>,
        sources: impl Iterator<Item = usize>,
    ) -> Result<Vec<(usize, Vec<u8>)>, CommError> {
        let seq = self.post(outgoing);
        self.collect(seq, sources)
    }

    /// Posts `outgoing` (destination, payload) under the next sequence number, which it returns.
    fn post(&self, outgoing: Vec<(usize, Vec<u8>)>) -> u64 {
        let seq = self.sequence.fetch_add(1, Ordering::Relaxed);
        let mut mailbox = self.hub.mailbox.lock().unwrap_or_else(|p| p.into_inner());
        for (dst, payload) in outgoing {
            mailbox.mail.insert((seq, self.rank, dst), payload);
        }
        self.hub.arrived.notify_all();
        seq
    }

    /// Waits for the payloads of collective `seq` from each of `sources`.
    fn collect(
        &self,
        seq: u64,
        sources: impl Iterator<Item = usize>,
    ) -> Result<Vec<(usize, Vec<u8>)>, CommError> {
        let mut mailbox = self.hub.mailbox.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = Instant::now() + self.hub.timeout;
        let mut received = Vec::new();
        for src in sources {
            loop {
                if let Some(payload) = mailbox.mail.remove(&(seq, src, self.rank)) {
                    received.push((src, payload));
                    break;
                }
                // Any failed rank fails the collective; a finished rank only the wait for it.
                // Report the first rank that failed: later failures are its consequences.
                let peer = mailbox
                    .gone
                    .iter()
                    .filter(|(r, g)| **r != self.rank && (g.failed || **r == src))
                    .min_by_key(|(_, g)| g.order);
                if let Some((&rank, gone)) = peer {
                    return Err(CommError::PeerFailed {
                        rank,
                        reason: gone.reason.clone(),
                    });
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(CommError::Timeout {
                        rank: src,
                        seconds: self.hub.timeout.as_secs(),
                    });
                }
                mailbox = self
                    .hub
                    .arrived
                    .wait_timeout(mailbox, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        Ok(received)
    }
}

impl Drop for ThreadComm {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        let reason = if panicking {
            "panicked"
        } else {
            "left the world"
        };
        self.mark_gone(reason.into(), panicking);
    }
}

impl Communicator for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.hub.world
    }

    fn all_to_all_v_overlapped(
        &self,
        mut send: Vec<Vec<u8>>,
        work: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<u8>>, CommError> {
        assert_eq!(
            send.len(),
            self.hub.world,
            "all_to_all_v needs one buffer per rank"
        );
        // This rank's own part never goes through the mailbox.
        let own = std::mem::take(&mut send[self.rank]);
        let outgoing = send
            .into_iter()
            .enumerate()
            .filter(|&(d, _)| d != self.rank)
            .collect();
        let seq = self.post(outgoing);
        work();
        let received = self.collect(seq, (0..self.hub.world).filter(|&s| s != self.rank))?;
        let mut parts: Vec<Vec<u8>> = received.into_iter().map(|(_, p)| p).collect();
        parts.insert(self.rank, own);
        Ok(parts)
    }

    fn all_gather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        let outgoing = (0..self.hub.world).map(|d| (d, data.to_vec())).collect();
        let received = self.exchange(outgoing, 0..self.hub.world)?;
        Ok(received.into_iter().map(|(_, p)| p).collect())
    }

    fn broadcast(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CommError> {
        let outgoing = if self.rank == root {
            (0..self.hub.world).map(|d| (d, data.clone())).collect()
        } else {
            vec![]
        };
        let mut received = self.exchange(outgoing, std::iter::once(root))?;
        Ok(received.remove(0).1)
    }

    fn gather(&self, root: usize, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        let sources = if self.rank == root {
            0..self.hub.world
        } else {
            0..0
        };
        let received = self.exchange(vec![(root, data.to_vec())], sources)?;
        Ok((self.rank == root).then(|| received.into_iter().map(|(_, p)| p).collect()))
    }

    fn abort(&self, reason: &str) {
        self.mark_gone(reason.to_string(), true);
    }
}

/// Runs `f` on `world` threads, one rank each, and returns every rank's result in rank order.
///
/// A rank whose `f` returns an error or panics is marked failed, so the others' collectives
/// return [`CommError::PeerFailed`] rather than hang; a panic becomes `Err(PeerFailed)` for that
/// rank too.
pub fn run<T, E, F>(world: usize, f: F) -> Vec<Result<T, E>>
where
    T: Send,
    E: Send + From<CommError> + std::fmt::Display,
    F: Fn(&ThreadComm) -> Result<T, E> + Sync,
{
    run_with_timeout(world, DEFAULT_TIMEOUT, f)
}

/// [`run`] with a chosen wait timeout.
pub fn run_with_timeout<T, E, F>(world: usize, timeout: Duration, f: F) -> Vec<Result<T, E>>
where
    T: Send,
    E: Send + From<CommError> + std::fmt::Display,
    F: Fn(&ThreadComm) -> Result<T, E> + Sync,
{
    let comms = ThreadComm::world(world, timeout);
    // While they outnumber the cores, the ranks wait for the `cpu` runtime one at a time.
    let _ranks = rowshard_kernels::wait::thread_ranks(world);
    std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                let f = &f;
                scope.spawn(move || {
                    let rank = comm.rank;
                    match catch_unwind(AssertUnwindSafe(|| f(&comm))) {
                        Ok(Ok(value)) => Ok(value),
                        Ok(Err(e)) => {
                            comm.abort(&e.to_string());
                            Err(e)
                        }
                        Err(_) => {
                            comm.abort("panicked");
                            Err(E::from(CommError::PeerFailed {
                                rank,
                                reason: "panicked".into(),
                            }))
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn overlapped_work_runs_after_the_messages_are_posted() {
        // Rank 1's work waits until rank 0 has received rank 1's message: that only ends if the
        // message was posted before the work ran.
        let zero_done = AtomicBool::new(false);
        let results = run(2, |comm| -> Result<_, CommError> {
            let me = comm.rank();
            let send = vec![vec![me as u8, 0], vec![me as u8, 1]];
            let own_address = send[me].as_ptr();
            let mut ran = 0;
            let received = if me == 0 {
                let received = comm.all_to_all_v(send)?;
                zero_done.store(true, Ordering::SeqCst);
                received
            } else {
                comm.all_to_all_v_overlapped(send, &mut || {
                    ran += 1;
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while !zero_done.load(Ordering::SeqCst) {
                        assert!(Instant::now() < deadline, "the message was not posted");
                        std::thread::yield_now();
                    }
                })?
            };
            assert_eq!(received[me].as_ptr(), own_address, "own part, not a copy");
            Ok((received, ran))
        });
        let (zero, _) = results[0].as_ref().expect("rank 0");
        let (one, ran) = results[1].as_ref().expect("rank 1");
        assert_eq!(zero, &vec![vec![0, 0], vec![1, 0]]);
        assert_eq!(one, &vec![vec![0, 1], vec![1, 1]]);
        assert_eq!(*ran, 1, "work runs once");
    }
}
