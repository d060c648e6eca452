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

/// `x` with the values smaller than `10⁻³⁰` in magnitude flushed to zero. A loss gradient that
/// small changes no `f32` weight, but as a subnormal input (or one that makes subnormal
/// products) it costs a CPU a microcode assist of a hundred cycles or more per operation in the
/// gradient products: scores tens of units below a query's log-sum-exp (a large initialisation)
/// made them ten to a hundred times slower.
#[cube]
pub fn flush_tiny<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    select_many(
        Vector::abs(x).less_than(&Vector::new(1e-30f32)),
        Vector::new(0.0f32),
        x,
    )
}

/// `1 / x` for `x` in `[1, 2]` without a division (a division of 16 lanes costs as much as a
/// dozen multiply-adds): a quadratic first guess (near-minimax, relative error ≤ 0.0101),
/// refined by two Newton steps, each squaring the error (≤ 1.1·10⁻⁸ before rounding, ≤ 2·10⁻⁷
/// in `f32`): six operations.
#[cube]
pub fn recip_1_2<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    let two = Vector::<f32, N>::new(2.0f32);
    let mut r = fma(
        fma(
            Vector::new(0.323_232_3_f32),
            x,
            Vector::new(-1.454_545_6_f32),
        ),
        x,
        Vector::new(2.121_212_5_f32),
    );
    r *= two - x * r;
    r *= two - x * r;
    r
}

/// `exp(x)` in the lanes of a vector, for `x ≤ 88`; below `−87` it returns `exp(−87)` (a
/// normal `f32` of `1.6·10⁻³⁸`, nothing any sum here can tell from 0). Thirteen operations
/// where the runtime's own vector `exp` takes about twice as many (it also handles `+∞`, NaN
/// and the subnormal range, which no loss here reaches): `k = round(x·log₂e)` by adding
/// `1.5·2²³`, which leaves `k` in the low mantissa bits for `2ᵏ`; `r = x − k·ln 2` in two
/// parts (Cody–Waite); `exp(r)` on `[−ln2/2, ln2/2]` a degree-5 polynomial (near-minimax,
/// relative error ≤ 7.5·10⁻⁸; ≤ 2·10⁻⁷ over the whole range in `f32`).
#[cube]
pub fn exp_lanes<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    exp_lanes_above::<N>(x, -87.0f32)
}

/// [`exp_lanes()`] of `max(x, floor)`, for `floor ≥ −87`: the same operations.
#[cube]
pub fn exp_lanes_above<N: Size>(x: Vector<f32, N>, #[comptime] floor: f32) -> Vector<f32, N> {
    let x = lane_max::<N>(x, Vector::new(floor));
    let t = fma(x, Vector::new(LOG2_E), Vector::new(ROUNDING));
    let k = t - Vector::new(ROUNDING);
    let r = fma(k, Vector::new(-LN2_HIGH), x);
    let r = fma(k, Vector::new(-LN2_LOW), r);
    let mut p = Vector::<f32, N>::new(0.008_297_655_f32);
    p = fma(p, r, Vector::new(0.041_915_383_f32));
    p = fma(p, r, Vector::new(0.166_675_75_f32));
    p = fma(p, r, Vector::new(0.499_988_94_f32));
    p = fma(p, r, Vector::new(0.999_999_7_f32));
    p = fma(p, r, Vector::new(1.000_000_1_f32));
    let bits = Vector::<u32, N>::reinterpret(t);
    p * Vector::<f32, N>::reinterpret((bits + Vector::new(127u32)) << Vector::new(23u32))
}

/// `exp(x)` in lanes: [`exp_lanes()`] where `polynomial` (the `cpu` runtime), else the
/// runtime's own (a GPU's hardware exponential).
#[cube]
pub fn lane_exp<N: Size>(x: Vector<f32, N>, #[comptime] polynomial: bool) -> Vector<f32, N> {
    if comptime!(polynomial) {
        exp_lanes::<N>(x)
    } else {
        Vector::exp(x)
    }
}

/// `exp(max(x, floor))` in lanes, as [`lane_exp()`] chooses.
#[cube]
pub fn lane_exp_above<N: Size>(
    x: Vector<f32, N>,
    #[comptime] floor: f32,
    #[comptime] polynomial: bool,
) -> Vector<f32, N> {
    if comptime!(polynomial) {
        exp_lanes_above::<N>(x, floor)
    } else {
        Vector::exp(lane_max::<N>(x, Vector::new(floor)))
    }
}

const LOG2_E: f32 = core::f32::consts::LOG2_E;
/// `1.5·2²³`: adding it rounds to an integer, kept in the low mantissa bits.
const ROUNDING: f32 = 12_582_912.0;
/// `ln 2` to 15 significant bits, so `k · LN2_HIGH` is exact for `|k| < 2⁹`.
const LN2_HIGH: f32 = 0.693_145_75;
/// `ln 2 − LN2_HIGH`.
const LN2_LOW: f32 = 1.428_606_8e-6;

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

/// `ln(x)` for `x ≥ 1` (a normal `f32`): the exponent field gives `⌊log₂ x⌋`, the mantissa `m`
/// in `[1, 2)` goes through [`ln_1p_01()`]; absolute error ≤ 3·10⁻⁷ plus `x`'s rounding.
#[cube]
pub fn ln_from_1<N: Size>(x: Vector<f32, N>) -> Vector<f32, N> {
    let bits = Vector::<u32, N>::reinterpret(x);
    let exponent = Vector::<f32, N>::cast_from(bits >> Vector::new(23u32)) - Vector::new(127.0f32);
    let mantissa = Vector::<f32, N>::reinterpret(
        (bits & Vector::new(0x007f_ffffu32)) | Vector::new(0x3f80_0000u32),
    );
    fma(
        exponent,
        Vector::new(core::f32::consts::LN_2),
        ln_1p_01::<N>(mantissa - Vector::new(1.0f32)),
    )
}

/// A stand-in for −∞ that stays finite under subtraction of any score.
pub const MINUS_HUGE: f32 = -1.0e38;
