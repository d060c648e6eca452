//! Training modes: which queries an epoch makes of the training triples and what they are
//! scored against.

use super::loss::LossName;
use crate::data::Dataset;

/// How a step scores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Every distinct `(h, r)` against every entity, with all its true tails; reciprocal
    /// relations (needs a score the dense kernels take: linear in the tail, or a squared distance).
    KvsAll,
    /// Every training triple `(h, r, t)` and its reciprocal against every entity, each with its
    /// one true tail (Lacroix et al., 2018); reciprocal relations (needs a score the dense
    /// kernels take).
    OneVsAll,
    /// Each training triple and `neg_ratio` corruptions of it (head or tail, uniform).
    NegSample {
        /// Corruptions per true triple.
        neg_ratio: usize,
    },
}

impl Mode {
    /// Whether the model has reciprocal relations (`r⁻¹ = r + relations`).
    pub fn reciprocal(self) -> bool {
        matches!(self, Mode::KvsAll | Mode::OneVsAll)
    }

    /// Whether a step scores its queries against every entity.
    pub fn all_entities(self) -> bool {
        self.reciprocal()
    }

    /// Lower-case name (the CLI's, the checkpoints').
    pub fn name(self) -> &'static str {
        match self {
            Mode::KvsAll => "kvsall",
            Mode::OneVsAll => "1vsall",
            Mode::NegSample { .. } => "negsample",
        }
    }

    /// The relation rows a model trained this way needs for `data`.
    pub fn model_relations(self, data: &Dataset) -> usize {
        data.relations.len() * if self.reciprocal() { 2 } else { 1 }
    }

    /// The loss a mode trains with when none is asked for: the softmax for 1vsAll (its one true
    /// tail is a class), binary cross-entropy otherwise.
    pub fn default_loss(self) -> LossName {
        match self {
            Mode::OneVsAll => LossName::Ce,
            _ => LossName::Bce,
        }
    }
}
