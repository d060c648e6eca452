//! One training step: scored triples (negative sampling), or queries scored against every entity
//! (KvsAll, 1vsAll; see `all_entities.rs`), the loss, the generated backward pass, and one
//! optimizer step on both tables.
//!
//! The loss is the mean over the *global* batch (every rank's part), so a step over W ranks is
//! the step one rank would take over the whole batch, up to the order of floating-point sums.

use cubecl::bytes::Bytes;

use super::candidates::SharedNegatives;
use super::corruptions::CorruptionLoss;
use super::id_lists::IdLists;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use crate::agree::{agree_on_input, all_values, sum_f64};
use crate::error::{InputError, ShardError};

/// One rank's part of a training batch.
#[derive(Clone, Copy, Debug)]
pub enum TrainBatch<'a> {
    /// Triples with a target in `[0, 1]` each (1 for a true triple, 0 for a corrupted one, or
    /// smoothed): binary cross-entropy on each score.
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
    /// KvsAll: each query `(heads[i], relations[i])` is scored against every entity, with
    /// target 1 for the entities in `labels.get(i)` and 0 for the others, smoothed to
    /// `(1 − smoothing)·y + smoothing / entities`; binary cross-entropy. The same as
    /// [`TrainBatch::AllEntities`] with [`EntityLoss::BinaryCrossEntropy`]. Needs a score
    /// linear in the tail.
    KvsAll {
        /// Head entities of the queries.
        heads: &'a [u32],
        /// Relations of the queries.
        relations: &'a [u32],
        /// The true tails of each query.
        labels: &'a IdLists,
        /// Label smoothing in `[0, 1)`.
        smoothing: f32,
    },
    /// Each query `(heads[i], relations[i])` scored against every entity, the entities in
    /// `labels.get(i)` being the true ones: KvsAll (a query per distinct `(h, r)`, all its true
    /// tails) or 1vsAll (a query per triple, its one tail), with either loss. Model-parallel:
    /// each rank scores every query against its own shard. Needs a score linear in the tail.
    AllEntities {
        /// Head entities of the queries.
        heads: &'a [u32],
        /// Relations of the queries.
        relations: &'a [u32],
        /// The true tails of each query.
        labels: &'a IdLists,
        /// The loss.
        loss: EntityLoss,
    },
    /// [`TrainBatch::AllEntities`] against shared negatives instead of every entity: each query
    /// is scored against its own true tails and its chunk's `negatives` (global ids, the same
    /// lists on every rank; duplicates count once) — and with `batch_negatives`, against every
    /// true tail of the global batch too, the positives of one query being negatives of the
    /// others (PyTorch-BigGraph's uniform and batch negatives). A chunk is `chunk` consecutive
    /// queries of the global batch (the last one shorter; `0`: the whole batch), with a list of
    /// negatives each; batch negatives need one chunk. The step looks up
    /// each negative once, on its owner, and scores it against every query with the dense
    /// kernels. The losses: the softmax over a query's positives and negatives; the logistic
    /// loss, the mean of its positives' and the mean of its negatives' binary cross-entropy
    /// (with `batch_negatives`: the mean over every (query, candidate) pair). Label smoothing
    /// needs `batch_negatives` (it spreads over the candidates). Needs a score linear in the
    /// tail.
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
        /// Whether every true tail of the global batch is a negative of every other query.
        batch_negatives: bool,
        /// The loss.
        loss: EntityLoss,
    },
    /// Negative sampling in groups: each true triple followed by `per_positive` corruptions of
    /// it, `1 + per_positive` triples a group, the loss over each group ([`CorruptionLoss`]:
    /// self-adversarial logistic, softmax, margin); the mean over the global batch's groups.
    Corrupted {
        /// Heads.
        heads: &'a [u32],
        /// Relations.
        relations: &'a [u32],
        /// Tails.
        tails: &'a [u32],
        /// Corruptions per true triple.
        per_positive: usize,
        /// The loss.
        loss: CorruptionLoss,
    },
}

/// The loss of a step that scores queries against every entity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EntityLoss {
    /// Binary cross-entropy on every (query, entity) logit against the targets `1` (true) and
    /// `0`, smoothed to `(1 − ε)·y + ε / entities`; the mean over every pair.
    BinaryCrossEntropy {
        /// Label smoothing ε in `[0, 1)`.
        smoothing: f32,
    },
    /// Softmax cross-entropy over all entities against the true entities' uniform
    /// distribution (1vsAll: the one true tail), smoothed to `(1 − ε)·y + ε / entities`; the
    /// mean over queries. The softmax's log-sum-exp is combined across the ranks' shards.
    SoftmaxCrossEntropy {
        /// Label smoothing ε in `[0, 1)`.
        smoothing: f32,
    },
    /// Shared negatives only (without batch negatives): the logistic loss with self-adversarial
    /// weighting (Sun et al., 2019) — per query, `softplus(−s)` of its true tails (their mean)
    /// plus `Σ p·softplus(s)` over the negatives, `p = softmax(α·s)` over them held constant;
    /// the mean over queries. The softmax's log-sum-exp is combined across ranks.
    SelfAdversarial {
        /// The temperature α > 0.
        temperature: f32,
    },
    /// Shared negatives only (without batch negatives): margin ranking (Bordes et al., 2013;
    /// PyTorch-BigGraph's `ranking` loss) — per query, the mean over its distinct true tails
    /// `s₊` and the sampled negatives `s` of `max(0, γ − s₊ + s)`; the mean over queries.
    Margin {
        /// The margin γ ≥ 0.
        margin: f32,
    },
}

impl EntityLoss {
    /// The label smoothing.
    pub fn smoothing(self) -> f32 {
        match self {
            EntityLoss::BinaryCrossEntropy { smoothing }
            | EntityLoss::SoftmaxCrossEntropy { smoothing } => smoothing,
            EntityLoss::SelfAdversarial { .. } | EntityLoss::Margin { .. } => 0.0,
        }
    }
}

/// What a step did, over all ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
    /// The loss over the global batch: the mean binary cross-entropy over every score, or the
    /// mean softmax cross-entropy over the queries.
    pub loss: f64,
    /// Triples (or KvsAll queries) in the global batch.
    pub examples: u64,
}

pub(super) fn length_error(n: usize, others: &[usize]) -> Option<InputError> {
    others
        .iter()
        .find(|&&l| l != n)
        .map(|&got| InputError::BatchLength {
            expected: n as u64,
            got: got as u64,
        })
}

/// `softplus(s) − y·s`: binary cross-entropy on a logit, stable for large `|s|`.
fn bce(s: f64, y: f64) -> f64 {
    s.max(0.0) + (-s.abs()).exp().ln_1p() - y * s
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// One optimizer step of both tables on this rank's part of `batch`. A collective: every
    /// rank calls it with the same kind of batch. Bad input on any rank is refused on every
    /// rank before anything changes.
    pub fn train_step(&mut self, batch: &TrainBatch) -> Result<StepReport, ShardError> {
        match *batch {
            TrainBatch::Triples {
                heads,
                relations,
                tails,
                targets,
            } => {
                let bad_target = targets
                    .iter()
                    .position(|y| !(0.0..=1.0).contains(y))
                    .map(|p| InputError::Target { position: p as u64 });
                let lengths = length_error(heads.len(), &[targets.len()]);
                self.train_scored(
                    heads,
                    relations,
                    tails,
                    lengths.or(bad_target),
                    |scores, total| {
                        let mut loss = 0.0f64;
                        let upstream = scores
                            .iter()
                            .zip(targets)
                            .map(|(&s, &y)| {
                                loss += bce(s as f64, y as f64);
                                let p = 1.0 / (1.0 + (-s as f64).exp());
                                ((p - y as f64) / total as f64) as f32
                            })
                            .collect();
                        (loss, upstream)
                    },
                )
            }
            TrainBatch::Corrupted {
                heads,
                relations,
                tails,
                per_positive,
                loss,
            } => {
                let group = 1 + per_positive;
                let bad_groups =
                    (!heads.len().is_multiple_of(group)).then_some(InputError::Groups {
                        triples: heads.len() as u64,
                        group: group as u64,
                    });
                self.train_scored(heads, relations, tails, bad_groups, |scores, total| {
                    let groups = total / group as u64;
                    let (mut sum, mut s, mut g) = (0.0f64, vec![0.0; group], vec![0.0; group]);
                    let mut upstream = Vec::with_capacity(scores.len());
                    for chunk in scores.chunks(group) {
                        s.iter_mut().zip(chunk).for_each(|(a, &b)| *a = b as f64);
                        sum += loss.group(&s, &mut g);
                        upstream.extend(g.iter().map(|&x| (x / groups as f64) as f32));
                    }
                    // The report's loss is the mean over triples: per group, scaled back.
                    (sum * group as f64, upstream)
                })
            }
            TrainBatch::KvsAll {
                heads,
                relations,
                labels,
                smoothing,
            } => self.train_all_entities(
                heads,
                relations,
                labels,
                EntityLoss::BinaryCrossEntropy { smoothing },
                None,
            ),
            TrainBatch::AllEntities {
                heads,
                relations,
                labels,
                loss,
            } => self.train_all_entities(heads, relations, labels, loss, None),
            TrainBatch::SharedNegatives {
                heads,
                relations,
                labels,
                negatives,
                chunk,
                batch_negatives,
                loss,
            } => {
                let shared = SharedNegatives {
                    lists: negatives,
                    chunk,
                    batch: batch_negatives,
                };
                self.train_all_entities(heads, relations, labels, loss, Some(shared))
            }
        }
    }

    /// A step on scored triples: `loss` turns the scores and the global number of triples
    /// into the summed loss and each score's gradient (of the mean loss); `extra` is a verdict
    /// on the input beyond its shape.
    fn train_scored(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        tails: &[u32],
        extra: Option<InputError>,
        loss: impl FnOnce(&[f32], u64) -> (f64, Vec<f32>),
    ) -> Result<StepReport, ShardError> {
        let n = heads.len();
        let verdict = length_error(n, &[relations.len(), tails.len()])
            .or(extra)
            .or_else(|| self.check_relations(relations));
        agree_on_input(self.comm, verdict)?;
        let total: u64 = all_values(self.comm, n as u64)?.iter().sum();
        if total == 0 {
            return Ok(StepReport {
                loss: 0.0,
                examples: 0,
            });
        }
        let ids: Vec<u32> = heads.iter().chain(tails).copied().collect();
        let rows = self.entities.lookup(&ids)?;
        let ent = self.kernels.upload_f32(rows);
        let positions: Vec<u32> = (0..2 * n as u32).collect();
        let triples = self
            .kernels
            .upload_triples(&positions[..n], relations, &positions[n..]);
        let rel = self.relation_rows();
        let scores = self
            .kernels
            .read(self.kernels.forward(&ent, &rel, &triples), n)?;
        let (loss, upstream) = loss(&scores, total);
        let upstream = self.kernels.client().create(Bytes::from_elems(upstream));
        let [dh, dr, dt] = self.kernels.backward(&ent, &rel, &triples, &upstream);
        let dim = self.spec.settings.dim;
        let mut grads = self.kernels.read(dh, n * dim)?;
        grads.extend(self.kernels.read(dt, n * dim)?);
        let dr = self.kernels.read(dr, n * self.relation_dim)?;
        let lr = self.spec.settings.entity.lr as f32;
        self.entities.apply_gradients(&ids, &grads, lr)?;
        self.apply_relation_gradients(relations, &dr)?;
        Ok(StepReport {
            loss: sum_f64(self.comm, loss)? / total as f64,
            examples: total,
        })
    }
}
