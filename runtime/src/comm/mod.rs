//! Collectives between ranks. Every call returns a `Result`: a failed peer, a broken transport or
//! a timeout is an error on every rank still waiting, never a hang.
//!
//! Backends: [`threads`] (ranks as threads of one process; the default on one machine and what
//! the tests use), `mpi` (processes and hosts; feature `mpi`) and `nccl` (GPUs; feature `nccl`).

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod threads;

/// Why a collective failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CommError {
    /// Another rank failed, panicked or left while this one waited for it.
    #[error("rank {rank} failed: {reason}")]
    PeerFailed {
        /// The rank.
        rank: usize,
        /// What it reported.
        reason: String,
    },
    /// A peer did not arrive in time.
    #[error("timed out after {seconds} s waiting for rank {rank}")]
    Timeout {
        /// The rank waited for.
        rank: usize,
        /// The timeout.
        seconds: u64,
    },
    /// The transport failed or is not available.
    #[error("{backend}: {reason}")]
    Transport {
        /// Which backend.
        backend: &'static str,
        /// What happened.
        reason: String,
    },
}

/// A group of `world()` ranks, of which this is `rank()`. All ranks call the same collectives in
/// the same order.
pub trait Communicator {
    /// This rank, in `0..world()`.
    fn rank(&self) -> usize;

    /// Ranks in the group.
    fn world(&self) -> usize;

    /// Sends `send[d]` to rank `d` and returns what every rank sent here, indexed by source
    /// (alltoallv).
    fn all_to_all_v(&self, send: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, CommError> {
        self.all_to_all_v_overlapped(send, &mut || {})
    }

    /// [`Communicator::all_to_all_v`] that runs `work` while the messages travel: after this
    /// rank's sends and receives are posted, before it waits for them. Backends that cannot
    /// overlap run `work` first, then exchange. `send[rank()]` comes back as it was sent,
    /// without a copy. `work` must not use this communicator (its messages would cross the
    /// exchange's).
    fn all_to_all_v_overlapped(
        &self,
        send: Vec<Vec<u8>>,
        work: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<u8>>, CommError>;

    /// Every rank's `data`, indexed by rank.
    fn all_gather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, CommError>;

    /// `root`'s `data` on every rank.
    fn broadcast(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CommError>;

    /// Every rank's `data` on `root` (indexed by rank); `None` elsewhere.
    fn gather(&self, root: usize, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError>;

    /// Element-wise sum over ranks, in rank order, so every rank gets the same bits.
    /// One rank leaves `data` as it is.
    fn all_reduce_sum(&self, data: &mut [f32]) -> Result<(), CommError> {
        if self.world() == 1 {
            return Ok(());
        }
        let parts = self.all_gather(bytemuck::cast_slice(data))?;
        data.fill(0.0);
        for part in parts {
            with_values(&part, |values: &[f32]| {
                for (d, v) in data.iter_mut().zip(values) {
                    *d += v;
                }
            });
        }
        Ok(())
    }

    /// Waits until every rank arrives.
    fn barrier(&self) -> Result<(), CommError> {
        self.all_gather(&[]).map(|_| ())
    }

    /// Tells the other ranks this one failed, so their collectives return an error.
    fn abort(&self, reason: &str);
}

/// Encodes plain values as bytes for a collective.
pub fn to_bytes<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

/// Decodes bytes received from a collective.
pub fn from_bytes<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    bytemuck::pod_collect_to_vec(bytes)
}

/// Runs `f` on the values of bytes received from a collective: in place where the bytes are
/// aligned for `T` (as the allocator returns them), else from a copy.
pub fn with_values<T: bytemuck::Pod, R>(bytes: &[u8], f: impl FnOnce(&[T]) -> R) -> R {
    match bytemuck::try_cast_slice(bytes) {
        Ok(values) => f(values),
        Err(_) => f(&from_bytes::<T>(bytes)),
    }
}

/// Every rank's `values`, concatenated in rank order; one rank's own, moved.
pub fn all_gather_values<T: bytemuck::Pod>(
    comm: &dyn Communicator,
    values: Vec<T>,
) -> Result<Vec<T>, CommError> {
    if comm.world() == 1 {
        return Ok(values);
    }
    let parts = comm.all_gather(bytemuck::cast_slice(&values))?;
    let mut all = Vec::with_capacity(parts.iter().map(Vec::len).sum::<usize>() / size_of::<T>());
    for part in parts {
        with_values(&part, |v: &[T]| all.extend_from_slice(v));
    }
    Ok(all)
}
