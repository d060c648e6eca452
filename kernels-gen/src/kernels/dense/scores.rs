//! `S = W · Qᵀ` in register tiles, and the loss applied to each tile in vector lanes before it is
//! stored: scores leave the registers once, already turned into what the next step needs.

use cubecl::prelude::*;

use super::tile::{MINUS_HUGE, Tile, lane_exp, lane_exp_above, lane_max, ln_from_1, recip_1_2};

/// The binary cross-entropy's exponent floor: `exp(−|s|)` is taken of `max(−|s|, −30)`.
const BCE_FLOOR: f32 = -30.0;

/// What [`dense_scores()`] does with a tile of scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScoreEpilogue {
    /// Store the scores.
    Scores,
    /// Binary cross-entropy on the logits against target `off` everywhere: store
    /// `scale · (σ(s) − off)` (junk in the padding lanes, which nothing reads) and add
    /// `softplus(s) − off · s` to the unit's loss lanes (`stats[unit]`) — and `ln 2` for each
    /// row and padding lane, which `DenseKernels::bce_loss` takes off. The targets of the true
    /// entities are corrected afterwards ([`super::labels::label_corrections()`]).
    BinaryCrossEntropy,
    /// Store the scores and keep, per query and row group, the running maximum, the sum of
    /// `exp(s − max)` and the sum of `s` over the group's rows (`stats[(group · 3 + j) · padded
    /// + v]`, `j` = 0, 1, 2): the pieces of a log-sum-exp combined across units and ranks.
    SoftmaxStats,
    /// Store nothing: count, per query and row group, the rows scoring above the query's true
    /// score and those level with it (`stats[(group · 2 + j) · padded + v]`, `j` = 0, 1; exact
    /// in `f32` below 2²⁴ rows a group), with the true scores in `out` (`padded` values, read
    /// only). Filtered ranking, without a block of scores.
    CountBetter,
}

/// Scores the queries against the table rows `first..first + rows`.
///
/// `queries_t` is `Qᵀ` panel by panel (see the module docs: vector `v` of panel `p` at
/// coordinate `k` is `queries_t[(p · dim + k) · tile.vectors + v]`, zero past the real
/// queries); `out` holds the block's `rows × padded` scores, panel by panel. The unit at
/// `(x, y)` owns the rows of group `x` (`rows_per_unit` rows) and the panels of range `y`
/// (`panels_per_unit` panels); it walks its panels, and for each every row tile: the panel
/// (32 KB at dim 128) stays in the first-level cache while the tiles' table rows stream past,
/// each row value broadcast to 64 queries — 2 bytes a cycle from the second-level cache where
/// tiles outer, panels inner streamed the panels at 21 (+11–16 %). Positions, not a division of
/// `ABSOLUTE_POS`: with a division the `cpu` runtime's code ran at half the speed.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_scores<F: Float, N: Size>(
    queries_t: &[Vector<f32, N>],
    table: &[F],
    out: &mut [Vector<f32, N>],
    stats: &mut [Vector<f32, N>],
    first: u32,
    rows: u32,
    dim: u32,
    queries: u32,
    rows_per_unit: u32,
    panels_per_unit: u32,
    scale: f32,
    off: f32,
    #[comptime] tile: Tile,
    #[comptime] epilogue: ScoreEpilogue,
    #[comptime] polynomial_exp: bool,
) {
    let tr = comptime!(tile.rows);
    let tv = comptime!(tile.vectors);
    let dim = dim as usize;
    let n_rows = rows as usize;
    let panels = (queries as usize).div_ceil(tv * N::value());
    let qv = panels * tv;
    let group = ABSOLUTE_POS_X as usize;
    let begin = group * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, n_rows);
    let p_begin = ABSOLUTE_POS_Y as usize * panels_per_unit as usize;
    let p_end = min(p_begin + panels_per_unit as usize, panels);
    let zero = Vector::<f32, N>::new(0.0f32);
    let one = Vector::<f32, N>::new(1.0f32);
    let scale_v = Vector::<f32, N>::new(scale);
    let half = Vector::<f32, N>::new(0.5f32);
    let half_minus_off = Vector::<f32, N>::new(0.5f32 - off);
    let minus_off_scaled = Vector::<f32, N>::new(-off * scale);
    let mut loss = zero;

    if begin < end {
        if comptime!(epilogue == ScoreEpilogue::SoftmaxStats) {
            for v in p_begin * tv..p_end * tv {
                let at = group * 3 * qv + v;
                stats[at] = Vector::new(MINUS_HUGE);
                stats[at + qv] = zero;
                stats[at + 2 * qv] = zero;
            }
        }
        if comptime!(epilogue == ScoreEpilogue::CountBetter) {
            for v in p_begin * tv..p_end * tv {
                let at = group * 2 * qv + v;
                stats[at] = zero;
                stats[at + qv] = zero;
            }
        }
        let tiles = (end - begin).div_ceil(tr);
        for p in p_begin..p_end {
            let panel = p * dim * tv;
            for t in 0..tiles {
                let e0 = begin + t * tr;
                let mut row = Array::<usize>::new(tr);
                #[unroll]
                for r in 0..tr {
                    row[r] = (first as usize + min(e0 + r, end - 1)) * dim;
                }
                let mut acc = Array::<Vector<f32, N>>::new(tr * tv);
                #[unroll]
                for i in 0..tr * tv {
                    acc[i] = zero;
                }
                for k in 0..dim {
                    let mut q = Array::<Vector<f32, N>>::new(tv);
                    #[unroll]
                    for v in 0..tv {
                        q[v] = queries_t[panel + k * tv + v];
                    }
                    #[unroll]
                    for r in 0..tr {
                        let w = Vector::<f32, N>::new(f32::cast_from(table[row[r] + k]));
                        #[unroll]
                        for v in 0..tv {
                            acc[r * tv + v] = fma(w, q[v], acc[r * tv + v]);
                        }
                    }
                }

                if comptime!(epilogue == ScoreEpilogue::SoftmaxStats) {
                    #[unroll]
                    for v in 0..tv {
                        let at = group * 3 * qv + p * tv + v;
                        let mut top = Vector::<f32, N>::new(MINUS_HUGE);
                        #[unroll]
                        for r in 0..tr {
                            if e0 + r < end {
                                top = lane_max::<N>(top, acc[r * tv + v]);
                            }
                        }
                        let old = stats[at];
                        let new = lane_max::<N>(old, top);
                        let mut sum_exp = stats[at + qv] * lane_exp::<N>(old - new, polynomial_exp);
                        let mut sum = stats[at + 2 * qv];
                        #[unroll]
                        for r in 0..tr {
                            if e0 + r < end {
                                sum_exp += lane_exp::<N>(acc[r * tv + v] - new, polynomial_exp);
                                sum += acc[r * tv + v];
                            }
                        }
                        stats[at] = new;
                        stats[at + qv] = sum_exp;
                        stats[at + 2 * qv] = sum;
                    }
                }

                if comptime!(epilogue == ScoreEpilogue::CountBetter) {
                    #[unroll]
                    for v in 0..tv {
                        let at = group * 2 * qv + p * tv + v;
                        let truth = out[p * tv + v];
                        let mut better = stats[at];
                        let mut tied = stats[at + qv];
                        #[unroll]
                        for r in 0..tr {
                            if e0 + r < end {
                                let s = acc[r * tv + v];
                                better += select_many(s.greater_than(&truth), one, zero);
                                tied += select_many(s.equal(&truth), one, zero);
                            }
                        }
                        stats[at] = better;
                        stats[at + qv] = tied;
                    }
                }

                if comptime!(epilogue == ScoreEpilogue::BinaryCrossEntropy) {
                    // With a = |s| and e = exp(−a): σ(s) = 1/(1+e) for s ≥ 0, e/(1+e) below;
                    // softplus(s) − off·s = (½ − off)·s + ½·a + ln(1 + e). The exponent is held
                    // at −`BCE_FLOOR` or above: a score beyond ±30 is off by at most e⁻³⁰ ≈
                    // 10⁻¹³ in σ and in the loss, and no gradient is small enough to make a
                    // subnormal product. The logarithms of the tile are one logarithm of the
                    // product of its (1 + e), at most 2^(rows · vectors). Padding lanes (zero
                    // queries, s = 0) add ln 2 a row, which the host takes off
                    // (`DenseKernels::bce_loss`).
                    let mut linear = zero;
                    let mut product = one;
                    #[unroll]
                    for v in 0..tv {
                        #[unroll]
                        for r in 0..tr {
                            if e0 + r < end {
                                let s = acc[r * tv + v];
                                let a = Vector::abs(s);
                                let e = lane_exp_above::<N>(zero - a, BCE_FLOOR, polynomial_exp);
                                let one_e = one + e;
                                let inv = recip_1_2::<N>(one_e);
                                let sigmoid = select_many(s.greater_equal(&zero), inv, e * inv);
                                out[(p * n_rows + e0 + r) * tv + v] =
                                    fma(sigmoid, scale_v, minus_off_scaled);
                                linear = fma(s, half_minus_off, fma(a, half, linear));
                                product *= one_e;
                            }
                        }
                    }
                    loss += linear + ln_from_1::<N>(product);
                } else if comptime!(epilogue != ScoreEpilogue::CountBetter) {
                    #[unroll]
                    for r in 0..tr {
                        if e0 + r < end {
                            #[unroll]
                            for v in 0..tv {
                                out[(p * n_rows + e0 + r) * tv + v] = acc[r * tv + v];
                            }
                        }
                    }
                }
            }
        }
    }

    if comptime!(epilogue == ScoreEpilogue::BinaryCrossEntropy) {
        stats[ABSOLUTE_POS] = loss;
    }
}
