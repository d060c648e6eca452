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

use std::ops::Range;

use cubecl::bytes::Bytes;
use cubecl::server::Handle;
use rowshard_kernels::dense_set::{
    DenseKernels, DeviceQueries, SoftmaxGradient, TableBlock, combine_softmax_stats,
};
use rowshard_kernels::kernels::dense::ScoreEpilogue;

use super::candidates::{CandidateGradient, Scored, SharedNegatives, describe_ids};
use super::dense_inputs::{DenseQueries, OffsetGrads};
use super::dropout::{DropoutSide, Masks};
use super::id_lists::IdLists;
use super::positives::Positives;
use super::regularize::StepRows;
use super::scoring::DeviceRows;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use super::train::{EntityLoss, StepReport, length_error};
use crate::agree::{agree_on, agree_on_input, all_values, sum_f64};
use crate::comm::{Communicator, all_gather_values, from_bytes, to_bytes};
use crate::error::{InputError, ShardError};
use crate::sharded::DeviceGradient;

/// Scores (or their gradients) of at most this many (query, entity) pairs make one block.
const BLOCK: usize = 1 << 24;

/// The true entities of every query that lie in one rank's shard, per block of its rows: the
/// label lists turned into what [`DenseKernels::label_corrections`] reads.
struct BlockLabels {
    /// Block-relative row of each label.
    rows: Vec<u32>,
    /// Query of each label.
    queries: Vec<u32>,
    /// `y − off` of each label.
    excess: Vec<f32>,
}

/// Splits every query's true entities (deduplicated) that this rank scores into `blocks` of
/// candidate rows; `row` maps a global id to its candidate row on this rank (`None`: another
/// rank's). Each label gets its target excess over `off`: `1 − ε` for binary cross-entropy,
/// `(1 − ε) / |labels|` for the softmax.
fn block_labels(
    labels: &IdLists,
    row: impl Fn(u32) -> Option<u32>,
    blocks: &[Range<usize>],
    loss: EntityLoss,
) -> Vec<BlockLabels> {
    let keep = 1.0 - loss.smoothing();
    let (queries, ids) = labels.distinct();
    let mut counts = vec![0usize; labels.len()];
    for &b in &queries {
        counts[b] += 1;
    }
    let mut mine: Vec<(u32, u32, f32)> = queries
        .iter()
        .zip(&ids)
        .filter_map(|(&b, &id)| {
            let excess = match loss {
                EntityLoss::BinaryCrossEntropy { .. }
                | EntityLoss::SelfAdversarial { .. }
                | EntityLoss::Margin { .. } => keep,
                EntityLoss::SoftmaxCrossEntropy { .. } => keep / counts[b] as f32,
            };
            row(id).map(|r| (r, b as u32, excess))
        })
        .collect();
    mine.sort_unstable_by_key(|&(row, query, _)| (row, query));
    let mut out: Vec<BlockLabels> = blocks
        .iter()
        .map(|_| BlockLabels {
            rows: Vec::new(),
            queries: Vec::new(),
            excess: Vec::new(),
        })
        .collect();
    let block_rows = blocks.first().map_or(1, |b| b.len().max(1));
    for (row, query, excess) in mine {
        let block = row as usize / block_rows;
        let part = &mut out[block];
        part.rows.push(row - blocks[block].start as u32);
        part.queries.push(query);
        part.excess.push(excess);
    }
    out
}

/// Per query, the log-sum-exp of its scores from `(max, Σ exp(s − max))`: this rank's own
/// (`mine`: each rank scores its own queries against every candidate), or over every rank's
/// shard, combined in rank order so every rank gets the same values.
fn log_sum_exp(
    comm: &dyn Communicator,
    local: &[[f64; 3]],
    mine: bool,
) -> Result<Vec<f64>, ShardError> {
    if mine {
        return Ok(local
            .iter()
            .map(|&[max, sum, _]| {
                if max == f64::NEG_INFINITY {
                    max // nothing scored (an empty sample)
                } else {
                    max + sum.ln()
                }
            })
            .collect());
    }
    let mine: Vec<f64> = local.iter().flat_map(|s| [s[0], s[1]]).collect();
    let parts: Vec<Vec<f64>> = comm
        .all_gather(&to_bytes(&mine))?
        .iter()
        .map(|p| from_bytes::<f64>(p))
        .collect();
    Ok((0..local.len())
        .map(|b| {
            let max = parts
                .iter()
                .map(|p| p[2 * b])
                .fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                return max; // no rank scored anything (an empty sample)
            }
            let sum: f64 = parts
                .iter()
                .map(|p| p[2 * b + 1] * (p[2 * b] - max).exp())
                .sum();
            max + sum.ln()
        })
        .collect())
}

/// The sum of the first `len` values of a buffer, in `f64`.
fn read_sum(dense: &DenseKernels, handle: Handle, len: usize) -> Result<f64, ShardError> {
    Ok(dense.read(handle, len)?.iter().map(|&x| x as f64).sum())
}

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
        let n = heads.len();
        let entities = self.spec.entities;
        let smoothing = loss.smoothing();
        let verdict = length_error(n, &[relations.len(), labels.len()])
            .or_else(|| self.check_relations(relations))
            .or_else(|| {
                heads
                    .iter()
                    .chain(labels.all_ids())
                    .chain(negatives.map_or(&[][..], |s| s.ids))
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
                "{}, batch negatives: {}",
                describe_ids(shared.ids),
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
        // Without batch negatives each query's positives are scored apart from the sample, and
        // each rank scores only its own queries, against the whole sample (see below).
        let local = negatives.is_some_and(|s| !s.batch);
        if let EntityLoss::SelfAdversarial { temperature } = loss {
            if !local {
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
            if !local {
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
        if let (None, Some(shared)) = (&self.dense, negatives.filter(|_| local)) {
            // A score the dense kernels cannot take, scored pair by pair (`per_pair.rs`).
            let mut sample = shared.ids.to_vec();
            sample.sort_unstable();
            sample.dedup();
            return self.train_per_pair(heads, relations, labels, loss, &sample);
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
        // The dense kernels' row width: `dim`, or the augmented rows' (`augmented.rs`).
        let width = self.dense_width();
        let client = self.kernels.client().clone();

        // With the positives scored apart from a shared sample, each rank scores its own queries
        // against the whole sample (data-parallel, as PyTorch-BigGraph's workers): the sample's
        // rows are looked up with the heads and the positives, every query's log-sum-exp is this
        // rank's, and the sample's gradient goes to its owners like any looked-up row's.
        // Otherwise every rank scores everyone's queries against its shard, or its share of the
        // candidates (model-parallel: no rank holds a whole score row).
        let sample: Vec<u32> = match negatives {
            Some(shared) if local => {
                let mut ids = shared.ids.to_vec();
                ids.sort_unstable();
                ids.dedup();
                ids
            }
            _ => Vec::new(),
        };
        let (positive_owners, positive_ids) = if local {
            labels.distinct()
        } else {
            (Vec::new(), Vec::new())
        };
        let looked_up: Vec<u32> = positive_ids.iter().chain(&sample).copied().collect();
        let (inputs, mut positive_rows) =
            self.query_inputs(heads, relations, offset, &looked_up)?;
        let sample_rows = positive_rows.split_off(positive_ids.len() * dim);
        let DenseQueries {
            rows: q,
            offset_grads,
        } = self.dense_queries(
            inputs.fed_heads().to_vec(),
            &inputs.relation_rows,
            &inputs.relation_index,
        )?;
        // The queries scored here: this rank's, or everyone's.
        let (q_all, n_scored, q_offset) = if local {
            (q, n, 0)
        } else {
            (all_gather_values(self.comm, q)?, total, offset)
        };
        let q = &q_all[q_offset * width..(q_offset + n) * width];
        // Everyone's label lists: the targets among the rows scored here, and the true tails
        // this rank owns for the regularisers — which are all a rank scoring its own queries
        // needs them for.
        let mut labels_all = IdLists::new();
        if !local || !self.regularization.entities.is_none() {
            for part in self.comm.all_gather(&to_bytes(&labels.encode()))? {
                labels_all.extend_encoded(&from_bytes::<u32>(&part));
            }
        }
        // The positives scored apart (augmented ones keep their rows as read, to fold their
        // gradients back).
        let (positive_rows, scored) = match self.augmented {
            Some(form) => {
                let scored = form.rows(&positive_rows);
                (positive_rows, scored)
            }
            None => (Vec::new(), positive_rows),
        };
        let positives =
            local.then(|| Positives::new(positive_owners, positive_ids, scored, q, width));

        // Every query against this rank's candidates, in blocks of rows.
        let partition = self.entities.partition().clone();
        let candidates = if local {
            self.sample_candidates(sample, &sample_rows)
        } else {
            self.candidates(negatives, &labels_all)?
        };
        let count = candidates.count;
        let queries = dense.upload_queries(&q_all, n_scored);
        let block_rows = (BLOCK / queries.padded).max(1);
        let blocks: Vec<Range<usize>> = (0..count.div_ceil(block_rows))
            .map(|i| i * block_rows..((i + 1) * block_rows).min(count))
            .collect();
        // Where a label lies among the scored rows: nowhere in a sample (the positives are
        // scored apart).
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
        let block = |range: &Range<usize>| TableBlock {
            table: &candidates.table,
            table_len: count * width,
            first: range.start,
            rows: range.len(),
        };
        // The true tails this rank owns, as local rows (the regularisers').
        let tails: Vec<u32> = if local {
            let (_, ids) = labels_all.distinct();
            ids.iter()
                .map(|&id| partition.locate(id))
                .filter_map(|(owner, local)| (owner == rank).then_some(local))
                .collect()
        } else {
            targets
                .iter()
                .zip(&blocks)
                .flat_map(|(t, b)| t.rows.iter().map(move |&r| r + b.start as u32))
                .map(|r| candidates.local(r))
                .collect()
        };
        // The positives' loss (scaled) and gradients, when scored apart.
        let mut positive_loss = 0.0;
        let mut positive_grads = Vec::new();
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
        let entities = candidates.global.max(1);
        let off = smoothing / entities as f32;
        // The step's loss on this rank, before the mean's scale.
        let mut partial = 0.0f64;
        let finish = |i: usize, range: &Range<usize>, grads: &Handle, scale: f32| {
            let t = &targets[i];
            let labels = dense.upload_labels(&t.rows, &t.queries, &t.excess);
            let label_loss = dense.label_loss_buffer(&labels);
            dense.label_corrections(&queries, &block(range), grads, &labels, &label_loss, scale);
            dense.table_grad(&queries, &block(range), grads, &dw);
            dense.query_grad(grads, &block(range), &queries, &dq, i > 0);
            (label_loss, dense.label_loss_len(&labels))
        };
        // The same for the softmax cross-entropy where its gradient is made inside the query
        // gradient's launch: `scores` become the gradient there, and the table gradient follows.
        let finish_softmax =
            |i: usize, range: &Range<usize>, scores: &Handle, softmax: &SoftmaxGradient| {
                let t = &targets[i];
                let labels = dense.upload_labels(&t.rows, &t.queries, &t.excess);
                let label_loss = dense.label_loss_buffer(&labels);
                let b = block(range);
                dense.softmax_query_grad(scores, &b, &queries, &dq, i > 0, softmax, &labels);
                dense.label_loss(&queries, &b, &labels, &label_loss);
                dense.table_grad(&queries, &b, scores, &dw);
                (label_loss, dense.label_loss_len(&labels))
            };
        // Every block's scores of `scored` (the queries, or scaled ones) with the softmax
        // epilogue, and per query this rank's (max, Σ exp(s − max), Σ s).
        let softmax_pieces =
            |scored: &DeviceQueries| -> Result<(Vec<Handle>, Vec<[f64; 3]>), ShardError> {
                let epilogue = ScoreEpilogue::SoftmaxStats;
                let mut scores = Vec::with_capacity(blocks.len());
                let mut stats = Vec::new();
                for range in &blocks {
                    let out = dense.score_buffer(range.len(), &queries);
                    let s = dense.stats_buffer(epilogue, range.len(), &queries);
                    dense.scores(scored, &block(range), &out, &s, epilogue, 1.0, 0.0);
                    let len = dense.stats_len(epilogue, range.len(), &queries);
                    stats.extend(dense.read(s, len)?);
                    scores.push(out);
                }
                let shard = if stats.is_empty() {
                    vec![[f64::NEG_INFINITY, 0.0, 0.0]; n_scored]
                } else {
                    combine_softmax_stats(&stats, queries.padded, n_scored)
                };
                Ok((scores, shard))
            };
        // A value per query on the device, padded.
        let upload_padded = |values: &[f64]| {
            let mut padded: Vec<f32> = values.iter().map(|&x| x as f32).collect();
            padded.resize(queries.padded, 0.0);
            client.create(Bytes::from_elems(padded))
        };
        let scale = match loss {
            EntityLoss::BinaryCrossEntropy { .. } => {
                let scale = (1.0 / (total as f64 * entities as f64)) as f32;
                let epilogue = ScoreEpilogue::BinaryCrossEntropy;
                let mut losses = Vec::new();
                let mut sums = Vec::new();
                for (i, range) in blocks.iter().enumerate() {
                    let grads = dense.score_buffer(range.len(), &queries);
                    let stats = dense.stats_buffer(epilogue, range.len(), &queries);
                    let b = block(range);
                    dense.scores(&queries, &b, &grads, &stats, epilogue, scale, off);
                    losses.push((stats, range.len()));
                    sums.push(finish(i, range, &grads, scale));
                }
                for (stats, rows) in losses {
                    partial += dense.bce_loss(stats, rows, &queries)?;
                }
                for (handle, len) in sums {
                    partial += read_sum(&dense, handle, len)?;
                }
                if let Some(positives) = &positives {
                    (positive_loss, positive_grads) = positives.logistic(1.0 / total as f64);
                }
                1.0 / (total as f64 * entities as f64)
            }
            EntityLoss::SelfAdversarial { temperature } => {
                // Scores of α·q give the softmax's pieces of α·s; the kernel turns them into
                // p·σ(s). The positives' part is the logistic loss's, on the host.
                let scale = 1.0 / total as f32;
                let scaled: Vec<f32> = q_all.iter().map(|&x| x * temperature).collect();
                let (scores, shard) = softmax_pieces(&dense.upload_queries(&scaled, n_scored))?;
                let lse = upload_padded(&log_sum_exp(self.comm, &shard, local)?);
                let mut sums = Vec::new();
                for (i, (range, out)) in blocks.iter().zip(&scores).enumerate() {
                    let rows = range.len();
                    let loss = dense.adversarial_loss_buffer(rows, &queries);
                    let len = dense.adversarial_loss_len(rows, &queries);
                    let alpha = temperature;
                    dense.adversarial_grad(out, rows, &queries, &lse, &loss, alpha, scale);
                    sums.push((loss, len));
                    sums.push(finish(i, range, out, scale));
                }
                for (handle, len) in sums {
                    partial += read_sum(&dense, handle, len)?;
                }
                if let Some(positives) = &positives {
                    (positive_loss, positive_grads) = positives.logistic(1.0 / total as f64);
                }
                1.0 / total as f64
            }
            EntityLoss::Margin { margin } => {
                // Each query's positives, scored apart, set its thresholds `s₊ − γ`; the kernel
                // compares every negative with each, and the violations it counts are the
                // positives' gradients. The mean over each query's (positive, negative) pairs.
                let scale = (1.0 / (total as f64 * entities as f64)) as f32;
                let positives = positives
                    .as_ref()
                    .expect("margin ranking scores each rank's own queries (checked above)");
                let (k, thresholds, weights) = positives.margin_thresholds(margin, queries.padded);
                let thresholds = client.create(Bytes::from_elems(thresholds));
                let weights = client.create(Bytes::from_elems(weights));
                let epilogue = ScoreEpilogue::Scores;
                let mut sums = Vec::new();
                let mut counted = Vec::new();
                for (i, range) in blocks.iter().enumerate() {
                    let (rows, b) = (range.len(), block(range));
                    let out = dense.score_buffer(rows, &queries);
                    let stats = dense.stats_buffer(epilogue, rows, &queries);
                    dense.scores(&queries, &b, &out, &stats, epilogue, 1.0, 0.0);
                    let grads = dense.score_buffer(rows, &queries);
                    let (_, counts_len, loss_len) = dense.margin_lens(rows, &queries, k);
                    let counts = client.empty(counts_len.max(1) * 4);
                    let loss = client.empty(loss_len.max(1) * 4);
                    dense.margin_grad(
                        &out,
                        &grads,
                        rows,
                        &queries,
                        &thresholds,
                        k,
                        &weights,
                        &counts,
                        &loss,
                        scale,
                    );
                    sums.push((loss, loss_len));
                    counted.push((counts, counts_len));
                    sums.push(finish(i, range, &grads, scale));
                }
                for (handle, len) in sums {
                    partial += read_sum(&dense, handle, len)?;
                }
                // Violations per (positive, query), summed over the units and blocks.
                let mut violations = vec![0.0f64; k * queries.padded];
                for (handle, len) in counted {
                    for unit in dense.read(handle, len)?.chunks(violations.len()) {
                        for (v, &c) in violations.iter_mut().zip(unit) {
                            *v += c as f64;
                        }
                    }
                }
                positive_grads = positives.margin(&violations, queries.padded, scale as f64);
                1.0 / (total as f64 * entities as f64)
            }
            EntityLoss::SoftmaxCrossEntropy { .. } => {
                let scale = 1.0 / total as f32;
                let (scores, shard) = softmax_pieces(&queries)?;
                let mut lse = log_sum_exp(self.comm, &shard, local)?;
                if let Some(positives) = &positives {
                    // Each query's positives join its sample's log-sum-exp (the positives are
                    // scored apart only where each rank scores its own queries).
                    for (l, p) in lse.iter_mut().zip(positives.log_sum_exp()) {
                        let top = l.max(p);
                        *l = top + ((*l - top).exp() + (p - top).exp()).ln();
                    }
                    let (l, g) = positives.softmax(&lse, scale as f64);
                    (positive_loss, positive_grads) = (l * scale as f64, g);
                }
                // Every rank holds every query's log-sum-exp, or just its own queries'.
                if local || rank == 0 {
                    partial += lse.iter().sum::<f64>();
                }
                partial -= off as f64 * shard.iter().map(|s| s[2]).sum::<f64>();
                let lse = upload_padded(&lse);
                let softmax = SoftmaxGradient {
                    lse: &lse,
                    scale,
                    off,
                };
                let mut sums = Vec::new();
                for (i, (range, out)) in blocks.iter().zip(&scores).enumerate() {
                    if dense.fuses_softmax() {
                        sums.push(finish_softmax(i, range, out, &softmax));
                    } else {
                        dense.softmax_grad(out, range.len(), &queries, &lse, scale, off);
                        sums.push(finish(i, range, out, scale));
                    }
                }
                for (handle, len) in sums {
                    partial += read_sum(&dense, handle, len)?;
                }
                1.0 / total as f64
            }
        };
        let mut dq = dense.read_query_grad(dq, &queries)?;
        if !local {
            self.comm.all_reduce_sum(&mut dq)?;
        }
        let dq = &mut dq[q_offset * width..(q_offset + n) * width];
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
            Some(mut ids) => {
                let read = dense.read(dw.clone(), count * width)?;
                let mut grads = fold(read, candidates.plain.as_deref().unwrap_or_default());
                if let Some(positives) = &positives {
                    let (more_ids, more) = positives.backward(&positive_grads, q, dq);
                    ids.extend(more_ids);
                    grads.extend(fold(more, &positive_rows));
                }
                CandidateGradient::Host { ids, grads }
            }
        };
        // The queries' gradient: `∂q`, or `(∂a, ∂c)` of augmented queries.
        let (da, offset_grad) = match self.augmented {
            Some(form) => {
                let (da, dc) = form.split_queries(dq);
                (Some(da), offset_grads.map(|grads| (dc, grads)))
            }
            None => (None, None),
        };
        let penalty = self.back_through_queries(
            heads,
            relations,
            inputs,
            QueryGradient {
                dq: da.as_deref().unwrap_or(dq),
                offset: offset_grad,
            },
            candidate_grads,
            &tails,
            total,
        )?;
        Ok(StepReport {
            loss: sum_f64(self.comm, partial * scale + positive_loss + penalty)?,
            examples: total as u64,
        })
    }

    /// What the query kernel reads for this rank's queries: the head rows, and the relation
    /// rows — with dropout, masked copies (one relation row per query) and the masks. The rows
    /// of `also` are looked up in the same call (one exchange; an entity among both heads and
    /// `also` travels once) and returned beside.
    fn query_inputs(
        &self,
        heads: &[u32],
        relations: &[u32],
        offset: usize,
        also: &[u32],
    ) -> Result<(QueryInputs, Vec<f32>), ShardError> {
        let n = heads.len();
        let dim = self.spec.settings.dim;
        let ids: Vec<u32> = heads.iter().chain(also).copied().collect();
        let mut head_rows = self.entities.lookup(&ids)?;
        let also_rows = head_rows.split_off(n * dim);
        let (p_head, p_relation) = self.dropout;
        if p_head == 0.0 && p_relation == 0.0 {
            let inputs = QueryInputs {
                head_rows_fed: None,
                head_rows,
                relation_rows: self.relation_rows(),
                relation_index: relations.to_vec(),
                masks: None,
            };
            return Ok((inputs, also_rows));
        }
        let (seed, step) = (self.spec.seed, self.entities.step());
        let head_mask = Masks::new(p_head, seed, step, DropoutSide::Head, offset, n, dim);
        let relation_mask = Masks::new(
            p_relation,
            seed,
            step,
            DropoutSide::Relation,
            offset,
            n,
            self.relation_dim,
        );
        let mut head_rows_fed = head_rows.clone();
        head_mask.apply(&mut head_rows_fed);
        let mut rows = self.relations.gather(relations)?;
        relation_mask.apply(&mut rows);
        let inputs = QueryInputs {
            head_rows,
            head_rows_fed: Some(head_rows_fed),
            relation_rows: self.kernels.upload_f32(rows),
            relation_index: (0..n as u32).collect(),
            masks: Some((head_mask, relation_mask)),
        };
        Ok((inputs, also_rows))
    }

    /// Applies the step: `dq` (this rank's queries' gradient) goes back through the query —
    /// `score(h, r, t) = ⟨q(h, r), t⟩`, so the backward kernel with `t = ∂loss/∂q` and an
    /// upstream of 1 gives `∂loss/∂h` and `∂loss/∂r` (and through dropout's masks); for an
    /// augmented query `score = c + ⟨a, t⟩ + κ‖t‖²` the same call gives `∂c + J_aᵀ∂a`, and
    /// `(∂c − 1)` times the offset's gradient completes it —, the regularisers add theirs, and
    /// the scored rows get theirs (`candidates`). `tails` are the true tails this rank owns
    /// (local rows). Returns this rank's part of the penalty.
    #[allow(clippy::too_many_arguments)]
    fn back_through_queries(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        inputs: QueryInputs,
        gradient: QueryGradient,
        candidates: CandidateGradient,
        tails: &[u32],
        total: usize,
    ) -> Result<f64, ShardError> {
        let dq = gradient.dq;
        let n = heads.len();
        let dim = self.spec.settings.dim;
        let mut rows = Vec::with_capacity(2 * n * dim);
        rows.extend_from_slice(inputs.fed_heads());
        rows.extend_from_slice(dq);
        let ent = self.kernels.upload_f32(rows);
        let positions: Vec<u32> = (0..2 * n as u32).collect();
        let triples =
            self.kernels
                .upload_triples(&positions[..n], &inputs.relation_index, &positions[n..]);
        let ones = self
            .kernels
            .client()
            .create(Bytes::from_elems(vec![1.0f32; n]));
        let [dh, dr, _] = self
            .kernels
            .backward(&ent, &inputs.relation_rows, &triples, &ones);
        let mut grads = self.kernels.read(dh, n * dim)?;
        let mut dr = self.kernels.read(dr, n * self.relation_dim)?;
        if let Some((dc, offset)) = &gradient.offset {
            let (dh0, dr0) = (&offset.head, &offset.relation);
            let rdim = self.relation_dim;
            for (b, &dc) in dc.iter().enumerate() {
                let more = dc - 1.0;
                let rows = [(&mut grads, dh0, dim), (&mut dr, dr0, rdim)];
                for (out, offset, width) in rows {
                    for (x, &o) in out[b * width..(b + 1) * width]
                        .iter_mut()
                        .zip(&offset[b * width..(b + 1) * width])
                    {
                        *x += more * o;
                    }
                }
            }
        }
        if let Some((head_mask, relation_mask)) = &inputs.masks {
            head_mask.apply(&mut grads);
            relation_mask.apply(&mut dr);
        }
        let (penalty, extra) = self.regularize(
            StepRows {
                heads,
                head_rows: &inputs.head_rows,
                head_grads: &mut grads,
                tails,
                relations,
                relation_grads: &mut dr,
            },
            total,
        )?;
        let mut ids = heads.to_vec();
        ids.extend_from_slice(&extra.ids);
        grads.extend_from_slice(&extra.grads);
        let mut relation_ids = relations.to_vec();
        relation_ids.extend_from_slice(&extra.relation_ids);
        dr.extend_from_slice(&extra.relation_grads);
        let lr = self.spec.settings.entity.lr as f32;
        match candidates {
            CandidateGradient::Device(handle) => {
                let rows = self.entities.partition().local_rows(self.comm.rank());
                let device = DeviceGradient { handle, rows };
                self.entities
                    .apply_gradients_with_device(&ids, &grads, device, lr)?;
            }
            CandidateGradient::Host {
                ids: candidate_ids,
                grads: candidate_grads,
            } => {
                ids.extend_from_slice(&candidate_ids);
                grads.extend_from_slice(&candidate_grads);
                self.entities.apply_gradients(&ids, &grads, lr)?;
            }
        }
        self.apply_relation_gradients(&relation_ids, &dr)?;
        Ok(penalty)
    }
}

/// The gradient of a rank's queries (see `back_through_queries`).
struct QueryGradient<'a> {
    /// `∂loss/∂q` (`∂loss/∂a` of augmented queries), a row per query.
    dq: &'a [f32],
    /// Augmented queries: `∂loss/∂c` per query, and the offset's gradient with respect to the
    /// head rows fed and the relation rows (`DenseQueries::offset_grads`).
    offset: Option<(Vec<f32>, OffsetGrads)>,
}

/// What the query kernel reads for a rank's queries (see `query_inputs`).
struct QueryInputs {
    /// The head rows, as looked up.
    head_rows: Vec<f32>,
    /// The head rows fed to the query, masked with dropout (`None`: as looked up).
    head_rows_fed: Option<Vec<f32>>,
    /// The relation rows fed to the query: the relation table, or masked copies.
    relation_rows: DeviceRows,
    /// Which of `relation_rows` each query reads.
    relation_index: Vec<u32>,
    /// The head and relation masks, with dropout.
    masks: Option<(Masks, Masks)>,
}

impl QueryInputs {
    /// The head rows fed to the query.
    fn fed_heads(&self) -> &[f32] {
        self.head_rows_fed.as_deref().unwrap_or(&self.head_rows)
    }
}
