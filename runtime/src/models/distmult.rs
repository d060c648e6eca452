//! DistMult (Yang et al., 2015): a bilinear score with a diagonal relation.

use crate::{scoring, sharded_embedding};

/// DistMult: `score(h, r, t) = Σ h·r·t`. Linear in the tail: trains with KvsAll.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.1), init = normal(std = 1.0))]
#[derive(Clone, Copy, Debug, Default)]
pub struct DistMult;

#[scoring(kvsall)]
impl DistMult {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        sum(h * r * t)
    }
}
