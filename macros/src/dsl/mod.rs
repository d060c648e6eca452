//! The scoring DSL: parse a `fn score(h, r, t)`, lower it to an expression graph, derive its
//! gradient, decide whether it is linear in the tail, and print kernels from the graph.

pub mod emit;
pub mod grad;
pub mod graph;
pub mod linear;
pub mod lower;
pub mod parse;

use proc_macro2::TokenStream;

use crate::ctxt::Ctxt;
use emit::RowOutputs;
use lower::{Frac, Lowered};

/// Everything the kernels are printed from.
pub struct Compiled {
    /// The forward graph, with the derived nodes added to it.
    pub lowered: Lowered,
    /// `upstream · ∂score/∂row` for every row segment.
    pub backward: RowOutputs,
    /// `q(h, r) = ∂score/∂t` when the score is linear in the tail.
    pub query: Option<RowOutputs>,
    /// Why the score is not linear in the tail (where, and the reason), if it is not.
    pub not_linear: Option<(TokenStream, String)>,
    /// Whether the score is a polynomial of degree 2 in the tail (or linear plus an offset).
    pub quadratic: bool,
}

/// Parses, checks and differentiates `function`, whose relation rows are `relation` times the
/// entity dim.
pub fn compile(function: &syn::ImplItemFn, relation: Frac, cx: &mut Ctxt) -> Option<Compiled> {
    let parsed = parse::parse_score_fn(function, cx)?;
    if cx.has_errors() {
        // Syntax errors first: names bound by a refused `let` would only cascade.
        return None;
    }
    let mut lowered = lower::lower(&parsed, relation, cx)?;
    let upstream = lowered.graph.upstream();
    let backward = grad::gradient(&mut lowered.graph, lowered.score, upstream);
    let not_linear = linear::tail_linearity(&parsed).err();
    let quadratic = linear::tail_quadratic(&parsed);
    let query = if not_linear.is_none() {
        let one = lowered.graph.num(1.0);
        let all = grad::gradient(&mut lowered.graph, lowered.score, one);
        let tail: RowOutputs = all
            .into_iter()
            .filter(|((input, _), _)| *input == graph::Input::Tail)
            .collect();
        let roots: Vec<_> = tail.values().copied().collect();
        assert!(
            !lowered.graph.reads(&roots, graph::Input::Tail),
            "a score linear in the tail has a query free of the tail"
        );
        Some(tail)
    } else {
        None
    };
    Some(Compiled {
        lowered,
        backward,
        query,
        not_linear,
        quadratic,
    })
}
