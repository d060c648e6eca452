//! What a run reports: each epoch, each evaluation, the whole run ([`FitReport`], which
//! `--metrics-json` writes), and why a run failed.

use super::eval::Metrics;
use crate::checkpoint::CheckpointError;
use crate::data::{DataError, Unseen, UnseenPolicy};
use crate::error::ShardError;

/// What one epoch did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochReport {
    /// The epoch (1-based).
    pub epoch: usize,
    /// Mean loss over its steps.
    pub loss: f64,
    /// Steps taken.
    pub steps: usize,
    /// Training examples (queries or true triples) in the epoch.
    pub examples: u64,
    /// Wall time of the epoch.
    pub seconds: f64,
}

/// One evaluation on valid during training.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Evaluation {
    /// After this epoch.
    pub epoch: usize,
    /// Seconds of training so far in this run.
    pub train_seconds: f64,
    /// Filtered metrics on valid.
    pub valid: Metrics,
}

/// What the training epochs of a run cost, over all ranks.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TrainFigures {
    /// Seconds spent in training epochs (evaluations and checkpoints left out).
    pub seconds: f64,
    /// Training examples (queries, or true triples) per second.
    pub examples_per_s: f64,
    /// Entity rows read per example, over all ranks: the ids looked up (heads, tails,
    /// corruptions) and the shared negatives gathered; a whole shard scored against every
    /// entity counts nothing.
    pub rows_looked_up_per_example: f64,
    /// The largest peak resident memory of the ranks' processes, in bytes (thread ranks share
    /// one).
    pub peak_rss_bytes: u64,
    /// The tables' weights and optimizer states, over all ranks, in bytes.
    pub tables_bytes: u64,
    /// The buffers of streamed triples (a block per rank: the triples and their examples), over
    /// all ranks, in bytes; 0 when the triples are in memory.
    pub stream_buffer_bytes: u64,
}

/// What a run did: `--metrics-json` writes it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FitReport {
    /// Filtered metrics on the validation split, of the model reported (the best evaluated one
    /// when there were evaluations).
    pub valid: Metrics,
    /// Filtered metrics on the test split, of the same model, when asked for.
    pub test: Option<Metrics>,
    /// The epoch after which the reported model was taken, when there were evaluations.
    pub best_epoch: Option<usize>,
    /// Epochs trained (counting those before a resume).
    pub epochs: usize,
    /// Epochs trained in this run.
    pub epochs_this_run: usize,
    /// Seconds spent in training epochs in this run (evaluations and checkpoints left out).
    pub train_seconds: f64,
    /// Whether the patience ended the run.
    pub stopped_early: bool,
    /// Every evaluation on valid during training.
    pub evaluations: Vec<Evaluation>,
    /// What training cost.
    pub train: TrainFigures,
    /// What evaluation did with valid and test triples whose entity or relation training never
    /// saw: `drop` (left out) or `count` (ranked like the others).
    pub unseen_policy: UnseenPolicy,
    /// How many there were.
    pub unseen: Unseen,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// A collective, a kernel, or bad input.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// Writing or loading a checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Reading the data set.
    #[error(transparent)]
    Data(#[from] DataError),
    /// Anything else, said in full (a rank's failure, as another rank saw it).
    #[error("{0}")]
    Other(String),
}
