//! The fused gather-gradient-apply kernel: aggregate duplicate-id gradients and update each
//! touched row once, in one pass over its weights and states.

use cubecl::prelude::*;

use super::rounding::stochastic_round;
use super::update::{
    PARAM_BIAS1, PARAM_BIAS2, PARAM_INV_DIM, PARAM_LR, UpdateRule, lane_iota, lane_sum,
    sum_gradients, update_vector,
};
use crate::Optimizer;

/// Applies one optimizer step to the rows `rows[0..]` (unique, local).
///
/// Row `rows[u]` receives the sum of the gradient rows `grads[order[k]]` for
/// `k in offsets[u]..offsets[u + 1]`, summed in that order, so the result is bitwise
/// reproducible. Rows not in `rows`, and their states, are not touched. Each unit owns the block
/// of `rows_per_unit` unique rows starting at `ABSOLUTE_POS * rows_per_unit`.
///
/// `state_a`/`state_b` hold per-element states and `row_state` the per-row state of the
/// optimizer (see the table); unused ones may be one-vector placeholders.
#[cube(launch_unchecked, create_dummy_kernel)]
#[allow(clippy::too_many_arguments)]
pub fn fused_apply<F: Float, S: Float, N: Size>(
    weights: &mut [Vector<F, N>],
    state_a: &mut [Vector<S, N>],
    state_b: &mut [Vector<S, N>],
    row_state: &mut [f32],
    rows: &[u32],
    offsets: &[u32],
    order: &[u32],
    grads: &[Vector<f32, N>],
    params: &[f32],
    row_vectors: u32,
    rows_per_unit: u32,
    seed: u32,
    step: u32,
    #[comptime] rule: UpdateRule,
) {
    let n_unique = rows.len();
    let first = ABSOLUTE_POS * rows_per_unit as usize;
    let last = min(first + rows_per_unit as usize, n_unique);
    let width = row_vectors as usize;
    let wd = Vector::<f32, N>::new(params[1]);

    for u in first..last {
        let row = rows[u] as usize;
        let g_first = offsets[u] as usize;
        let g_last = offsets[u + 1] as usize;
        let base = row * width;

        let mut bias1 = 1.0f32;
        let mut bias2 = 1.0f32;
        let mut row_scale = 0.0f32;
        if comptime!(rule.optimizer == Optimizer::Adam) {
            let t = row_state[row] + 1.0;
            row_state[row] = t;
            if comptime!(rule.global_clock) {
                bias1 = params[PARAM_BIAS1];
                bias2 = params[PARAM_BIAS2];
            } else {
                bias1 = 1.0 - f32::powf(params[2], t);
                bias2 = 1.0 - f32::powf(params[3], t);
            }
        }
        if comptime!(rule.optimizer == Optimizer::RowWiseAdaGrad) {
            let mut squares = 0.0f32;
            for e in 0..width {
                let w = Vector::<f32, N>::cast_from(weights[base + e]);
                let g = sum_gradients::<N>(grads, order, g_first, g_last, width, e) + wd * w;
                squares += lane_sum::<N>(g * g);
            }
            let s = row_state[row] + squares * params[PARAM_INV_DIM];
            row_state[row] = s;
            row_scale = params[PARAM_LR] / (f32::sqrt(s) + params[4]);
        }

        for e in 0..width {
            let idx = base + e;
            let w = Vector::<f32, N>::cast_from(weights[idx]);
            let g = sum_gradients::<N>(grads, order, g_first, g_last, width, e);
            let mut a = state_a[0];
            let mut b = state_b[0];
            if comptime!(rule.element_states >= 1) {
                a = state_a[idx];
            }
            if comptime!(rule.element_states >= 2) {
                b = state_b[idx];
            }
            let mut updated =
                update_vector::<S, N>(w, g, &mut a, &mut b, params, bias1, bias2, row_scale, rule);
            if comptime!(rule.element_states >= 1) {
                state_a[idx] = a;
            }
            if comptime!(rule.element_states >= 2) {
                state_b[idx] = b;
            }
            if comptime!(rule.stochastic_bits > 0) {
                let element = Vector::<u32, N>::new((idx * N::value()) as u32) + lane_iota::<N>();
                updated = stochastic_round::<N>(updated, element, seed, step, rule.stochastic_bits);
            }
            weights[idx] = Vector::cast_from(updated);
        }
    }
}
