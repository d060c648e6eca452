//! Ranks as GPUs exchanging through NCCL (feature `nccl`, via cudarc with dynamic loading).
//!
//! NCCL has no alltoallv: [`NcclComm::all_to_all_v`] exchanges counts over the bootstrap
//! communicator (threads or MPI, which also hands out NCCL's unique id), then moves the payloads
//! with grouped send/recv between device buffers. The other collectives carry small messages
//! and go through the bootstrap. On a machine without a CUDA driver or without `libnccl`,
//! [`NcclComm::new`] returns an error; it never panics.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cudarc::nccl::{Comm, Id};

use super::{CommError, Communicator, from_bytes, to_bytes};

/// One rank's NCCL communicator on one GPU, bootstrapped by another communicator.
pub struct NcclComm<'b> {
    bootstrap: &'b dyn Communicator,
    comm: Comm,
    stream: Arc<CudaStream>,
}

fn nccl_error(reason: impl std::fmt::Debug) -> CommError {
    CommError::Transport {
        backend: "nccl",
        reason: format!("{reason:?}"),
    }
}

impl<'b> NcclComm<'b> {
    /// Opens GPU `device` and joins the NCCL communicator of `bootstrap`'s ranks (a collective on
    /// `bootstrap`).
    pub fn new(bootstrap: &'b dyn Communicator, device: usize) -> Result<Self, CommError> {
        // SAFETY: these only try to load the shared libraries; nothing is called through them.
        let driver = unsafe { cudarc::driver::sys::is_culib_present() };
        let nccl = unsafe { cudarc::nccl::sys::is_culib_present() };
        let missing = match (driver, nccl) {
            (false, _) => Some("no CUDA driver (libcuda) on this machine"),
            (true, false) => {
                Some("libnccl was not found (cudarc looks for libnccl.so; link it to libnccl.so.2)")
            }
            _ => None,
        };
        // Every rank learns whether every rank can go on before anyone starts NCCL.
        let verdicts = bootstrap.all_gather(&[u8::from(missing.is_none())])?;
        if let Some(reason) = missing {
            return Err(CommError::Transport {
                backend: "nccl",
                reason: reason.into(),
            });
        }
        if let Some(rank) = verdicts.iter().position(|v| v.first() != Some(&1)) {
            return Err(CommError::PeerFailed {
                rank,
                reason: "could not open NCCL".into(),
            });
        }
        let context = CudaContext::new(device).map_err(nccl_error)?;
        let stream = context.default_stream();
        let id_bytes = if bootstrap.rank() == 0 {
            let id = Id::new().map_err(nccl_error)?;
            id.internal().iter().map(|&c| c as u8).collect()
        } else {
            Vec::new()
        };
        let id_bytes = bootstrap.broadcast(0, id_bytes)?;
        let mut internal = [0 as core::ffi::c_char; 128];
        for (dst, &src) in internal.iter_mut().zip(&id_bytes) {
            *dst = src as core::ffi::c_char;
        }
        let comm = Comm::from_rank(
            stream.clone(),
            bootstrap.rank(),
            bootstrap.world(),
            Id::uninit(internal),
        )
        .map_err(nccl_error)?;
        Ok(Self {
            bootstrap,
            comm,
            stream,
        })
    }
}

impl Communicator for NcclComm<'_> {
    fn rank(&self) -> usize {
        self.bootstrap.rank()
    }

    fn world(&self) -> usize {
        self.bootstrap.world()
    }

    /// The host copies, group calls and stream sync of an NCCL exchange leave nothing to
    /// overlap from the host: `work` runs first.
    fn all_to_all_v_overlapped(
        &self,
        send: Vec<Vec<u8>>,
        work: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<u8>>, CommError> {
        work();
        let counts: Vec<u64> = send.iter().map(|s| s.len() as u64).collect();
        let incoming: Vec<u64> = self
            .bootstrap
            .all_to_all_v(counts.iter().map(|c| to_bytes(&[*c])).collect())?
            .iter()
            .map(|b| from_bytes::<u64>(b).first().copied().unwrap_or(0))
            .collect();
        let outgoing: Vec<Option<CudaSlice<u8>>> = send
            .iter()
            .map(|s| {
                (!s.is_empty())
                    .then(|| self.stream.clone_htod(s))
                    .transpose()
            })
            .collect::<Result<_, _>>()
            .map_err(nccl_error)?;
        let mut received: Vec<Option<CudaSlice<u8>>> = incoming
            .iter()
            .map(|&n| {
                (n > 0)
                    .then(|| self.stream.alloc_zeros::<u8>(n as usize))
                    .transpose()
            })
            .collect::<Result<_, _>>()
            .map_err(nccl_error)?;
        {
            let mut group = self.comm.group();
            for (peer, buffer) in outgoing.iter().enumerate() {
                if let Some(buffer) = buffer {
                    group
                        .send(buffer.slice(..), peer as i32)
                        .map_err(nccl_error)?;
                }
            }
            for (peer, buffer) in received.iter_mut().enumerate() {
                if let Some(buffer) = buffer {
                    group
                        .recv(buffer.slice_mut(..), peer as i32)
                        .map_err(nccl_error)?;
                }
            }
        }
        self.stream.synchronize().map_err(nccl_error)?;
        received
            .iter()
            .map(|b| match b {
                Some(b) => self.stream.clone_dtoh(b).map_err(nccl_error),
                None => Ok(Vec::new()),
            })
            .collect()
    }

    fn all_gather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        self.bootstrap.all_gather(data)
    }

    fn broadcast(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CommError> {
        self.bootstrap.broadcast(root, data)
    }

    fn gather(&self, root: usize, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        self.bootstrap.gather(root, data)
    }

    fn barrier(&self) -> Result<(), CommError> {
        self.bootstrap.barrier()
    }

    fn abort(&self, reason: &str) {
        self.bootstrap.abort(reason);
    }
}
