//! TransE (Bordes et al., 2013): relations as translations, `−‖h + r − t‖`.

use crate::{scoring, sharded_embedding};

/// TransE with the L1 distance: `score = γ − ‖h + r − t‖₁` with margin γ = 6 (a constant offset,
/// so that true triples can score above 0 under a logistic loss). Not linear in the tail: trains
/// with negative sampling.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
#[derive(Clone, Copy, Debug, Default)]
pub struct TransE;

#[scoring]
impl TransE {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        6.0 - norm_l1(h + r - t)
    }
}

/// TransE with the L2 distance: `score = γ − ‖h + r − t‖₂`, γ = 6.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
#[derive(Clone, Copy, Debug, Default)]
pub struct TransEL2;

#[scoring]
impl TransEL2 {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        6.0 - norm_l2(h + r - t)
    }
}

/// TransE with the squared L2 distance: `score = γ − ‖h + r − t‖²`, γ = 6. Quadratic in the
/// tail, so besides negative sampling it scores against every entity (KvsAll, 1vsAll, shared
/// negatives, ranking) as a dense product of augmented rows (`model/augmented.rs`).
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
#[derive(Clone, Copy, Debug, Default)]
pub struct TransESq;

#[scoring]
impl TransESq {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let d = h + r - t;
        6.0 - sum(d * d)
    }
}
