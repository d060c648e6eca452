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

use super::StepReport;
use super::candidates::CandidateGradient;
use super::query_side::{apply_query_gradients, query_inputs};
use super::sample::{owned_true_tails, place_apart};
use crate::agree::sum_f64;
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{ScoringFunction, ShardedModel};
use crate::negatives::SharedSample;
use crate::objective::SampleLoss;
use crate::objective::host::sample_loss;

/// Pairs scored per launch: bounds the step's buffers (at dim 128 about 100 MB of gradients).
const PAIRS: usize = 1 << 16;

/// One step of `loss` on this rank's queries against their true tails and their chunks' samples
/// of the `shared` negatives, pair by pair. A collective.
pub(super) fn step<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    labels: &IdLists,
    shared: SharedSample,
    loss: SampleLoss,
) -> Result<StepReport, ShardError> {
    let Some((placed, chunks)) = place_apart(model, heads, relations, labels, shared, loss)? else {
        return Ok(StepReport::empty());
    };
    let (offset, total) = (placed.offset, placed.total);
    let n = heads.len();
    let dim = model.spec.settings.dim;
    let rdim = model.relation_dim;
    // The rows scored as tails: each query's distinct true tails, then each chunk's sample;
    // looked up with the heads in one exchange (the heads and relations fed through
    // dropout's masks, if any). Rows are positions: the heads, then those.
    let (owners, positives) = labels.distinct();
    let mut tail_ids = positives;
    // Per query: where its chunk's sample starts among the rows, and its length.
    let mut samples = vec![(0, 0); n];
    for chunk in &chunks {
        for b in chunk.queries.clone() {
            samples[b] = (n + tail_ids.len(), chunk.sample.len());
        }
        tail_ids.extend_from_slice(&chunk.sample);
    }
    let (inputs, tail_rows) = query_inputs(model, heads, relations, offset, &tail_ids)?;
    let mut rows = inputs.fed_heads().to_vec();
    rows.extend_from_slice(&tail_rows);
    let ent = model.kernels.upload_f32(rows);
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
            let triples = model.kernels.upload_triples(
                &queries[range.clone()],
                &pair_relations,
                &tails[range],
            );
            let scores = model.kernels.forward(&ent, rel, &triples);
            (triples, scores)
        })
        .collect();
    let mut scores = Vec::with_capacity(tails.len());
    for (triples, handle) in &launches {
        scores.extend(model.kernels.read(handle.clone(), triples.count)?);
    }
    // Each query's loss and its scores' gradients (of the mean over the global batch).
    let mut upstream = vec![0.0f32; tails.len()];
    let mut loss_sum = 0.0;
    let mut at = 0;
    for (&count, &(_, len)) in per_query.iter().zip(&samples) {
        let pairs = count + len;
        let s: Vec<f64> = scores[at..at + pairs].iter().map(|&x| x as f64).collect();
        let mut g = vec![0.0; pairs];
        loss_sum += sample_loss(loss, &s[..count], &s[count..], &mut g);
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
        let up = model
            .kernels
            .client()
            .create(Bytes::from_elems(up.to_vec()));
        let [dh, dr, dt] = model.kernels.backward(&ent, rel, triples, &up);
        let [dh, dt, dr] =
            model
                .kernels
                .read_each([(dh, count * dim), (dt, count * dim), (dr, count * rdim)])?;
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
    let owned = owned_true_tails(model, labels)?;
    let candidates = CandidateGradient::Host {
        ids: tail_ids,
        grads: tail_grads,
        at_heads: None,
    };
    let penalty = apply_query_gradients(
        model,
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
        loss: sum_f64(model.comm, loss_sum / total as f64 + penalty)?,
        examples: total as u64,
    })
}
