//! Training and evaluating a sharded model on a knowledge graph: epochs of KvsAll, 1vsAll or
//! negative-sampling steps, learning-rate schedules, filtered metrics. Every function here is a
//! collective: each rank runs it with the same data set and configuration.

pub mod batches;
pub mod eval;

use batches::{NegativeBatch, QuerySet, batches, share, shared_negatives, shuffled};
pub use eval::{Filters, Metrics, evaluate};

use crate::data::{Dataset, Split};
use crate::error::ShardError;
use crate::model::{EntityLoss, ScoringFunction, ShardedModel, TrainBatch};

/// How a step scores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Every distinct `(h, r)` against every entity, with all its true tails; reciprocal
    /// relations (needs a score linear in the tail).
    KvsAll,
    /// Every training triple `(h, r, t)` and its reciprocal against every entity, each with its
    /// one true tail (Lacroix et al., 2018); reciprocal relations (needs a score linear in the
    /// tail).
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
}

/// The loss of a mode that scores against every entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Binary cross-entropy on every (query, entity) logit.
    BinaryCrossEntropy,
    /// Softmax cross-entropy over all entities.
    SoftmaxCrossEntropy,
}

impl Loss {
    /// The loss a mode gets when none is asked for: the softmax for 1vsAll (its one true tail is
    /// a class), binary cross-entropy otherwise.
    pub fn default_for(mode: Mode) -> Self {
        match mode {
            Mode::OneVsAll => Loss::SoftmaxCrossEntropy,
            _ => Loss::BinaryCrossEntropy,
        }
    }

    /// With label smoothing `smoothing`.
    pub fn with_smoothing(self, smoothing: f32) -> EntityLoss {
        match self {
            Loss::BinaryCrossEntropy => EntityLoss::BinaryCrossEntropy { smoothing },
            Loss::SoftmaxCrossEntropy => EntityLoss::SoftmaxCrossEntropy { smoothing },
        }
    }
}

/// What a KvsAll or 1vsAll step scores its queries against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Negatives {
    /// Every entity.
    #[default]
    All,
    /// Shared negatives, drawn anew for every step: `count` distinct uniform entities, every
    /// query against all of them and its own true tails — with `batch`, also against every true
    /// tail of the global batch ([`TrainBatch::SharedNegatives`]).
    Uniform {
        /// Entities drawn per step.
        count: usize,
        /// Whether the batch's true tails are every query's negatives too.
        batch: bool,
    },
}

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
    /// The loss of KvsAll and 1vsAll steps (negative sampling: binary cross-entropy).
    pub loss: Loss,
    /// What KvsAll and 1vsAll steps score against: every entity, or shared negatives.
    pub negatives: Negatives,
    /// Epochs to run.
    pub epochs: usize,
    /// Global batch: KvsAll queries or true triples per step, over all ranks.
    pub batch_size: usize,
    /// Seeds the batches' order and the negatives.
    pub seed: u64,
    /// Label smoothing ε.
    pub label_smoothing: f32,
    /// The learning-rate schedule.
    pub schedule: LrSchedule,
    /// Global queries per ranking call in evaluation.
    pub eval_batch: usize,
}

impl Default for TrainConfig {
    /// dicee's UMLS settings: KvsAll, batch 1024, 256 epochs, no smoothing.
    fn default() -> Self {
        Self {
            mode: Mode::KvsAll,
            loss: Loss::BinaryCrossEntropy,
            negatives: Negatives::All,
            epochs: 256,
            batch_size: 1024,
            seed: 1,
            label_smoothing: 0.0,
            schedule: LrSchedule::Constant,
            eval_batch: 512,
        }
    }
}

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

/// Told about progress; the CLI draws bars with it. Every method has a default that does
/// nothing.
pub trait Progress {
    /// Step `step` (1-based) of `steps` of `epoch` finished with `loss`.
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        let _ = (epoch, step, steps, loss);
    }

    /// An epoch finished.
    fn epoch(&mut self, report: &EpochReport) {
        let _ = report;
    }
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {}

/// Trains `model` on `data`; holds the epoch count so a run can stop and resume.
pub struct Trainer<'d> {
    data: &'d Dataset,
    config: TrainConfig,
    queries: Option<QuerySet>,
    /// Base learning rates the schedule scales.
    base_lr: Option<(f64, f64)>,
    /// Epochs finished.
    pub epochs_done: usize,
}

impl<'d> Trainer<'d> {
    /// A trainer at epoch 0.
    pub fn new(data: &'d Dataset, config: TrainConfig) -> Self {
        let relations = data.relations.len() as u32;
        let queries = match config.mode {
            Mode::KvsAll => Some(QuerySet::kvsall(&data.train, relations)),
            Mode::OneVsAll => Some(QuerySet::one_vs_all(&data.train, relations)),
            Mode::NegSample { .. } => None,
        };
        Self {
            data,
            config,
            queries,
            base_lr: None,
            epochs_done: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Training examples per epoch: queries (KvsAll, 1vsAll) or true triples.
    pub fn examples_per_epoch(&self) -> usize {
        match &self.queries {
            Some(set) => set.len(),
            None => self.data.train.len(),
        }
    }

    /// Steps per epoch.
    pub fn steps_per_epoch(&self) -> usize {
        self.examples_per_epoch()
            .div_ceil(self.config.batch_size.max(1))
    }

    /// Runs the next epoch. A collective.
    pub fn epoch<S: ScoringFunction>(
        &mut self,
        model: &mut ShardedModel<'_, S>,
        progress: &mut dyn Progress,
    ) -> Result<EpochReport, ShardError> {
        let start = std::time::Instant::now();
        let epoch = self.epochs_done;
        let (base_entity, base_relation) = *self.base_lr.get_or_insert((
            model.spec().settings.entity.lr,
            model.spec().settings.relation.lr,
        ));
        let factor = self.config.schedule.factor(epoch, self.config.epochs);
        model.set_lr(base_entity * factor, base_relation * factor)?;
        let (rank, world) = (model.comm().rank(), model.comm().world());
        let c = &self.config;
        let order = shuffled(self.examples_per_epoch(), c.seed, epoch);
        let steps = self.steps_per_epoch();
        let (mut loss, mut examples) = (0.0, 0);
        for (step, range) in batches(order.len(), c.batch_size).enumerate() {
            let global = &order[range];
            let mine = &global[share(global.len(), rank, world)];
            let report = match (&self.queries, c.mode) {
                (Some(set), _) => {
                    let heads: Vec<u32> = mine.iter().map(|&i| set.heads[i as usize]).collect();
                    let relations: Vec<u32> =
                        mine.iter().map(|&i| set.relations[i as usize]).collect();
                    let lists: Vec<&[u32]> =
                        mine.iter().map(|&i| set.labels.get(i as usize)).collect();
                    let labels = crate::model::IdLists::from_lists(&lists);
                    let loss = c.loss.with_smoothing(c.label_smoothing);
                    match c.negatives {
                        Negatives::All => model.train_step(&TrainBatch::AllEntities {
                            heads: &heads,
                            relations: &relations,
                            labels: &labels,
                            loss,
                        })?,
                        Negatives::Uniform { count, batch } => {
                            let entities = self.data.entities.len() as u32;
                            let negatives = shared_negatives(entities, count, c.seed, epoch, step);
                            model.train_step(&TrainBatch::SharedNegatives {
                                heads: &heads,
                                relations: &relations,
                                labels: &labels,
                                negatives: &negatives,
                                batch_negatives: batch,
                                loss,
                            })?
                        }
                    }
                }
                (None, Mode::NegSample { neg_ratio }) => {
                    let b = NegativeBatch::new(
                        self.data,
                        mine,
                        neg_ratio,
                        c.label_smoothing,
                        c.seed,
                        epoch,
                    );
                    model.train_step(&TrainBatch::Triples {
                        heads: &b.heads,
                        relations: &b.relations,
                        tails: &b.tails,
                        targets: &b.targets,
                    })?
                }
                (None, _) => unreachable!("KvsAll and 1vsAll build their query sets"),
            };
            loss += report.loss;
            examples += report.examples;
            progress.step(epoch + 1, step + 1, steps, report.loss);
        }
        self.epochs_done += 1;
        let report = EpochReport {
            epoch: self.epochs_done,
            loss: loss / steps.max(1) as f64,
            steps,
            examples,
            seconds: start.elapsed().as_secs_f64(),
        };
        progress.epoch(&report);
        Ok(report)
    }

    /// Filtered metrics on `split`. A collective.
    pub fn evaluate<S: ScoringFunction>(
        &self,
        model: &ShardedModel<'_, S>,
        filters: &Filters,
        split: Split,
    ) -> Result<Metrics, ShardError> {
        evaluate(
            model,
            self.data,
            filters,
            split,
            self.config.mode.reciprocal(),
            self.config.eval_batch,
        )
    }
}
