//! Updating the replicated relation table: every rank's per-triple relation gradients are summed
//! by relation, all-reduced (in rank order, so every replica gets the same bits), and applied by
//! every rank to the same rows with the same fused kernel — the replicas stay identical.

use crate::error::ShardError;
use crate::model::{ScoringFunction, ShardedModel};

/// Applies one step to `model`'s relation table from this rank's `grads` (one `relation_dim` row
/// per entry of `relations`). A collective.
pub(super) fn apply_relation_gradients<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    relations: &[u32],
    grads: &[f32],
) -> Result<(), ShardError> {
    let width = model.relation_dim;
    let rows = model.spec.relations;
    // One row of sums plus a count per relation.
    let mut dense = vec![0.0f32; rows * (width + 1)];
    for (k, &r) in relations.iter().enumerate() {
        let row = &mut dense[r as usize * (width + 1)..][..width + 1];
        for (d, g) in row[..width].iter_mut().zip(&grads[k * width..][..width]) {
            *d += g;
        }
        row[width] += 1.0;
    }
    model.comm.all_reduce_sum(&mut dense)?;
    let mut ids = Vec::new();
    let mut sums = Vec::new();
    for (r, row) in dense.chunks_exact(width + 1).enumerate() {
        if row[width] > 0.0 {
            ids.push(r as u32);
            sums.extend_from_slice(&row[..width]);
        }
    }
    let lr = model.spec.settings.relation.lr as f32;
    model.relations.apply(&ids, &sums, lr)?;
    Ok(())
}
