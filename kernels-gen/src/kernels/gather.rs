//! Gather rows of a table into a dense output, by local row index.

use cubecl::prelude::*;

/// `out[i] = table[rows[i]]` for the `rows.len()` requested rows.
///
/// Each unit owns the contiguous block of `rows_per_unit` output rows starting at
/// `ABSOLUTE_POS * rows_per_unit` and copies them with `N`-wide vector loads; `row_vectors` is the
/// row length in vectors. The caller guarantees every `rows[i]` is a row of `table`.
#[cube(launch_unchecked, create_dummy_kernel)]
pub fn gather_rows<F: Float, N: Size>(
    table: &[Vector<F, N>],
    rows: &[u32],
    out: &mut [Vector<F, N>],
    row_vectors: u32,
    rows_per_unit: u32,
) {
    let n_rows = rows.len();
    let first = ABSOLUTE_POS * rows_per_unit as usize;
    let last = min(first + rows_per_unit as usize, n_rows);
    let width = row_vectors as usize;
    for i in first..last {
        let src = rows[i] as usize * width;
        let dst = i * width;
        for e in 0..width {
            out[dst + e] = table[src + e];
        }
    }
}
