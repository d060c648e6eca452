//! The regularisers of a step's rows: each rank adds the penalties' gradients of the rows it
//! used to theirs and counts its part of the penalty ([`regularize`]); the penalties' math is the
//! objective's ([`Regularizer`](crate::objective::Regularizer)).

use crate::error::ShardError;
use crate::model::{ScoringFunction, ShardedModel};
use crate::objective::{UsedRows, distinct_ids, distinct_rows, per_occurrence};

/// The rows a step used, as its regularisers see them (this rank's part).
pub(super) struct StepRows<'a> {
    /// The query heads (global ids), one per query.
    pub heads: &'a [u32],
    /// Their rows.
    pub head_rows: &'a [f32],
    /// Their gradients, added to.
    pub head_grads: &'a mut [f32],
    /// The true tails this rank owns, as local rows: one entry per (query, true tail) of the
    /// global batch.
    pub tails: &'a [u32],
    /// The query relations, one per query.
    pub relations: &'a [u32],
    /// Their gradients, added to.
    pub relation_grads: &'a mut [f32],
}

/// Rows only a penalty touches: entity rows (owned by this rank) and relation rows, with their
/// gradients, to apply with the step's.
#[derive(Default)]
pub(super) struct Extra {
    /// Entity ids (global).
    pub ids: Vec<u32>,
    /// Their gradients.
    pub grads: Vec<f32>,
    /// Relation ids.
    pub relation_ids: Vec<u32>,
    /// Their gradients.
    pub relation_grads: Vec<f32>,
}

/// Adds the regularisers' gradients of the rows a step used to `rows`, returns the rows only
/// the penalties touch and this rank's part of the penalty. A collective. `queries` is the
/// global batch's queries.
///
/// Heads are regularised where they were looked up, true tails by their owners (from the
/// shard, no lookup), relations where they were used; plain L2 once per distinct row of the
/// global batch, on the row's owner (rank 0 for the replicated relations).
pub(super) fn regularize<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    rows: StepRows,
    queries: usize,
) -> Result<(f64, Extra), ShardError> {
    let reg = model.objective().regularization;
    let dim = model.spec.settings.dim;
    let rank = model.comm.rank();
    let partition = model.entities.partition().clone();
    let mut extra = Extra::default();
    let mut penalty = 0.0;
    if !reg.entities.is_none() {
        let tail_ids: Vec<u32> = rows
            .tails
            .iter()
            .map(|&l| partition.global(rank, l as usize) as u32)
            .collect();
        if reg.entities.per_occurrence() {
            let tail_rows = model.entities.shard().gather(rows.tails)?;
            let mut tail_grads = vec![0.0f32; tail_rows.len()];
            let mut ids = rows.heads.to_vec();
            ids.extend_from_slice(&tail_ids);
            let mut values = rows.head_rows.to_vec();
            values.extend_from_slice(&tail_rows);
            let mut grads = vec![0.0f32; values.len()];
            let used = UsedRows {
                ids: &ids,
                rows: &values,
                grads: &mut grads,
                width: dim,
                segments: S::SEGMENTS,
            };
            penalty += per_occurrence(model.comm, &reg.entities, used, queries)?;
            let (head_part, tail_part) = grads.split_at(rows.heads.len() * dim);
            for (g, r) in rows.head_grads.iter_mut().zip(head_part) {
                *g += r;
            }
            tail_grads.copy_from_slice(tail_part);
            extra.ids = tail_ids;
            extra.grads = tail_grads;
        } else {
            let mut used = rows.heads.to_vec();
            used.extend_from_slice(&tail_ids);
            let mine: Vec<u32> = distinct_ids(model.comm, &used)?
                .into_iter()
                .filter(|&id| partition.locate(id).0 == rank)
                .collect();
            let local: Vec<u32> = mine.iter().map(|&id| partition.locate(id).1).collect();
            let values = model.entities.shard().gather(&local)?;
            penalty += distinct_rows(&reg.entities, &values, dim, &mut extra.grads);
            extra.ids = mine;
        }
    }
    if !reg.relations.is_none() {
        let width = model.relation_dim;
        let segments = if width == dim { S::SEGMENTS } else { 1 };
        if reg.relations.per_occurrence() {
            let values = model.relations.gather(rows.relations)?;
            let used = UsedRows {
                ids: rows.relations,
                rows: &values,
                grads: rows.relation_grads,
                width,
                segments,
            };
            penalty += per_occurrence(model.comm, &reg.relations, used, queries)?;
        } else {
            // The replicas are equal: rank 0 alone adds the distinct rows' gradients (they
            // are all-reduced with everyone's).
            let distinct = distinct_ids(model.comm, rows.relations)?;
            if rank == 0 {
                let values = model.relations.gather(&distinct)?;
                penalty += distinct_rows(&reg.relations, &values, width, &mut extra.relation_grads);
                extra.relation_ids = distinct;
            }
        }
    }
    Ok((penalty, extra))
}
