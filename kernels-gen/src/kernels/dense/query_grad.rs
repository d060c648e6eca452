//! `∂Qᵀ = Wᵀ · G`: the gradient of the queries, accumulated over blocks of table rows, in register
//! tiles of coordinates × vectors of queries — the score tile turned around.

use cubecl::prelude::*;

use super::tile::{Tile, flush_tiny, lane_exp, lane_mask};
use crate::kernels::update::lane_iota;

/// `out[k, b] (+)= Σ_e w_{first + e}[k] · grads[e, b]` over the block's rows, for the query
/// panels and coordinates a unit owns; `accumulate == 0` overwrites `out` (the first block), else
/// adds.
///
/// Both `grads` and `out` are laid out panel by panel like the scores and `Qᵀ` (`tile.vectors`
/// vectors of queries per panel): `grads[(p · rows + e) · tile.vectors + v]` and
/// `out[(p · dim + k) · tile.vectors + v]`. So for each row one contiguous run of vector loads
/// brings a panel's gradients and each coordinate of the row is a broadcast — the same outer
/// product as the scores, streaming the gradients in address order. (Vectors along `dim`, with
/// a query's gradients read down the rows a panel apart, ran at 0.7 of the scores' speed.)
///
/// The unit at `(x, y)` owns the panels of group `x` (`panels_per_unit` panels) and the
/// coordinates of range `y` (`coords_per_unit`). The rows are walked in chunks of `chunk`: a
/// panel's gradients for a chunk stay in the first-level cache while every coordinate tile
/// passes over them.
///
/// With `softmax`, `grads` holds the block's *scores*, and each unit first turns a chunk of its
/// panel into the softmax cross-entropy's gradient in place — `scale · (exp(s − lse) − off)`
/// with `lse` a value per query, as
/// [`crate::kernels::dense::softmax::softmax_grad()`] computes it — less `scale · y` of the
/// chunk's labels (`label_rows`, `label_queries`, `label_excess`, sorted by row; chunk `c`'s
/// are `chunk_starts[c]..chunk_starts[c + 1]` while `c + 1 < chunk_starts.len()`). The gradient is made where it is first read, with no pass of its own;
/// the table gradient reads it afterwards. Needs every coordinate of a panel in one unit.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_query_grad<F: Float, N: Size>(
    grads: &mut [Vector<f32, N>],
    table: &[F],
    out: &mut [Vector<f32, N>],
    lse: &[Vector<f32, N>],
    label_rows: &[u32],
    label_queries: &[u32],
    label_excess: &[f32],
    chunk_starts: &[u32],
    first: u32,
    rows: u32,
    dim: u32,
    queries: u32,
    panels_per_unit: u32,
    coords_per_unit: u32,
    chunk: u32,
    accumulate: u32,
    scale: f32,
    off: f32,
    #[comptime] tile: Tile,
    #[comptime] softmax: bool,
    #[comptime] polynomial_exp: bool,
) {
    let tr = comptime!(tile.rows);
    let tv = comptime!(tile.vectors);
    let dim = dim as usize;
    let n_rows = rows as usize;
    let first = first as usize;
    let panels = (queries as usize).div_ceil(tv * N::value());
    let p_begin = ABSOLUTE_POS_X as usize * panels_per_unit as usize;
    let p_end = min(p_begin + panels_per_unit as usize, panels);
    let begin = ABSOLUTE_POS_Y as usize * coords_per_unit as usize;
    let end = min(begin + coords_per_unit as usize, dim);
    if p_begin < p_end && begin < end {
        let tiles = (end - begin).div_ceil(tr);
        let chunk = chunk as usize;
        for c in 0..n_rows.div_ceil(chunk) {
            let c0 = c * chunk;
            let c1 = min(c0 + chunk, n_rows);
            let add = c > 0 || accumulate != 0;
            for p in p_begin..p_end {
                let panel = p * n_rows * tv;
                if comptime!(softmax) {
                    // Per lane: the query's log-sum-exp, `scale` (0 in padding lanes) and
                    // `−off · scale`: one exponential and one multiply-add per value.
                    let mut l = Array::<Vector<f32, N>>::new(tv);
                    let mut times = Array::<Vector<f32, N>>::new(tv);
                    let mut plus = Array::<Vector<f32, N>>::new(tv);
                    #[unroll]
                    for v in 0..tv {
                        l[v] = lse[p * tv + v];
                        times[v] = lane_mask::<N>(p * tv + v, queries) * Vector::new(scale);
                        plus[v] = times[v] * Vector::new(-off);
                    }
                    for e in c0..c1 {
                        #[unroll]
                        for v in 0..tv {
                            let at = panel + e * tv + v;
                            let p_exp = lane_exp::<N>(grads[at] - l[v], polynomial_exp);
                            grads[at] = flush_tiny::<N>(fma(p_exp, times[v], plus[v]));
                        }
                    }
                    if c + 1 < chunk_starts.len() {
                        let lanes = N::value();
                        for i in chunk_starts[c] as usize..chunk_starts[c + 1] as usize {
                            let b = label_queries[i] as usize;
                            if b / (tv * lanes) == p {
                                let at = panel
                                    + label_rows[i] as usize * tv
                                    + (b % (tv * lanes)) / lanes;
                                let lane = Vector::<u32, N>::new((b % lanes) as u32);
                                grads[at] -= select_many(
                                    lane_iota::<N>().equal(&lane),
                                    Vector::new(scale * label_excess[i]),
                                    Vector::new(0.0f32),
                                );
                            }
                        }
                    }
                }
                for t in 0..tiles {
                    let k0 = begin + t * tr;
                    let mut col = Array::<usize>::new(tr);
                    #[unroll]
                    for r in 0..tr {
                        col[r] = first * dim + min(k0 + r, end - 1);
                    }
                    let mut acc = Array::<Vector<f32, N>>::new(tr * tv);
                    #[unroll]
                    for i in 0..tr * tv {
                        acc[i] = Vector::new(0.0f32);
                    }
                    for e in c0..c1 {
                        let mut g = Array::<Vector<f32, N>>::new(tv);
                        #[unroll]
                        for v in 0..tv {
                            g[v] = grads[panel + e * tv + v];
                        }
                        #[unroll]
                        for r in 0..tr {
                            let w = Vector::<f32, N>::new(f32::cast_from(table[col[r] + e * dim]));
                            #[unroll]
                            for v in 0..tv {
                                acc[r * tv + v] = fma(w, g[v], acc[r * tv + v]);
                            }
                        }
                    }
                    #[unroll]
                    for r in 0..tr {
                        if k0 + r < end {
                            #[unroll]
                            for v in 0..tv {
                                let at = (p * dim + k0 + r) * tv + v;
                                if add {
                                    out[at] += acc[r * tv + v];
                                } else {
                                    out[at] = acc[r * tv + v];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
