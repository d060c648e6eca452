//! The attribute macros of rowshard (re-exported by the `rowshard` crate; use them from there).
//!
//! - `#[sharded_embedding(...)]` on a user's model struct: the table settings (dim, dtype, the
//!   optimizers and their hyper-parameters, partition, state location, rounding), every name and
//!   value checked against the one optimizer table at compile time.
//! - `#[scoring]` on an `impl` block of that struct holding `fn score(h: Row, r: Row, t: Row)`,
//!   written in the scoring DSL (`docs/dsl.md`): the macro derives the backward pass symbolically
//!   and generates the forward, backward and (for scores linear in the tail) query kernels as
//!   CubeCL `#[cube]` code, plus an `f64` host version of both.
//!
//! Layout (after serde_derive and cubecl-macros): `args` parses and checks the struct's
//! arguments, `dsl/` turns a scoring function into an expression graph (`parse` → `lower`), derives
//! gradients (`grad`) and decides tail-linearity (`linear`), `emit` prints the graph as kernels,
//! and `expand/` assembles each attribute's output. Every emitted path to the runtime is built in
//! `paths`. On error a macro emits `compile_error!`s *and* the user's item, so the rest of the
//! crate keeps type-checking.

mod args;
mod ctxt;
mod dsl;
mod expand;
mod paths;

use proc_macro::TokenStream;

/// Turns a struct into a sharded knowledge-graph-embedding model's settings: its entity table
/// is row-sharded across ranks, its relation table replicated. See the `rowshard` crate docs.
#[proc_macro_attribute]
pub fn sharded_embedding(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::model::expand(args.into(), item.into()).into()
}

/// Generates the kernels of a model's scoring function from `fn score(h: Row, r: Row, t: Row)`
/// in an `impl` block of the model struct. See `docs/dsl.md`.
#[proc_macro_attribute]
pub fn scoring(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scoring::expand(args.into(), item.into()).into()
}
