//! The register tile of the dense products, and the small lane helpers their epilogues share.

use cubecl::prelude::*;

use crate::kernels::update::lane_iota;

/// A register tile: `rows × vectors` accumulators, each an `N`-wide vector. Chosen per runtime
/// (see `DenseKernels`); a compile-time constant of each kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Rows of the tile: table rows (scores, table gradient) or queries (query gradient); each
    /// contributes one broadcast value per step of the reduction.
    pub rows: usize,
    /// Vectors of the tile: each one vector load per step of the reduction.
    pub vectors: usize,
}

impl Tile {
    /// Accumulators in the tile.
    pub const fn accumulators(&self) -> usize {
        self.rows * self.vectors
    }
}

/// `1.0` in the lanes of vector `v` (of `N` lanes) that hold one of the first `valid` items,
/// `0.0` in the padding lanes past them.
#[cube]
pub fn lane_mask<N: Size>(v: usize, valid: u32) -> Vector<f32, N> {
    let item = Vector::<u32, N>::new((v * N::value()) as u32) + lane_iota::<N>();
    select_many(
        item.less_than(&Vector::new(valid)),
        Vector::new(1.0f32),
        Vector::new(0.0f32),
    )
}

/// The lane-wise larger of `a` and `b`.
#[cube]
pub fn lane_max<N: Size>(a: Vector<f32, N>, b: Vector<f32, N>) -> Vector<f32, N> {
    select_many(a.greater_than(&b), a, b)
}

/// `1 / x` for `x` in `[1, 2]` without a division (a division of 16 lanes costs as much as a
/// dozen multiply-adds): the linear first guess `24/17 − 8/17·x` (relative error ≤ 1/17),
/// refined by three Newton steps, each squaring the error (≤ 2·10⁻¹⁰ before rounding).
#[cube]
pub fn recip_1_2<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    let two = Vector::<f32, N>::new(2.0f32);
    let mut r = Vector::<f32, N>::new(24.0f32 / 17.0) - Vector::new(8.0f32 / 17.0) * x;
    r *= two - x * r;
    r *= two - x * r;
    r *= two - x * r;
    r
}

/// `ln(1 + x)` for `x` in `[0, 1]`: a degree-8 polynomial (near-minimax, Chebyshev
/// interpolation), absolute error ≤ 2·10⁻⁷ in `f32`, in eight multiply-adds instead of a full
/// logarithm.
#[cube]
pub fn ln_1p_01<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    let mut p = Vector::<f32, N>::new(-0.006_074_752_f32);
    p = p * x + Vector::new(0.034_417_911f32);
    p = p * x + Vector::new(-0.092_312_309f32);
    p = p * x + Vector::new(0.164_781_89f32);
    p = p * x + Vector::new(-0.239_189_72f32);
    p = p * x + Vector::new(0.331_333_66f32);
    p = p * x + Vector::new(-0.499_801_1f32);
    p = p * x + Vector::new(0.999_991_5_f32);
    p * x + Vector::new(9.099_033e-8f32)
}

/// A stand-in for −∞ that stays finite under subtraction of any score.
pub const MINUS_HUGE: f32 = -1.0e38;
