//! The softmax cross-entropy gradient over stored scores, once every rank's log-sum-exp per query
//! is known.

use cubecl::prelude::*;

use super::tile::{flush_tiny, lane_exp, lane_mask};

/// `scores ← scale · (exp(scores − lse) − off)` over the rows a unit owns: `softmax − off`, the
/// gradient of the cross-entropy against target `off` everywhere (the true entities are
/// corrected afterwards); values below `10⁻³⁰` become 0 ([`flush_tiny()`]). Scores are laid
/// out panel by panel (`panel_vectors` vectors per panel
/// and row); `lse` holds one value per query. Padding lanes become 0.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn softmax_grad<N: Size>(
    scores: &mut [Vector<f32, N>],
    lse: &[Vector<f32, N>],
    rows: u32,
    queries: u32,
    rows_per_unit: u32,
    scale: f32,
    off: f32,
    #[comptime] panel_vectors: usize,
    #[comptime] polynomial_exp: bool,
) {
    let n_rows = rows as usize;
    let pv = comptime!(panel_vectors);
    let panels = (queries as usize).div_ceil(pv * N::value());
    let begin = ABSOLUTE_POS * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, n_rows);
    let scale_v = Vector::<f32, N>::new(scale);
    let minus_off = Vector::<f32, N>::new(-off);
    for p in 0..panels {
        // Per lane: the query's log-sum-exp, and `scale` (0 in padding lanes) and
        // `−off · scale`, so each value is one exponential and one multiply-add.
        let mut l = Array::<Vector<f32, N>>::new(pv);
        let mut times = Array::<Vector<f32, N>>::new(pv);
        let mut plus = Array::<Vector<f32, N>>::new(pv);
        #[unroll]
        for v in 0..pv {
            l[v] = lse[p * pv + v];
            times[v] = lane_mask::<N>(p * pv + v, queries) * scale_v;
            plus[v] = minus_off * times[v];
        }
        for e in begin..end {
            let at = (p * n_rows + e) * pv;
            #[unroll]
            for v in 0..pv {
                let softmax = lane_exp::<N>(scores[at + v] - l[v], polynomial_exp);
                scores[at + v] = flush_tiny::<N>(fma(softmax, times[v], plus[v]));
            }
        }
    }
}
