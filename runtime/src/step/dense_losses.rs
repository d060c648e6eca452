//! The losses of a step that scores queries against candidate rows with the dense kernels
//! (`all_entities.rs`, `sample.rs`): per loss, the launches over each block of rows — scores, the loss's
//! gradient, the true entities' corrections from the label lists, the table and query gradients —
//! and this rank's part of the loss.
//!
//! Binary cross-entropy is fused into the score tiles. The softmax cross-entropy and the
//! self-adversarial weights need each query's log-sum-exp first: a score pass keeps per query
//! (max, Σ exp, Σ s), the ranks combine them (or, where each rank scores its own queries, each
//! keeps its own), and a second pass makes the gradient. Margin ranking compares each score
//! with thresholds from the query's true tails, scored apart (`positives.rs`).

use std::ops::Range;

use cubecl::bytes::Bytes;
use cubecl::server::Handle;
use rowshard_kernels::dense_set::{
    DenseKernels, DeviceQueries, SoftmaxGradient, TableBlock, combine_softmax_stats,
};
use rowshard_kernels::kernels::dense::ScoreEpilogue;

use super::candidates::Candidates;
use super::positives::Positives;
use super::timings::StepPhase;
use crate::comm::{Communicator, from_bytes, to_bytes};
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::HostQueries;
use crate::objective::host::log_sum_exp;
use crate::objective::{LabelLoss, SampleLoss};

/// The true entities of every query that lie in one rank's shard, per block of its rows: the
/// label lists turned into what [`DenseKernels::label_corrections`] reads.
pub(super) struct BlockLabels {
    /// Block-relative row of each label.
    pub rows: Vec<u32>,
    /// Query of each label.
    queries: Vec<u32>,
    /// `y − off` of each label.
    excess: Vec<f32>,
}

impl BlockLabels {
    /// No labels in any of `blocks`: the true tails are scored apart.
    pub(super) fn none(blocks: &[Range<usize>]) -> Vec<BlockLabels> {
        blocks
            .iter()
            .map(|_| BlockLabels {
                rows: Vec::new(),
                queries: Vec::new(),
                excess: Vec::new(),
            })
            .collect()
    }
}

/// Splits every query's true entities (deduplicated) that this rank scores into `blocks` of
/// candidate rows; `row` maps a global id to its candidate row on this rank (`None`: another
/// rank's). Each label gets its target excess over `off`: `1 − ε` for binary cross-entropy,
/// `(1 − ε) / |labels|` for the softmax.
pub(super) fn block_labels(
    labels: &IdLists,
    row: impl Fn(u32) -> Option<u32>,
    blocks: &[Range<usize>],
    loss: LabelLoss,
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
                LabelLoss::BinaryCrossEntropy { .. } => keep,
                LabelLoss::SoftmaxCrossEntropy { .. } => keep / counts[b] as f32,
            };
            row(id).map(|r| (r, b as u32, excess))
        })
        .collect();
    mine.sort_unstable_by_key(|&(row, query, _)| (row, query));
    let mut out = BlockLabels::none(blocks);
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
fn combined_log_sum_exp(
    comm: &dyn Communicator,
    local: &[[f64; 3]],
    mine: bool,
) -> Result<Vec<f64>, ShardError> {
    if mine {
        return Ok(local
            .iter()
            .map(|&[max, sum, _]| log_sum_exp([(max, sum)]))
            .collect());
    }
    let mine: Vec<f64> = local.iter().flat_map(|s| [s[0], s[1]]).collect();
    let parts: Vec<Vec<f64>> = comm
        .all_gather(&to_bytes(&mine))?
        .iter()
        .map(|p| from_bytes::<f64>(p))
        .collect();
    Ok((0..local.len())
        .map(|b| log_sum_exp(parts.iter().map(|p| (p[2 * b], p[2 * b + 1]))))
        .collect())
}

/// `sum` plus the sums of buffers of `f32` values (each with its length), read back in one
/// round trip and added one buffer at a time.
fn add_sums(
    dense: &DenseKernels,
    mut sum: f64,
    buffers: Vec<(Handle, usize)>,
) -> Result<f64, ShardError> {
    for values in dense.read_each(buffers)? {
        sum += values.iter().map(|&x| x as f64).sum::<f64>();
    }
    Ok(sum)
}

/// Ranges of at most [`BLOCK`] scores' rows, over `count` rows scored against `padded` queries.
pub(super) fn blocks(count: usize, padded: usize) -> Vec<Range<usize>> {
    let block_rows = (BLOCK / padded).max(1);
    (0..count.div_ceil(block_rows))
        .map(|i| i * block_rows..((i + 1) * block_rows).min(count))
        .collect()
}

/// Scores (or their gradients) of at most this many (query, entity) pairs make one block.
const BLOCK: usize = 1 << 24;

/// One rank's dense pass of a step: its scored queries against its candidates' blocks of rows,
/// and the buffers the gradients go to.
pub(super) struct CandidateScoring<'a> {
    pub dense: &'a DenseKernels,
    pub comm: &'a dyn Communicator,
    /// The queries scored (this rank's, or everyone's), uploaded; `q` on the host, read when a
    /// loss needs it.
    pub queries: &'a DeviceQueries,
    pub q: &'a HostQueries,
    pub candidates: &'a Candidates,
    /// Blocks of candidate rows, and the true entities' labels in each.
    pub blocks: &'a [Range<usize>],
    pub targets: &'a [BlockLabels],
    /// The candidates' gradient (`∂W`) and the scored queries' (`∂Q`).
    pub dw: &'a Handle,
    pub dq: &'a Handle,
    /// Queries in the global batch: the losses' mean.
    pub total: usize,
    /// Whether each rank scores only its own queries (its log-sum-exps are its own).
    pub local: bool,
    /// The dense kernels' row width.
    pub width: usize,
    /// Ends a phase of the step's time split.
    pub lap: &'a dyn Fn(StepPhase),
}

/// A rank's part of a step's loss: `partial` (before the mean's `scale`) plus `positive_loss`
/// (already scaled), and the gradients of the true tails scored apart, if any.
pub(super) struct LossParts {
    pub partial: f64,
    pub scale: f64,
    pub positive_loss: f64,
    pub positive_grads: Vec<f64>,
}

/// The loss of a dense pass, in the form its step takes.
pub(super) enum DenseLoss<'p, 'a> {
    /// The true entities lie among the candidates: their targets are corrected from the labels.
    Labels(LabelLoss),
    /// The true tails are scored apart (`positives.rs`), each query against its sample.
    Apart(SampleLoss, &'p Positives<'a>),
}

impl CandidateScoring<'_> {
    /// Runs `loss` over every block.
    pub fn run(&self, loss: DenseLoss) -> Result<LossParts, ShardError> {
        match loss {
            DenseLoss::Labels(LabelLoss::BinaryCrossEntropy { smoothing }) => {
                self.bce(smoothing, None)
            }
            DenseLoss::Labels(LabelLoss::SoftmaxCrossEntropy { smoothing }) => {
                self.softmax(smoothing, None)
            }
            DenseLoss::Apart(SampleLoss::Logistic, positives) => self.bce(0.0, Some(positives)),
            DenseLoss::Apart(SampleLoss::Softmax, positives) => self.softmax(0.0, Some(positives)),
            DenseLoss::Apart(SampleLoss::SelfAdversarial { temperature }, positives) => {
                self.adversarial(temperature, positives)
            }
            DenseLoss::Apart(SampleLoss::Margin { margin }, positives) => {
                self.margin(margin, positives)
            }
        }
    }

    /// Candidates every query is scored against, over all ranks: the `N` of the means.
    fn entities(&self) -> usize {
        self.candidates.global.max(1)
    }

    /// Rows `range` of the candidates, for the kernels.
    fn block(&self, range: &Range<usize>) -> TableBlock<'_> {
        TableBlock {
            table: &self.candidates.table,
            table_len: self.candidates.count * self.width,
            first: range.start,
            rows: range.len(),
        }
    }

    /// Block `i`'s label corrections into `grads` (the loss's gradient of its scores), then its
    /// table and query gradients; returns the labels' loss buffer and its length.
    fn finish(
        &self,
        i: usize,
        range: &Range<usize>,
        grads: &Handle,
        scale: f32,
    ) -> (Handle, usize) {
        let (dense, queries) = (self.dense, self.queries);
        let t = &self.targets[i];
        let labels = dense.upload_labels(&t.rows, &t.queries, &t.excess);
        let label_loss = dense.label_loss_buffer(&labels);
        let b = self.block(range);
        dense.label_corrections(queries, &b, grads, &labels, &label_loss, scale);
        dense.table_grad(queries, &b, grads, self.dw);
        dense.query_grad(grads, &b, queries, self.dq, i > 0);
        (label_loss, dense.label_loss_len(&labels))
    }

    /// [`Self::finish`] for the softmax cross-entropy where its gradient is made inside the query
    /// gradient's launch: `scores` become the gradient there, and the table gradient follows.
    fn finish_softmax(
        &self,
        i: usize,
        range: &Range<usize>,
        scores: &Handle,
        softmax: &SoftmaxGradient,
    ) -> (Handle, usize) {
        let (dense, queries) = (self.dense, self.queries);
        let t = &self.targets[i];
        let labels = dense.upload_labels(&t.rows, &t.queries, &t.excess);
        let label_loss = dense.label_loss_buffer(&labels);
        let b = self.block(range);
        dense.softmax_query_grad(scores, &b, queries, self.dq, i > 0, softmax, &labels);
        dense.label_loss(queries, &b, &labels, &label_loss);
        dense.table_grad(queries, &b, scores, self.dw);
        (label_loss, dense.label_loss_len(&labels))
    }

    /// Every block's scores of `scored` (the queries, or scaled ones) with the softmax
    /// epilogue, and per query this rank's (max, Σ exp(s − max), Σ s); with `with_q`, the
    /// queries on the host too ([`CandidateScoring::q`]), read in the same round trip.
    fn softmax_pieces(
        &self,
        scored: &DeviceQueries,
        with_q: bool,
    ) -> Result<(Vec<Handle>, Vec<[f64; 3]>), ShardError> {
        let (dense, queries) = (self.dense, self.queries);
        let epilogue = ScoreEpilogue::SoftmaxStats;
        let mut scores = Vec::with_capacity(self.blocks.len());
        let mut reads = Vec::with_capacity(self.blocks.len() + 1);
        for range in self.blocks {
            let out = dense.score_buffer(range.len(), queries);
            let s = dense.stats_buffer(epilogue, range.len(), queries);
            dense.scores(scored, &self.block(range), &out, &s, epilogue, 1.0, 0.0);
            reads.push((s, dense.stats_len(epilogue, range.len(), queries)));
            scores.push(out);
        }
        let pending = self.q.pending().filter(|_| with_q);
        reads.extend(pending.clone());
        let mut read = dense.read_each(reads)?;
        if pending.is_some() {
            self.q.fill(read.pop().expect("the queries were read"));
        }
        let stats = read.concat();
        let shard = if stats.is_empty() {
            vec![[f64::NEG_INFINITY, 0.0, 0.0]; queries.count]
        } else {
            combine_softmax_stats(&stats, queries.padded, queries.count)
        };
        Ok((scores, shard))
    }

    /// A value per query on the device, padded.
    fn upload_padded(&self, values: &[f64]) -> Handle {
        let mut padded: Vec<f32> = values.iter().map(|&x| x as f32).collect();
        padded.resize(self.queries.padded, 0.0);
        self.upload(padded)
    }

    fn upload(&self, values: Vec<f32>) -> Handle {
        self.dense.client().create(Bytes::from_elems(values))
    }

    /// Binary cross-entropy, fused into the score tiles; the true tails scored apart take the
    /// logistic loss's part.
    fn bce(&self, smoothing: f32, positives: Option<&Positives>) -> Result<LossParts, ShardError> {
        let (dense, queries) = (self.dense, self.queries);
        let entities = self.entities();
        let scale = (1.0 / (self.total as f64 * entities as f64)) as f32;
        let off = smoothing / entities as f32;
        let epilogue = ScoreEpilogue::BinaryCrossEntropy;
        let mut losses = Vec::new();
        let mut sums = Vec::new();
        for (i, range) in self.blocks.iter().enumerate() {
            let grads = dense.score_buffer(range.len(), queries);
            let stats = dense.stats_buffer(epilogue, range.len(), queries);
            let b = self.block(range);
            dense.scores(queries, &b, &grads, &stats, epilogue, scale, off);
            losses.push((stats, range.len()));
            sums.push(self.finish(i, range, &grads, scale));
        }
        let mut partial = 0.0;
        for (stats, rows) in losses {
            partial += dense.bce_loss(stats, rows, queries)?;
        }
        partial = add_sums(dense, partial, sums)?;
        let (positive_loss, positive_grads) = match positives {
            Some(p) => p.scored(self.q.get()?).logistic(1.0 / self.total as f64),
            None => Default::default(),
        };
        Ok(LossParts {
            partial,
            scale: 1.0 / (self.total as f64 * entities as f64),
            positive_loss,
            positive_grads,
        })
    }

    /// The self-adversarial logistic loss: scores of `α·q` give the softmax's pieces of `α·s`,
    /// and a kernel turns them into `p·σ(s)`. The positives' part is the logistic loss's, on
    /// the host.
    fn adversarial(
        &self,
        temperature: f32,
        positives: &Positives,
    ) -> Result<LossParts, ShardError> {
        let (dense, queries) = (self.dense, self.queries);
        let scale = 1.0 / self.total as f32;
        let scaled: Vec<f32> = self.q.get()?.iter().map(|&x| x * temperature).collect();
        let scaled = dense.upload_queries(&scaled, queries.count);
        let (scores, shard) = self.softmax_pieces(&scaled, false)?;
        let lse = self.upload_padded(&combined_log_sum_exp(self.comm, &shard, self.local)?);
        let mut sums = Vec::new();
        for (i, (range, out)) in self.blocks.iter().zip(&scores).enumerate() {
            let rows = range.len();
            let loss = dense.adversarial_loss_buffer(rows, queries);
            let len = dense.adversarial_loss_len(rows, queries);
            dense.adversarial_grad(out, rows, queries, &lse, &loss, temperature, scale);
            sums.push((loss, len));
            sums.push(self.finish(i, range, out, scale));
        }
        let partial = add_sums(dense, 0.0, sums)?;
        let (positive_loss, positive_grads) = positives
            .scored(self.q.get()?)
            .logistic(1.0 / self.total as f64);
        Ok(LossParts {
            partial,
            scale: 1.0 / self.total as f64,
            positive_loss,
            positive_grads,
        })
    }

    /// Margin ranking: each query's true tails, scored apart, set its thresholds `s₊ − γ`; the
    /// kernel compares every negative with each, and the violations it counts are the true
    /// tails' gradients. The mean over each query's (true tail, negative) pairs.
    fn margin(&self, margin: f32, positives: &Positives) -> Result<LossParts, ShardError> {
        let (dense, queries) = (self.dense, self.queries);
        let entities = self.entities();
        let scale = (1.0 / (self.total as f64 * entities as f64)) as f32;
        let positives = positives.scored(self.q.get()?);
        let (k, thresholds, weights) = positives.margin_thresholds(margin, queries.padded);
        let (thresholds, weights) = (self.upload(thresholds), self.upload(weights));
        let epilogue = ScoreEpilogue::Scores;
        let mut sums = Vec::new();
        let mut counted = Vec::new();
        for (i, range) in self.blocks.iter().enumerate() {
            let (rows, b) = (range.len(), self.block(range));
            let out = dense.score_buffer(rows, queries);
            let stats = dense.stats_buffer(epilogue, rows, queries);
            dense.scores(queries, &b, &out, &stats, epilogue, 1.0, 0.0);
            let grads = dense.score_buffer(rows, queries);
            let (_, counts_len, loss_len) = dense.margin_lens(rows, queries, k);
            let client = dense.client();
            let counts = client.empty(counts_len.max(1) * 4);
            let loss = client.empty(loss_len.max(1) * 4);
            let (t, w) = (&thresholds, &weights);
            dense.margin_grad(&out, &grads, rows, queries, t, k, w, &counts, &loss, scale);
            sums.push((loss, loss_len));
            counted.push((counts, counts_len));
            sums.push(self.finish(i, range, &grads, scale));
        }
        let partial = add_sums(dense, 0.0, sums)?;
        // Violations per (true tail, query), summed over the units and blocks.
        let mut violations = vec![0.0f64; k * queries.padded];
        for (handle, len) in counted {
            for unit in dense.read(handle, len)?.chunks(violations.len()) {
                for (v, &c) in violations.iter_mut().zip(unit) {
                    *v += c as f64;
                }
            }
        }
        Ok(LossParts {
            partial,
            scale: 1.0 / (self.total as f64 * entities as f64),
            positive_loss: 0.0,
            positive_grads: positives.margin(&violations, queries.padded, scale as f64),
        })
    }

    /// The softmax cross-entropy: the log-sum-exp of each query over every rank's candidates
    /// (and its true tails scored apart), then the gradient — made inside the query gradient's
    /// launch where the runtime fuses it.
    fn softmax(
        &self,
        smoothing: f32,
        positives: Option<&Positives>,
    ) -> Result<LossParts, ShardError> {
        let (dense, queries) = (self.dense, self.queries);
        let scale = 1.0 / self.total as f32;
        let off = smoothing / self.entities() as f32;
        let (scores, shard) = self.softmax_pieces(queries, positives.is_some())?;
        (self.lap)(StepPhase::Scores);
        let mut lse = combined_log_sum_exp(self.comm, &shard, self.local)?;
        let (mut positive_loss, mut positive_grads) = (0.0, Vec::new());
        if let Some(positives) = positives {
            let positives = positives.scored(self.q.get()?);
            // Each query's positives join its sample's log-sum-exp (the positives are
            // scored apart only where each rank scores its own queries).
            for (l, p) in lse.iter_mut().zip(positives.log_sum_exp()) {
                *l = log_sum_exp([(*l, 1.0), (p, 1.0)]);
            }
            let (l, g) = positives.softmax(&lse, scale as f64);
            (positive_loss, positive_grads) = (l * scale as f64, g);
        }
        let mut partial = 0.0;
        // Every rank holds every query's log-sum-exp, or just its own queries'.
        if self.local || self.comm.rank() == 0 {
            partial += lse.iter().sum::<f64>();
        }
        partial -= off as f64 * shard.iter().map(|s| s[2]).sum::<f64>();
        (self.lap)(StepPhase::Host);
        let lse = self.upload_padded(&lse);
        let softmax = SoftmaxGradient {
            lse: &lse,
            scale,
            off,
        };
        let mut sums = Vec::new();
        for (i, (range, out)) in self.blocks.iter().zip(&scores).enumerate() {
            if dense.fuses_softmax() {
                sums.push(self.finish_softmax(i, range, out, &softmax));
            } else {
                dense.softmax_grad(out, range.len(), queries, &lse, scale, off);
                sums.push(self.finish(i, range, out, scale));
            }
        }
        partial = add_sums(dense, partial, sums)?;
        Ok(LossParts {
            partial,
            scale: 1.0 / self.total as f64,
            positive_loss,
            positive_grads,
        })
    }
}
