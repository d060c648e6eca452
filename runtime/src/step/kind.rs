//! The kind of a training step, chosen once from what the batch scores its queries against, the
//! objective and the model's score: the one place that decides which combinations train, so the
//! steps read a loss of the form they take and never check it again.

use crate::model::DenseSupport;
use crate::objective::{LabelLoss, Loss, Objective, ObjectiveError, SampleLoss, Setting};

/// What a batch scores its queries (or triples) against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidates {
    /// Every entity (KvsAll, 1vsAll).
    AllEntities,
    /// Shared negatives: with `batch`, each chunk's true tails among them; `chunked`, drawn per
    /// chunk of the batch rather than for the whole batch.
    Shared {
        /// Whether a chunk's true tails are its queries' negatives too.
        batch: bool,
        /// Whether the batch is cut into chunks, each with its own sample.
        chunked: bool,
    },
    /// Triples with their targets (negative sampling's binary cross-entropy).
    Targets,
    /// Groups of a true triple and its corruptions (negative sampling's other losses).
    Corruptions,
}

/// How a step trains: each kind has its file under `step/` and reads its loss in the form it
/// takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepKind {
    /// Every rank's queries against every entity, or against the shared candidates of the whole
    /// batch (batch negatives, one chunk): each rank scores all of them against its shard or its
    /// share of the candidates — model-parallel (`all_entities.rs`).
    AllEntities(LabelLoss),
    /// Each rank's own queries against their chunks' samples, which hold each chunk's true tails
    /// (batch negatives in chunks): data-parallel (`sample.rs`).
    SampleWithLabels(LabelLoss),
    /// Each rank's own queries against their chunks' samples, their true tails scored apart
    /// (shared negatives without batch negatives): data-parallel (`sample.rs`).
    SampleApart(SampleLoss),
    /// [`StepKind::SampleApart`] for a score the dense kernels cannot take: every (query,
    /// candidate) pair through the scoring function's own kernels (`per_pair.rs`).
    PerPair(SampleLoss),
    /// Triples with their targets, binary cross-entropy on each (`triples.rs`).
    Triples,
    /// A true triple and its corruptions, the loss over each group (`triples.rs`).
    Corrupted(SampleLoss),
}

/// Why a refused regulariser or dropout does not apply to negative sampling.
const NEGATIVE_SAMPLING_REGULARIZER: &str = "regularisers apply to queries scored against every \
     entity or shared negatives (kvsall, 1vsall); negative sampling trains without them";
const NEGATIVE_SAMPLING_DROPOUT: &str = "dropout applies to queries scored against every entity \
     or shared negatives (kvsall, 1vsall); negative sampling trains without it";

impl StepKind {
    /// The kind of step that trains `objective` on a batch scoring against `candidates` for a
    /// model whose score the dense kernels take or not (`dense`); refuses what cannot train,
    /// naming the option at fault.
    pub fn choose(
        candidates: Candidates,
        objective: &Objective,
        dense: &DenseSupport,
    ) -> Result<StepKind, ObjectiveError> {
        objective.check()?;
        let not_dense = |what: &str, advice: &str| match dense {
            DenseSupport::Dense => Ok(()),
            DenseSupport::Not { model, why } => Err(ObjectiveError::NotDense {
                model: model.to_string(),
                what: what.to_string(),
                why: why.clone(),
                advice: advice.to_string(),
            }),
        };
        match candidates {
            Candidates::Targets | Candidates::Corruptions => {
                if objective.regularized() {
                    return Err(ObjectiveError::Candidates {
                        option: Setting::Regularization,
                        reason: NEGATIVE_SAMPLING_REGULARIZER,
                    });
                }
                if !objective.dropout.is_none() {
                    return Err(ObjectiveError::Candidates {
                        option: Setting::Dropout,
                        reason: NEGATIVE_SAMPLING_DROPOUT,
                    });
                }
                if candidates == Candidates::Corruptions {
                    let smoothing = "label smoothing applies to negative sampling's binary \
                                     cross-entropy (targets on each triple)";
                    return Ok(StepKind::Corrupted(objective.sample_loss(smoothing)?));
                }
                match objective.loss {
                    Loss::BinaryCrossEntropy => Ok(StepKind::Triples),
                    _ => Err(ObjectiveError::Candidates {
                        option: Setting::Loss,
                        reason: "triples with their targets train with binary cross-entropy; \
                                 the other losses train groups of a true triple and its \
                                 corruptions",
                    }),
                }
            }
            Candidates::AllEntities => {
                not_dense(
                    "every entity (KvsAll, 1vsAll)",
                    "train it with negative sampling, or shared negatives without batch \
                     negatives (scored pair by pair)",
                )?;
                Ok(StepKind::AllEntities(objective.label_loss()?))
            }
            Candidates::Shared {
                batch: true,
                chunked,
            } => {
                not_dense(
                    "batch negatives",
                    "train it with uniform or degree negatives alone",
                )?;
                let loss = objective.label_loss()?;
                Ok(if chunked {
                    StepKind::SampleWithLabels(loss)
                } else {
                    StepKind::AllEntities(loss)
                })
            }
            Candidates::Shared { batch: false, .. } => {
                let smoothing = "label smoothing with shared negatives needs batch negatives (it \
                                 spreads over the candidates, and without them each query has \
                                 its own)";
                let loss = objective.sample_loss(smoothing)?;
                Ok(match dense {
                    DenseSupport::Dense => StepKind::SampleApart(loss),
                    DenseSupport::Not { .. } => StepKind::PerPair(loss),
                })
            }
        }
    }
}
