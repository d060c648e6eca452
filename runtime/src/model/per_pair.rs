//! Shared negatives for scores that the dense kernels cannot take — neither linear nor quadratic
//! in the tail, as TransE's and RotatE's plain distances: every (query, candidate) pair goes
//! through the scoring function's own forward and backward kernels.
//!
//! Correct, and slower: a step scores `queries × (true tails + negatives)` pairs one at a time,
//! each reading its head, relation and candidate rows, where the dense kernels run one product
//! over the sample. What it shares with the dense step without batch negatives: each rank scores
//! its own queries against the whole sample, each row (head, true tail, negative) is looked up
//! once, and the losses are the same per query (computed here in `f64` from the scores).

use cubecl::bytes::Bytes;

use super::candidates::CandidateGradient;
use super::corruptions::{sigmoid, softplus};
use super::id_lists::IdLists;
use super::sample_step::SampleChunk;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use super::train::{EntityLoss, StepReport};
use crate::agree::sum_f64;
use crate::error::ShardError;

/// Pairs scored per launch: bounds the step's buffers (at dim 128 about 100 MB of gradients).
const PAIRS: usize = 1 << 16;

/// The loss of one query over the scores `pos` of its true tails and `neg` of the sample, as the
/// dense step defines it ([`EntityLoss`] on shared negatives without batch negatives), and its
/// gradient with respect to each score into `grads` (`pos`'s, then `neg`'s).
fn query_loss(loss: EntityLoss, pos: &[f64], neg: &[f64], grads: &mut [f64]) -> f64 {
    let (dpos, dneg) = grads.split_at_mut(pos.len());
    let share = 1.0 / pos.len().max(1) as f64;
    let logistic_positives = |dpos: &mut [f64]| {
        for (g, &s) in dpos.iter_mut().zip(pos) {
            *g = (sigmoid(s) - 1.0) * share;
        }
        pos.iter().map(|&s| softplus(-s)).sum::<f64>() * share
    };
    match loss {
        EntityLoss::BinaryCrossEntropy { .. } => {
            let mean = 1.0 / neg.len().max(1) as f64;
            for (g, &s) in dneg.iter_mut().zip(neg) {
                *g = sigmoid(s) * mean;
            }
            logistic_positives(dpos) + neg.iter().map(|&s| softplus(s)).sum::<f64>() * mean
        }
        EntityLoss::SelfAdversarial { temperature } => {
            let alpha = temperature as f64;
            let top = neg.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let weights: Vec<f64> = neg.iter().map(|&s| (alpha * (s - top)).exp()).collect();
            let sum: f64 = weights.iter().sum();
            let mut total = logistic_positives(dpos);
            for ((g, &s), w) in dneg.iter_mut().zip(neg).zip(&weights) {
                let p = w / sum;
                *g = p * sigmoid(s);
                total += p * softplus(s);
            }
            total
        }
        EntityLoss::SoftmaxCrossEntropy { .. } => {
            let top = pos
                .iter()
                .chain(neg)
                .fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let sum: f64 = pos.iter().chain(neg).map(|&s| (s - top).exp()).sum();
            let lse = top + sum.ln();
            for (g, &s) in grads.iter_mut().zip(pos.iter().chain(neg)) {
                *g = (s - lse).exp();
            }
            for g in &mut grads[..pos.len()] {
                *g -= share;
            }
            lse - pos.iter().sum::<f64>() * share
        }
        EntityLoss::Margin { margin } => {
            let weight = share / neg.len().max(1) as f64;
            grads.iter_mut().for_each(|g| *g = 0.0);
            let (dpos, dneg) = grads.split_at_mut(pos.len());
            let mut total = 0.0;
            for (gp, &p) in dpos.iter_mut().zip(pos) {
                for (gn, &s) in dneg.iter_mut().zip(neg) {
                    let violation = margin as f64 - p + s;
                    if violation > 0.0 {
                        total += violation * weight;
                        *gp -= weight;
                        *gn += weight;
                    }
                }
            }
            total
        }
    }
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// One step of `loss` on this rank's queries against their true tails and their chunks'
    /// samples (`chunks`: the rank's queries in each, and its distinct ids), pair by pair; the
    /// rank's queries start at `offset` of the global batch of `total`. The input is checked
    /// already. A collective.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn train_per_pair(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        loss: EntityLoss,
        chunks: &[SampleChunk],
        offset: usize,
        total: usize,
    ) -> Result<StepReport, ShardError> {
        let n = heads.len();
        let dim = self.spec.settings.dim;
        let rdim = self.relation_dim;
        // The rows scored as tails: each query's distinct true tails, then each chunk's sample;
        // looked up with the heads in one exchange (the heads and relations fed through
        // dropout's masks, if any). Rows are positions: the heads, then those.
        let (owners, positives) = labels.distinct();
        let mut tail_ids = positives;
        // Per query: where its chunk's sample starts among the rows, and its length.
        let mut samples = vec![(0, 0); n];
        for chunk in chunks {
            for b in chunk.queries.clone() {
                samples[b] = (n + tail_ids.len(), chunk.sample.len());
            }
            tail_ids.extend_from_slice(&chunk.sample);
        }
        let (inputs, tail_rows) = self.query_inputs(heads, relations, offset, &tail_ids)?;
        let mut rows = inputs.fed_heads().to_vec();
        rows.extend_from_slice(&tail_rows);
        let ent = self.kernels.upload_f32(rows);
        let rel = &inputs.relation_rows;
        // Pairs, query by query: its true tails, then its sample.
        let mut per_query = vec![0usize; n];
        for &b in &owners {
            per_query[b] += 1;
        }
        let pairs: usize = per_query.iter().zip(&samples).map(|(p, s)| p + s.1).sum();
        let mut tails = Vec::with_capacity(pairs);
        let mut queries = Vec::with_capacity(pairs);
        let mut positive = n;
        for (b, (&count, &(first, len))) in per_query.iter().zip(&samples).enumerate() {
            let candidates = (positive..positive + count).chain(first..first + len);
            positive += count;
            for t in candidates {
                tails.push(t as u32);
                queries.push(b as u32);
            }
        }
        let launches: Vec<_> = (0..tails.len())
            .step_by(PAIRS)
            .map(|at| {
                let range = at..(at + PAIRS).min(tails.len());
                let pair_relations: Vec<u32> = queries[range.clone()]
                    .iter()
                    .map(|&b| inputs.relation_index[b as usize])
                    .collect();
                let triples = self.kernels.upload_triples(
                    &queries[range.clone()],
                    &pair_relations,
                    &tails[range],
                );
                let scores = self.kernels.forward(&ent, rel, &triples);
                (triples, scores)
            })
            .collect();
        let mut scores = Vec::with_capacity(tails.len());
        for (triples, handle) in &launches {
            scores.extend(self.kernels.read(handle.clone(), triples.count)?);
        }
        // Each query's loss and its scores' gradients (of the mean over the global batch).
        let mut upstream = vec![0.0f32; tails.len()];
        let mut loss_sum = 0.0;
        let mut at = 0;
        for (&count, &(_, len)) in per_query.iter().zip(&samples) {
            let pairs = count + len;
            let s: Vec<f64> = scores[at..at + pairs].iter().map(|&x| x as f64).collect();
            let mut g = vec![0.0; pairs];
            loss_sum += query_loss(loss, &s[..count], &s[count..], &mut g);
            for (u, g) in upstream[at..at + pairs].iter_mut().zip(g) {
                *u = (g / total as f64) as f32;
            }
            at += pairs;
        }
        // Back through the scoring function; every pair's gradients summed into its rows.
        let mut row_grads = vec![0.0f32; (n + tail_ids.len()) * dim];
        let mut relation_grads = vec![0.0f32; n * rdim];
        for (i, (triples, _)) in launches.iter().enumerate() {
            let first = i * PAIRS;
            let count = triples.count;
            let up = &upstream[first..first + count];
            let up = self.kernels.client().create(Bytes::from_elems(up.to_vec()));
            let [dh, dr, dt] = self.kernels.backward(&ent, rel, triples, &up);
            let [dh, dt, dr] = self.kernels.read_each([
                (dh, count * dim),
                (dt, count * dim),
                (dr, count * rdim),
            ])?;
            for p in 0..count {
                let (b, t) = (queries[first + p] as usize, tails[first + p] as usize);
                let add = |into: &mut [f32], from: &[f32]| {
                    into.iter_mut().zip(from).for_each(|(a, &x)| *a += x);
                };
                add(&mut row_grads[b * dim..][..dim], &dh[p * dim..][..dim]);
                add(&mut row_grads[t * dim..][..dim], &dt[p * dim..][..dim]);
                add(
                    &mut relation_grads[b * rdim..][..rdim],
                    &dr[p * rdim..][..rdim],
                );
            }
        }
        // The heads', relations' and true tails' gradients, with the regularisers'.
        let tail_grads = row_grads.split_off(n * dim);
        let owned = self.owned_true_tails(labels)?;
        let candidates = CandidateGradient::Host {
            ids: tail_ids,
            grads: tail_grads,
        };
        let penalty = self.apply_query_gradients(
            heads,
            relations,
            &inputs,
            row_grads,
            relation_grads,
            candidates,
            &owned,
            total,
        )?;
        Ok(StepReport {
            loss: sum_f64(self.comm, loss_sum / total as f64 + penalty)?,
            examples: total as u64,
        })
    }
}
