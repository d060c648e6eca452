//! Copy rows between two buffers, by row index on both sides: moves cache lines between a
//! table's buffers and a staging buffer, whatever the buffer's dtype.

use cubecl::prelude::*;

/// `dst[dst_rows[i]] = src[src_rows[i]]` for every `i`, rows of `width` 32-bit words.
///
/// Rows are words, not elements, so one kernel serves every dtype (a row's bytes must be a whole
/// number of words). Each unit owns the contiguous block of `rows_per_unit` pairs starting at
/// `ABSOLUTE_POS * rows_per_unit`. The caller guarantees every index is a row of its buffer and
/// that `dst_rows` holds no row twice.
#[cube(launch_unchecked)]
pub fn copy_rows(
    src: &[u32],
    src_rows: &[u32],
    dst: &mut [u32],
    dst_rows: &[u32],
    width: u32,
    rows_per_unit: u32,
) {
    let n_rows = src_rows.len();
    let first = ABSOLUTE_POS * rows_per_unit as usize;
    let last = min(first + rows_per_unit as usize, n_rows);
    let w = width as usize;
    for i in first..last {
        let from = src_rows[i] as usize * w;
        let to = dst_rows[i] as usize * w;
        for e in 0..w {
            dst[to + e] = src[from + e];
        }
    }
}
