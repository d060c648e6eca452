//! Embedding caches (WholeMemory's embedding cache), chosen when a table is created:
//!
//! - **read-only** ([`RowCache`]): each rank keeps copies of rows other ranks own, so a lookup
//!   serves hits locally and routes only misses; every row an `apply_gradients` updates is
//!   invalidated on every rank before the next lookup, so a lookup never returns a stale row;
//! - **read-write** ([`WriteBackCache`]): the shard's weights and optimizer states live in host
//!   memory; its hot rows and their states are cached in lines on the device, updated there by
//!   the fused kernels and written back when evicted or by `write_back_all`/`drop_all`.
//!
//! The cache uses a set-associative [`Directory`]: 32 ways per set, one set for every
//! `round(32 / ratio)` rows and a row's set a hash of its id, least-frequently-used replacement
//! with bounded counters, a valid and a modified bit per line; deterministic.

mod directory;
mod read_only;
mod write_back;

pub use directory::{Directory, Evicted, WAYS};
pub use read_only::RowCache;
pub use write_back::{Round, WriteBackCache};

use crate::error::ShardError;

/// The smallest ratio a cache may have (WholeMemory's bound).
pub const MIN_RATIO: f64 = 1.0 / 512.0;

/// Which cache a table has.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum CachePolicy {
    /// No cache.
    #[default]
    None,
    /// Copies of other ranks' rows, for lookups; invalidated by updates.
    ReadOnly {
        /// The fraction of the table's rows the cache holds, in `[1/512, 1]`.
        ratio: f64,
    },
    /// A device cache over a shard kept in host memory (`StateLocation::Host`), written back.
    ReadWrite {
        /// The fraction of the shard's rows the cache holds, in `[1/512, 1]`.
        ratio: f64,
    },
}

impl CachePolicy {
    /// Checks the ratio.
    pub fn validate(&self) -> Result<(), ShardError> {
        match *self {
            CachePolicy::None => Ok(()),
            CachePolicy::ReadOnly { ratio } | CachePolicy::ReadWrite { ratio } => {
                if (MIN_RATIO..=1.0).contains(&ratio) {
                    Ok(())
                } else {
                    Err(ShardError::InvalidCache(format!(
                        "cache_ratio = {ratio} is outside [1/512, 1] ([{MIN_RATIO}, 1])"
                    )))
                }
            }
        }
    }

    /// Short name for benchmarks and descriptions.
    pub fn name(&self) -> String {
        match self {
            CachePolicy::None => "none".into(),
            CachePolicy::ReadOnly { ratio } => format!("read-only 1/{}", (1.0 / ratio).round()),
            CachePolicy::ReadWrite { ratio } => format!("read-write 1/{}", (1.0 / ratio).round()),
        }
    }
}

/// What a rank's cache did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Rows served from the cache.
    pub hits: u64,
    /// Rows not in the cache (fetched from their owner, or from host memory).
    pub misses: u64,
    /// Lines replaced by others.
    pub evictions: u64,
    /// Modified lines written back to host memory.
    pub write_backs: u64,
    /// Lines dropped because their row was updated (read-only cache).
    pub invalidations: u64,
    /// Bytes lookups did not send between ranks thanks to hits (requests and rows).
    pub bytes_not_sent: u64,
}
