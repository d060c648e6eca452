//! QMult (QuatE, Zhang et al., 2019; dicee's QMult): rotations by quaternions.

use crate::{scoring, sharded_embedding};

/// QMult: rows are quaternion vectors (four quarters: real, i, j, k); the relation is normalised
/// to unit quaternions and `score = ⟨h ⊗ r/|r|, t⟩` with ⊗ the Hamilton product. Linear in the
/// tail: trains with KvsAll.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.1), init = normal(std = 1.0))]
#[derive(Clone, Copy, Debug, Default)]
pub struct QMult;

#[scoring(kvsall)]
impl QMult {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (a, b, c, d) = quarters(h);
        let (ra, rb, rc, rd) = quarters(r);
        let (ta, tb, tc, td) = quarters(t);
        let norm = sqrt(ra * ra + rb * rb + rc * rc + rd * rd);
        let (p, q, u, v) = (ra / norm, rb / norm, rc / norm, rd / norm);
        let real = a * p - b * q - c * u - d * v;
        let i = a * q + b * p + c * v - d * u;
        let j = a * u - b * v + c * p + d * q;
        let k = a * v + b * u - c * q + d * p;
        sum(real * ta + i * tb + j * tc + k * td)
    }
}
