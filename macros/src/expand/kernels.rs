//! The CubeCL kernels and `f64` host functions of one scoring function, printed from its graph.
//!
//! Every model's kernels have the same signatures, so the runtime launches them all the same way:
//!
//! - `forward(ent, rel, hi, ri, ti, out, …)`: `out[k] = score(ent[hi[k]], rel[ri[k]], ent[ti[k]])`;
//! - `backward(ent, rel, hi, ri, ti, upstream, dh, dr, dt, …)`: `upstream[k]` times the score's
//!   gradient with respect to each row of triple `k`, one output row per triple;
//! - `query(ent, rel, hi, ri, q, …)` (scores linear in the tail): `q[k] = ∂score/∂t`, so that
//!   `score = ⟨q, t⟩` for every tail.
//!
//! Rows are read as `E`/`R` (the storage dtypes) in `N`-wide vectors and computed in `f32`.
//! `seg_vectors` is a segment's length in vectors, `seg_len` in elements; each unit handles the
//! `per_unit` consecutive triples from `ABSOLUTE_POS * per_unit` (the CPU launch shape; on GPUs
//! `per_unit` is 1).

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use crate::dsl::Compiled;
use crate::dsl::emit::{Target, body};
use crate::dsl::graph::Input;
use crate::paths;

/// Every `(input, segment)` of the three rows, in order.
fn all_segments(c: &Compiled) -> Vec<(Input, u32)> {
    let l = &c.lowered;
    let mut out = Vec::new();
    for input in Input::ALL {
        let n = if input == Input::Relation {
            l.relation_segments
        } else {
            l.segments
        };
        out.extend((0..n).map(|s| (input, s)));
    }
    out
}

/// A row's length in vectors: `sv` times its segments.
fn row_vectors(segments: u32) -> TokenStream {
    if segments == 1 {
        quote!(sv)
    } else {
        let n = Literal::usize_unsuffixed(segments as usize);
        quote!((sv * #n))
    }
}

/// The row starts a kernel body reads: only those of the rows `roots` load from.
fn bases(c: &Compiled, roots: &[usize]) -> TokenStream {
    let graph = &c.lowered.graph;
    let ent = row_vectors(c.lowered.segments);
    let rel = row_vectors(c.lowered.relation_segments);
    let mut out = TokenStream::new();
    if graph.reads(roots, Input::Head) {
        out.extend(quote!(let h_at = hi[k] as usize * #ent;));
    }
    if graph.reads(roots, Input::Relation) {
        out.extend(quote!(let r_at = ri[k] as usize * #rel;));
    }
    if graph.reads(roots, Input::Tail) {
        out.extend(quote!(let t_at = ti[k] as usize * #ent;));
    }
    out
}

/// The module of kernels, named `module`.
pub fn kernel_module(c: &Compiled, module: &syn::Ident) -> TokenStream {
    let p = paths::private();
    let graph = &c.lowered.graph;
    let segs = row_vectors(c.lowered.segments);
    let rsegs = row_vectors(c.lowered.relation_segments);

    let forward_body = body(
        graph,
        Target::Cube,
        &[c.lowered.score],
        &Default::default(),
        &[],
    );
    let forward_code = forward_body.code;
    let score = &forward_body.uniform[0];
    let forward_bases = bases(c, &[c.lowered.score]);

    let written = all_segments(c);
    let backward_body = body(graph, Target::Cube, &[], &c.backward, &written);
    let backward_code = backward_body.code;
    let backward_roots: Vec<usize> = c.backward.values().copied().collect();
    let backward_bases = bases(c, &backward_roots);

    let query = c.query.as_ref().map(|q| {
        let tails: Vec<(Input, u32)> = (0..c.lowered.segments).map(|s| (Input::Tail, s)).collect();
        let b = body(graph, Target::Cube, &[], q, &tails);
        let code = b.code;
        let roots: Vec<usize> = q.values().copied().collect();
        let query_bases = bases(c, &roots);
        quote! {
            /// `q[k] = ∂score/∂t` for triple `k`'s head and relation: the score of every tail
            /// `t` is `⟨q, t⟩`.
            #[cube(launch_unchecked)]
            #[allow(clippy::too_many_arguments)]
            pub fn query<E: Float, R: Float, N: Size>(
                ent: &[Vector<E, N>],
                rel: &[Vector<R, N>],
                hi: &[u32],
                ri: &[u32],
                dt: &mut [Vector<f32, N>],
                seg_vectors: u32,
                seg_len: f32,
                per_unit: u32,
            ) {
                let first = ABSOLUTE_POS * per_unit as usize;
                let last = min(first + per_unit as usize, hi.len());
                let sv = seg_vectors as usize;
                for k in first..last {
                    #query_bases
                    let dt_at = k * #segs;
                    #code
                }
            }
        }
    });

    quote! {
        #[doc(hidden)]
        #[allow(non_snake_case, unused, clippy::all, missing_docs)]
        mod #module {
            use #p::cubecl;
            use #p::cubecl::prelude::*;

            /// `out[k]` = the score of triple `k`.
            #[cube(launch_unchecked)]
            #[allow(clippy::too_many_arguments)]
            pub fn forward<E: Float, R: Float, N: Size>(
                ent: &[Vector<E, N>],
                rel: &[Vector<R, N>],
                hi: &[u32],
                ri: &[u32],
                ti: &[u32],
                out: &mut [f32],
                seg_vectors: u32,
                seg_len: f32,
                per_unit: u32,
            ) {
                let first = ABSOLUTE_POS * per_unit as usize;
                let last = min(first + per_unit as usize, out.len());
                let sv = seg_vectors as usize;
                for k in first..last {
                    #forward_bases
                    #forward_code
                    out[k] = #score;
                }
            }

            /// `upstream[k]` times the gradient of triple `k`'s score, by row.
            #[cube(launch_unchecked)]
            #[allow(clippy::too_many_arguments)]
            pub fn backward<E: Float, R: Float, N: Size>(
                ent: &[Vector<E, N>],
                rel: &[Vector<R, N>],
                hi: &[u32],
                ri: &[u32],
                ti: &[u32],
                upstream: &[f32],
                dh: &mut [Vector<f32, N>],
                dr: &mut [Vector<f32, N>],
                dt: &mut [Vector<f32, N>],
                seg_vectors: u32,
                seg_len: f32,
                per_unit: u32,
            ) {
                let first = ABSOLUTE_POS * per_unit as usize;
                let last = min(first + per_unit as usize, upstream.len());
                let sv = seg_vectors as usize;
                for k in first..last {
                    #backward_bases
                    let dh_at = k * #segs;
                    let dr_at = k * #rsegs;
                    let dt_at = k * #segs;
                    #backward_code
                }
            }

            #query
        }
    }
}

/// `score_host` and `gradient_host`: the same math in `f64` on the host.
pub fn host_functions(c: &Compiled) -> TokenStream {
    let p = paths::private();
    let graph = &c.lowered.graph;
    let segs = c.lowered.segments as usize;
    let rsegs = c.lowered.relation_segments as usize;
    let score_body = body(
        graph,
        Target::Host,
        &[c.lowered.score],
        &Default::default(),
        &[],
    );
    let score_code = score_body.code;
    let score = &score_body.uniform[0];
    let written = all_segments(c);
    let grad_body = body(
        graph,
        Target::Host,
        &[c.lowered.score],
        &c.backward,
        &written,
    );
    let grad_code = grad_body.code;
    let grad_score = &grad_body.uniform[0];
    quote! {
        fn score_host(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
            let seg_len = #p::dsl::host::segment_len(h, r, t, #segs, #rsegs);
            #score_code
            #score
        }

        fn gradient_host(h: &[f64], r: &[f64], t: &[f64]) -> #p::HostGradient {
            let seg_len = #p::dsl::host::segment_len(h, r, t, #segs, #rsegs);
            let mut dh = #p::dsl::host::zeros(h.len());
            let mut dr = #p::dsl::host::zeros(r.len());
            let mut dt = #p::dsl::host::zeros(t.len());
            #grad_code
            #p::HostGradient { score: #grad_score, head: dh, relation: dr, tail: dt }
        }
    }
}
