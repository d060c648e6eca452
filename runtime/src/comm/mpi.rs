//! Ranks as MPI processes (Open MPI through rsmpi), on one host or many. Start the program with
//! `mpirun -np N`; started without it, it is a world of one.
//!
//! MPI's default error handler aborts the job on a transport error, and a panicking rank calls
//! `MPI_Abort` from a panic hook, so a failing rank ends the whole job instead of hanging it.

use mpi::Count;
use mpi::collective::CommunicatorCollectives;
use mpi::environment::Universe;
use mpi::point_to_point::{Destination as _, Source as _};
use mpi::request::{Request, Scope};
use mpi::topology::{Communicator as _, SimpleCommunicator};

use super::{CommError, Communicator};

/// This process's handle on `MPI_COMM_WORLD`. Create one per process, before anything else
/// uses MPI.
pub struct MpiComm {
    world: SimpleCommunicator,
    /// Vectors to receive into: the ones callers sent, recycled, so a steady state of
    /// exchanges allocates nothing.
    spare: std::cell::RefCell<Vec<Vec<u8>>>,
    _universe: Universe,
}

impl MpiComm {
    /// Initialises MPI and installs the panic hook that aborts the job.
    pub fn init() -> Result<Self, CommError> {
        let universe = mpi::initialize().ok_or_else(|| CommError::Transport {
            backend: "mpi",
            reason: "MPI was already initialised in this process".into(),
        })?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            eprintln!("rowshard: a rank panicked; aborting the MPI job");
            SimpleCommunicator::world().abort(101);
        }));
        Ok(Self {
            world: universe.world(),
            spare: Default::default(),
            _universe: universe,
        })
    }

    fn counts(lens: impl Iterator<Item = usize>) -> Result<Vec<Count>, CommError> {
        lens.map(|n| {
            Count::try_from(n).map_err(|_| CommError::Transport {
                backend: "mpi",
                reason: format!("a {n}-byte message exceeds MPI's i32 counts; use smaller batches"),
            })
        })
        .collect()
    }
}

impl Communicator for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn world(&self) -> usize {
        self.world.size() as usize
    }

    fn all_to_all_v_overlapped(
        &self,
        mut send: Vec<Vec<u8>>,
        work: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let (me, world) = (self.rank(), self.world());
        assert_eq!(send.len(), world, "all_to_all_v needs one buffer per rank");
        let send_counts = Self::counts(send.iter().map(Vec::len))?;
        let mut recv_counts = vec![0 as Count; world];
        mpi::request::scope(|scope| {
            wait_yielding(self.world.immediate_all_to_all_into(
                scope,
                &send_counts[..],
                &mut recv_counts[..],
            ));
        });
        // Each part is received straight into its own vector and sent straight from the
        // caller's: no packing into one contiguous buffer and out again.
        let spare = &mut self.spare.borrow_mut();
        let mut parts: Vec<Vec<u8>> = recv_counts
            .iter()
            .enumerate()
            .map(|(source, &count)| {
                if source == me {
                    return std::mem::take(&mut send[me]);
                }
                receive_buffer(spare, count as usize)
            })
            .collect();
        mpi::request::scope(|scope| {
            let receives: Vec<_> = parts
                .iter_mut()
                .enumerate()
                .filter(|(source, part)| *source != me && !part.is_empty())
                .map(|(source, part)| {
                    self.world
                        .process_at_rank(source as i32)
                        .immediate_receive_into(scope, &mut part[..])
                })
                .collect();
            let sends: Vec<_> = send
                .iter()
                .enumerate()
                .filter(|(destination, part)| *destination != me && !part.is_empty())
                .map(|(destination, part)| {
                    self.world
                        .process_at_rank(destination as i32)
                        .immediate_send(scope, &part[..])
                })
                .collect();
            work();
            receives.into_iter().for_each(wait_yielding);
            sends.into_iter().for_each(wait_yielding);
        });
        // The caller's sent vectors become the next calls' receive buffers; the largest are
        // kept.
        spare.extend(send.into_iter().filter(|v| v.capacity() > 0));
        spare.sort_unstable_by_key(|v| std::cmp::Reverse(v.capacity()));
        spare.truncate(4 * world);
        Ok(parts)
    }

    fn all_gather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        self.all_to_all_v(vec![data.to_vec(); self.world()])
    }

    // All-gather, broadcast and gather go through alltoallv, the one collective whose zero-length
    // corner cases are handled above; none of them is on a hot path.
    fn broadcast(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CommError> {
        let send = (0..self.world())
            .map(|_| {
                if self.rank() == root {
                    data.clone()
                } else {
                    Vec::new()
                }
            })
            .collect();
        Ok(self.all_to_all_v(send)?.swap_remove(root))
    }

    fn gather(&self, root: usize, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        let send = (0..self.world())
            .map(|d| if d == root { data.to_vec() } else { Vec::new() })
            .collect();
        let received = self.all_to_all_v(send)?;
        Ok((self.rank() == root).then_some(received))
    }

    fn barrier(&self) -> Result<(), CommError> {
        wait_yielding(self.world.immediate_barrier());
        Ok(())
    }

    fn abort(&self, reason: &str) {
        eprintln!(
            "rowshard: rank {} failed: {reason}; aborting the MPI job",
            self.rank()
        );
        self.world.abort(1);
    }
}

/// Waits for `request`, yielding the core between polls. MPI's own waits poll at full speed: on a
/// machine with fewer cores than ranks and runtime workers, a rank that waits (for the rank with
/// the most rows to gather, say) takes a core from the ranks still computing. This is what Open
/// MPI's `mpi_yield_when_idle` does, for every MPI and without a launcher setting.
fn wait_yielding<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>) {
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        std::thread::yield_now();
    }
}

/// A vector of `len` bytes to receive into: the smallest spare one with room for them (its old
/// bytes are left for the receive to overwrite, not zeroed first), else a new one.
fn receive_buffer(spare: &mut Vec<Vec<u8>>, len: usize) -> Vec<u8> {
    let mut part = match rowshard_kernels::upload::best_fit(spare, len) {
        Some(i) => spare.swap_remove(i),
        // A quarter more than asked: message sizes vary a little from step to step.
        None => Vec::with_capacity(len + len / 4),
    };
    set_len(&mut part, len);
    part
}

/// Makes `part` `len` bytes long, writing only the bytes it did not hold (a recycled vector
/// still holds what it carried last).
fn set_len(part: &mut Vec<u8>, len: usize) {
    if part.len() >= len {
        part.truncate(len);
    } else {
        part.resize(len, 0);
    }
}
