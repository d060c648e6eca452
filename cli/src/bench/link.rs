//! An emulated network link between ranks, for `rowshard bench --link-gbps`: this machine's
//! ranks talk through shared memory, where a row crosses in a memcpy; between hosts it crosses a
//! NIC. Each exchange here lasts at least as long as its bytes take over a full-duplex link of
//! the given speed (plus a fixed latency), the rank sleeping for the rest — so the figures show
//! what sending fewer rows (the read-only cache) is worth on such a link. An emulation, named as
//! one wherever its figures are printed.

use std::time::{Duration, Instant};

use rowshard::comm::{CommError, Communicator};

/// Latency added to every exchange: a switched datacenter network's order of magnitude.
pub const LATENCY: Duration = Duration::from_micros(5);

/// `inner`, with every all-to-all and all-gather held to the link's speed.
pub struct EmulatedLink<'a> {
    inner: &'a dyn Communicator,
    bytes_per_second: f64,
}

impl<'a> EmulatedLink<'a> {
    /// A link of `gbps` gigabits per second each way, per rank.
    pub fn new(inner: &'a dyn Communicator, gbps: f64) -> Self {
        Self {
            inner,
            bytes_per_second: gbps * 1e9 / 8.0,
        }
    }

    /// Sleeps until `started` + the time `sent` and `received` bytes take over the link.
    fn hold(&self, started: Instant, sent: usize, received: usize) {
        let wire = sent.max(received) as f64 / self.bytes_per_second;
        let until = started + LATENCY + Duration::from_secs_f64(wire);
        if let Some(rest) = until.checked_duration_since(Instant::now()) {
            std::thread::sleep(rest);
        }
    }

    /// Bytes in `parts` other than `rank`'s own.
    fn remote_bytes(&self, parts: &[Vec<u8>]) -> usize {
        let me = self.inner.rank();
        parts
            .iter()
            .enumerate()
            .filter(|&(r, _)| r != me)
            .map(|(_, p)| p.len())
            .sum()
    }
}

impl Communicator for EmulatedLink<'_> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    fn world(&self) -> usize {
        self.inner.world()
    }

    fn all_to_all_v_overlapped(
        &self,
        send: Vec<Vec<u8>>,
        work: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let started = Instant::now();
        let sent = self.remote_bytes(&send);
        let received = self.inner.all_to_all_v_overlapped(send, work)?;
        self.hold(started, sent, self.remote_bytes(&received));
        Ok(received)
    }

    fn all_gather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        let started = Instant::now();
        let parts = self.inner.all_gather(data)?;
        let sent = data.len() * (self.world() - 1);
        self.hold(started, sent, self.remote_bytes(&parts));
        Ok(parts)
    }

    fn broadcast(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CommError> {
        self.inner.broadcast(root, data)
    }

    fn gather(&self, root: usize, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        self.inner.gather(root, data)
    }

    fn barrier(&self) -> Result<(), CommError> {
        self.inner.barrier()
    }

    fn abort(&self, reason: &str) {
        self.inner.abort(reason)
    }
}
