//! Ranking: per query, how many of a block's entities score above, and level with, the true
//! answer — counted where the scores are, so they never travel.

use cubecl::prelude::*;

/// For the rows a unit owns and every query: counts `s > truth` into
/// `counts[(2 · unit) · padded + b]` and `s == truth` into `counts[(2 · unit + 1) · padded + b]`
/// (exact in `f32` below 2²⁴ rows per unit). Scores are laid out panel by panel
/// (`panel_vectors` vectors per panel and row, a compile-time constant); `truth` holds one value per query.
#[cube(launch_unchecked)]
pub fn count_better<N: Size>(
    scores: &[Vector<f32, N>],
    truth: &[Vector<f32, N>],
    counts: &mut [Vector<f32, N>],
    rows: u32,
    queries: u32,
    rows_per_unit: u32,
    #[comptime] panel_vectors: usize,
) {
    let n_rows = rows as usize;
    let pv = comptime!(panel_vectors);
    let panels = (queries as usize).div_ceil(pv * N::value());
    let qv = panels * pv;
    let begin = ABSOLUTE_POS * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, n_rows);
    let zero = Vector::<f32, N>::new(0.0f32);
    let one = Vector::<f32, N>::new(1.0f32);
    let base = 2 * ABSOLUTE_POS * qv;
    for p in 0..panels {
        let mut t = Array::<Vector<f32, N>>::new(pv);
        let mut better = Array::<Vector<f32, N>>::new(pv);
        let mut tied = Array::<Vector<f32, N>>::new(pv);
        #[unroll]
        for v in 0..pv {
            t[v] = truth[p * pv + v];
            better[v] = zero;
            tied[v] = zero;
        }
        for e in begin..end {
            let at = (p * n_rows + e) * pv;
            #[unroll]
            for v in 0..pv {
                let s = scores[at + v];
                better[v] += select_many(s.greater_than(&t[v]), one, zero);
                tied[v] += select_many(s.equal(&t[v]), one, zero);
            }
        }
        #[unroll]
        for v in 0..pv {
            counts[base + p * pv + v] = better[v];
            counts[base + qv + p * pv + v] = tied[v];
        }
    }
}
