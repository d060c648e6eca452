//! TransH, a model rowshard does not ship, defined the way a user would: the macros generate its
//! kernels (forward, and the backward pass derived from the formula) and its glue to a sharded
//! model. `src/main.rs` gives it the whole `rowshard` command; `src/bin/fit.rs` trains it with
//! the library's `fit` and a recipe built in code.

use rowshard::{scoring, sharded_embedding};

/// TransH: `γ − ‖h⊥ + d − t⊥‖₂`, where `x⊥ = x − ⟨n, x⟩ n` projects onto the hyperplane with
/// unit normal `n = w / ‖w‖` and the relation row is `(w, d)`.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
pub struct TransH;

#[scoring(relation_dim = dim * 2)]
impl TransH {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (w, d) = halves(r);
        let n = w / norm_l2(w);
        let h_proj = h - dot(n, h) * n;
        let t_proj = t - dot(n, t) * n;
        6.0 - norm_l2(h_proj + d - t_proj)
    }
}
