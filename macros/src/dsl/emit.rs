//! Prints a graph as code: CubeCL `#[cube]` kernel bodies (`f32` math over `N`-wide vectors) and
//! the plain `f64` host functions.
//!
//! Schedule: every `Sum` node gets a *level* — one more than the deepest `Sum` its elements
//! depend on — and each level is one loop over the segment's elements that accumulates all of
//! that level's sums at once. Uniform values are computed between the loops as soon as their
//! inputs are known; lane values are computed inside each loop that needs them (recomputed
//! rather than stored). Row outputs (gradients, query vectors) are written by one last loop.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::graph::{Graph, Id, Input, Op};
use crate::paths;

/// What the printed code is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A CubeCL kernel body: `f32` scalars and `Vector<f32, N>` lanes.
    Cube,
    /// A host function: `f64` throughout.
    Host,
}

/// Where a row output is written: (input row whose gradient or query it is, segment) → node.
pub type RowOutputs = BTreeMap<(Input, u32), Id>;

/// The code computing `uniform` (bound to variables) and writing `rows`.
pub struct Body {
    /// The statements.
    pub code: TokenStream,
    /// The variable each uniform output is in.
    pub uniform: Vec<TokenStream>,
}

struct Emitter<'g> {
    graph: &'g Graph,
    target: Target,
    depth: Vec<u32>,
    uniform_done: BTreeSet<Id>,
    broadcast_done: BTreeSet<Id>,
    code: TokenStream,
}

fn lane_var(id: Id) -> TokenStream {
    let v = format_ident!("l{id}");
    quote!(#v)
}

fn uniform_var(id: Id) -> TokenStream {
    let v = format_ident!("u{id}");
    quote!(#v)
}

fn broadcast_var(id: Id) -> TokenStream {
    let v = format_ident!("b{id}");
    quote!(#v)
}

fn number(target: Target, x: f64) -> TokenStream {
    let lit = match target {
        Target::Cube => Literal::f32_suffixed(x as f32),
        Target::Host => Literal::f64_suffixed(x),
    };
    quote!(#lit)
}

/// The variable holding input `input`'s row start, and the buffer it is read from.
fn base(input: Input) -> (TokenStream, TokenStream) {
    match input {
        Input::Head => (quote!(h_at), quote!(ent)),
        Input::Relation => (quote!(r_at), quote!(rel)),
        Input::Tail => (quote!(t_at), quote!(ent)),
    }
}

fn host_row(input: Input) -> TokenStream {
    match input {
        Input::Head => quote!(h),
        Input::Relation => quote!(r),
        Input::Tail => quote!(t),
    }
}

/// The index of element `e` of `segment` in a row starting at `at` (cube: in vectors, `sv` per
/// segment; host: in elements from 0, `seg_len` per segment).
fn offset(target: Target, at: TokenStream, segment: u32) -> TokenStream {
    let s = Literal::usize_unsuffixed(segment as usize);
    match (target, segment) {
        (Target::Cube, 0) => quote!(#at + e),
        (Target::Cube, _) => quote!(#at + sv * #s + e),
        (Target::Host, 0) => quote!(e),
        (Target::Host, _) => quote!(#s * seg_len + e),
    }
}

/// The output buffer and its row start for a row output of `input`.
pub fn out_row(input: Input) -> (TokenStream, TokenStream) {
    match input {
        Input::Head => (quote!(dh), quote!(dh_at)),
        Input::Relation => (quote!(dr), quote!(dr_at)),
        Input::Tail => (quote!(dt), quote!(dt_at)),
    }
}

impl<'g> Emitter<'g> {
    fn new(graph: &'g Graph, target: Target) -> Self {
        let mut depth = vec![0u32; graph.nodes.len()];
        for (id, node) in graph.nodes.iter().enumerate() {
            let deepest = node
                .op
                .operands()
                .iter()
                .map(|&o| depth[o])
                .max()
                .unwrap_or(0);
            depth[id] = if matches!(node.op, Op::Sum(_)) {
                deepest + 1
            } else {
                deepest
            };
        }
        Self {
            graph,
            target,
            depth,
            uniform_done: BTreeSet::new(),
            broadcast_done: BTreeSet::new(),
            code: TokenStream::new(),
        }
    }

    /// How a uniform node reads inside a uniform expression.
    fn uniform_ref(&self, id: Id) -> TokenStream {
        match self.graph.constant(id) {
            Some(x) => number(self.target, x),
            None => uniform_var(id),
        }
    }

    /// How a node reads inside a lane expression.
    fn lane_ref(&self, id: Id) -> TokenStream {
        if self.graph.is_lane(id) {
            lane_var(id)
        } else if self.target == Target::Host {
            self.uniform_ref(id)
        } else {
            broadcast_var(id)
        }
    }

    /// Emits uniform node `id` and the uniform nodes it needs (its `Sum`s must be done).
    fn uniform(&mut self, id: Id) {
        if self.uniform_done.contains(&id) || self.graph.constant(id).is_some() {
            return;
        }
        let node = &self.graph.nodes[id];
        debug_assert!(!node.lane);
        if let Op::Sum(_) = node.op {
            unreachable!("sums are emitted by their loop");
        }
        for o in node.op.operands() {
            self.uniform(o);
        }
        let p = paths::private();
        let t = self.target;
        let a = |i: usize| self.uniform_ref(node.op.operands()[i]);
        let (float, helpers) = match t {
            Target::Cube => (quote!(f32), quote!(#p::dsl::cube)),
            Target::Host => (quote!(f64), quote!(#p::dsl::host)),
        };
        let expr = match &node.op {
            Op::SegLen => match t {
                Target::Cube => quote!(seg_len),
                Target::Host => quote!(seg_len as f64),
            },
            Op::Upstream => match t {
                Target::Cube => quote!(upstream[k]),
                Target::Host => quote!(1.0f64),
            },
            Op::Add(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x + #y)
            }
            Op::Sub(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x - #y)
            }
            Op::Mul(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x * #y)
            }
            Op::Div(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x / #y)
            }
            Op::Neg(_) => {
                let x = a(0);
                quote!(-#x)
            }
            Op::Abs(_) => {
                let x = a(0);
                quote!(#float::abs(#x))
            }
            Op::Sqrt(_) => {
                let x = a(0);
                quote!(#float::sqrt(#x))
            }
            Op::Exp(_) => {
                let x = a(0);
                quote!(#float::exp(#x))
            }
            Op::Ln(_) => {
                let x = a(0);
                quote!(#float::ln(#x))
            }
            Op::Sin(_) => {
                let x = a(0);
                quote!(#float::sin(#x))
            }
            Op::Cos(_) => {
                let x = a(0);
                quote!(#float::cos(#x))
            }
            Op::Sigmoid(_) => {
                let x = a(0);
                quote!(#helpers::sigmoid(#x))
            }
            Op::Sign(_) => {
                let x = a(0);
                quote!(#helpers::sign(#x))
            }
            Op::Const(_) | Op::Load(..) | Op::Sum(_) => unreachable!(),
        };
        let v = uniform_var(id);
        self.code.extend(quote!(let #v = #expr;));
        self.uniform_done.insert(id);
    }

    /// Emits what a loop over lane roots needs before it starts: uniform values and (on the
    /// cube target) their vector broadcasts.
    fn prepare_lanes(&mut self, lanes: &[Id]) {
        for &id in lanes {
            for o in self.graph.nodes[id].op.operands() {
                if !self.graph.is_lane(o) {
                    self.uniform(o);
                    self.broadcast(o);
                }
            }
        }
    }

    fn broadcast(&mut self, id: Id) {
        if self.target == Target::Host || !self.broadcast_done.insert(id) {
            return;
        }
        let v = broadcast_var(id);
        let x = self.uniform_ref(id);
        self.code
            .extend(quote!(let #v = Vector::<f32, N>::new(#x);));
    }

    /// The lane nodes `roots` need, ascending (stopping at uniform values).
    fn lanes_of(&self, roots: &[Id]) -> Vec<Id> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Id> = roots
            .iter()
            .copied()
            .filter(|&r| self.graph.is_lane(r))
            .collect();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            for o in self.graph.nodes[id].op.operands() {
                if self.graph.is_lane(o) {
                    stack.push(o);
                }
            }
        }
        seen.into_iter().collect()
    }

    /// The statement computing lane node `id` at element `e`.
    fn lane(&self, id: Id) -> TokenStream {
        let node = &self.graph.nodes[id];
        let p = paths::private();
        let a = |i: usize| self.lane_ref(node.op.operands()[i]);
        let cube = self.target == Target::Cube;
        let helpers = if cube {
            quote!(#p::dsl::cube)
        } else {
            quote!(#p::dsl::host)
        };
        let call = |f: TokenStream, x: TokenStream| {
            if cube {
                quote!(Vector::#f(#x))
            } else {
                quote!(#x.#f())
            }
        };
        let expr = match &node.op {
            Op::Load(input, segment) => {
                if cube {
                    let (at, buffer) = base(*input);
                    let index = offset(self.target, at, *segment);
                    quote!(Vector::<f32, N>::cast_from(#buffer[#index]))
                } else {
                    let row = host_row(*input);
                    let index = offset(self.target, TokenStream::new(), *segment);
                    quote!(#row[#index])
                }
            }
            Op::Add(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x + #y)
            }
            Op::Sub(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x - #y)
            }
            Op::Mul(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x * #y)
            }
            Op::Div(..) => {
                let (x, y) = (a(0), a(1));
                quote!(#x / #y)
            }
            Op::Neg(_) => {
                let x = a(0);
                quote!(-#x)
            }
            Op::Abs(_) => call(quote!(abs), a(0)),
            Op::Sqrt(_) => call(quote!(sqrt), a(0)),
            Op::Exp(_) => call(quote!(exp), a(0)),
            Op::Ln(_) => call(quote!(ln), a(0)),
            Op::Sin(_) => call(quote!(sin), a(0)),
            Op::Cos(_) => call(quote!(cos), a(0)),
            Op::Sigmoid(_) => {
                let x = a(0);
                if cube {
                    quote!(#helpers::sigmoid_lane::<N>(#x))
                } else {
                    quote!(#helpers::sigmoid(#x))
                }
            }
            Op::Sign(_) => {
                let x = a(0);
                if cube {
                    quote!(#helpers::sign_lane::<N>(#x))
                } else {
                    quote!(#helpers::sign(#x))
                }
            }
            Op::Const(_) | Op::SegLen | Op::Upstream | Op::Sum(_) => {
                unreachable!("uniform nodes are not lanes")
            }
        };
        let v = lane_var(id);
        quote!(let #v = #expr;)
    }

    /// A loop over the segment's elements computing `lanes` and then `tail`.
    fn element_loop(&mut self, lanes: &[Id], tail: TokenStream) {
        let statements: Vec<TokenStream> = lanes.iter().map(|&l| self.lane(l)).collect();
        let bound = match self.target {
            Target::Cube => quote!(sv),
            Target::Host => quote!(seg_len),
        };
        self.code.extend(quote! {
            for e in 0..#bound {
                #(#statements)*
                #tail
            }
        });
    }

    /// Emits every `Sum` that `roots` need, level by level.
    fn sums(&mut self, roots: &[Id]) {
        let reachable = self.graph.reachable(roots);
        let mut levels: BTreeMap<u32, Vec<Id>> = BTreeMap::new();
        for &id in &reachable {
            if let Op::Sum(_) = self.graph.nodes[id].op {
                levels.entry(self.depth[id]).or_default().push(id);
            }
        }
        let p = paths::private();
        for (_, sums) in levels {
            let parts: Vec<Id> = sums
                .iter()
                .flat_map(|&s| self.graph.nodes[s].op.operands())
                .collect();
            let lanes = self.lanes_of(&parts);
            self.prepare_lanes(&lanes);
            let mut adds = TokenStream::new();
            for &s in &sums {
                let acc = format_ident!("acc{s}");
                let terms: Vec<TokenStream> = self.graph.nodes[s]
                    .op
                    .operands()
                    .into_iter()
                    .map(lane_var)
                    .collect();
                let zero = match self.target {
                    Target::Cube => quote!(Vector::<f32, N>::new(0.0f32)),
                    Target::Host => quote!(0.0f64),
                };
                self.code.extend(quote!(let mut #acc = #zero;));
                adds.extend(quote!(#acc += #(#terms)+*;));
            }
            self.element_loop(&lanes, adds);
            for &s in &sums {
                let acc = format_ident!("acc{s}");
                let v = uniform_var(s);
                let total = match self.target {
                    Target::Cube => quote!(#p::dsl::cube::lane_sum::<N>(#acc)),
                    Target::Host => quote!(#acc),
                };
                self.code.extend(quote!(let #v = #total;));
                self.uniform_done.insert(s);
            }
        }
    }
}

/// The code computing the uniform nodes `uniform` and writing the row outputs `rows` (every
/// segment of each listed input is written; one absent from `rows` gets zeros).
pub fn body(
    graph: &Graph,
    target: Target,
    uniform: &[Id],
    rows: &RowOutputs,
    written: &[(Input, u32)],
) -> Body {
    let mut em = Emitter::new(graph, target);
    let mut roots: Vec<Id> = uniform.to_vec();
    roots.extend(rows.values().copied());
    em.sums(&roots);
    for &u in uniform {
        em.uniform(u);
    }
    if !written.is_empty() {
        let lane_roots: Vec<Id> = rows.values().copied().collect();
        let lanes = em.lanes_of(&lane_roots);
        em.prepare_lanes(&lanes);
        let mut writes = TokenStream::new();
        for &(input, segment) in written {
            let value = match rows.get(&(input, segment)) {
                Some(&id) if graph.is_lane(id) => lane_var(id),
                Some(&id) => {
                    em.uniform(id);
                    em.broadcast(id);
                    em.lane_ref(id)
                }
                None => match target {
                    Target::Cube => quote!(Vector::<f32, N>::new(0.0f32)),
                    Target::Host => quote!(0.0f64),
                },
            };
            let (buffer, at) = out_row(input);
            let index = match target {
                Target::Cube => offset(target, at, segment),
                Target::Host => offset(target, TokenStream::new(), segment),
            };
            writes.extend(quote!(#buffer[#index] = #value;));
        }
        em.element_loop(&lanes, writes);
    }
    let uniform = uniform.iter().map(|&u| em.uniform_ref(u)).collect();
    Body {
        code: em.code,
        uniform,
    }
}
