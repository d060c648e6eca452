//! `∂W = G · Q`: the gradient of a block of table rows, in register tiles of rows × vectors of
//! the row.

use cubecl::prelude::*;

use super::tile::Tile;

/// `out[first + e] = Σ_b grads[e, b] · q_b` for the block rows `e` a unit owns.
///
/// `queries` is `Q` row-major (`row_vectors` vectors per query, `n_queries` queries); `grads`
/// holds the block's `rows` rows panel by panel (`panel` queries per panel); `out` holds the
/// whole shard's rows. The unit at `(x, y)` owns the rows of group `x` (`rows_per_unit` rows)
/// and the panels (of `tile.vectors` row vectors) of range `y` (`panels_per_unit` panels).
///
/// The queries are walked in passes of `pass_panels` query panels, each tile's sums carried
/// from one pass to the next through `out`: the slice of `Q` a pass reads for one row panel
/// (`pass_panels × panel × tile.vectors` vectors) stays close in the caches while every row tile
/// of the unit passes over it, instead of all of `Q` streaming from the second-level cache once
/// per tile (+8–15 % at FB15k-237 shapes), and a tile's sums go through memory once a pass (four
/// panels a pass against one: alike at dim 128, +5–10 % at dim 256). A unit with too few tiles
/// to reuse the slice takes all the queries in one pass.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_table_grad<N: Size>(
    queries: &[Vector<f32, N>],
    grads: &[f32],
    out: &mut [Vector<f32, N>],
    first: u32,
    rows: u32,
    row_vectors: u32,
    n_queries: u32,
    panel: u32,
    rows_per_unit: u32,
    panels_per_unit: u32,
    pass_panels: u32,
    #[comptime] tile: Tile,
) {
    let tr = comptime!(tile.rows);
    let tv = comptime!(tile.vectors);
    let dv = row_vectors as usize;
    let n_rows = rows as usize;
    let nq = n_queries as usize;
    let panel = panel as usize;
    let group = ABSOLUTE_POS_X as usize;
    let begin = group * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, n_rows);
    let panels = dv.div_ceil(tv);
    let p_begin = ABSOLUTE_POS_Y as usize * panels_per_unit as usize;
    let p_end = min(p_begin + panels_per_unit as usize, panels);
    if begin < end {
        let tiles = (end - begin).div_ceil(tr);
        let query_panels = max(nq.div_ceil(panel), 1);
        let per_pass = pass_panels as usize;
        // The queries in passes of `pass_panels` panels: a pass's slice of `Q` for one row panel
        // stays in the first-level cache while every row tile passes over it.
        for pass in 0..query_panels.div_ceil(per_pass) {
            let qp_begin = pass * per_pass;
            let qp_end = min(qp_begin + per_pass, query_panels);
            for p in p_begin..p_end {
                let k0 = p * tv;
                let mut col = Array::<usize>::new(tv);
                #[unroll]
                for v in 0..tv {
                    col[v] = min(k0 + v, dv - 1);
                }
                for t in 0..tiles {
                    let e0 = begin + t * tr;
                    let mut row = Array::<usize>::new(tr);
                    let mut at = Array::<usize>::new(tr);
                    #[unroll]
                    for r in 0..tr {
                        let e = min(e0 + r, end - 1);
                        row[r] = e * panel;
                        at[r] = (first as usize + e) * dv;
                    }
                    // The first pass starts the sums; later ones add to them.
                    let mut acc = Array::<Vector<f32, N>>::new(tr * tv);
                    #[unroll]
                    for r in 0..tr {
                        #[unroll]
                        for v in 0..tv {
                            acc[r * tv + v] = if pass == 0 {
                                Vector::new(0.0f32)
                            } else {
                                out[at[r] + col[v]]
                            };
                        }
                    }
                    for qp in qp_begin..qp_end {
                        let b0 = qp * panel;
                        let g0 = qp * n_rows * panel;
                        for j in 0..min(panel, nq - min(b0, nq)) {
                            let b = b0 + j;
                            let mut q = Array::<Vector<f32, N>>::new(tv);
                            #[unroll]
                            for v in 0..tv {
                                q[v] = queries[b * dv + col[v]];
                            }
                            #[unroll]
                            for r in 0..tr {
                                let g = Vector::<f32, N>::new(grads[g0 + row[r] + j]);
                                #[unroll]
                                for v in 0..tv {
                                    acc[r * tv + v] = fma(g, q[v], acc[r * tv + v]);
                                }
                            }
                        }
                    }
                    #[unroll]
                    for r in 0..tr {
                        if e0 + r < end {
                            #[unroll]
                            for v in 0..tv {
                                if k0 + v < dv {
                                    out[at[r] + k0 + v] = acc[r * tv + v];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
