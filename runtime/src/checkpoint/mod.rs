//! Checkpoints of a sharded model: each rank writes its shard — weights and optimizer states in
//! their storage dtypes, with the global id of every row — as a safetensors file, rank 0 writes
//! the relation table, and a JSON manifest listing every file with its size and SHA-256 is
//! written last. Files go to temporary names and are renamed into place; a checkpoint is a
//! folder `epoch-NNNNNN` and is never written over.
//!
//! Loading checks the manifest against the model (kind, sizes, dtype, optimizers, data set) and
//! every file against the manifest, and refuses a torn or mismatched checkpoint naming the file.
//! Rows are placed by global id, so a checkpoint loads under any number of ranks and any
//! partition (re-sharding). Every function here is a collective.

mod export;
mod format;
mod load;
mod save;

pub use export::export;
pub use format::{FORMAT, FileEntry, Manifest, OptimizerEntry, RunState};
pub use load::{load, read_manifest, resolve};
pub use save::save;

use std::path::PathBuf;

/// What went wrong writing or reading a checkpoint. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Reading or writing failed.
    #[error("{path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// There is no checkpoint where one was expected.
    #[error("{0}: no checkpoint here (expected manifest.json, or epoch-* folders holding one)")]
    Missing(PathBuf),
    /// A checkpoint folder already holds a checkpoint.
    #[error(
        "{0} already holds a checkpoint; nothing was written (choose another --checkpoint-dir)"
    )]
    Exists(PathBuf),
    /// A file is truncated, corrupted or not what the manifest lists.
    #[error("{file}: {reason}; the checkpoint is torn, nothing was loaded")]
    Torn {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The checkpoint does not fit the model or data it is loaded into.
    #[error("{file}: {reason}; nothing was loaded")]
    Mismatch {
        /// The file.
        file: PathBuf,
        /// What differs.
        reason: String,
    },
    /// Another rank failed.
    #[error("rank {rank}: {message}")]
    OnRank {
        /// The rank.
        rank: usize,
        /// Its error.
        message: String,
    },
    /// A collective or kernel failed.
    #[error(transparent)]
    Shard(#[from] crate::error::ShardError),
}

impl From<crate::comm::CommError> for CheckpointError {
    fn from(e: crate::comm::CommError) -> Self {
        CheckpointError::Shard(e.into())
    }
}

impl From<rowshard_kernels::KernelError> for CheckpointError {
    fn from(e: rowshard_kernels::KernelError) -> Self {
        CheckpointError::Shard(e.into())
    }
}

/// Makes every rank return an error when any rank failed: this rank's own, or the first failing
/// rank's. A collective.
fn agree<T>(
    comm: &dyn crate::comm::Communicator,
    result: Result<T, CheckpointError>,
) -> Result<T, CheckpointError> {
    let message = match &result {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    let views = comm.all_gather(message.as_bytes())?;
    let value = result?;
    match views.iter().position(|v| !v.is_empty()) {
        Some(rank) => Err(CheckpointError::OnRank {
            rank,
            message: String::from_utf8_lossy(&views[rank]).into_owned(),
        }),
        None => Ok(value),
    }
}
