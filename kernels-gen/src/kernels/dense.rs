//! The dense products of scoring queries against every row of a table (KvsAll training and
//! evaluation), model-parallel: each rank runs them over its own shard.
//!
//! With queries `Q` (`queries × dim`, `f32`) and a block of table rows `W` (`rows × dim`, in the
//! table's dtype), the layout of scores and their gradients is row-major by *table row*:
//! `out[e * queries + b]` belongs to (table row `e`, query `b`).

use cubecl::prelude::*;

use super::update::lane_sum;

/// What [`dense_scores()`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DenseMode {
    /// The scores `⟨q_b, w_e⟩`.
    Scores,
    /// Binary cross-entropy on the logits against the targets already in `out`: writes
    /// `scale · (σ(s) − y)` and sums `softplus(s) − y·s` per unit into `loss`.
    BinaryCrossEntropy,
}

/// Scores every query against the table rows `first..first + rows`; each unit owns a block of
/// `rows_per_unit` table rows and walks every query.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_scores<F: Float, N: Size>(
    queries: &[Vector<f32, N>],
    table: &[Vector<F, N>],
    out: &mut [f32],
    loss: &mut [f32],
    first: u32,
    rows: u32,
    row_vectors: u32,
    rows_per_unit: u32,
    scale: f32,
    #[comptime] mode: DenseMode,
) {
    let w = row_vectors as usize;
    let n_queries = queries.len() / w;
    let begin = ABSOLUTE_POS * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, rows as usize);
    let mut total = 0.0f32;
    for e in begin..end {
        let row = (first as usize + e) * w;
        for b in 0..n_queries {
            let mut acc = Vector::<f32, N>::new(0.0f32);
            for v in 0..w {
                acc += queries[b * w + v] * Vector::<f32, N>::cast_from(table[row + v]);
            }
            let s = lane_sum::<N>(acc);
            let at = e * n_queries + b;
            if comptime!(mode == DenseMode::Scores) {
                out[at] = s;
            } else {
                let y = out[at];
                let p = 1.0f32 / (1.0f32 + f32::exp(-s));
                out[at] = (p - y) * scale;
                let mut positive = 0.0f32;
                if s > 0.0f32 {
                    positive = s;
                }
                // softplus(s) = max(s, 0) + ln(1 + e^-|s|), stable for large |s|.
                total += positive + f32::ln(1.0f32 + f32::exp(-f32::abs(s))) - y * s;
            }
        }
    }
    if comptime!(mode == DenseMode::BinaryCrossEntropy) {
        loss[ABSOLUTE_POS] = total;
    }
}

/// `out[first + e] = Σ_b grads[e, b] · q_b` for the block's table rows: the gradient of the
/// table rows `first..first + rows`.
#[cube(launch_unchecked)]
pub fn dense_table_grad<N: Size>(
    queries: &[Vector<f32, N>],
    grads: &[f32],
    out: &mut [Vector<f32, N>],
    first: u32,
    rows: u32,
    row_vectors: u32,
    rows_per_unit: u32,
) {
    let w = row_vectors as usize;
    let n_queries = queries.len() / w;
    let begin = ABSOLUTE_POS * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, rows as usize);
    for e in begin..end {
        let row = (first as usize + e) * w;
        for v in 0..w {
            out[row + v] = Vector::<f32, N>::new(0.0f32);
        }
        for b in 0..n_queries {
            let g = Vector::<f32, N>::new(grads[e * n_queries + b]);
            for v in 0..w {
                out[row + v] += g * queries[b * w + v];
            }
        }
    }
}

/// `out[b] += Σ_e grads[e, b] · w_e` over the table rows `first..first + rows`: the gradient of
/// the queries, accumulated over blocks of the table. Each unit owns `queries_per_unit` queries.
#[cube(launch_unchecked)]
pub fn dense_query_grad<F: Float, N: Size>(
    grads: &[f32],
    table: &[Vector<F, N>],
    out: &mut [Vector<f32, N>],
    first: u32,
    rows: u32,
    row_vectors: u32,
    queries_per_unit: u32,
) {
    let w = row_vectors as usize;
    let n_queries = out.len() / w;
    let begin = ABSOLUTE_POS * queries_per_unit as usize;
    let end = min(begin + queries_per_unit as usize, n_queries);
    for e in 0..rows as usize {
        let row = (first as usize + e) * w;
        for b in begin..end {
            let g = Vector::<f32, N>::new(grads[e * n_queries + b]);
            for v in 0..w {
                out[b * w + v] += g * Vector::<f32, N>::cast_from(table[row + v]);
            }
        }
    }
}
