//! The query side of a step against every entity or against shared negatives: what the query
//! kernel reads for a rank's queries (head rows, relation rows, dropout's masks), and the end of
//! the step — the queries' gradient back through the query kernel to the head and relation rows,
//! the regularisers', and every row's update.

use cubecl::bytes::Bytes;

use super::StepReport;
use super::candidates::CandidateGradient;
use super::regularize::{StepRows, regularize};
use super::relations::apply_relation_gradients;
use super::timings::StepPhase;
use crate::agree::sum_f64;
use crate::error::ShardError;
use crate::model::{DenseQueries, DeviceRows, OffsetGrads, ScoringFunction, ShardedModel};
use crate::objective::{DropoutSide, Masks};
use crate::sharded::DeviceGradient;

/// The end of a step against every entity or shared negatives: this rank's queries'
/// gradient `dq` — `∂q`, or `(∂a, ∂c)` of augmented queries — goes back through the queries
/// and the candidates' gradient to their rows (`back_through_queries`). `rank_loss` is this
/// rank's part of the loss, before the regularisers'.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_entity_step<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    inputs: QueryInputs,
    dq: &mut [f32],
    offset_grads: Option<OffsetGrads>,
    candidates: CandidateGradient,
    tails: &[u32],
    total: usize,
    rank_loss: f64,
) -> Result<StepReport, ShardError> {
    let (da, offset_grad) = match model.augmented {
        Some(form) => {
            let (da, dc) = form.split_queries(dq);
            (Some(da), offset_grads.map(|grads| (dc, grads)))
        }
        None => (None, None),
    };
    let penalty = back_through_queries(
        model,
        heads,
        relations,
        inputs,
        QueryGradient {
            dq: da.as_deref().unwrap_or(dq),
            offset: offset_grad,
        },
        candidates,
        tails,
        total,
    )?;
    Ok(StepReport {
        loss: sum_f64(model.comm, rank_loss + penalty)?,
        examples: total as u64,
    })
}

/// The query kernel's output for `inputs` (see `dense_queries`); the head rows it read stay
/// on the device in `inputs`, for the backward pass.
pub(super) fn queries_of<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    inputs: &mut QueryInputs,
) -> Result<DenseQueries, ShardError> {
    let mut queries = model.dense_queries(
        inputs.fed_heads(),
        &inputs.relation_rows,
        &inputs.relation_index,
        true,
    )?;
    inputs.fed_on_device = queries.heads.take();
    Ok(queries)
}

/// What the query kernel reads for this rank's queries: the head rows, and the relation
/// rows — with dropout, masked copies (one relation row per query) and the masks. The rows
/// of `also` are looked up in the same call (one exchange; an entity among both heads and
/// `also` travels once) and returned beside.
pub(super) fn query_inputs<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    offset: usize,
    also: &[u32],
) -> Result<(QueryInputs, Vec<f32>), ShardError> {
    let n = heads.len();
    let dim = model.spec.settings.dim;
    let ids: Vec<u32> = heads.iter().chain(also).copied().collect();
    let mut head_rows = model.entities.lookup(&ids)?;
    let also_rows = head_rows.split_off(n * dim);
    let dropout = model.objective().dropout;
    let (p_head, p_relation) = (dropout.entity, dropout.relation);
    if p_head == 0.0 && p_relation == 0.0 {
        let inputs = QueryInputs {
            head_rows_fed: None,
            fed_on_device: None,
            head_rows,
            relation_rows: model.relation_rows(),
            relation_index: relations.to_vec(),
            masks: None,
        };
        return Ok((inputs, also_rows));
    }
    let (seed, step) = (model.spec.seed, model.entities.step());
    let head_mask = Masks::new(p_head, seed, step, DropoutSide::Head, offset, n, dim);
    let relation_mask = Masks::new(
        p_relation,
        seed,
        step,
        DropoutSide::Relation,
        offset,
        n,
        model.relation_dim,
    );
    let mut head_rows_fed = head_rows.clone();
    head_mask.apply(&mut head_rows_fed);
    let mut rows = model.relations.gather(relations)?;
    relation_mask.apply(&mut rows);
    let inputs = QueryInputs {
        head_rows,
        head_rows_fed: Some(head_rows_fed),
        fed_on_device: None,
        relation_rows: model.kernels.upload_f32(rows),
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
fn back_through_queries<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    mut inputs: QueryInputs,
    gradient: QueryGradient,
    candidates: CandidateGradient,
    tails: &[u32],
    total: usize,
) -> Result<f64, ShardError> {
    let dq = gradient.dq;
    let n = heads.len();
    let dim = model.spec.settings.dim;
    // The tails are `∂loss/∂q`, after the heads: written beside the head rows where the query
    // kernel left them, else uploaded with them.
    let ent = match inputs.fed_on_device.take() {
        Some(heads) if heads.len == 2 * n * dim => {
            model.kernels.write_f32(&heads.handle, n * dim, dq);
            heads
        }
        _ => {
            let mut rows = Vec::with_capacity(2 * n * dim);
            rows.extend_from_slice(inputs.fed_heads());
            rows.extend_from_slice(dq);
            model.kernels.upload_f32(rows)
        }
    };
    let positions: Vec<u32> = (0..2 * n as u32).collect();
    let triples =
        model
            .kernels
            .upload_triples(&positions[..n], &inputs.relation_index, &positions[n..]);
    let ones = model
        .kernels
        .client()
        .create(Bytes::from_elems(vec![1.0f32; n]));
    let [dh, dr, _] = model
        .kernels
        .backward(&ent, &inputs.relation_rows, &triples, &ones);
    let [mut grads, mut dr] = model
        .kernels
        .read_each([(dh, n * dim), (dr, n * model.relation_dim)])?;
    model.lap(StepPhase::Backward);
    if let Some((dc, offset)) = &gradient.offset {
        let (dh0, dr0) = (&offset.head, &offset.relation);
        let rdim = model.relation_dim;
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
    apply_query_gradients(
        model, heads, relations, &inputs, grads, dr, candidates, tails, total,
    )
}

/// Applies a step's gradients of the rows its queries read — `head_grads` and
/// `relation_grads`, a row per query, through dropout's masks — with the regularisers'
/// (`tails`: the true tails this rank owns, local rows) and the scored rows' (`candidates`).
/// Returns this rank's part of the penalty. A collective.
#[allow(clippy::too_many_arguments)]
pub(super) fn apply_query_gradients<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    inputs: &QueryInputs,
    mut grads: Vec<f32>,
    mut dr: Vec<f32>,
    candidates: CandidateGradient,
    tails: &[u32],
    total: usize,
) -> Result<f64, ShardError> {
    if let Some((head_mask, relation_mask)) = &inputs.masks {
        head_mask.apply(&mut grads);
        relation_mask.apply(&mut dr);
    }
    // The head rows' gradients as true tails (read unmasked, as looked up).
    if let CandidateGradient::Host {
        at_heads: Some(more),
        ..
    } = &candidates
    {
        for (g, &m) in grads.iter_mut().zip(more) {
            *g += m;
        }
    }
    let (penalty, extra) = regularize(
        model,
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
    let lr = model.spec.settings.entity.lr as f32;
    model.lap(StepPhase::Host);
    match candidates {
        CandidateGradient::Device(handle) => {
            let rows = model.entities.partition().local_rows(model.comm.rank());
            let device = DeviceGradient { handle, rows };
            model
                .entities
                .apply_gradients_with_device(&ids, &grads, device, lr)?;
        }
        CandidateGradient::Host {
            ids: candidate_ids,
            grads: candidate_grads,
            ..
        } => {
            ids.extend_from_slice(&candidate_ids);
            grads.extend_from_slice(&candidate_grads);
            model.entities.apply_gradients(&ids, &grads, lr)?;
        }
    }
    model.lap(StepPhase::ApplyEntities);
    apply_relation_gradients(model, &relation_ids, &dr)?;
    model.lap(StepPhase::ApplyRelations);
    Ok(penalty)
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
pub(super) struct QueryInputs {
    /// The head rows, as looked up.
    pub(super) head_rows: Vec<f32>,
    /// The head rows fed to the query, masked with dropout (`None`: as looked up).
    head_rows_fed: Option<Vec<f32>>,
    /// The head rows fed, on the device once the query kernel has read them, with room for a row
    /// per query after them (`DenseQueries::heads`).
    fed_on_device: Option<DeviceRows>,
    /// The relation rows fed to the query: the relation table, or masked copies.
    pub(super) relation_rows: DeviceRows,
    /// Which of `relation_rows` each query reads.
    pub(super) relation_index: Vec<u32>,
    /// The head and relation masks, with dropout.
    pub(super) masks: Option<(Masks, Masks)>,
}

impl QueryInputs {
    /// The head rows fed to the query.
    pub(super) fn fed_heads(&self) -> &[f32] {
        self.head_rows_fed.as_deref().unwrap_or(&self.head_rows)
    }
}
