//! The margin ranking loss over shared negatives (Bordes et al., 2013; PyTorch-BigGraph's
//! `ranking` loss): each of a query's positives against each of its negatives,
//! `max(0, γ − s₊ + s)`.

use cubecl::prelude::*;

/// Over the rows a unit owns, with `thresholds[k · padded + b] = s₊ − γ` of query `b`'s `k`-th
/// positive (`+∞` past its positives) and `weights[b]` (0 in padding lanes):
/// `grads = scale · w · Σₖ [s > tₖ]`, the gradient of `w · Σₖ max(0, s − tₖ)`. Per unit,
/// `counts[(unit · positives + k) · padded + b]` gets how many of its rows violate the margin of
/// query `b`'s `k`-th positive (each such pair's gradient for the positive is `−scale · w`), and
/// `loss[unit]` the unit's `Σ w · max(0, s − tₖ)`, per lane. The scores are read, not replaced:
/// with several positives each is compared once per positive. Scores are laid out panel by panel
/// (`panel_vectors` vectors per panel and row); junk in padding lanes adds nothing (a comparison
/// with it is false).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn margin_grad<N: Size>(
    scores: &[Vector<f32, N>],
    thresholds: &[Vector<f32, N>],
    weights: &[Vector<f32, N>],
    grads: &mut [Vector<f32, N>],
    counts: &mut [Vector<f32, N>],
    loss: &mut [Vector<f32, N>],
    rows: u32,
    queries: u32,
    positives: u32,
    rows_per_unit: u32,
    scale: f32,
    #[comptime] panel_vectors: usize,
) {
    let n_rows = rows as usize;
    let pv = comptime!(panel_vectors);
    let panels = (queries as usize).div_ceil(pv * N::value());
    let qv = panels * pv;
    let begin = ABSOLUTE_POS * rows_per_unit as usize;
    let end = min(begin + rows_per_unit as usize, n_rows);
    let zero = Vector::<f32, N>::new(0.0f32);
    let one = Vector::<f32, N>::new(1.0f32);
    let scale_v = Vector::<f32, N>::new(scale);
    let base = ABSOLUTE_POS * positives as usize * qv;
    let mut total = zero;
    for p in 0..panels {
        let mut w = Array::<Vector<f32, N>>::new(pv);
        let mut g = Array::<Vector<f32, N>>::new(pv);
        #[unroll]
        for v in 0..pv {
            w[v] = weights[p * pv + v];
            g[v] = w[v] * scale_v;
        }
        for k in 0..positives as usize {
            let mut t = Array::<Vector<f32, N>>::new(pv);
            let mut hits = Array::<Vector<f32, N>>::new(pv);
            #[unroll]
            for v in 0..pv {
                t[v] = thresholds[k * qv + p * pv + v];
                hits[v] = zero;
            }
            for e in begin..end {
                let at = (p * n_rows + e) * pv;
                #[unroll]
                for v in 0..pv {
                    let over = scores[at + v] - t[v];
                    let hit = over.greater_than(&zero);
                    let grad = select_many(hit, g[v], zero);
                    if k == 0 {
                        grads[at + v] = grad;
                    } else {
                        grads[at + v] += grad;
                    }
                    hits[v] += select_many(hit, one, zero);
                    total += select_many(hit, over * w[v], zero);
                }
            }
            #[unroll]
            for v in 0..pv {
                counts[base + k * qv + p * pv + v] = hits[v];
            }
        }
    }
    loss[ABSOLUTE_POS] = total;
}
