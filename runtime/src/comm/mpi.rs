//! Ranks as MPI processes (Open MPI through rsmpi), on one host or many. Start the program with
//! `mpirun -np N`; started without it, it is a world of one.
//!
//! MPI's default error handler aborts the job on a transport error, and a panicking rank calls
//! `MPI_Abort` from a panic hook, so a failing rank ends the whole job instead of hanging it.

use mpi::Count;
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::{Communicator as _, SimpleCommunicator};

use super::{CommError, Communicator};

/// This process's handle on `MPI_COMM_WORLD`. Create one per process, before anything else
/// uses MPI.
pub struct MpiComm {
    world: SimpleCommunicator,
    buffers: std::cell::RefCell<Buffers>,
    _universe: Universe,
}

/// What `all_to_all_v` keeps between calls, so a steady state of exchanges allocates nothing:
/// the contiguous send and receive buffers MPI needs, and spare vectors for the received parts
/// (the caller's sent vectors, recycled).
#[derive(Default)]
struct Buffers {
    flat: Vec<u8>,
    recv: Vec<u8>,
    spare: Vec<Vec<u8>>,
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
            buffers: Default::default(),
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

    fn displacements(counts: &[Count]) -> Vec<Count> {
        counts
            .iter()
            .scan(0, |at, &c| Some(std::mem::replace(at, *at + c)))
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

    fn all_to_all_v(&self, send: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, CommError> {
        let send_counts = Self::counts(send.iter().map(Vec::len))?;
        let mut recv_counts = vec![0 as Count; self.world()];
        self.world
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let buffers = &mut *self.buffers.borrow_mut();
        buffers.flat.clear();
        for part in send {
            buffers.flat.extend_from_slice(&part);
            buffers.spare.push(part);
        }
        pad(&mut buffers.flat);
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        buffers.recv.clear();
        buffers.recv.resize(total, 0);
        pad(&mut buffers.recv);
        {
            let send_displs = Self::displacements(&send_counts);
            let recv_displs = Self::displacements(&recv_counts);
            let outgoing = Partition::new(&buffers.flat[..], &send_counts[..], &send_displs[..]);
            let mut incoming =
                PartitionMut::new(&mut buffers.recv[..], &recv_counts[..], &recv_displs[..]);
            self.world
                .all_to_all_varcount_into(&outgoing, &mut incoming);
        }
        let mut at = 0;
        let parts = recv_counts
            .iter()
            .map(|&c| {
                let mut part = buffers.spare.pop().unwrap_or_default();
                part.clear();
                part.extend_from_slice(&buffers.recv[at..at + c as usize]);
                at += c as usize;
                part
            })
            .collect();
        // Keep a few spares; the caller recycles the parts into its next sends.
        buffers.spare.truncate(4 * self.world());
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
        self.world.barrier();
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

/// Open MPI refuses (MPI_ERR_ARG) the dangling pointer of an empty buffer even with zero counts:
/// give every buffer at least one byte; the counts still say how much is real.
fn pad(buffer: &mut Vec<u8>) {
    if buffer.is_empty() {
        buffer.push(0);
    }
}
