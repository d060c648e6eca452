//! `∂Q = Gᵀ · W`: the gradient of the queries, accumulated over blocks of table rows, in register
//! tiles of queries × vectors of the row.

use cubecl::prelude::*;

use super::tile::Tile;

/// `out[b] (+)= Σ_e grads[e, b] · w_{first + e}` over the block's rows, for the queries `b` a
/// unit owns; `accumulate == 0` overwrites `out` (the first block), else adds.
///
/// `grads` holds the block's `rows` rows panel by panel (`panel` queries per panel), so a
/// query's values down the rows are `panel` floats apart. The unit at `(x, y)` owns the
/// queries of group `x` (`queries_per_unit` queries) and the panels (of `tile.vectors` row
/// vectors) of range `y` (`panels_per_unit` panels). The rows are walked in chunks of `chunk`,
/// so a chunk of the table stays in cache while every tile of the unit passes over it.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_query_grad<F: Float, N: Size>(
    grads: &[f32],
    table: &[Vector<F, N>],
    out: &mut [Vector<f32, N>],
    first: u32,
    rows: u32,
    row_vectors: u32,
    n_queries: u32,
    panel: u32,
    queries_per_unit: u32,
    panels_per_unit: u32,
    chunk: u32,
    accumulate: u32,
    #[comptime] tile: Tile,
) {
    let tr = comptime!(tile.rows);
    let tv = comptime!(tile.vectors);
    let dv = row_vectors as usize;
    let rows = rows as usize;
    let panel = panel as usize;
    let first = first as usize;
    let group = ABSOLUTE_POS_X as usize;
    let begin = group * queries_per_unit as usize;
    let end = min(begin + queries_per_unit as usize, n_queries as usize);
    let panels = dv.div_ceil(tv);
    let p_begin = ABSOLUTE_POS_Y as usize * panels_per_unit as usize;
    let p_end = min(p_begin + panels_per_unit as usize, panels);
    if begin < end {
        let tiles = (end - begin).div_ceil(tr);
        let chunk = chunk as usize;
        for c in 0..rows.div_ceil(chunk) {
            let c0 = c * chunk;
            let c1 = min(c0 + chunk, rows);
            let add = c > 0 || accumulate != 0;
            for t in 0..tiles {
                let b0 = begin + t * tr;
                // Where each query's column starts: panel, then the query within it.
                let mut col = Array::<usize>::new(tr);
                #[unroll]
                for r in 0..tr {
                    let b = min(b0 + r, end - 1);
                    col[r] = (b / panel) * rows * panel + b % panel;
                }
                for p in p_begin..p_end {
                    let k0 = p * tv;
                    let mut kv = Array::<usize>::new(tv);
                    #[unroll]
                    for v in 0..tv {
                        kv[v] = min(k0 + v, dv - 1);
                    }
                    let mut acc = Array::<Vector<f32, N>>::new(tr * tv);
                    #[unroll]
                    for i in 0..tr * tv {
                        acc[i] = Vector::new(0.0f32);
                    }
                    for e in c0..c1 {
                        let mut w = Array::<Vector<f32, N>>::new(tv);
                        #[unroll]
                        for v in 0..tv {
                            w[v] = Vector::<f32, N>::cast_from(table[(first + e) * dv + kv[v]]);
                        }
                        #[unroll]
                        for r in 0..tr {
                            let g = Vector::<f32, N>::new(grads[col[r] + e * panel]);
                            #[unroll]
                            for v in 0..tv {
                                acc[r * tv + v] = fma(g, w[v], acc[r * tv + v]);
                            }
                        }
                    }
                    #[unroll]
                    for r in 0..tr {
                        if b0 + r < end {
                            #[unroll]
                            for v in 0..tv {
                                if k0 + v < dv {
                                    let at = (b0 + r) * dv + k0 + v;
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
}
