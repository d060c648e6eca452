//! Targets on the device: the dense epilogues assume target `off` everywhere; this corrects the
//! entries of the true entities from a list of (row, query, weight) — the label lists, never a
//! dense target block.

use cubecl::prelude::*;

use crate::kernels::update::lane_sum;

/// For each label `i` a unit owns — block row `rows[i]`, query `queries_of[i]`, target excess
/// `excess[i] = y − off` —: its gradient entry gets `−scale · excess` (with `correct`; without,
/// the gradient was corrected where it was made), and `−excess · s` (with `s = ⟨q, w⟩`
/// recomputed) is added to the unit's `loss[unit]`.
///
/// `queries` is `Q` row-major (`row_vectors` vectors per query); the table row is
/// `first + rows[i]`; `grads` holds the block's `block_rows` rows panel by panel, `panel`
/// queries per panel. A (row, query) pair appears at most once.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn label_corrections<F: Float, N: Size>(
    queries: &[Vector<f32, N>],
    table: &[Vector<F, N>],
    grads: &mut [f32],
    rows: &[u32],
    queries_of: &[u32],
    excess: &[f32],
    loss: &mut [f32],
    first: u32,
    block_rows: u32,
    row_vectors: u32,
    panel: u32,
    labels_per_unit: u32,
    scale: f32,
    #[comptime] correct: bool,
) {
    let w = row_vectors as usize;
    let panel = panel as usize;
    let begin = ABSOLUTE_POS * labels_per_unit as usize;
    let end = min(begin + labels_per_unit as usize, rows.len());
    let mut total = 0.0f32;
    for i in begin..end {
        let e = rows[i] as usize;
        let b = queries_of[i] as usize;
        let y = excess[i];
        let mut acc = Vector::<f32, N>::new(0.0f32);
        for v in 0..w {
            let row = (first as usize + e) * w;
            acc += queries[b * w + v] * Vector::<f32, N>::cast_from(table[row + v]);
        }
        if comptime!(correct) {
            grads[((b / panel) * block_rows as usize + e) * panel + b % panel] -= scale * y;
        }
        total -= y * lane_sum::<N>(acc);
    }
    loss[ABSOLUTE_POS] = total;
}
