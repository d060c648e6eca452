//! Steps against shared negatives in which each rank scores only its own queries, each against
//! its chunk's sample — data-parallel, as PyTorch-BigGraph's workers: without batch negatives
//! (the true tails scored apart, `positives.rs`), or with batch negatives in chunks (a chunk's
//! sample holds its queries' true tails).
//!
//! A chunk is a run of consecutive queries of the global batch with its own sample of
//! negatives (the whole batch unless chunks are asked for); a rank's queries meet one chunk or
//! a few. Every chunk's sample is looked up in the same exchange as the rank's heads (and its
//! queries' true tails, when they are scored apart). Per chunk, the dense kernels score the
//! chunk's queries against its sample (`dense_losses.rs`); every log-sum-exp is the rank's own,
//! no query is gathered and no query gradient all-reduced, and the sample's gradient goes to
//! its owners through the sparse optimizer step like any looked-up row's.

use std::ops::Range;

use cubecl::bytes::Bytes;
use rowshard_kernels::DenseKernels;

use super::StepReport;
use super::batch::{Placed, gather_labels, place};
use super::candidates::{CandidateGradient, sample_candidates};
use super::dense_losses::{
    BlockLabels, CandidateScoring, DenseLoss, LossParts, block_labels, blocks,
};
use super::pairs::{partner, reciprocal_pairs};
use super::positives::Positives;
use super::query_side::{finish_entity_step, queries_of, query_inputs};
use super::timings::StepPhase;
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{DenseQueries, HostQueries, ScoringFunction, ShardedModel};
use crate::negatives::{SampleChunk, SharedSample};
use crate::objective::{LabelLoss, SampleLoss};

/// The loss of a step against its chunks' samples.
#[derive(Clone, Copy, Debug)]
enum ChunkLoss {
    /// Each chunk's true tails lie in its sample (batch negatives).
    Labels(LabelLoss),
    /// Each query's true tails are scored apart from the sample.
    Apart(SampleLoss),
}

/// One step of `loss` on this rank's queries against their chunks' samples, which hold each
/// chunk's true tails (batch negatives in chunks). A collective.
pub(super) fn with_labels<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    labels: &IdLists,
    shared: SharedSample,
    loss: LabelLoss,
) -> Result<StepReport, ShardError> {
    let softmax = matches!(loss, LabelLoss::SoftmaxCrossEntropy { .. });
    let Some(placed) = place(model, heads, relations, labels, Some(shared), softmax)? else {
        return Ok(StepReport::empty());
    };
    let labels_all = gather_labels(model, labels)?;
    let chunks = shared.rank_chunks(&labels_all, placed.offset, heads.len(), placed.total);
    let dense = model.dense_kernels()?.clone();
    let loss = ChunkLoss::Labels(loss);
    against_samples(
        model, &dense, heads, relations, labels, loss, &chunks, placed,
    )
}

/// One step of `loss` on this rank's queries against their chunks' samples, each query's true
/// tails scored apart (shared negatives without batch negatives). A collective.
pub(super) fn apart<S: ScoringFunction>(
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
    let dense = model.dense_kernels()?.clone();
    let loss = ChunkLoss::Apart(loss);
    against_samples(
        model, &dense, heads, relations, labels, loss, &chunks, placed,
    )
}

/// [`place`] for a step whose true tails are scored apart, and the chunks this rank's queries
/// meet with their samples. A collective.
pub(super) fn place_apart<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    labels: &IdLists,
    shared: SharedSample,
    loss: SampleLoss,
) -> Result<Option<(Placed, Vec<SampleChunk>)>, ShardError> {
    let softmax = matches!(loss, SampleLoss::Softmax);
    let Some(placed) = place(model, heads, relations, labels, Some(shared), softmax)? else {
        return Ok(None);
    };
    let none = IdLists::new();
    let chunks = shared.rank_chunks(&none, placed.offset, heads.len(), placed.total);
    Ok(Some((placed, chunks)))
}

/// The positions `[first, last)` of `owners` (ascending) that lie in `queries`.
fn owned_by(owners: &[usize], queries: &Range<usize>) -> Range<usize> {
    owners.partition_point(|&b| b < queries.start)..owners.partition_point(|&b| b < queries.end)
}

/// The true tails of every rank's queries (`labels` on each) that this rank owns, as local
/// rows, one per (query, distinct true tail): what an entity regulariser needs, and
/// nothing without one. A collective when there is one.
pub(super) fn owned_true_tails<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    labels: &IdLists,
) -> Result<Vec<u32>, ShardError> {
    if model.objective().regularization.entities.is_none() {
        return Ok(Vec::new());
    }
    let labels_all = gather_labels(model, labels)?;
    let (partition, rank) = (model.entities.partition(), model.comm.rank());
    let (_, ids) = labels_all.distinct();
    Ok(ids
        .iter()
        .map(|&id| partition.locate(id))
        .filter_map(|(owner, local)| (owner == rank).then_some(local))
        .collect())
}

/// One step of `loss` on this rank's queries, each chunk against its sample (`placed`: the
/// queries in the global batch). With the true tails apart, each query's are looked up and
/// scored on their own; else they are among their chunk's sample (batch negatives) and the
/// targets are corrected from the label lists. A collective.
#[allow(clippy::too_many_arguments)]
fn against_samples<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    dense: &DenseKernels,
    heads: &[u32],
    relations: &[u32],
    labels: &IdLists,
    loss: ChunkLoss,
    chunks: &[SampleChunk],
    placed: Placed,
) -> Result<StepReport, ShardError> {
    let (offset, total) = (placed.offset, placed.total);
    let apart = matches!(loss, ChunkLoss::Apart(_));
    let n = heads.len();
    let dim = model.spec.settings.dim;
    let width = model.dense_width();
    let client = model.kernels.client().clone();
    // The true tails (when apart) and every chunk's sample, looked up with the heads; a
    // 1vsAll batch's reciprocal pairs read their true tails from each other's heads.
    let (owners, positive_ids) = if apart {
        labels.distinct()
    } else {
        (Vec::new(), Vec::new())
    };
    let merged = apart && model.augmented.is_none() && reciprocal_pairs(heads, labels);
    let mut looked_up = if merged {
        Vec::new()
    } else {
        positive_ids.clone()
    };
    for chunk in chunks {
        looked_up.extend_from_slice(&chunk.sample);
    }
    let sampled: usize = chunks.iter().map(|c| c.sample.len()).sum();
    let (mut inputs, mut positive_rows) =
        query_inputs(model, heads, relations, offset, &looked_up)?;
    let sample_rows = positive_rows.split_off((looked_up.len() - sampled) * dim);
    model.lap(StepPhase::Lookup);
    let DenseQueries {
        rows: q,
        offset_grads,
        device: q_device,
        ..
    } = queries_of(model, &mut inputs)?;
    model.lap(StepPhase::Queries);
    let tails = owned_true_tails(model, labels)?;
    // A chunk that is all of the rank's queries scores them where the query kernel left
    // them, and reads them back only when its loss asks (`HostQueries`); several chunks
    // upload theirs from the host.
    let whole = match (&q_device, chunks) {
        (Some(rows), [chunk]) if chunk.queries == (0..n) => Some(rows.clone()),
        _ => None,
    };
    if whole.is_none() {
        q.get()?;
    }
    // The true tails as scored (augmented ones keep their rows as read, to fold their
    // gradients back).
    let scored_positives = match model.augmented {
        Some(form) => form.rows(&positive_rows),
        None => std::mem::take(&mut positive_rows),
    };
    let fold = |grads: Vec<f32>, rows: &[f32]| match model.augmented {
        Some(form) => form.fold_rows(&grads, rows),
        None => grads,
    };
    let mut dq = vec![0.0f32; n * width];
    // The merged pairs' true tails' gradients, a row per query's head.
    let mut at_heads = merged.then(|| vec![0.0f32; n * dim]);
    let (mut ids, mut grads) = (Vec::new(), Vec::new());
    let mut rank_loss = 0.0;
    let mut sample_at = 0;
    for chunk in chunks {
        let r = chunk.queries.clone();
        let p = owned_by(&owners, &r);
        let chunk_queries = owners[p.clone()].iter().map(|&b| b - r.start).collect();
        let chunk_ids = positive_ids[p.clone()].to_vec();
        let positives = if merged {
            let at = owners[p.clone()].iter().map(|&b| partner(b)).collect();
            Positives::new(chunk_queries, chunk_ids, &inputs.head_rows, r.len(), dim).at(at)
        } else {
            let rows = &scored_positives[p.start * width..p.end * width];
            Positives::new(chunk_queries, chunk_ids, rows, r.len(), width)
        };
        let rows = &sample_rows[sample_at * dim..(sample_at + chunk.sample.len()) * dim];
        sample_at += chunk.sample.len();
        let candidates = sample_candidates(model, chunk.sample.clone(), rows);
        let count = candidates.count;
        // The queries as the query kernel left them when the chunk is all of them (a view
        // of part of a buffer may not be bound at any offset on every runtime), else
        // uploaded.
        let chunk_q;
        let (queries, q_chunk) = match &whole {
            Some(rows) => (dense.queries_on_device(rows.clone(), n), &q),
            None => {
                let values = q.get()?[r.start * width..r.end * width].to_vec();
                let queries = dense.upload_queries(&values, r.len());
                chunk_q = HostQueries::given(values);
                (queries, &chunk_q)
            }
        };
        let blocks = blocks(count, queries.padded);
        // The chunk's queries' true tails among its rows (none when they are apart).
        let targets = match loss {
            ChunkLoss::Apart(_) => BlockLabels::none(&blocks),
            ChunkLoss::Labels(loss) => {
                let lists: Vec<&[u32]> = r.clone().map(|b| labels.get(b)).collect();
                let own = IdLists::from_lists(&lists);
                let row = |id: u32| chunk.sample.binary_search(&id).ok().map(|at| at as u32);
                block_labels(&own, row, &blocks, loss)
            }
        };
        let dw = client.empty((count * width).max(1) * 4);
        let dq_buffer = if blocks.is_empty() {
            client.create(Bytes::from_elems(vec![0.0f32; width * queries.padded]))
        } else {
            dense.query_grad_buffer(&queries)
        };
        let LossParts {
            partial,
            scale,
            positive_loss,
            positive_grads,
        } = CandidateScoring {
            dense,
            comm: model.comm,
            queries: &queries,
            q: q_chunk,
            candidates: &candidates,
            blocks: &blocks,
            targets: &targets,
            dw: &dw,
            dq: &dq_buffer,
            total,
            local: true,
            width,
            lap: &|phase| model.lap(phase),
        }
        .run(match loss {
            ChunkLoss::Labels(loss) => DenseLoss::Labels(loss),
            ChunkLoss::Apart(loss) => DenseLoss::Apart(loss, &positives),
        })?;
        rank_loss += partial * scale + positive_loss;
        let dq_chunk = &mut dq[r.start * width..r.end * width];
        let q_chunk = q_chunk.get()?;
        // The chunk's ∂Q and ∂W, in one round trip.
        let dq_len = dense.query_grad_len(&queries);
        let mut read = dense.read_each(vec![(dq_buffer, dq_len), (dw, count * width)])?;
        let dw_read = read.pop().expect("two buffers read");
        model.lap(StepPhase::Gradients);
        dense.query_grad_rows_into(&read[0], &queries, dq_chunk);
        ids.extend_from_slice(&chunk.sample);
        grads.extend(fold(
            dw_read,
            candidates.plain.as_deref().unwrap_or_default(),
        ));
        if let Some(onto) = at_heads.as_mut() {
            positives.backward_onto(&positive_grads, q_chunk, dq_chunk, onto);
            continue;
        }
        let (more_ids, more) = positives.backward(&positive_grads, q_chunk, dq_chunk);
        ids.extend(more_ids);
        // Rows as read exist only for augmented rows, which fold back through them.
        let plain = positive_rows
            .get(p.start * dim..p.end * dim)
            .unwrap_or_default();
        grads.extend(fold(more, plain));
    }
    finish_entity_step(
        model,
        heads,
        relations,
        inputs,
        &mut dq,
        offset_grads,
        CandidateGradient::Host {
            ids,
            grads,
            at_heads,
        },
        &tails,
        total,
        rank_loss,
    )
}
