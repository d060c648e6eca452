//! A step that scores queries against every entity — KvsAll and 1vsAll — model-parallel.
//!
//! Each rank maps its queries `(h, r)` through the query kernel to `q` (the score is `⟨q, t⟩`),
//! every rank's `q` are gathered, and each rank scores all of them against its own shard with
//! the dense kernels: the loss is fused into the score tiles, the true entities' targets are
//! corrected on the device from the label lists, the shard's gradient stays local and the
//! queries' gradient is all-reduced and sent back through the query's backward pass. With the
//! softmax cross-entropy each rank first reduces its shard to a (max, Σ exp) per query, the ranks
//! combine those into the log-sum-exp, and each computes its shard's gradient from it. No rank
//! holds a whole score row or the whole table.
//!
//! With shared negatives the same step runs against a sample instead of every entity. With batch
//! negatives (the batch's true tails among the candidates) each rank gathers its share of the
//! sampled ids and of the true tails into one block and scores everyone's queries against it.
//! Without, each query's positives are scored apart, and each rank scores only its own queries
//! against the whole sample, looked up with its heads — data-parallel, as PyTorch-BigGraph's
//! workers: no queries gathered, no gradient of them all-reduced, every log-sum-exp local. Either
//! way the sample's gradient goes back through the sparse optimizer step like any looked-up
//! row's, summed over the ranks at the rows' owners.
//!
//! Each loss's launches over the blocks of candidate rows are in `candidate_losses.rs`; what the
//! query kernel reads and the gradient back through it are `query_side.rs`; a score the dense
//! kernels cannot take meets shared negatives pair by pair (`per_pair.rs`).

use cubecl::bytes::Bytes;

use super::candidate_losses::{CandidateScoring, LossParts, block_labels, blocks};
use super::candidates::{CandidateGradient, Scored, SharedNegatives, describe_ids};
use super::dense_inputs::{DenseQueries, HostQueries};
use super::id_lists::IdLists;
use super::sample_step::SampleChunk;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use super::train::{EntityLoss, StepReport, length_error};
use crate::agree::{agree_on, agree_on_input, all_values};
use crate::comm::{all_gather_values, from_bytes, to_bytes};
use crate::error::{InputError, ShardError};

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// One step of `loss` on this rank's queries against every entity, or against the shared
    /// candidates: `negatives` and the global batch's true tails. A collective.
    pub(super) fn train_all_entities(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        loss: EntityLoss,
        negatives: Option<SharedNegatives>,
    ) -> Result<StepReport, ShardError> {
        let apart = self.check_entity_step(heads, relations, labels, loss, negatives)?;
        // Each rank scores only its own queries against shared negatives, chunk by chunk —
        // unless batch negatives make the whole batch one chunk of candidates.
        let local = apart || negatives.is_some_and(|s| s.batch && s.chunk > 0);
        let n = heads.len();
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
        if let Some(shared) = negatives {
            // The lists are the same on every rank (checked), so every rank refuses alike.
            let chunks = shared.chunks(total);
            if shared.lists.len() != chunks.len() {
                let error = InputError::NegativeChunks {
                    lists: shared.lists.len() as u64,
                    chunks: chunks.len() as u64,
                };
                return Err(ShardError::BadInput { rank: 0, error });
            }
            if local {
                // Each rank scores its own queries, chunk by chunk (`sample_step.rs`); with
                // batch negatives a chunk's candidates are its sample and its queries' true
                // tails, every rank's.
                if !apart && self.dense.is_none() {
                    return Err(ShardError::Unsupported(format!(
                        "batch negatives for {}, whose score the dense kernels cannot take \
                         ({}); train it with uniform or degree negatives alone",
                        S::NAME,
                        self.not_dense()
                    )));
                }
                let labels_all = if apart {
                    IdLists::new()
                } else {
                    self.gather_labels(labels)?
                };
                let mine = offset..offset + n;
                let chunks: Vec<SampleChunk> = chunks
                    .iter()
                    .enumerate()
                    .filter_map(|(c, range)| {
                        let start = range.start.max(mine.start);
                        let end = range.end.min(mine.end);
                        (start < end).then(|| {
                            let mut sample = shared.lists.get(c).to_vec();
                            if !apart {
                                for b in range.clone() {
                                    sample.extend_from_slice(labels_all.get(b));
                                }
                            }
                            sample.sort_unstable();
                            sample.dedup();
                            SampleChunk {
                                queries: start - offset..end - offset,
                                sample,
                            }
                        })
                    })
                    .collect();
                return match self.dense.clone() {
                    Some(dense) => self.train_against_samples(
                        &dense, heads, relations, labels, loss, &chunks, apart, offset, total,
                    ),
                    // A score the dense kernels cannot take, pair by pair (`per_pair.rs`).
                    None => {
                        self.train_per_pair(heads, relations, labels, loss, &chunks, offset, total)
                    }
                };
            }
        }
        let Some(dense) = self.dense.clone() else {
            return Err(ShardError::Unsupported(format!(
                "training {} against every entity (KvsAll, 1vsAll) or shared negatives with \
                 batch negatives: {}; train it with negative sampling, or shared negatives \
                 without batch negatives (scored pair by pair)",
                S::NAME,
                self.not_dense()
            )));
        };
        let dim = self.spec.settings.dim;
        // The dense kernels' row width: `dim`, or the augmented rows' (`augmented.rs`).
        let width = self.dense_width();
        let client = self.kernels.client().clone();

        // Every rank scores everyone's queries against its shard, or its share of the
        // candidates (model-parallel: no rank holds a whole score row).
        let (mut inputs, _) = self.query_inputs(heads, relations, offset, &[])?;
        let DenseQueries {
            rows: q,
            offset_grads,
            ..
        } = self.queries_of(&mut inputs)?;
        let q_all = all_gather_values(self.comm, q.into_values()?)?;
        // Everyone's label lists: the targets among the rows scored here, and the true tails
        // this rank owns for the regularisers.
        let labels_all = self.gather_labels(labels)?;

        // Every query against this rank's candidates, in blocks of rows.
        let partition = self.entities.partition().clone();
        let candidates = self.candidates(negatives, &labels_all)?;
        let count = candidates.count;
        let queries = dense.upload_queries(&q_all, total);
        let q_all = HostQueries::given(q_all);
        let blocks = blocks(count, queries.padded);
        // Where a label lies among the scored rows.
        let row = |id: u32| {
            let (owner, at) = partition.locate(id);
            match &candidates.rows {
                _ if owner != rank => None,
                Scored::Shard => Some(at),
                Scored::Rows(rows) => rows.binary_search(&at).ok().map(|r| r as u32),
                Scored::Sample(_) => None,
            }
        };
        let targets = block_labels(&labels_all, row, &blocks, loss);
        // The true tails this rank owns, as local rows (the regularisers').
        let tails: Vec<u32> = targets
            .iter()
            .zip(&blocks)
            .flat_map(|(t, b)| t.rows.iter().map(move |&r| r + b.start as u32))
            .map(|r| candidates.local(r))
            .collect();
        // The candidates' gradient; for the whole shard with room after it for the rows the
        // step routes here: a head of any rank, a true tail or a distinct row of this rank's
        // (regularisers).
        let room = match candidates.rows {
            Scored::Shard => total + tails.len() + count,
            Scored::Rows(_) | Scored::Sample(_) => 0,
        };
        let dw = client.empty(((count + room) * width).max(1) * 4);
        let dq = if blocks.is_empty() {
            client.create(Bytes::from_elems(vec![0.0f32; width * queries.padded]))
        } else {
            dense.query_grad_buffer(&queries)
        };
        let LossParts { partial, scale, .. } = CandidateScoring {
            dense: &dense,
            comm: self.comm,
            queries: &queries,
            q: &q_all,
            candidates: &candidates,
            blocks: &blocks,
            targets: &targets,
            dw: &dw,
            dq: &dq,
            total,
            local: false,
            width,
        }
        .run(loss, None)?;
        let mut dq = dense.read_query_grad(dq, &queries)?;
        self.comm.all_reduce_sum(&mut dq)?;
        let dq = &mut dq[offset * width..(offset + n) * width];
        // Augmented rows' gradients fold back to the rows' (`augmented.rs`).
        let fold = |grads: Vec<f32>, rows: &[f32]| match self.augmented {
            Some(form) => form.fold_rows(&grads, rows),
            None => grads,
        };
        let dw = match (&self.augmented, &candidates.rows, &candidates.plain) {
            (Some(_), Scored::Shard, Some(plain)) => {
                let mut grads = fold(dense.read(dw, count * width)?, plain);
                grads.resize(((count + room) * dim).max(1), 0.0);
                client.create(Bytes::from_elems(grads))
            }
            _ => dw,
        };
        let candidate_grads = match candidates.ids(&partition, rank) {
            None => CandidateGradient::Device(&dw),
            Some(ids) => {
                let read = dense.read(dw.clone(), count * width)?;
                let grads = fold(read, candidates.plain.as_deref().unwrap_or_default());
                CandidateGradient::Host { ids, grads }
            }
        };
        self.finish_entity_step(
            heads,
            relations,
            inputs,
            dq,
            offset_grads,
            candidate_grads,
            &tails,
            total,
            partial * scale,
        )
    }

    /// Refuses bad input (on any rank, on every rank) and settings the step cannot train; says
    /// whether the queries' true tails are scored apart from the negatives: shared negatives
    /// without batch negatives. A collective.
    fn check_entity_step(
        &self,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        loss: EntityLoss,
        negatives: Option<SharedNegatives>,
    ) -> Result<bool, ShardError> {
        let n = heads.len();
        let entities = self.spec.entities;
        let smoothing = loss.smoothing();
        let verdict = length_error(n, &[relations.len(), labels.len()])
            .or_else(|| self.check_relations(relations))
            .or_else(|| {
                heads
                    .iter()
                    .chain(labels.all_ids())
                    .chain(negatives.map_or(&[][..], |s| s.lists.all_ids()))
                    .find(|&&id| id as usize >= entities)
                    .map(|&id| InputError::IdOutOfRange {
                        id: id as u64,
                        rows: entities as u64,
                    })
            })
            .or_else(|| {
                (!(0.0..1.0).contains(&smoothing)).then_some(InputError::Smoothing {
                    value: smoothing.to_bits() as u64,
                })
            })
            .or_else(|| match loss {
                EntityLoss::SoftmaxCrossEntropy { .. } => (0..n)
                    .find(|&b| labels.get(b).is_empty())
                    .map(|b| InputError::NoLabels { position: b as u64 }),
                EntityLoss::BinaryCrossEntropy { .. }
                | EntityLoss::SelfAdversarial { .. }
                | EntityLoss::Margin { .. } => None,
            });
        agree_on_input(self.comm, verdict)?;
        if let Some(shared) = negatives {
            let what = format!(
                "{} in {} lists, chunks of {} queries, batch negatives: {}",
                describe_ids(shared.lists.all_ids()),
                shared.lists.len(),
                shared.chunk,
                shared.batch
            );
            agree_on(self.comm, &[("the shared negatives", what)])?;
            if !shared.batch && smoothing > 0.0 {
                return Err(ShardError::Unsupported(
                    "label smoothing with shared negatives needs batch negatives (it spreads \
                     over the candidates, and without them each query has its own)"
                        .into(),
                ));
            }
        }
        // Without batch negatives each query's positives are scored apart from the sample.
        let apart = negatives.is_some_and(|s| !s.batch);
        if let EntityLoss::SelfAdversarial { temperature } = loss {
            if !apart {
                return Err(ShardError::Unsupported(
                    "self-adversarial weighting needs shared negatives without batch negatives \
                     (it weighs each query's negatives, apart from its true tails)"
                        .into(),
                ));
            }
            if !(temperature > 0.0 && temperature.is_finite()) {
                return Err(ShardError::Unsupported(format!(
                    "a self-adversarial temperature of {temperature} (it must be > 0)"
                )));
            }
        }
        if let EntityLoss::Margin { margin } = loss {
            if !apart {
                return Err(ShardError::Unsupported(
                    "margin ranking needs shared negatives without batch negatives (it ranks \
                     each query's true tails, scored apart, against its negatives)"
                        .into(),
                ));
            }
            if !(margin >= 0.0 && margin.is_finite()) {
                return Err(ShardError::Unsupported(format!(
                    "a margin of {margin} (it must be ≥ 0 and finite)"
                )));
            }
        }
        Ok(apart)
    }

    /// Every rank's label lists, in rank order. A collective.
    pub(super) fn gather_labels(&self, labels: &IdLists) -> Result<IdLists, ShardError> {
        let mut all = IdLists::new();
        for part in self.comm.all_gather(&to_bytes(&labels.encode()))? {
            all.extend_encoded(&from_bytes::<u32>(&part));
        }
        Ok(all)
    }
}
