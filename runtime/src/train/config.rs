//! How a trainer trains: the mode, the objective, the negatives, epochs and batches, the
//! learning-rate schedule, evaluation's protocol.

use super::eval::Protocol;
use crate::negatives::Negatives;
use crate::objective::{Loss, Mode, Objective};
use crate::step::Candidates;

/// How the learning rates change over the epochs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    /// The configured rates throughout.
    Constant,
    /// Multiplied by `gamma` after every epoch.
    Exponential {
        /// The factor per epoch.
        gamma: f64,
    },
    /// Cosine annealing from the configured rates to 0 over the run.
    Cosine,
}

impl LrSchedule {
    /// The factor on the configured rates in `epoch` (0-based) of `epochs`.
    pub fn factor(self, epoch: usize, epochs: usize) -> f64 {
        match self {
            LrSchedule::Constant => 1.0,
            LrSchedule::Exponential { gamma } => gamma.powi(epoch as i32),
            LrSchedule::Cosine => {
                0.5 * (1.0 + (std::f64::consts::PI * epoch as f64 / epochs.max(1) as f64).cos())
            }
        }
    }
}

/// How to train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    /// KvsAll, 1vsAll or negative sampling.
    pub mode: Mode,
    /// What a step optimises: the loss, label smoothing, regularisers, dropout.
    pub objective: Objective,
    /// What KvsAll and 1vsAll steps score against: every entity, or shared negatives.
    pub negatives: Negatives,
    /// Epochs to run.
    pub epochs: usize,
    /// Global batch: KvsAll queries or true triples per step, over all ranks.
    pub batch_size: usize,
    /// Seeds the batches' order and the negatives.
    pub seed: u64,
    /// The learning-rate schedule.
    pub schedule: LrSchedule,
    /// Global queries per ranking call in evaluation.
    pub eval_batch: usize,
    /// What evaluation ranks each answer against: every entity, or a sample.
    pub eval_protocol: Protocol,
    /// Training triples per block when they stream from a prepared folder: an epoch reads the
    /// blocks in a shuffled order and shuffles each, so a rank holds one block (12 bytes a
    /// triple, and its queries) at a time.
    pub stream_block: usize,
    /// The fraction of the training triples trained on, in `(0, 1]`: below 1, a sample drawn from
    /// the seed, the same every epoch (a search's early rungs train on such subsets, as GraSH
    /// does); evaluation's filters still know every triple.
    pub train_fraction: f64,
}

impl Default for TrainConfig {
    /// dicee's UMLS settings: KvsAll, binary cross-entropy, batch 1024, 256 epochs.
    fn default() -> Self {
        Self {
            mode: Mode::KvsAll,
            objective: Objective::default(),
            negatives: Negatives::All,
            epochs: 256,
            batch_size: 1024,
            seed: 1,
            schedule: LrSchedule::Constant,
            eval_batch: 512,
            eval_protocol: Protocol::Full,
            stream_block: 1 << 20,
            train_fraction: 1.0,
        }
    }
}

impl TrainConfig {
    /// What the epochs' batches score their queries (or triples) against.
    pub fn candidates(&self) -> Candidates {
        match (self.mode, self.negatives) {
            (Mode::NegSample { .. }, _) => match self.objective.loss {
                Loss::BinaryCrossEntropy => Candidates::Targets,
                _ => Candidates::Corruptions,
            },
            (_, Negatives::All) => Candidates::AllEntities,
            (_, Negatives::Shared { batch, chunk, .. }) => Candidates::Shared {
                batch,
                chunked: chunk > 0,
            },
        }
    }
}
