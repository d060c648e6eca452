//! RotatE (Sun et al., 2019): relations as rotations in the complex plane.

use crate::{scoring, sharded_embedding};

/// RotatE: entity rows are complex vectors (real half, imaginary half), a relation row holds
/// `dim / 2` phases θ, and `score = γ − Σ |h ∘ e^{iθ} − t|` (the sum of complex moduli, as the
/// paper's code), γ = 6. Not linear in the tail: trains with negative sampling.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
#[derive(Clone, Copy, Debug, Default)]
pub struct RotatE;

#[scoring(relation_dim = dim / 2)]
impl RotatE {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (h_re, h_im) = halves(h);
        let (t_re, t_im) = halves(t);
        let re = h_re * cos(r) - h_im * sin(r) - t_re;
        let im = h_re * sin(r) + h_im * cos(r) - t_im;
        6.0 - sum(sqrt(re * re + im * im))
    }
}

/// RotatE as a rotation followed by the squared L2 distance: `score = γ − ‖h ∘ e^{iθ} − t‖²`
/// (the squared moduli summed, where [`RotatE`] sums the moduli), γ = 6. Quadratic in the tail,
/// so besides negative sampling it scores against every entity (KvsAll, 1vsAll, shared
/// negatives, ranking) as a dense product of augmented rows (`model/augmented.rs`).
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
#[derive(Clone, Copy, Debug, Default)]
pub struct RotatESq;

#[scoring(relation_dim = dim / 2)]
impl RotatESq {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (h_re, h_im) = halves(h);
        let (t_re, t_im) = halves(t);
        let re = h_re * cos(r) - h_im * sin(r) - t_re;
        let im = h_re * sin(r) + h_im * cos(r) - t_im;
        6.0 - sum(re * re + im * im)
    }
}
