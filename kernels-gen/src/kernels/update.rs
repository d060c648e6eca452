//! The optimizer update rules, written once as CubeCL code. Math runs in `f32` whatever the
//! storage dtype; [`UpdateRule`] picks the specialisation at compile time.

use cubecl::prelude::*;

use crate::{BiasClock, Optimizer, TableConfig};

pub use rowshard_table::hyper::{PARAM_BIAS1, PARAM_BIAS2, PARAM_INV_DIM, PARAM_LEN, PARAM_LR};

const WD: usize = 1;
const BETA1: usize = 2;
const BETA2: usize = 3;
const EPS: usize = 4;
const ALPHA: usize = 5;

/// The compile-time choices a fused-apply kernel is specialised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UpdateRule {
    /// Which update rule.
    pub optimizer: Optimizer,
    /// Adam: bias correction from the table's step count instead of the row's.
    pub global_clock: bool,
    /// Adam: decoupled weight decay (AdamW).
    pub decoupled_weight_decay: bool,
    /// How many per-element state buffers the optimizer uses (from the table).
    pub element_states: u32,
    /// Low mantissa bits the weight dtype drops, randomised when stochastic rounding is on;
    /// 0 rounds to nearest.
    pub stochastic_bits: u32,
}

impl UpdateRule {
    /// The kernel specialisation a table's choices select.
    pub fn new(config: &TableConfig) -> Self {
        UpdateRule {
            optimizer: config.optimizer,
            global_clock: config.bias_clock == BiasClock::Global,
            decoupled_weight_decay: config.decoupled_weight_decay,
            element_states: config.optimizer.spec().element_states().count() as u32,
            stochastic_bits: if config.stochastic_rounding {
                config.weight_dtype.dropped_mantissa_bits()
            } else {
                0
            },
        }
    }
}

/// Sum of a vector's lanes.
#[cube]
pub fn lane_sum<N: Size>(v: Vector<f32, N>) -> f32 {
    let mut s = 0.0f32;
    #[unroll]
    for i in 0..N::value() {
        s += v.extract(i);
    }
    s
}

/// Lane indices `0, 1, …, N-1`.
#[cube]
pub fn lane_iota<N: Size>() -> Vector<u32, N> {
    let mut iota = Vector::<u32, N>::empty();
    #[unroll]
    for i in 0..N::value() {
        iota.insert(i, i as u32);
    }
    iota
}

/// Sums the gradient vectors `e` of the inputs `order[first..last]`, in that order: the
/// deterministic aggregation of duplicate ids.
#[cube]
pub fn sum_gradients<N: Size>(
    grads: &[Vector<f32, N>],
    order: &[u32],
    first: usize,
    last: usize,
    width: usize,
    e: usize,
) -> Vector<f32, N> {
    let mut g = Vector::<f32, N>::new(0.0f32);
    for k in first..last {
        g += grads[order[k] as usize * width + e];
    }
    g
}

/// Applies `rule` to one `N`-wide piece of a row and returns the new weights.
///
/// `a` and `b` are the per-element states (Adam's m and v; AdaGrad's sum; RMSProp's v);
/// `bias1`/`bias2` are Adam's bias corrections for this row and `row_scale` is row-wise
/// AdaGrad's `lr / (sqrt(s) + eps)`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn update_vector<S: Float, N: Size>(
    w: Vector<f32, N>,
    gradient: Vector<f32, N>,
    a: &mut Vector<S, N>,
    b: &mut Vector<S, N>,
    params: &[f32],
    bias1: f32,
    bias2: f32,
    row_scale: f32,
    #[comptime] rule: UpdateRule,
) -> Vector<f32, N> {
    let lr = Vector::<f32, N>::new(params[PARAM_LR]);
    let wd = Vector::<f32, N>::new(params[WD]);
    let eps = Vector::<f32, N>::new(params[EPS]);
    let one = Vector::<f32, N>::new(1.0f32);
    let mut g = gradient;
    if comptime!(!rule.decoupled_weight_decay) {
        g += wd * w;
    }
    let mut out = w;
    if comptime!(rule.optimizer == Optimizer::Sgd) {
        out = w - lr * g;
    } else if comptime!(rule.optimizer == Optimizer::Adam) {
        let b1 = Vector::<f32, N>::new(params[BETA1]);
        let b2 = Vector::<f32, N>::new(params[BETA2]);
        let m = b1 * Vector::<f32, N>::cast_from(*a) + (one - b1) * g;
        let v = b2 * Vector::<f32, N>::cast_from(*b) + (one - b2) * g * g;
        *a = Vector::cast_from(m);
        *b = Vector::cast_from(v);
        let m_hat = m / Vector::new(bias1);
        let v_hat = v / Vector::new(bias2);
        let mut base = w;
        if comptime!(rule.decoupled_weight_decay) {
            base = w - lr * wd * w;
        }
        out = base - lr * m_hat / (Vector::sqrt(v_hat) + eps);
    } else if comptime!(rule.optimizer == Optimizer::AdaGrad) {
        let s = Vector::<f32, N>::cast_from(*a) + g * g;
        *a = Vector::cast_from(s);
        out = w - lr * g / (Vector::sqrt(s) + eps);
    } else if comptime!(rule.optimizer == Optimizer::RowWiseAdaGrad) {
        out = w - Vector::new(row_scale) * g;
    } else if comptime!(rule.optimizer == Optimizer::RmsProp) {
        let alpha = Vector::<f32, N>::new(params[ALPHA]);
        let v = alpha * Vector::<f32, N>::cast_from(*a) + (one - alpha) * g * g;
        *a = Vector::cast_from(v);
        out = w - lr * g / (Vector::sqrt(v) + eps);
    }
    out
}
