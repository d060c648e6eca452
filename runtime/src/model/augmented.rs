//! Scores quadratic in the tail as dense products of augmented rows.
//!
//! A score `c(h, r) + ⟨a(h, r), t⟩ + κ‖t‖²` — a squared distance such as TransE's
//! `γ − ‖h + r − t‖²` (κ = −1), RotatE's rotation followed by the squared L2 distance, or a
//! linear score plus an offset (κ = 0) — is the dot product
//! `⟨[a, κ, c, 0…], [t, ‖t‖², 1, 0…]⟩`: the query `q̃ = [a, κ, c]` against the augmented row
//! `t̃ = [t, ‖t‖², 1]`, both padded to [`Augmented::width`] so the dense kernels read whole
//! vectors. So every dense path — KvsAll, 1vsAll, shared negatives, ranking — serves these
//! models too, at `width / dim` of a linear model's flops.
//!
//! `c` and `a` are the score and its tail gradient at `t = 0` (the forward and backward kernels
//! on a zero tail row). κ is found once, numerically, from the `f64` host score, which also
//! checks that the degree-2 part really is `κ‖t‖²` (the macro only knows the degree). The
//! gradients come back the same way: a row's `∂t = ∂t̃[..dim] + 2 t ∂t̃[dim]`, a query's
//! `(∂a, ∂c) = (∂q̃[..dim], ∂q̃[dim + 1])`; κ is a constant.
//!
//! The augmented rows are built on the host from the rows read back (the shard, or the step's
//! candidates) and uploaded in `f32`: one read and one write of the scored rows per step.

use super::scoring::ScoringFunction;

/// Lanes the augmented width is a multiple of: whole vectors on every runtime.
const WIDTH_MULTIPLE: usize = 16;

/// How a score quadratic in the tail reaches the dense products (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Augmented {
    /// The coefficient of `‖t‖²`.
    pub kappa: f32,
    /// Entity row length.
    pub dim: usize,
    /// Augmented row length: `dim + 2` rounded up to whole vectors.
    pub width: usize,
}

/// How `S` scores against every entity by dense products with `dim`-wide entity rows: `Ok(None)`
/// as it is (linear in the tail), `Ok(Some(form))` with augmented rows, `Err(why)` not at all.
pub fn dense_form<S: ScoringFunction>(dim: usize) -> Result<Option<Augmented>, String> {
    match S::TAIL_LINEAR {
        Ok(()) => Ok(None),
        Err(_) if S::TAIL_QUADRATIC => {
            Augmented::probe::<S>(dim, super::scoring::relation_dim::<S>(dim)).map(Some)
        }
        Err(why) => Err(format!(
            "its score is not linear in the tail nor quadratic in it ({why})"
        )),
    }
}

/// A deterministic value in `[-1, 1)` for probe `i` (no RNG: the probe is the same everywhere).
fn probe_value(i: usize) -> f64 {
    let mut x = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

impl Augmented {
    /// Checks numerically that `S`'s score is `c(h, r) + ⟨a(h, r), t⟩ + κ‖t‖²` for one constant
    /// κ, at `dim`-wide entity rows and `relation_dim`-wide relation rows, and returns the form;
    /// else why not.
    pub fn probe<S: ScoringFunction>(dim: usize, relation_dim: usize) -> Result<Self, String> {
        let mut next = 0usize;
        let mut draw = |n: usize| -> Vec<f64> {
            next += n;
            (next - n..next).map(probe_value).collect()
        };
        let mut kappa: Option<f64> = None;
        for _ in 0..3 {
            let (h, r) = (draw(dim), draw(relation_dim));
            let zero = vec![0.0; dim];
            let c = S::score_host(&h, &r, &zero);
            let a = S::gradient_host(&h, &r, &zero).tail;
            for _ in 0..3 {
                let t = draw(dim);
                let norm: f64 = t.iter().map(|x| x * x).sum();
                let linear: f64 = a.iter().zip(&t).map(|(x, y)| x * y).sum();
                let s = S::score_host(&h, &r, &t);
                let k = (s - c - linear) / norm;
                let scale = 1.0 + s.abs() + c.abs() + linear.abs();
                match kappa {
                    None => kappa = Some(k),
                    Some(kappa) if (k - kappa).abs() * norm <= 1e-9 * scale => {}
                    Some(kappa) => {
                        return Err(format!(
                            "its score is quadratic in the tail row, but its degree-2 part is \
                             not κ‖t‖² for one constant κ (probes gave {kappa} and {k})"
                        ));
                    }
                }
            }
        }
        let kappa = kappa.unwrap_or(0.0);
        Ok(Self {
            kappa: kappa as f32,
            dim,
            width: Self::width(dim),
        })
    }

    /// The augmented row length for `dim`-wide rows.
    pub fn width(dim: usize) -> usize {
        (dim + 2).div_ceil(WIDTH_MULTIPLE) * WIDTH_MULTIPLE
    }

    /// Rows `t` (`dim` wide, row-major) as `[t, ‖t‖², 1, 0…]`.
    pub fn rows(&self, rows: &[f32]) -> Vec<f32> {
        let (dim, width) = (self.dim, self.width);
        let mut out = vec![0.0f32; rows.len() / dim.max(1) * width];
        for (t, o) in rows.chunks_exact(dim).zip(out.chunks_exact_mut(width)) {
            o[..dim].copy_from_slice(t);
            o[dim] = t.iter().map(|&x| x as f64 * x as f64).sum::<f64>() as f32;
            o[dim + 1] = 1.0;
        }
        out
    }

    /// Queries `[a, κ, c, 0…]` from `a` (`dim` wide) and `c` (one each).
    pub fn queries(&self, a: &[f32], c: &[f32]) -> Vec<f32> {
        let (dim, width) = (self.dim, self.width);
        let mut out = vec![0.0f32; c.len() * width];
        for ((a, &c), o) in a.chunks_exact(dim).zip(c).zip(out.chunks_exact_mut(width)) {
            o[..dim].copy_from_slice(a);
            o[dim] = self.kappa;
            o[dim + 1] = c;
        }
        out
    }

    /// The gradient of rows `t` from that of their augmented rows: `∂t̃[..dim] + 2 t ∂t̃[dim]`.
    pub fn fold_rows(&self, grads: &[f32], rows: &[f32]) -> Vec<f32> {
        let (dim, width) = (self.dim, self.width);
        let mut out = Vec::with_capacity(rows.len());
        for (g, t) in grads.chunks_exact(width).zip(rows.chunks_exact(dim)) {
            let norm = g[dim];
            out.extend(g[..dim].iter().zip(t).map(|(&g, &t)| g + 2.0 * t * norm));
        }
        out
    }

    /// The gradients of `a` and of `c` from that of the queries `[a, κ, c]`.
    pub fn split_queries(&self, grads: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (dim, width) = (self.dim, self.width);
        let n = grads.len() / width;
        let mut da = Vec::with_capacity(n * dim);
        let mut dc = Vec::with_capacity(n);
        for g in grads.chunks_exact(width) {
            da.extend_from_slice(&g[..dim]);
            dc.push(g[dim + 1]);
        }
        (da, dc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{DistMult, RotatE, RotatESq, TransE, TransESq};
    use crate::{scoring, sharded_embedding};

    /// Quadratic in the tail, but not isotropically: `Σ h_i t_i²`.
    #[sharded_embedding(dim = 8, optimizer = sgd(lr = 0.1), init = uniform(bound = 0.1))]
    #[derive(Clone, Copy, Debug, Default)]
    struct Weighted;

    #[scoring]
    impl Weighted {
        fn score(h: Row, r: Row, t: Row) -> Scalar {
            sum(h * t * t + r)
        }
    }

    #[test]
    fn the_probe_finds_kappa_of_squared_distances_and_refuses_anisotropic_quadratics() {
        assert_eq!(dense_form::<TransESq>(8).unwrap().unwrap().kappa, -1.0);
        let rotate = dense_form::<RotatESq>(8).unwrap().unwrap();
        assert_eq!((rotate.kappa, rotate.width), (-1.0, 16));
        assert_eq!(dense_form::<DistMult>(8), Ok(None));
        for refused in [dense_form::<TransE>(8), dense_form::<RotatE>(8)] {
            let e = refused.unwrap_err();
            assert!(e.contains("not linear in the tail nor quadratic"), "{e}");
        }
        let e = dense_form::<Weighted>(8).unwrap_err();
        assert!(e.contains("not κ‖t‖²"), "{e}");
    }

    #[test]
    fn augmented_rows_and_queries_multiply_to_the_quadratic_and_fold_its_gradient() {
        let form = Augmented {
            kappa: -1.0,
            dim: 3,
            width: Augmented::width(3),
        };
        assert_eq!(form.width, 16);
        let t = [1.0f32, -2.0, 0.5];
        let (a, c) = ([0.5f32, 1.0, -1.0], 2.0f32);
        let rows = form.rows(&t);
        let q = form.queries(&a, &[c]);
        let dot: f32 = rows.iter().zip(&q).map(|(x, y)| x * y).sum();
        let expected = c + (0.5 - 2.0 - 0.5) - (1.0 + 4.0 + 0.25);
        assert!((dot - expected).abs() < 1e-6, "{dot} vs {expected}");
        // ∂(⟨q̃, t̃⟩)/∂t̃ = q̃, folded: a + 2κt.
        let folded = form.fold_rows(&q, &t);
        for k in 0..3 {
            assert!((folded[k] - (a[k] - 2.0 * t[k])).abs() < 1e-6);
        }
        // ∂/∂q̃ = t̃, split: (t, 1).
        let (da, dc) = form.split_queries(&rows);
        assert_eq!((da.as_slice(), dc.as_slice()), (&t[..], &[1.0f32][..]));
    }
}
