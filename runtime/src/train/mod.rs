//! Training and evaluating a sharded model on a knowledge graph: epochs of KvsAll, 1vsAll or
//! negative-sampling steps, learning-rate schedules, filtered metrics. Every function here is a
//! collective: each rank runs it with the same data set and configuration.

pub mod batches;
pub mod eval;

use batches::{
    DegreeSampler, NegativeBatch, QuerySet, batches, chunk_negatives, share, shuffled,
    shuffled_pairs,
};
pub use eval::{Filters, Metrics, Protocol, evaluate};

use crate::data::{DataError, Dataset, Split, Triple};
use crate::error::ShardError;
use crate::model::{CorruptionLoss, EntityLoss, ScoringFunction, ShardedModel, TrainBatch};

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
    /// Shared negatives, drawn anew for every step and the same on every rank: `uniform`
    /// distinct entities drawn uniformly and `degree` drawn in proportion to their degree in
    /// the training triples (with replacement; a repeat counts once), every query against all
    /// of them and its own true tails — with `batch`, also against every true tail of the
    /// global batch ([`TrainBatch::SharedNegatives`]).
    Shared {
        /// Entities drawn uniformly per step.
        uniform: usize,
        /// Entities drawn by degree per step.
        degree: usize,
        /// Whether the batch's true tails are every query's negatives too.
        batch: bool,
    },
}

impl Negatives {
    /// The order of an epoch's (or a streamed block's) `n` examples for `mode`: shuffled from
    /// the seed and the epoch; with shared negatives in 1vsAll, each triple's two queries side
    /// by side ([`batches::shuffled_pairs`]) — their heads and true tails are the same two entities,
    /// looked up and updated once (as PyTorch-BigGraph scores an edge's head and tail
    /// corruptions together).
    pub fn order(self, mode: Mode, n: usize, seed: u64, epoch: usize) -> Vec<u32> {
        match (mode, self) {
            (Mode::OneVsAll, Negatives::Shared { .. }) => shuffled_pairs(n, seed, epoch),
            _ => shuffled(n, seed, epoch),
        }
    }

    /// `count` uniform shared negatives per step, and with `batch` the batch's true tails.
    pub fn uniform(count: usize, batch: bool) -> Self {
        Negatives::Shared {
            uniform: count,
            degree: 0,
            batch,
        }
    }
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
    /// Negative sampling's loss over each true triple and its corruptions; `None`: binary
    /// cross-entropy on every triple with targets 1 and 0 (smoothed), the mean over triples
    /// (dicee's). With shared negatives without batch negatives the self-adversarial logistic
    /// loss and the margin ranking loss apply too (each query's true tails against the sample),
    /// in place of `loss`.
    pub corruption_loss: Option<CorruptionLoss>,
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
    /// What evaluation ranks each answer against: every entity, or a sample.
    pub eval_protocol: Protocol,
    /// Training triples per block when they stream from a prepared folder: an epoch reads the
    /// blocks in a shuffled order and shuffles each, so a rank holds one block (12 bytes a
    /// triple, and its queries) at a time.
    pub stream_block: usize,
    /// Shared negatives: queries of the global batch per chunk, each chunk with its own draw of
    /// negatives — and, with batch negatives, its own queries' true tails (PyTorch-BigGraph's
    /// chunks; `0`: the whole batch).
    pub chunk: usize,
}

impl Default for TrainConfig {
    /// dicee's UMLS settings: KvsAll, batch 1024, 256 epochs, no smoothing.
    fn default() -> Self {
        Self {
            mode: Mode::KvsAll,
            loss: Loss::BinaryCrossEntropy,
            corruption_loss: None,
            negatives: Negatives::All,
            epochs: 256,
            batch_size: 1024,
            seed: 1,
            label_smoothing: 0.0,
            schedule: LrSchedule::Constant,
            eval_batch: 512,
            eval_protocol: Protocol::Full,
            stream_block: 1 << 20,
            chunk: 0,
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
    /// KvsAll's queries, and 1vsAll's when the triples are in memory.
    queries: Option<QuerySet>,
    /// The entities' degrees, to draw negatives by.
    degrees: Option<DegreeSampler>,
    /// Base learning rates the schedule scales.
    base_lr: Option<(f64, f64)>,
    /// Epochs finished.
    pub epochs_done: usize,
}

/// What a block of an epoch trains on.
enum Examples<'a> {
    /// KvsAll or 1vsAll queries.
    Queries(&'a QuerySet),
    /// True triples of the training split from position `first` on (negative sampling).
    Triples { triples: &'a [Triple], first: usize },
}

impl Examples<'_> {
    fn len(&self) -> usize {
        match self {
            Examples::Queries(set) => set.len(),
            Examples::Triples { triples, .. } => triples.len(),
        }
    }
}

/// Mixes a block's number into the seed of its shuffle (block 0: the seed itself, so that an
/// epoch of one block is the in-memory epoch).
fn block_seed(seed: u64, block: usize) -> u64 {
    seed ^ (block as u64).wrapping_mul(0xa076_1d64_78bd_642f)
}

impl<'d> Trainer<'d> {
    /// A trainer at epoch 0. KvsAll groups every `(h, r)` of the training split, so it reads a
    /// prepared folder's triples into memory here; 1vsAll and negative sampling stream them.
    pub fn new(data: &'d Dataset, config: TrainConfig) -> Result<Self, DataError> {
        let relations = data.relations.len() as u32;
        let queries = match (config.mode, &data.stream) {
            (Mode::KvsAll, None) => Some(QuerySet::kvsall(&data.train, relations)),
            (Mode::KvsAll, Some(file)) => Some(QuerySet::kvsall(&file.read_all()?, relations)),
            (Mode::OneVsAll, None) => Some(QuerySet::one_vs_all(&data.train, relations)),
            _ => None,
        };
        let degrees = match config.negatives {
            Negatives::Shared { degree, .. } if degree > 0 => Some(DegreeSampler::new(data)?),
            _ => None,
        };
        Ok(Self {
            data,
            config,
            queries,
            degrees,
            base_lr: None,
            epochs_done: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Whether the epochs read their triples from disk a block at a time.
    fn streamed(&self) -> bool {
        self.queries.is_none() && self.data.stream.is_some()
    }

    /// Training examples per block of `triples` triples: 1vsAll has a query per triple and its
    /// reciprocal.
    fn examples_of(&self, triples: usize) -> usize {
        match self.config.mode {
            Mode::OneVsAll => 2 * triples,
            _ => triples,
        }
    }

    /// The epoch's blocks of training triples, as ranges of the split (one when in memory).
    fn blocks(&self) -> Vec<std::ops::Range<usize>> {
        let n = self.data.train_len();
        let block = if self.streamed() {
            self.config.stream_block.max(1)
        } else {
            n.max(1)
        };
        batches(n, block).collect()
    }

    /// Training examples per epoch: queries (KvsAll, 1vsAll) or true triples.
    pub fn examples_per_epoch(&self) -> usize {
        match &self.queries {
            Some(set) => set.len(),
            None => self.examples_of(self.data.train_len()),
        }
    }

    /// Steps per epoch (a block's last batch may be short).
    pub fn steps_per_epoch(&self) -> usize {
        let batch = self.config.batch_size.max(1);
        match &self.queries {
            Some(set) => set.len().div_ceil(batch),
            None => self
                .blocks()
                .iter()
                .map(|b| self.examples_of(b.len()).div_ceil(batch))
                .sum(),
        }
    }

    /// Runs the next epoch. A collective.
    ///
    /// In memory, the epoch is one block: its examples in an order shuffled from the seed and
    /// the epoch. Streamed, it reads blocks of [`TrainConfig::stream_block`] triples in a
    /// shuffled order and shuffles the examples of each; a block of the whole split is the
    /// in-memory epoch.
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
        let steps = self.steps_per_epoch();
        let blocks = self.blocks();
        let (mut loss, mut examples, mut step) = (0.0, 0, 0);
        let mut triples: Vec<Triple> = Vec::new();
        let mut block_queries: Option<QuerySet> = None;
        for b in shuffled(blocks.len(), c.seed ^ 0x626c_6f63_6b73, epoch) {
            let block = blocks[b as usize].clone();
            let of_block = match &self.queries {
                Some(set) => Examples::Queries(set),
                None => {
                    self.data.read_train(block.clone(), &mut triples)?;
                    if c.mode == Mode::OneVsAll {
                        let relations = self.data.relations.len() as u32;
                        Examples::Queries(
                            block_queries.insert(QuerySet::one_vs_all(&triples, relations)),
                        )
                    } else {
                        Examples::Triples {
                            triples: &triples,
                            first: block.start,
                        }
                    }
                }
            };
            let seed = block_seed(c.seed, b as usize);
            let order = c.negatives.order(c.mode, of_block.len(), seed, epoch);
            for range in batches(order.len(), c.batch_size) {
                let global = &order[range];
                let mine = &global[share(global.len(), rank, world)];
                let report = self.step(model, &of_block, mine, global.len(), epoch, step)?;
                loss += report.loss;
                examples += report.examples;
                step += 1;
                progress.step(epoch + 1, step, steps, report.loss);
            }
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

    /// Step `step` of `epoch`: this rank's examples `mine` (positions in `examples`).
    fn step<S: ScoringFunction>(
        &self,
        model: &mut ShardedModel<'_, S>,
        examples: &Examples<'_>,
        mine: &[u32],
        global: usize,
        epoch: usize,
        step: usize,
    ) -> Result<crate::model::StepReport, ShardError> {
        let c = &self.config;
        match examples {
            Examples::Queries(set) => {
                let heads: Vec<u32> = mine.iter().map(|&i| set.heads[i as usize]).collect();
                let relations: Vec<u32> = mine.iter().map(|&i| set.relations[i as usize]).collect();
                let lists: Vec<&[u32]> = mine.iter().map(|&i| set.labels.get(i as usize)).collect();
                let labels = crate::model::IdLists::from_lists(&lists);
                let loss = match (c.corruption_loss, c.negatives) {
                    (
                        Some(CorruptionLoss::Logistic {
                            adversarial: Some(temperature),
                        }),
                        Negatives::Shared { .. },
                    ) => EntityLoss::SelfAdversarial { temperature },
                    (Some(CorruptionLoss::Margin { margin }), Negatives::Shared { .. }) => {
                        EntityLoss::Margin { margin }
                    }
                    _ => c.loss.with_smoothing(c.label_smoothing),
                };
                match c.negatives {
                    Negatives::All => model.train_step(&TrainBatch::AllEntities {
                        heads: &heads,
                        relations: &relations,
                        labels: &labels,
                        loss,
                    }),
                    Negatives::Shared {
                        uniform,
                        degree,
                        batch,
                    } => {
                        let entities = self.data.entities.len() as u32;
                        let chunk = c.chunk;
                        let chunks = if chunk == 0 {
                            1
                        } else {
                            global.div_ceil(chunk)
                        };
                        let mut negatives = crate::model::IdLists::new();
                        for k in 0..chunks {
                            let mut drawn =
                                chunk_negatives(entities, uniform, c.seed, epoch, step, k);
                            if let Some(degrees) = &self.degrees {
                                degrees.extend(&mut drawn, degree, c.seed, epoch, step, k);
                            }
                            negatives.push(&drawn);
                        }
                        model.train_step(&TrainBatch::SharedNegatives {
                            heads: &heads,
                            relations: &relations,
                            labels: &labels,
                            negatives: &negatives,
                            chunk,
                            batch_negatives: batch,
                            loss,
                        })
                    }
                }
            }
            Examples::Triples { triples, first } => {
                let Mode::NegSample { neg_ratio } = c.mode else {
                    unreachable!("only negative sampling trains on triples")
                };
                let b = NegativeBatch::new(
                    triples,
                    *first,
                    mine,
                    self.data.entities.len() as u32,
                    neg_ratio,
                    c.label_smoothing,
                    c.seed,
                    epoch,
                );
                match c.corruption_loss {
                    None => model.train_step(&TrainBatch::Triples {
                        heads: &b.heads,
                        relations: &b.relations,
                        tails: &b.tails,
                        targets: &b.targets,
                    }),
                    Some(loss) => model.train_step(&TrainBatch::Corrupted {
                        heads: &b.heads,
                        relations: &b.relations,
                        tails: &b.tails,
                        per_positive: neg_ratio,
                        loss,
                    }),
                }
            }
        }
    }

    /// Filtered metrics on `split`, by the configured protocol. A collective.
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
            self.config.eval_protocol,
        )
    }
}
