//! A step that scores every rank's queries against every entity — KvsAll and 1vsAll — or
//! against the shared candidates of the whole batch (batch negatives in one chunk):
//! model-parallel.
//!
//! Each rank maps its queries `(h, r)` through the query kernel to `q` (the score is `⟨q, t⟩`),
//! every rank's `q` are gathered, and each rank scores all of them against its own shard — or
//! its share of the candidates, gathered into one block — with the dense kernels: the loss is
//! fused into the score tiles, the true entities' targets are corrected on the device from the
//! label lists, the shard's gradient stays local and the queries' gradient is all-reduced and
//! sent back through the query's backward pass. With the softmax cross-entropy each rank first
//! reduces its shard to a (max, Σ exp) per query, the ranks combine those into the log-sum-exp,
//! and each computes its shard's gradient from it. No rank holds a whole score row or the whole
//! table.
//!
//! Each loss's launches over the blocks of candidate rows are in `dense_losses.rs`; what the
//! query kernel reads and the gradient back through it are `query_side.rs`.

use cubecl::bytes::Bytes;

use super::StepReport;
use super::batch::{gather_labels, place};
use super::candidates::{CandidateGradient, Scored, candidates};
use super::dense_losses::{CandidateScoring, DenseLoss, LossParts, block_labels, blocks};
use super::query_side::{finish_entity_step, queries_of, query_inputs};
use super::timings::StepPhase;
use crate::comm::all_gather_values;
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{DenseQueries, HostQueries, ScoringFunction, ShardedModel};
use crate::negatives::SharedSample;
use crate::objective::LabelLoss;

/// One step of `loss` on this rank's queries against every entity, or against the shared
/// candidates of the whole batch: the `shared` negatives and the global batch's true tails. A
/// collective.
pub(super) fn step<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    labels: &IdLists,
    loss: LabelLoss,
    shared: Option<SharedSample>,
) -> Result<StepReport, ShardError> {
    let softmax = matches!(loss, LabelLoss::SoftmaxCrossEntropy { .. });
    let Some(placed) = place(model, heads, relations, labels, shared, softmax)? else {
        return Ok(StepReport::empty());
    };
    let (offset, total) = (placed.offset, placed.total);
    let (n, rank) = (heads.len(), model.comm.rank());
    let dense = model.dense_kernels()?.clone();
    let dense = &dense;
    let dim = model.spec.settings.dim;
    // The dense kernels' row width: `dim`, or the augmented rows' (`augmented.rs`).
    let width = model.dense_width();
    let client = model.kernels.client().clone();

    // Every rank scores everyone's queries against its shard, or its share of the
    // candidates (model-parallel: no rank holds a whole score row).
    let (mut inputs, _) = query_inputs(model, heads, relations, offset, &[])?;
    let DenseQueries {
        rows: q,
        offset_grads,
        ..
    } = queries_of(model, &mut inputs)?;
    let q_all = all_gather_values(model.comm, q.into_values()?)?;
    // Everyone's label lists: the targets among the rows scored here, and the true tails
    // this rank owns for the regularisers.
    let labels_all = gather_labels(model, labels)?;

    // Every query against this rank's candidates, in blocks of rows.
    let partition = model.entities.partition().clone();
    let candidates = candidates(model, shared, &labels_all)?;
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
        dense,
        comm: model.comm,
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
        lap: &|phase| model.lap(phase),
    }
    .run(DenseLoss::Labels(loss))?;
    let mut dq = dense.read_query_grad(dq, &queries)?;
    model.comm.all_reduce_sum(&mut dq)?;
    model.lap(StepPhase::Gradients);
    let dq = &mut dq[offset * width..(offset + n) * width];
    // Augmented rows' gradients fold back to the rows' (`augmented.rs`).
    let fold = |grads: Vec<f32>, rows: &[f32]| match model.augmented {
        Some(form) => form.fold_rows(&grads, rows),
        None => grads,
    };
    let dw = match (&model.augmented, &candidates.rows, &candidates.plain) {
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
            CandidateGradient::Host {
                ids,
                grads,
                at_heads: None,
            }
        }
    };
    finish_entity_step(
        model,
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
