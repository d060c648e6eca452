//! What a training step optimises: one [`Objective`] — the [`Loss`], label smoothing, the
//! regularisers of the rows a step uses and dropout on the rows a query is built from — checked
//! once ([`Objective::check`]), then read by every step; and the training [`Mode`] (which
//! queries an epoch makes, and what they are scored against).
//!
//! Which losses suit which candidates (every entity, a shared sample, a triple's corruptions) is
//! decided where the kind of step is chosen (`step/kind.rs`), from the objective and the model;
//! the losses' host math lives in [`host`].

mod dropout;
pub mod host;
mod loss;
mod mode;
mod regularizer;

pub(crate) use dropout::Masks;
pub use dropout::{Dropout, DropoutSide, dropout_mask};
pub use loss::{LabelLoss, Loss, LossName, SampleLoss};
pub use mode::Mode;
pub use regularizer::{Regularization, Regularizer};
pub(crate) use regularizer::{UsedRows, distinct_ids, distinct_rows, per_occurrence};

/// What a training step optimises.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Objective {
    /// The loss over each query's (or true triple's) scores.
    pub loss: Loss,
    /// Label smoothing ε in `[0, 1)`: the targets of steps whose candidates hold the true
    /// entities are `(1 − ε)·y + ε / candidates`; negative sampling's, `1 − ε` and `ε`.
    pub label_smoothing: f32,
    /// The regularisers of the rows a step uses (steps scoring queries against many entities).
    pub regularization: Regularization,
    /// Dropout on the head and relation rows a query is built from (steps scoring queries
    /// against many entities).
    pub dropout: Dropout,
}

impl Default for Objective {
    /// Binary cross-entropy, nothing else.
    fn default() -> Self {
        Self::new(Loss::BinaryCrossEntropy)
    }
}

impl Objective {
    /// `loss` alone: no smoothing, regularisers or dropout.
    pub fn new(loss: Loss) -> Self {
        Self {
            loss,
            label_smoothing: 0.0,
            regularization: Regularization::default(),
            dropout: Dropout::default(),
        }
    }

    /// With label smoothing `smoothing`.
    pub fn with_smoothing(mut self, smoothing: f32) -> Self {
        self.label_smoothing = smoothing;
        self
    }

    /// With the regularisers `regularization`.
    pub fn with_regularization(mut self, regularization: Regularization) -> Self {
        self.regularization = regularization;
        self
    }

    /// With dropout `dropout`.
    pub fn with_dropout(mut self, dropout: Dropout) -> Self {
        self.dropout = dropout;
        self
    }

    /// Whether a regulariser does something.
    pub fn regularized(&self) -> bool {
        !(self.regularization.entities.is_none() && self.regularization.relations.is_none())
    }

    /// Refuses values outside their ranges, naming the option.
    pub fn check(&self) -> Result<(), ObjectiveError> {
        match self.loss {
            Loss::SelfAdversarial { temperature }
                if !(temperature > 0.0 && temperature.is_finite()) =>
            {
                return Err(ObjectiveError::Temperature(temperature));
            }
            Loss::MarginRanking { margin } if !(margin >= 0.0 && margin.is_finite()) => {
                return Err(ObjectiveError::Margin(margin));
            }
            _ => {}
        }
        if !(0.0..1.0).contains(&self.label_smoothing) {
            return Err(ObjectiveError::Smoothing(self.label_smoothing));
        }
        for p in [self.dropout.entity, self.dropout.relation] {
            if !(0.0..1.0).contains(&p) {
                return Err(ObjectiveError::Dropout(p));
            }
        }
        for r in [self.regularization.entities, self.regularization.relations] {
            if let Some(weight) = r.weight()
                && !(weight >= 0.0 && weight.is_finite())
            {
                return Err(ObjectiveError::RegularizerWeight(weight));
            }
        }
        Ok(())
    }

    /// The loss where each query's true entities are among its candidates (every entity, or a
    /// sample holding the batch's true tails); the losses that score the true tails apart are
    /// refused.
    pub fn label_loss(&self) -> Result<LabelLoss, ObjectiveError> {
        let smoothing = self.label_smoothing;
        match self.loss {
            Loss::BinaryCrossEntropy => Ok(LabelLoss::BinaryCrossEntropy { smoothing }),
            Loss::SoftmaxCrossEntropy => Ok(LabelLoss::SoftmaxCrossEntropy { smoothing }),
            Loss::SelfAdversarial { .. } => Err(ObjectiveError::Candidates {
                option: Setting::Loss,
                reason: "self-adversarial weighting needs shared negatives without batch \
                         negatives (it weighs each query's negatives, apart from its true tails)",
            }),
            Loss::MarginRanking { .. } => Err(ObjectiveError::Candidates {
                option: Setting::Loss,
                reason: "margin ranking needs shared negatives without batch negatives (it \
                         ranks each query's true tails, scored apart, against its negatives)",
            }),
        }
    }

    /// The loss over each query's positives against its negatives, scored apart (shared
    /// negatives without batch negatives, a true triple and its corruptions); `smoothing` is
    /// the refusal of label smoothing there, which has nothing to spread over.
    pub fn sample_loss(&self, smoothing: &'static str) -> Result<SampleLoss, ObjectiveError> {
        if self.label_smoothing > 0.0 {
            return Err(ObjectiveError::Candidates {
                option: Setting::LabelSmoothing,
                reason: smoothing,
            });
        }
        Ok(match self.loss {
            Loss::BinaryCrossEntropy => SampleLoss::Logistic,
            Loss::SoftmaxCrossEntropy => SampleLoss::Softmax,
            Loss::SelfAdversarial { temperature } => SampleLoss::SelfAdversarial { temperature },
            Loss::MarginRanking { margin } => SampleLoss::Margin { margin },
        })
    }
}

/// The option of an [`Objective`] (or of what a step scores against) an error is about: what
/// a recipe's error points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The loss.
    Loss,
    /// The self-adversarial temperature.
    Temperature,
    /// The margin.
    Margin,
    /// Label smoothing.
    LabelSmoothing,
    /// A regulariser.
    Regularization,
    /// Dropout.
    Dropout,
    /// What the queries are scored against (the training mode or the shared negatives).
    Candidates,
}

/// An objective that cannot be trained: a value out of its range, or a choice that does not fit
/// what the step scores against or the model's score.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ObjectiveError {
    /// A self-adversarial temperature that is not > 0.
    #[error("a self-adversarial temperature of {0} (it must be > 0)")]
    Temperature(f32),
    /// A margin that is negative or not finite.
    #[error("a margin of {0} (it must be ≥ 0 and finite)")]
    Margin(f32),
    /// Label smoothing outside `[0, 1)`.
    #[error("label smoothing {0} must be in [0, 1)")]
    Smoothing(f32),
    /// A dropout probability outside `[0, 1)`.
    #[error("dropout {0}: a probability in [0, 1) is needed")]
    Dropout(f32),
    /// A regulariser weight that is negative or not finite.
    #[error("a regulariser weight of {0} (it must be ≥ 0 and finite)")]
    RegularizerWeight(f64),
    /// An option that does not apply to what the step scores against.
    #[error("{reason}")]
    Candidates {
        /// The option.
        option: Setting,
        /// Why, and what would.
        reason: &'static str,
    },
    /// A step that needs the dense kernels, for a score they cannot take.
    #[error("{model} cannot train with {what}: {why}; {advice}")]
    NotDense {
        /// The model.
        model: String,
        /// What it was asked to train with (every entity, batch negatives…).
        what: String,
        /// Why the dense kernels cannot take its score.
        why: String,
        /// What it can train with instead.
        advice: String,
    },
}

impl ObjectiveError {
    /// The option the error is about.
    pub fn option(&self) -> Setting {
        match self {
            ObjectiveError::Temperature(_) => Setting::Temperature,
            ObjectiveError::Margin(_) => Setting::Margin,
            ObjectiveError::Smoothing(_) => Setting::LabelSmoothing,
            ObjectiveError::Dropout(_) => Setting::Dropout,
            ObjectiveError::RegularizerWeight(_) => Setting::Regularization,
            ObjectiveError::Candidates { option, .. } => *option,
            ObjectiveError::NotDense { .. } => Setting::Candidates,
        }
    }
}

impl From<ObjectiveError> for crate::error::ShardError {
    /// An objective the step cannot train is an option that is not available.
    fn from(e: ObjectiveError) -> Self {
        crate::error::ShardError::Unsupported(e.to_string())
    }
}
