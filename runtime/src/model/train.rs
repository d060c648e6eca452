//! One training step: scored triples (negative sampling) or KvsAll queries, binary cross-entropy
//! on the logits, the generated backward pass, and one optimizer step on both tables.
//!
//! The loss is the mean over the *global* batch (every rank's part), so a step over W ranks is
//! the step one rank would take over the whole batch, up to the order of floating-point sums.

use cubecl::bytes::Bytes;
use rowshard_kernels::dense_set::TableBlock;
use rowshard_kernels::kernels::dense::DenseMode;

use super::id_lists::IdLists;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use crate::agree::{agree_on_input, all_values, sum_f64};
use crate::comm::{from_bytes, to_bytes};
use crate::error::{InputError, ShardError};

/// Scores and gradients of at most this many (query, entity) pairs are held at once in KvsAll.
const KVSALL_BLOCK: usize = 1 << 24;

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
    /// `(1 − smoothing)·y + smoothing / entities`. Needs a score linear in the tail.
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
}

/// What a step did, over all ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
    /// The mean binary cross-entropy over the global batch (every score of every rank).
    pub loss: f64,
    /// Triples (or KvsAll queries) in the global batch.
    pub examples: u64,
}

fn length_error(n: usize, others: &[usize]) -> Option<InputError> {
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
            } => self.train_triples(heads, relations, tails, targets),
            TrainBatch::KvsAll {
                heads,
                relations,
                labels,
                smoothing,
            } => self.train_kvsall(heads, relations, labels, smoothing),
        }
    }

    fn train_triples(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        tails: &[u32],
        targets: &[f32],
    ) -> Result<StepReport, ShardError> {
        let n = heads.len();
        let verdict = length_error(n, &[relations.len(), tails.len(), targets.len()])
            .or_else(|| self.check_relations(relations))
            .or_else(|| {
                targets
                    .iter()
                    .position(|y| !(0.0..=1.0).contains(y))
                    .map(|p| InputError::Target { position: p as u64 })
            });
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
        let mut loss = 0.0f64;
        let upstream: Vec<f32> = scores
            .iter()
            .zip(targets)
            .map(|(&s, &y)| {
                loss += bce(s as f64, y as f64);
                let p = 1.0 / (1.0 + (-s as f64).exp());
                ((p - y as f64) / total as f64) as f32
            })
            .collect();
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

    fn train_kvsall(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        smoothing: f32,
    ) -> Result<StepReport, ShardError> {
        let n = heads.len();
        let entities = self.spec.entities;
        let verdict = length_error(n, &[relations.len(), labels.len()])
            .or_else(|| self.check_relations(relations))
            .or_else(|| {
                labels
                    .all_ids()
                    .iter()
                    .find(|&&id| id as usize >= entities)
                    .map(|&id| InputError::IdOutOfRange {
                        id: id as u64,
                        rows: entities as u64,
                    })
            })
            .or_else(|| {
                (!(0.0..1.0).contains(&smoothing)).then_some(InputError::Target { position: 0 })
            });
        agree_on_input(self.comm, verdict)?;
        let Some(dense) = self.dense.clone() else {
            let why = S::TAIL_LINEAR.err().unwrap_or_default();
            return Err(ShardError::Unsupported(format!(
                "KvsAll training of {}: its score is not linear in the tail ({why}); train it \
                 with negative sampling",
                S::NAME
            )));
        };
        let counts = all_values(self.comm, n as u64)?;
        let total = counts.iter().sum::<u64>() as usize;
        if total == 0 {
            return Ok(StepReport {
                loss: 0.0,
                examples: 0,
            });
        }
        let rank = self.comm.rank();
        let offset = counts[..rank].iter().sum::<u64>() as usize;
        let dim = self.spec.settings.dim;
        let client = self.kernels.client().clone();

        // This rank's queries, then everyone's.
        let head_rows = self.entities.lookup(heads)?;
        let ent = self.kernels.upload_f32(head_rows.clone());
        let positions: Vec<u32> = (0..2 * n as u32).collect();
        let rel = self.relation_rows();
        let triples = self
            .kernels
            .upload_triples(&positions[..n], relations, &positions[..n]);
        let q = self
            .kernels
            .read(self.kernels.query(&ent, &rel, &triples)?, n * dim)?;
        let mut q_all = Vec::with_capacity(total * dim);
        for part in self.comm.all_gather(&to_bytes(&q))? {
            q_all.extend(from_bytes::<f32>(&part));
        }
        let mut labels_all = IdLists::new();
        for part in self.comm.all_gather(&to_bytes(&labels.encode()))? {
            labels_all.extend_encoded(&from_bytes::<u32>(&part));
        }

        // Every query against this rank's shard, in blocks of rows.
        let partition = self.entities.partition().clone();
        let local = partition.local_rows(rank);
        let weights = self.entities.shard().buffers().weights.clone();
        let queries = client.create(Bytes::from_elems(q_all));
        let dq = client.create(Bytes::from_elems(vec![0.0f32; total * dim]));
        let dw = client.empty((local * dim).max(1) * 4);
        let scale = 1.0 / (total as f64 * entities as f64);
        let off = smoothing / entities as f32;
        let on = 1.0 - smoothing + off;
        let block_rows = (KVSALL_BLOCK / total).max(1);
        let mut loss = 0.0f64;
        let mut first = 0;
        while first < local {
            let rows = block_rows.min(local - first);
            let mut targets = vec![off; rows * total];
            for b in 0..total {
                for &id in labels_all.get(b) {
                    let (owner, l) = partition.locate(id);
                    let l = l as usize;
                    if owner == rank && (first..first + rows).contains(&l) {
                        targets[(l - first) * total + b] = on;
                    }
                }
            }
            let targets = client.create(Bytes::from_elems(targets));
            let losses = dense.loss_buffer(rows);
            let block = TableBlock {
                table: &weights,
                table_len: local * dim,
                first,
                rows,
            };
            let mode = DenseMode::BinaryCrossEntropy;
            dense.scores(
                &queries,
                total,
                &block,
                &targets,
                &losses,
                scale as f32,
                mode,
            );
            dense.table_grad(&queries, total, &block, &targets, &dw);
            dense.query_grad(&targets, &block, &dq, total);
            let units = dense.loss_units(rows);
            loss += self
                .kernels
                .read(losses, units)?
                .iter()
                .map(|&x| x as f64)
                .sum::<f64>();
            first += rows;
        }
        let dw = self.kernels.read(dw, local * dim)?;
        let mut dq = self.kernels.read(dq, total * dim)?;
        self.comm.all_reduce_sum(&mut dq)?;

        // Back through the query: score(h, r, t) = ⟨q(h, r), t⟩, so the backward kernel with
        // t = ∂loss/∂q and an upstream of 1 gives ∂loss/∂h and ∂loss/∂r.
        let mut rows = head_rows;
        rows.extend_from_slice(&dq[offset * dim..(offset + n) * dim]);
        let ent = self.kernels.upload_f32(rows);
        let triples = self
            .kernels
            .upload_triples(&positions[..n], relations, &positions[n..]);
        let ones = client.create(Bytes::from_elems(vec![1.0f32; n]));
        let [dh, dr, _] = self.kernels.backward(&ent, &rel, &triples, &ones);
        let mut ids: Vec<u32> = heads.to_vec();
        ids.extend((0..local).map(|l| partition.global(rank, l) as u32));
        let mut grads = self.kernels.read(dh, n * dim)?;
        grads.extend(dw);
        let dr = self.kernels.read(dr, n * self.relation_dim)?;
        let lr = self.spec.settings.entity.lr as f32;
        self.entities.apply_gradients(&ids, &grads, lr)?;
        self.apply_relation_gradients(relations, &dr)?;
        Ok(StepReport {
            loss: sum_f64(self.comm, loss)? * scale,
            examples: total as u64,
        })
    }
}
