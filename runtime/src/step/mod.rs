//! One training step of a [`ShardedModel`]: the batch's scores, the loss of its
//! [`Objective`](crate::objective::Objective), the generated backward pass, and one optimizer
//! step on both tables.
//!
//! What a step does is chosen once, as a [`StepKind`], from what the batch scores its queries
//! against, the objective and the model (`kind.rs`); each kind has its own file:
//!
//! | kind | file | what it scores |
//! |---|---|---|
//! | [`StepKind::AllEntities`] | `all_entities.rs` | every rank's queries against its shard, or its share of the shared candidates (model-parallel) |
//! | [`StepKind::SampleWithLabels`], [`StepKind::SampleApart`] | `sample.rs` | each rank's own queries against their chunks' samples (data-parallel) |
//! | [`StepKind::PerPair`] | `per_pair.rs` | the same, pair by pair, for scores the dense kernels cannot take |
//! | [`StepKind::Triples`], [`StepKind::Corrupted`] | `triples.rs` | true triples and their corruptions (negative sampling) |
//!
//! The dense steps share what their queries read and the way back through them
//! (`query_side.rs`), the rows they score against (`candidates.rs`), the losses' launches over
//! them (`dense_losses.rs`), the true tails scored apart (`positives.rs`), the regularisers
//! (`regularize.rs`) and the relation table's update (`relations.rs`).
//!
//! The loss is the mean over the *global* batch (every rank's part), so a step over W ranks is
//! the step one rank would take over the whole batch, up to the order of floating-point sums.

mod all_entities;
mod batch;
mod candidates;
mod dense_losses;
mod kind;
mod pairs;
mod per_pair;
mod positives;
mod query_side;
mod regularize;
mod relations;
mod sample;
mod timings;
mod triples;

pub use kind::{Candidates, StepKind};
pub(crate) use timings::StepClock;
pub use timings::{StepPhase, StepTimings};

use crate::error::InputError;
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{ScoringFunction, ShardedModel};
use crate::negatives::SharedSample;

/// One rank's part of a training batch. Every rank calls a step with the same kind of batch.
#[derive(Clone, Copy, Debug)]
pub enum TrainBatch<'a> {
    /// Triples with a target in `[0, 1]` each (1 for a true triple, 0 for a corrupted one, or
    /// smoothed): binary cross-entropy on each score, the mean over the global batch's triples.
    Triples {
        /// Head entities.
        heads: &'a [u32],
        /// Relations.
        relations: &'a [u32],
        /// Tail entities.
        tails: &'a [u32],
        /// Targets.
        targets: &'a [f32],
    },
    /// Negative sampling in groups: each true triple followed by `per_positive` corruptions of
    /// it, `1 + per_positive` triples a group, the objective's loss over each group (its true
    /// triple the positive, its corruptions the negatives); the mean over the global batch's
    /// groups.
    Corrupted {
        /// Heads.
        heads: &'a [u32],
        /// Relations.
        relations: &'a [u32],
        /// Tails.
        tails: &'a [u32],
        /// Corruptions per true triple.
        per_positive: usize,
    },
    /// Each query `(heads[i], relations[i])` scored against every entity, the entities in
    /// `labels.get(i)` being the true ones: KvsAll (a query per distinct `(h, r)`, all its true
    /// tails) or 1vsAll (a query per triple, its one tail). Model-parallel: each rank scores
    /// every query against its own shard. Needs a score the dense kernels take.
    AllEntities {
        /// Head entities of the queries.
        heads: &'a [u32],
        /// Relations of the queries.
        relations: &'a [u32],
        /// The true tails of each query.
        labels: &'a IdLists,
    },
    /// [`TrainBatch::AllEntities`] against shared negatives instead of every entity: each query
    /// is scored against its own true tails and its chunk's `negatives` (global ids, the same
    /// lists on every rank; duplicates count once) — and with `batch_negatives`, against every
    /// true tail of its chunk too, the positives of one query being negatives of the others
    /// (PyTorch-BigGraph's uniform and batch negatives). A chunk is `chunk` consecutive queries
    /// of the global batch (the last one shorter; `0`: the whole batch), with a list of
    /// negatives each. The step looks up each negative once, on its owner, and scores it
    /// against every query with the dense kernels (or pair by pair, for a score they cannot
    /// take, without batch negatives).
    SharedNegatives {
        /// Head entities of the queries.
        heads: &'a [u32],
        /// Relations of the queries.
        relations: &'a [u32],
        /// The true tails of each query.
        labels: &'a IdLists,
        /// Per chunk, the entities its queries are scored against besides their true tails.
        negatives: &'a IdLists,
        /// Queries of the global batch per chunk (`0`: one chunk).
        chunk: usize,
        /// Whether every true tail of a chunk is a negative of its other queries.
        batch_negatives: bool,
    },
}

impl TrainBatch<'_> {
    /// What the batch scores its queries (or triples) against.
    pub fn candidates(&self) -> Candidates {
        match *self {
            TrainBatch::Triples { .. } => Candidates::Targets,
            TrainBatch::Corrupted { .. } => Candidates::Corruptions,
            TrainBatch::AllEntities { .. } => Candidates::AllEntities,
            TrainBatch::SharedNegatives {
                chunk,
                batch_negatives,
                ..
            } => Candidates::Shared {
                batch: batch_negatives,
                chunked: chunk > 0,
            },
        }
    }
}

/// What a step did, over all ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
    /// The loss over the global batch (the objective's, as its step kind means it), the
    /// regularisers' penalty included.
    pub loss: f64,
    /// Triples (or KvsAll queries) in the global batch.
    pub examples: u64,
}

impl StepReport {
    /// An empty global batch's.
    fn empty() -> Self {
        StepReport {
            loss: 0.0,
            examples: 0,
        }
    }
}

/// The first of `others` that is not `n` long, as an input error.
fn length_error(n: usize, others: &[usize]) -> Option<InputError> {
    others
        .iter()
        .find(|&&l| l != n)
        .map(|&got| InputError::BatchLength {
            expected: n as u64,
            got: got as u64,
        })
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// One optimizer step of both tables on this rank's part of `batch`, of the model's
    /// objective ([`ShardedModel::set_objective`]). A collective: every rank calls it with the
    /// same kind of batch. An objective the batch cannot train is refused; bad input on any
    /// rank is refused on every rank before anything changes.
    pub fn train_step(&mut self, batch: &TrainBatch) -> Result<StepReport, ShardError> {
        let kind = StepKind::choose(batch.candidates(), self.objective(), &self.dense_support())?;
        self.train_step_as(kind, batch)
    }

    /// [`ShardedModel::train_step`] of a kind already chosen by [`StepKind::choose`] for this
    /// model, its objective and this kind of batch (an epoch chooses once); a batch of another
    /// kind is refused.
    pub fn train_step_as(
        &mut self,
        kind: StepKind,
        batch: &TrainBatch,
    ) -> Result<StepReport, ShardError> {
        self.step_clock.restart();
        let report = self.train_step_dispatch(kind, batch);
        self.lap(StepPhase::Host);
        self.step_timings.count_step();
        report
    }

    fn train_step_dispatch(
        &mut self,
        kind: StepKind,
        batch: &TrainBatch,
    ) -> Result<StepReport, ShardError> {
        use TrainBatch as B;
        let shared = |negatives, chunk, batch| SharedSample {
            lists: negatives,
            chunk,
            batch,
        };
        match (kind, *batch) {
            (
                StepKind::Triples,
                B::Triples {
                    heads,
                    relations,
                    tails,
                    targets,
                },
            ) => triples::with_targets(self, heads, relations, tails, targets),
            (
                StepKind::Corrupted(loss),
                B::Corrupted {
                    heads,
                    relations,
                    tails,
                    per_positive,
                },
            ) => triples::in_groups(self, heads, relations, tails, per_positive, loss),
            (
                StepKind::AllEntities(loss),
                B::AllEntities {
                    heads,
                    relations,
                    labels,
                },
            ) => all_entities::step(self, heads, relations, labels, loss, None),
            (
                StepKind::AllEntities(loss),
                B::SharedNegatives {
                    heads,
                    relations,
                    labels,
                    negatives,
                    chunk: 0,
                    batch_negatives: true,
                },
            ) => {
                let sample = shared(negatives, 0, true);
                all_entities::step(self, heads, relations, labels, loss, Some(sample))
            }
            (
                StepKind::SampleWithLabels(loss),
                B::SharedNegatives {
                    heads,
                    relations,
                    labels,
                    negatives,
                    chunk,
                    batch_negatives: true,
                },
            ) if chunk > 0 => {
                let sample = shared(negatives, chunk, true);
                sample::with_labels(self, heads, relations, labels, sample, loss)
            }
            (
                StepKind::SampleApart(loss) | StepKind::PerPair(loss),
                B::SharedNegatives {
                    heads,
                    relations,
                    labels,
                    negatives,
                    chunk,
                    batch_negatives: false,
                },
            ) => {
                let sample = shared(negatives, chunk, false);
                match kind {
                    StepKind::SampleApart(_) => {
                        sample::apart(self, heads, relations, labels, sample, loss)
                    }
                    _ => per_pair::step(self, heads, relations, labels, sample, loss),
                }
            }
            (kind, batch) => Err(ShardError::Unsupported(format!(
                "a step chosen as {kind:?} cannot train a batch scored against {:?}",
                batch.candidates()
            ))),
        }
    }
}
