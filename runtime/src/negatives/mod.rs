//! Negatives: what a query is scored against besides its true tails, and how they are drawn.
//!
//! - [`Negatives`]: every entity, or a sample shared by the queries of a chunk of the batch —
//!   entities drawn uniformly, drawn by degree, and the chunk's own true tails (PyTorch-BigGraph's
//!   uniform and batch negatives).
//! - Drawing a step's samples ([`SharedSampler`], `draw.rs`) and negative sampling's
//!   corruptions of each true triple ([`NegativeBatch`], `corrupt.rs`), each from counter-based
//!   generators keyed by the seed, so what a step trains on does not depend on the ranks.
//! - The sample a step scores and how the ranks share it ([`SharedSample`], `sample.rs`).

mod corrupt;
mod draw;
mod sample;

pub use corrupt::{NegativeBatch, corrupt};
pub use draw::{DegreeSampler, SharedSampler, chunk_negatives, shared_negatives};
pub use sample::{SampleChunk, SharedSample, describe_ids};

/// What a query of KvsAll or 1vsAll is scored against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Negatives {
    /// Every entity.
    #[default]
    All,
    /// Shared negatives, drawn anew for every step and the same on every rank: per chunk of
    /// `chunk` queries of the global batch (`0`: the whole batch), `uniform` distinct entities
    /// drawn uniformly and `degree` drawn in proportion to their degree in the training triples
    /// (with replacement; a repeat counts once), every query against all of them and its own
    /// true tails — with `batch`, also against every true tail of its chunk
    /// ([`TrainBatch::SharedNegatives`](crate::step::TrainBatch::SharedNegatives)).
    Shared {
        /// Entities drawn uniformly per chunk.
        uniform: usize,
        /// Entities drawn by degree per chunk.
        degree: usize,
        /// Whether the chunk's true tails are every query's negatives too.
        batch: bool,
        /// Queries of the global batch per chunk (`0`: the whole batch is one chunk).
        chunk: usize,
    },
}

impl Negatives {
    /// `count` uniform shared negatives per step for the whole batch, and with `batch` the
    /// batch's true tails.
    pub fn uniform(count: usize, batch: bool) -> Self {
        Negatives::Shared {
            uniform: count,
            degree: 0,
            batch,
            chunk: 0,
        }
    }

    /// The same, in chunks of `chunk` queries (`0`: one chunk); [`Negatives::All`] stays.
    pub fn in_chunks(self, chunk: usize) -> Self {
        match self {
            Negatives::All => Negatives::All,
            Negatives::Shared {
                uniform,
                degree,
                batch,
                ..
            } => Negatives::Shared {
                uniform,
                degree,
                batch,
                chunk,
            },
        }
    }

    /// Whether the queries are scored against shared negatives.
    pub fn is_shared(self) -> bool {
        self != Negatives::All
    }
}
