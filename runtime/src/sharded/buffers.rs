//! Buffers a sharded table keeps between calls, so a steady state of steps allocates nothing of
//! batch size: the routing plan, message buffers, and the owner's grouping.

use rowshard_kernels::{Segments, UploadPool};

use super::route::Route;

/// Everything a call needs besides its inputs and outputs.
#[derive(Default)]
pub(crate) struct StepBuffers {
    /// The routing plan of the last batch (reused when the next call has the same ids).
    pub route: Route,
    /// Message buffers, recycled, shared with the shard's uploads (a received gradient message
    /// is uploaded as it is). With thread ranks the buffers a rank receives were allocated by its
    /// peers; giving them back here and building the next messages in them makes the buffers
    /// circulate between ranks instead of being freed and allocated every step.
    pub pool: UploadPool,
    /// Owner side: the local rows of every received row, in rank order.
    pub rows: Vec<u32>,
    /// Owner side: the received rows grouped by local row.
    pub grouped: Segments,
    /// Radix scratch for `grouped`.
    pub scratch: Vec<u64>,
    /// One gradient row, for sums of duplicates.
    pub sum: Vec<f32>,
    /// With a read-only cache: for each unique id, its cache slot (or [`NOT_CACHED`]).
    pub hit: Vec<u32>,
    /// With a read-only cache: for each fetched unique id, its place in its owner's request.
    pub fetch_slot: Vec<u32>,
    /// With a read-only cache: the local rows requested, grouped by owner.
    pub fetch_locals: Vec<u32>,
    /// With a read-only cache: where each owner's requested rows start (`world + 1`).
    pub fetch_starts: Vec<usize>,
    /// Global ids a step updated, to invalidate in every rank's cache.
    pub updated: Vec<u32>,
}

/// A unique id not served by the cache.
pub(crate) const NOT_CACHED: u32 = u32::MAX;
