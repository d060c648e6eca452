//! From the parsed scoring function to the expression graph, in two passes: the first checks
//! shapes (scalar, row of a given length, tuple from a split) and finds how finely rows must be
//! cut into segments; the second builds the graph over those segments.

use std::collections::HashMap;

use proc_macro2::TokenStream;
use syn::Ident;

use super::graph::{Graph, Id, Input, Op};
use super::parse::{BinOp, Expr, ExprKind, Func, Pat, ScoreFn};
use crate::ctxt::Ctxt;

/// A row length as a fraction of the entity dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frac {
    /// Numerator.
    pub num: u32,
    /// Denominator.
    pub den: u32,
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Frac {
    /// `num / den`, reduced.
    pub fn new(num: u32, den: u32) -> Self {
        let g = gcd(num, den).max(1);
        Frac {
            num: num / g,
            den: den / g,
        }
    }

    fn split(self, parts: u32) -> Self {
        Frac::new(self.num, self.den * parts)
    }
}

impl std::fmt::Display for Frac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.num, self.den) {
            (1, 1) => write!(f, "dim"),
            (n, 1) => write!(f, "{n}·dim"),
            (1, d) => write!(f, "dim/{d}"),
            (n, d) => write!(f, "{n}·dim/{d}"),
        }
    }
}

/// What pass one knows of a value.
#[derive(Clone, Debug, PartialEq)]
enum Shape {
    Scalar,
    Row(Frac),
    Tuple(Vec<Shape>),
}

/// What pass two knows of a value.
#[derive(Clone, Debug)]
enum Val {
    Scalar(Id),
    Row(Vec<Id>),
    Tuple(Vec<Val>),
}

/// A scoring function lowered to a graph.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The graph.
    pub graph: Graph,
    /// The score node.
    pub score: Id,
    /// Segments per entity row: the entity dim must be a multiple of it.
    pub segments: u32,
    /// Segments per relation row.
    pub relation_segments: u32,
}

/// Lowers `f`, whose relation rows are `relation` times the entity dim.
pub fn lower(f: &ScoreFn, relation: Frac, cx: &mut Ctxt) -> Option<Lowered> {
    let names = &f.params;
    let mut shapes: HashMap<String, Shape> = HashMap::new();
    shapes.insert(names[0].to_string(), Shape::Row(Frac::new(1, 1)));
    shapes.insert(names[1].to_string(), Shape::Row(relation));
    shapes.insert(names[2].to_string(), Shape::Row(Frac::new(1, 1)));
    let mut dens = vec![1, relation.den];
    let mut ok = true;
    for l in &f.lets {
        match shape(&l.expr, &shapes, &mut dens, cx) {
            Some(s) => ok &= bind(&l.pat, s, &mut shapes, cx),
            None => ok = false,
        }
    }
    let result = shape(&f.result, &shapes, &mut dens, cx);
    match &result {
        Some(Shape::Scalar) => {}
        Some(other) => {
            cx.error_spanned(
                &f.result.site,
                format!(
                    "the score must be one number, but this is {}; reduce rows with sum, mean, \
                     dot, norm_l1 or norm_l2",
                    describe(other)
                ),
            );
            return None;
        }
        None => return None,
    }
    if !ok {
        return None;
    }
    let segments = dens.iter().fold(1, |acc, &d| acc / gcd(acc, d) * d);
    let count = |len: Frac| len.num * segments / len.den;
    let relation_segments = count(relation);

    let mut graph = Graph::default();
    let mut env: HashMap<String, Val> = HashMap::new();
    for (name, input, n) in [
        (&names[0], Input::Head, segments),
        (&names[1], Input::Relation, relation_segments),
        (&names[2], Input::Tail, segments),
    ] {
        let segs = (0..n).map(|s| graph.load(input, s)).collect();
        env.insert(name.to_string(), Val::Row(segs));
    }
    for l in &f.lets {
        let v = build(&l.expr, &env, &mut graph);
        bind_val(&l.pat, v, &mut env);
    }
    let Val::Scalar(score) = build(&f.result, &env, &mut graph) else {
        unreachable!("checked by the shape pass")
    };
    Some(Lowered {
        graph,
        score,
        segments,
        relation_segments,
    })
}

fn describe(s: &Shape) -> String {
    match s {
        Shape::Scalar => "a scalar".into(),
        Shape::Row(len) => format!("a row of length {len}"),
        Shape::Tuple(items) => format!("a tuple of {} values", items.len()),
    }
}

fn bind(pat: &Pat, s: Shape, env: &mut HashMap<String, Shape>, cx: &mut Ctxt) -> bool {
    match (pat, s) {
        (Pat::Name(n), s) => {
            env.insert(n.to_string(), s);
            true
        }
        (Pat::Wild, _) => true,
        (Pat::Tuple(pats, _), Shape::Tuple(items)) if pats.len() == items.len() => {
            pats.iter().zip(items).all(|(p, s)| bind(p, s, env, cx))
        }
        (Pat::Tuple(pats, site), s) => {
            cx.error_spanned(
                site,
                format!(
                    "this pattern takes {} values apart, but the value is {}",
                    pats.len(),
                    describe(&s)
                ),
            );
            false
        }
    }
}

fn bind_val(pat: &Pat, v: Val, env: &mut HashMap<String, Val>) {
    match (pat, v) {
        (Pat::Name(n), v) => {
            env.insert(n.to_string(), v);
        }
        (Pat::Tuple(pats, _), Val::Tuple(items)) => {
            for (p, v) in pats.iter().zip(items) {
                bind_val(p, v, env);
            }
        }
        _ => {}
    }
}

fn unknown(name: &Ident, cx: &mut Ctxt, env_names: Vec<String>) {
    let mut names = env_names;
    names.sort();
    cx.error_spanned(
        name,
        format!(
            "unknown name `{name}`; the names bound here are: {}",
            names.join(", ")
        ),
    );
}

fn shape(
    e: &Expr,
    env: &HashMap<String, Shape>,
    dens: &mut Vec<u32>,
    cx: &mut Ctxt,
) -> Option<Shape> {
    let not_tuple = |s: &Shape, site: &TokenStream, cx: &mut Ctxt| {
        if let Shape::Tuple(items) = s {
            cx.error_spanned(
                site,
                format!(
                    "this is a tuple of {} values; take it apart first: `let (a, b, …) = …;`",
                    items.len()
                ),
            );
            false
        } else {
            true
        }
    };
    match &e.kind {
        ExprKind::Var(name) => match env.get(&name.to_string()) {
            Some(s) => Some(s.clone()),
            None => {
                unknown(name, cx, env.keys().cloned().collect());
                None
            }
        },
        ExprKind::Num(_) => Some(Shape::Scalar),
        ExprKind::Tuple(items) => {
            let shapes: Vec<Option<Shape>> =
                items.iter().map(|i| shape(i, env, dens, cx)).collect();
            Some(Shape::Tuple(shapes.into_iter().collect::<Option<_>>()?))
        }
        ExprKind::Neg(a) => {
            let s = shape(a, env, dens, cx)?;
            not_tuple(&s, &a.site, cx).then_some(s)
        }
        ExprKind::Binary(op, a, b) => {
            let (sa, sb) = (shape(a, env, dens, cx), shape(b, env, dens, cx));
            let (sa, sb) = (sa?, sb?);
            if !(not_tuple(&sa, &a.site, cx) & not_tuple(&sb, &b.site, cx)) {
                return None;
            }
            match (&sa, &sb) {
                (Shape::Row(x), Shape::Row(y)) if x != y => {
                    let symbol = match op {
                        BinOp::Add => "+",
                        BinOp::Sub => "-",
                        BinOp::Mul => "*",
                        BinOp::Div => "/",
                    };
                    cx.error_spanned(
                        &e.site,
                        format!(
                            "element-wise `{symbol}` of rows of different lengths: {x} and {y}"
                        ),
                    );
                    None
                }
                (Shape::Row(_), _) => Some(sa),
                _ => Some(sb),
            }
        }
        ExprKind::Call(func, args) => {
            let shapes: Vec<Option<Shape>> = args.iter().map(|a| shape(a, env, dens, cx)).collect();
            let shapes: Vec<Shape> = shapes.into_iter().collect::<Option<_>>()?;
            for (s, a) in shapes.iter().zip(args) {
                if !not_tuple(s, &a.site, cx) {
                    return None;
                }
            }
            let row = |s: &Shape, cx: &mut Ctxt, site: &TokenStream| match s {
                Shape::Row(len) => Some(*len),
                _ => {
                    cx.error_spanned(
                        site,
                        format!("`{}` takes a row; this is a scalar", func.name()),
                    );
                    None
                }
            };
            match func {
                Func::Abs
                | Func::Sqrt
                | Func::Exp
                | Func::Ln
                | Func::Sin
                | Func::Cos
                | Func::Sigmoid => Some(shapes[0].clone()),
                Func::Sum | Func::Mean | Func::NormL1 | Func::NormL2 => {
                    row(&shapes[0], cx, &args[0].site)?;
                    Some(Shape::Scalar)
                }
                Func::Dot => {
                    let x = row(&shapes[0], cx, &args[0].site);
                    let y = row(&shapes[1], cx, &args[1].site);
                    let (x, y) = (x?, y?);
                    if x != y {
                        cx.error_spanned(
                            &e.site,
                            format!("`dot` of rows of different lengths: {x} and {y}"),
                        );
                        return None;
                    }
                    Some(Shape::Scalar)
                }
                Func::Halves | Func::Quarters => {
                    let parts = if *func == Func::Halves { 2 } else { 4 };
                    let len = row(&shapes[0], cx, &args[0].site)?.split(parts);
                    dens.push(len.den);
                    Some(Shape::Tuple(vec![Shape::Row(len); parts as usize]))
                }
            }
        }
    }
}

fn broadcast(g: &mut Graph, a: Val, b: Val, f: impl Fn(&mut Graph, Id, Id) -> Id) -> Val {
    match (a, b) {
        (Val::Scalar(x), Val::Scalar(y)) => Val::Scalar(f(g, x, y)),
        (Val::Row(xs), Val::Scalar(y)) => Val::Row(xs.into_iter().map(|x| f(g, x, y)).collect()),
        (Val::Scalar(x), Val::Row(ys)) => Val::Row(ys.into_iter().map(|y| f(g, x, y)).collect()),
        (Val::Row(xs), Val::Row(ys)) => {
            Val::Row(xs.into_iter().zip(ys).map(|(x, y)| f(g, x, y)).collect())
        }
        _ => unreachable!("checked by the shape pass"),
    }
}

fn map(g: &mut Graph, a: Val, f: impl Fn(&mut Graph, Id) -> Id) -> Val {
    match a {
        Val::Scalar(x) => Val::Scalar(f(g, x)),
        Val::Row(xs) => Val::Row(xs.into_iter().map(|x| f(g, x)).collect()),
        Val::Tuple(_) => unreachable!("checked by the shape pass"),
    }
}

fn segments(v: Val) -> Vec<Id> {
    match v {
        Val::Row(xs) => xs,
        _ => unreachable!("checked by the shape pass"),
    }
}

fn build(e: &Expr, env: &HashMap<String, Val>, g: &mut Graph) -> Val {
    match &e.kind {
        ExprKind::Var(name) => env[&name.to_string()].clone(),
        ExprKind::Num(x) => Val::Scalar(g.num(*x)),
        ExprKind::Tuple(items) => Val::Tuple(items.iter().map(|i| build(i, env, g)).collect()),
        ExprKind::Neg(a) => {
            let a = build(a, env, g);
            map(g, a, Graph::neg)
        }
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (build(a, env, g), build(b, env, g));
            match op {
                BinOp::Add => broadcast(g, a, b, Graph::add),
                BinOp::Sub => broadcast(g, a, b, Graph::sub),
                BinOp::Mul => broadcast(g, a, b, Graph::mul),
                BinOp::Div => broadcast(g, a, b, Graph::div),
            }
        }
        ExprKind::Call(func, args) => {
            let mut vals: Vec<Val> = args.iter().map(|a| build(a, env, g)).collect();
            let a = vals.remove(0);
            let elementwise = |g: &mut Graph, make: fn(Id) -> Op, eval: fn(f64) -> f64, a| {
                map(g, a, |g, x| g.unary(make, eval, x))
            };
            match func {
                Func::Abs => elementwise(g, Op::Abs, f64::abs, a),
                Func::Sqrt => elementwise(g, Op::Sqrt, f64::sqrt, a),
                Func::Exp => elementwise(g, Op::Exp, f64::exp, a),
                Func::Ln => elementwise(g, Op::Ln, f64::ln, a),
                Func::Sin => elementwise(g, Op::Sin, f64::sin, a),
                Func::Cos => elementwise(g, Op::Cos, f64::cos, a),
                Func::Sigmoid => elementwise(g, Op::Sigmoid, |x| 1.0 / (1.0 + (-x).exp()), a),
                Func::Sum => Val::Scalar(g.sum(&segments(a))),
                Func::Mean => {
                    let segs = segments(a);
                    let total = g.sum(&segs);
                    let count = g.num(segs.len() as f64);
                    let len = g.seg_len();
                    let n = g.mul(count, len);
                    Val::Scalar(g.div(total, n))
                }
                Func::Dot => {
                    let b = vals.remove(0);
                    let products = segments(broadcast(g, a, b, Graph::mul));
                    Val::Scalar(g.sum(&products))
                }
                Func::NormL1 => {
                    let abs = segments(elementwise(g, Op::Abs, f64::abs, a));
                    Val::Scalar(g.sum(&abs))
                }
                Func::NormL2 => {
                    let squares: Vec<Id> = segments(a).into_iter().map(|x| g.mul(x, x)).collect();
                    let total = g.sum(&squares);
                    Val::Scalar(g.unary(Op::Sqrt, f64::sqrt, total))
                }
                Func::Halves | Func::Quarters => {
                    let parts = if *func == Func::Halves { 2 } else { 4 };
                    let segs = segments(a);
                    let each = segs.len() / parts;
                    Val::Tuple(segs.chunks(each).map(|c| Val::Row(c.to_vec())).collect())
                }
            }
        }
    }
}
