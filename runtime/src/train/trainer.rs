//! The epoch: a trainer holds the data, the configuration and the epoch count, and runs the
//! next epoch's steps on a model — its blocks of training triples in a shuffled order (one when
//! they are in memory), each block's examples shuffled and cut into global batches, each rank
//! training its share of each.

use super::batches::{QuerySet, batches, epoch_order, share, shuffled};
use super::config::TrainConfig;
use super::eval::{Filters, Metrics, evaluate};
use super::progress::Progress;
use super::report::EpochReport;
use crate::data::{DataError, Dataset, Split, Triple};
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{ScoringFunction, ShardedModel};
use crate::negatives::{NegativeBatch, SharedSampler};
use crate::objective::Mode;
use crate::step::{StepKind, StepReport, TrainBatch};

/// Trains `model` on `data`; holds the epoch count so a run can stop and resume.
pub struct Trainer<'d> {
    data: &'d Dataset,
    config: TrainConfig,
    /// KvsAll's queries, and 1vsAll's when the triples are in memory.
    queries: Option<QuerySet>,
    /// Draws each step's shared negatives.
    sampler: Option<SharedSampler>,
    /// The training triples trained on when they are a sample of the split
    /// ([`TrainConfig::train_fraction`]).
    sample: Option<Vec<Triple>>,
    /// Base learning rates the schedule scales.
    base_lr: Option<(f64, f64)>,
    /// Epochs finished.
    pub epochs_done: usize,
}

/// What a block of an epoch trains on.
enum Examples<'a> {
    /// KvsAll or 1vsAll queries.
    Queries(&'a QuerySet),
    /// True triples of the training split from position `first` on, each to meet `neg_ratio`
    /// corruptions (negative sampling).
    Triples {
        triples: &'a [Triple],
        first: usize,
        neg_ratio: usize,
    },
}

impl Examples<'_> {
    fn len(&self) -> usize {
        match self {
            Examples::Queries(set) => set.len(),
            Examples::Triples { triples, .. } => triples.len(),
        }
    }
}

/// The training triples of a trainer on `fraction` of `triples`: a sample drawn from the seed,
/// in the split's order.
fn sample(triples: &[Triple], fraction: f64, seed: u64) -> Vec<Triple> {
    let keep = ((triples.len() as f64 * fraction).ceil() as usize).clamp(1, triples.len().max(1));
    let mut picked: Vec<u32> = shuffled(triples.len(), seed ^ 0x7361_6d70_6c65, 0)
        .into_iter()
        .take(keep)
        .collect();
    picked.sort_unstable();
    picked.iter().map(|&i| triples[i as usize]).collect()
}

/// Mixes a block's number into the seed of its shuffle (block 0: the seed itself, so that an
/// epoch of one block is the in-memory epoch).
fn block_seed(seed: u64, block: usize) -> u64 {
    seed ^ (block as u64).wrapping_mul(0xa076_1d64_78bd_642f)
}

impl<'d> Trainer<'d> {
    /// A trainer at epoch 0. KvsAll groups every `(h, r)` of the training split, so it reads a
    /// prepared folder's triples into memory here; 1vsAll and negative sampling stream them.
    /// With a training fraction below 1, it trains on a sample of the split drawn from the
    /// seed, held in memory.
    pub fn new(data: &'d Dataset, config: TrainConfig) -> Result<Self, DataError> {
        let relations = data.relations.len() as u32;
        let sample = (config.train_fraction < 1.0)
            .then(|| -> Result<Vec<Triple>, DataError> {
                let all = match &data.stream {
                    Some(file) => file.read_all()?,
                    None => data.train.clone(),
                };
                Ok(sample(&all, config.train_fraction, config.seed))
            })
            .transpose()?;
        let in_memory = sample
            .as_deref()
            .or(data.stream.is_none().then_some(&data.train[..]));
        let queries = match (config.mode, in_memory, &data.stream) {
            (Mode::KvsAll, Some(triples), _) => Some(QuerySet::kvsall(triples, relations)),
            (Mode::KvsAll, None, Some(file)) => {
                Some(QuerySet::kvsall(&file.read_all()?, relations))
            }
            (Mode::OneVsAll, Some(triples), _) => Some(QuerySet::one_vs_all(triples, relations)),
            _ => None,
        };
        let sampler = SharedSampler::new(data, config.negatives, config.seed)?;
        Ok(Self {
            data,
            config,
            queries,
            sampler,
            sample,
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
        self.queries.is_none() && self.sample.is_none() && self.data.stream.is_some()
    }

    /// Training triples trained on: the split's, or its sample's.
    fn train_len(&self) -> usize {
        self.sample.as_ref().map_or(self.data.train_len(), Vec::len)
    }

    /// The training triples at positions `range` (of the sample, if any), into `out`.
    fn read_train(
        &self,
        range: std::ops::Range<usize>,
        out: &mut Vec<Triple>,
    ) -> Result<(), DataError> {
        match &self.sample {
            Some(sample) => {
                out.clear();
                out.extend_from_slice(&sample[range]);
                Ok(())
            }
            None => self.data.read_train(range, out),
        }
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
        let n = self.train_len();
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
            None => self.examples_of(self.train_len()),
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
        model.set_objective(self.config.objective)?;
        let kind = StepKind::choose(
            self.config.candidates(),
            &self.config.objective,
            &model.dense_support(),
        )
        .map_err(|e| ShardError::Unsupported(e.to_string()))?;
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
            let of_block = match (&self.queries, c.mode) {
                (Some(set), _) => Examples::Queries(set),
                (None, Mode::NegSample { neg_ratio }) => {
                    self.read_train(block.clone(), &mut triples)?;
                    Examples::Triples {
                        triples: &triples,
                        first: block.start,
                        neg_ratio,
                    }
                }
                (None, mode) => {
                    self.read_train(block.clone(), &mut triples)?;
                    let relations = self.data.relations.len() as u32;
                    let set = match mode {
                        Mode::KvsAll => QuerySet::kvsall(&triples, relations),
                        _ => QuerySet::one_vs_all(&triples, relations),
                    };
                    Examples::Queries(block_queries.insert(set))
                }
            };
            let seed = block_seed(c.seed, b as usize);
            let order = epoch_order(c.mode, c.negatives, of_block.len(), seed, epoch);
            for range in batches(order.len(), c.batch_size) {
                let global = &order[range];
                let mine = &global[share(global.len(), rank, world)];
                let report = self.step(model, kind, &of_block, mine, global.len(), epoch, step)?;
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

    /// Step `step` of `epoch`, of `kind`: this rank's examples `mine` (positions in
    /// `examples`) of a global batch of `global`.
    #[allow(clippy::too_many_arguments)]
    fn step<S: ScoringFunction>(
        &self,
        model: &mut ShardedModel<'_, S>,
        kind: StepKind,
        examples: &Examples<'_>,
        mine: &[u32],
        global: usize,
        epoch: usize,
        step: usize,
    ) -> Result<StepReport, ShardError> {
        let c = &self.config;
        match examples {
            Examples::Queries(set) => {
                let heads: Vec<u32> = mine.iter().map(|&i| set.heads[i as usize]).collect();
                let relations: Vec<u32> = mine.iter().map(|&i| set.relations[i as usize]).collect();
                let lists: Vec<&[u32]> = mine.iter().map(|&i| set.labels.get(i as usize)).collect();
                let labels = IdLists::from_lists(&lists);
                match (&self.sampler, c.negatives) {
                    (Some(sampler), crate::negatives::Negatives::Shared { batch, chunk, .. }) => {
                        let negatives = sampler.draw(global, epoch, step);
                        let batch = TrainBatch::SharedNegatives {
                            heads: &heads,
                            relations: &relations,
                            labels: &labels,
                            negatives: &negatives,
                            chunk,
                            batch_negatives: batch,
                        };
                        model.train_step_as(kind, &batch)
                    }
                    _ => {
                        let batch = TrainBatch::AllEntities {
                            heads: &heads,
                            relations: &relations,
                            labels: &labels,
                        };
                        model.train_step_as(kind, &batch)
                    }
                }
            }
            &Examples::Triples {
                triples,
                first,
                neg_ratio,
            } => {
                let b = NegativeBatch::new(
                    triples,
                    first,
                    mine,
                    self.data.entities.len() as u32,
                    neg_ratio,
                    c.objective.label_smoothing,
                    c.seed,
                    epoch,
                );
                let batch = match kind {
                    StepKind::Triples => TrainBatch::Triples {
                        heads: &b.heads,
                        relations: &b.relations,
                        tails: &b.tails,
                        targets: &b.targets,
                    },
                    _ => TrainBatch::Corrupted {
                        heads: &b.heads,
                        relations: &b.relations,
                        tails: &b.tails,
                        per_positive: neg_ratio,
                    },
                };
                model.train_step_as(kind, &batch)
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
