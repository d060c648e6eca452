//! ComplEx (Trouillon et al., 2016): DistMult over complex numbers, `Re(⟨h, r, conj(t)⟩)`.

use crate::{scoring, sharded_embedding};

/// ComplEx: rows are complex vectors (first half real, second half imaginary) and
/// `score = Re(Σ h·r·conj(t))`. Linear in the tail: trains with KvsAll.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.1), init = normal(std = 1.0))]
#[derive(Clone, Copy, Debug, Default)]
pub struct ComplEx;

#[scoring(kvsall)]
impl ComplEx {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (h_re, h_im) = halves(h);
        let (r_re, r_im) = halves(r);
        let (t_re, t_im) = halves(t);
        sum(h_re * r_re * t_re + h_im * r_re * t_im + h_re * r_im * t_im - h_im * r_im * t_re)
    }
}
