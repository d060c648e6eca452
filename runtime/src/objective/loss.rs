//! The losses a step can optimise, as a user names them, and the two forms the steps read: a
//! loss over labelled candidates ([`LabelLoss`]: the true tails are among the scored rows) and a
//! loss over one query's positives against its negatives ([`SampleLoss`]: the true tails scored
//! apart, or a true triple and its corruptions).

use std::fmt;
use std::str::FromStr;

/// What a step minimises over each query's (or true triple's) scores.
///
/// One loss is one variant: self-adversarial weighting is a loss of its own (PyKEEN's
/// `NSSALoss`), not a modifier of another.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// Binary cross-entropy on each score against its target (1 for a true entity, 0 for the
    /// others, smoothed): over every entity, the mean over every (query, entity) pair; over a
    /// shared sample whose true tails are scored apart, PyTorch-BigGraph's logistic loss — per
    /// query the mean over its true tails plus the mean over its negatives; in negative sampling,
    /// the mean over every triple (dicee's), or per true triple the logistic loss of it plus the
    /// mean of its corruptions' (in groups).
    BinaryCrossEntropy,
    /// Softmax cross-entropy over a query's candidates against its true entities' uniform
    /// distribution (1vsAll: its one true tail), smoothed; the mean over queries. Over every
    /// entity the log-sum-exp is combined across the ranks' shards.
    SoftmaxCrossEntropy,
    /// The logistic loss with self-adversarial weighting (Sun et al., 2019): per query,
    /// `softplus(−s)` of its true tails (their mean) plus `Σ p·softplus(s)` over its negatives,
    /// `p = softmax(α·s)` over them held constant in the gradient; the mean over queries.
    SelfAdversarial {
        /// The temperature α > 0.
        temperature: f32,
    },
    /// Margin ranking (Bordes et al., 2013; PyTorch-BigGraph's `ranking` loss): per query, the
    /// mean over its true tails `s₊` and its negatives `s` of `max(0, γ − s₊ + s)`; the mean over
    /// queries.
    MarginRanking {
        /// The margin γ ≥ 0.
        margin: f32,
    },
}

impl Loss {
    /// The loss's name on the command line and in recipes.
    pub fn name(self) -> &'static str {
        LossName::of(self).name()
    }
}

/// A loss's name, without its parameters: what `--loss` takes (`bce`, `ce`,
/// `self-adversarial`, `margin`); the temperature and the margin are keys of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossName {
    /// [`Loss::BinaryCrossEntropy`].
    Bce,
    /// [`Loss::SoftmaxCrossEntropy`].
    Ce,
    /// [`Loss::SelfAdversarial`].
    SelfAdversarial,
    /// [`Loss::MarginRanking`].
    Margin,
}

impl LossName {
    /// Every name, in the order `--help` lists them.
    pub const ALL: [LossName; 4] = [
        LossName::Bce,
        LossName::Ce,
        LossName::SelfAdversarial,
        LossName::Margin,
    ];

    /// The name of `loss`.
    pub fn of(loss: Loss) -> Self {
        match loss {
            Loss::BinaryCrossEntropy => LossName::Bce,
            Loss::SoftmaxCrossEntropy => LossName::Ce,
            Loss::SelfAdversarial { .. } => LossName::SelfAdversarial,
            Loss::MarginRanking { .. } => LossName::Margin,
        }
    }

    /// As written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LossName::Bce => "bce",
            LossName::Ce => "ce",
            LossName::SelfAdversarial => "self-adversarial",
            LossName::Margin => "margin",
        }
    }

    /// The loss of this name with `temperature` (self-adversarial) and `margin` (margin
    /// ranking).
    pub fn with(self, temperature: f32, margin: f32) -> Loss {
        match self {
            LossName::Bce => Loss::BinaryCrossEntropy,
            LossName::Ce => Loss::SoftmaxCrossEntropy,
            LossName::SelfAdversarial => Loss::SelfAdversarial { temperature },
            LossName::Margin => Loss::MarginRanking { margin },
        }
    }
}

impl fmt::Display for LossName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LossName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        LossName::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = LossName::ALL.iter().map(|l| l.name()).collect();
                format!("unknown loss `{s}`; expected one of: {}", names.join(", "))
            })
    }
}

/// A loss over candidates among which each query's true entities lie (every entity, or a shared
/// sample holding the batch's true tails), with label smoothing ε: the targets are
/// `(1 − ε)·y + ε / candidates`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LabelLoss {
    /// Binary cross-entropy on every (query, candidate) pair; the mean over pairs.
    BinaryCrossEntropy {
        /// Label smoothing ε in `[0, 1)`.
        smoothing: f32,
    },
    /// Softmax cross-entropy over each query's candidates; the mean over queries.
    SoftmaxCrossEntropy {
        /// Label smoothing ε in `[0, 1)`.
        smoothing: f32,
    },
}

impl LabelLoss {
    /// The label smoothing.
    pub fn smoothing(self) -> f32 {
        match self {
            LabelLoss::BinaryCrossEntropy { smoothing }
            | LabelLoss::SoftmaxCrossEntropy { smoothing } => smoothing,
        }
    }
}

/// A loss over one query's positives (its true tails, or a true triple) and its negatives (a
/// shared sample, or the triple's corruptions), which are scored apart; the mean over queries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SampleLoss {
    /// The mean of the positives' `softplus(−s)` plus the mean of the negatives'
    /// `softplus(s)` (PyTorch-BigGraph's logistic loss).
    Logistic,
    /// Softmax cross-entropy over the positives and the negatives, against the positives'
    /// uniform distribution.
    Softmax,
    /// The logistic loss with the negatives weighted by `softmax(α·s)` over them, held constant.
    SelfAdversarial {
        /// The temperature α > 0.
        temperature: f32,
    },
    /// The mean over (positive, negative) pairs of `max(0, γ − s₊ + s)`.
    Margin {
        /// The margin γ ≥ 0.
        margin: f32,
    },
}
