//! The self-adversarial logistic loss over shared negatives (Sun et al., 2019, RotatE): each
//! query's negatives weighted by a softmax of their scores at temperature α, held constant.

use cubecl::prelude::*;

use super::tile::{flush_tiny, lane_exp, lane_mask, ln_1p_01, recip_1_2};

/// `scores ← scale · p · σ(s)` over the rows a unit owns, where the scores hold `α·s` (the
/// queries were scaled by α) and `p = exp(α·s − lse)` is the negative's self-adversarial
/// weight (`lse`: each query's log-sum-exp of `α·s` over every rank's negatives): the gradient
/// of `Σ p · softplus(s)` with `p` held constant. `loss[unit]` gets the unit's `Σ p ·
/// softplus(s)`, per lane. Stable for any `|s|` (σ and softplus from `e^{−|s|}`); gradients below
/// `10⁻³⁰` become 0 ([`flush_tiny()`]); padding lanes become 0 and add nothing. Scores are laid
/// out panel by panel (`panel_vectors` vectors per panel and row).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn adversarial_grad<N: Size>(
    scores: &mut [Vector<f32, N>],
    lse: &[Vector<f32, N>],
    loss: &mut [Vector<f32, N>],
    rows: u32,
    queries: u32,
    rows_per_unit: u32,
    inv_alpha: f32,
    scale: f32,
    #[comptime] panel_vectors: usize,
    #[comptime] polynomial_exp: bool,
) {
    let n_rows = rows as usize;
    let pv = comptime!(panel_vectors);
    let panels = (queries as usize).div_ceil(pv * N::value());
    let begin = ABSOLUTE_POS * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, n_rows);
    let zero = Vector::<f32, N>::new(0.0f32);
    let one = Vector::<f32, N>::new(1.0f32);
    let half = Vector::<f32, N>::new(0.5f32);
    let inv_alpha_v = Vector::<f32, N>::new(inv_alpha);
    let scale_v = Vector::<f32, N>::new(scale);
    let mut total = zero;
    for p in 0..panels {
        let mut l = Array::<Vector<f32, N>>::new(pv);
        let mut mask = Array::<Vector<f32, N>>::new(pv);
        #[unroll]
        for v in 0..pv {
            l[v] = lse[p * pv + v];
            mask[v] = lane_mask::<N>(p * pv + v, queries);
        }
        for e in begin..end {
            let at = (p * n_rows + e) * pv;
            #[unroll]
            for v in 0..pv {
                let scaled = scores[at + v];
                let s = scaled * inv_alpha_v;
                let weight = lane_exp::<N>(scaled - l[v], polynomial_exp) * mask[v];
                let a = Vector::abs(s);
                let ex = lane_exp::<N>(zero - a, polynomial_exp);
                let inv = recip_1_2::<N>(one + ex);
                let sigmoid = select_many(s.greater_equal(&zero), inv, ex * inv);
                // softplus(s) = max(s, 0) + ln(1 + e^{−|s|}).
                let softplus = fma(s + a, half, ln_1p_01::<N>(ex));
                scores[at + v] = flush_tiny::<N>(weight * sigmoid * scale_v);
                total = fma(weight, softplus, total);
            }
        }
    }
    loss[ABSOLUTE_POS] = total;
}
