//! The dense products of scoring queries against every row of a table — KvsAll and 1vsAll
//! training, filtered ranking — and the losses fused into them. Model-parallel: each rank runs
//! them over its own shard.
//!
//! With queries `Q` (`queries × dim`, `f32`) and a block of table rows `W` (`rows × dim`, in the
//! table's dtype, converted to `f32` in registers):
//!
//! | kernel | computes | vectors run along |
//! |---|---|---|
//! | [`scores::dense_scores()`] | `S = W·Qᵀ`, then a loss epilogue in lanes, or filtered ranking's counts instead of `S` | queries |
//! | [`softmax::softmax_grad()`] | `G = scale·(exp(S − lse) − off)` in place | queries |
//! | [`adversarial::adversarial_grad()`] | `G = scale·exp(αS − lse)·σ(S)` in place (self-adversarial) | queries |
//! | [`margin::margin_grad()`] | `G = scale·w·Σₖ [S > tₖ]` (margin ranking against each positive), violations counted | queries |
//! | [`labels::label_corrections()`] | `G[e, b] −= scale·y`, loss `−y·s` for each label | dim |
//! | [`table_grad::dense_table_grad()`] | `∂W = G·Q` | dim |
//! | [`query_grad::dense_query_grad()`] | `∂Q = Gᵀ·W` (on the `cpu` runtime, with the softmax gradient and its label corrections made in place first) | queries |
//! | [`panels::query_panels()`] | `Qᵀ` panel by panel from `Q` on the device | — |
//!
//! Scores and their gradients are laid out row-major by *table row*, each row padded to whole
//! vectors of queries: `S[e · padded + b]` belongs to (table row `e`, query `b`), and the padding
//! lanes hold junk that nothing reads. The score kernel reads the queries transposed
//! (`Qᵀ`, `dim × padded`), so one vector load brings `N` queries' values of one coordinate and a
//! broadcast table value multiplies all of them: an outer product per coordinate, accumulated in
//! a register tile of [`Tile::rows`] table rows × [`Tile::vectors`] query vectors. The two
//! gradient products tile the same way with vectors along the row (`dim`).
//!
//! Every unit owns a rectangle of the output (a range of rows or queries, and a range of vector
//! panels), so no two units write the same place and no atomics are needed; each sums in a fixed
//! order, so results are reproducible run to run.

#[allow(missing_docs)]
pub mod adversarial;
#[allow(missing_docs)]
pub mod labels;
#[allow(missing_docs)]
pub mod margin;
#[allow(missing_docs)]
pub mod panels;
#[allow(missing_docs)]
pub mod query_grad;
#[allow(missing_docs)]
pub mod scores;
#[allow(missing_docs)]
pub mod softmax;
#[allow(missing_docs)]
pub mod table_grad;
#[allow(missing_docs)]
pub mod tile;

pub use scores::ScoreEpilogue;
pub use tile::Tile;
