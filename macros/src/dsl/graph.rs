//! The expression graph a scoring function lowers to, and that its gradient is derived on.
//!
//! Rows are cut into equal *segments* (`dim / segments` elements each; more than one when the
//! function splits rows into halves or quarters), so every row-valued node is per segment and
//! every element-wise operation is between two values of the same length. A node is either a
//! *lane* value (one per element of a segment, evaluated inside a loop over the segment) or a
//! *uniform* value (one per triple). Nodes are hash-consed and lightly simplified as they are
//! built, so shared subexpressions — common in derived gradients — exist once.

use std::collections::HashMap;

/// A node's index; operands always have smaller indices than their users.
pub type Id = usize;

/// Which row a load reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Input {
    /// The head entity row.
    Head,
    /// The relation row.
    Relation,
    /// The tail entity row.
    Tail,
}

impl Input {
    /// All three, in argument order.
    pub const ALL: [Input; 3] = [Input::Head, Input::Relation, Input::Tail];
}

/// An operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A constant (its `f64` bits).
    Const(u64),
    /// Element `e` of segment `segment` of a row (lane).
    Load(Input, u32),
    /// The segment length `dim / segments`, as a number (uniform).
    SegLen,
    /// The gradient flowing into the score (uniform; backward kernels only).
    Upstream,
    /// `a + b`.
    Add(Id, Id),
    /// `a - b`.
    Sub(Id, Id),
    /// `a * b`.
    Mul(Id, Id),
    /// `a / b`.
    Div(Id, Id),
    /// `-a`.
    Neg(Id),
    /// `|a|`.
    Abs(Id),
    /// `sqrt(a)`.
    Sqrt(Id),
    /// `e^a`.
    Exp(Id),
    /// `ln(a)`.
    Ln(Id),
    /// `sin(a)`.
    Sin(Id),
    /// `cos(a)`.
    Cos(Id),
    /// `1 / (1 + e^-a)`.
    Sigmoid(Id),
    /// -1, 0 or 1 (the derivative of `abs`).
    Sign(Id),
    /// The sum, over every element, of the listed lane nodes (uniform).
    Sum(Vec<Id>),
}

impl Op {
    /// The operands.
    pub fn operands(&self) -> Vec<Id> {
        match self {
            Op::Const(_) | Op::Load(..) | Op::SegLen | Op::Upstream => vec![],
            Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) | Op::Div(a, b) => vec![*a, *b],
            Op::Neg(a)
            | Op::Abs(a)
            | Op::Sqrt(a)
            | Op::Exp(a)
            | Op::Ln(a)
            | Op::Sin(a)
            | Op::Cos(a)
            | Op::Sigmoid(a)
            | Op::Sign(a) => vec![*a],
            Op::Sum(list) => list.clone(),
        }
    }
}

/// A node: an operation and whether it varies along a segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The operation.
    pub op: Op,
    /// A lane value (per element) rather than a uniform one (per triple).
    pub lane: bool,
}

/// The graph of one scoring function (and, once derived, its gradients).
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    dedup: HashMap<Op, Id>,
}

impl Graph {
    fn intern(&mut self, op: Op) -> Id {
        if let Some(&id) = self.dedup.get(&op) {
            return id;
        }
        let lane = match &op {
            Op::Load(..) => true,
            Op::Sum(_) => false,
            other => other.operands().iter().any(|&o| self.nodes[o].lane),
        };
        let id = self.nodes.len();
        self.nodes.push(Node {
            op: op.clone(),
            lane,
        });
        self.dedup.insert(op, id);
        id
    }

    /// The constant's value, if `id` is one.
    pub fn constant(&self, id: Id) -> Option<f64> {
        match self.nodes[id].op {
            Op::Const(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    /// Whether `id` is a lane value.
    pub fn is_lane(&self, id: Id) -> bool {
        self.nodes[id].lane
    }

    /// A constant.
    pub fn num(&mut self, value: f64) -> Id {
        // One zero: -0.0 and 0.0 print alike and behave alike in every use here.
        let value = if value == 0.0 { 0.0 } else { value };
        self.intern(Op::Const(value.to_bits()))
    }

    /// Element `e` of a row's segment.
    pub fn load(&mut self, input: Input, segment: u32) -> Id {
        self.intern(Op::Load(input, segment))
    }

    /// The segment length.
    pub fn seg_len(&mut self) -> Id {
        self.intern(Op::SegLen)
    }

    /// The gradient flowing into the score.
    pub fn upstream(&mut self) -> Id {
        self.intern(Op::Upstream)
    }

    /// `a + b`.
    pub fn add(&mut self, a: Id, b: Id) -> Id {
        match (self.constant(a), self.constant(b)) {
            (Some(x), Some(y)) => self.num(x + y),
            (Some(0.0), _) => b,
            (_, Some(0.0)) => a,
            _ => self.intern(Op::Add(a.min(b), a.max(b))),
        }
    }

    /// `a - b`.
    pub fn sub(&mut self, a: Id, b: Id) -> Id {
        match (self.constant(a), self.constant(b)) {
            (Some(x), Some(y)) => self.num(x - y),
            (_, Some(0.0)) => a,
            (Some(0.0), _) => self.neg(b),
            _ if a == b => self.num(0.0),
            _ => self.intern(Op::Sub(a, b)),
        }
    }

    /// `a * b`.
    pub fn mul(&mut self, a: Id, b: Id) -> Id {
        match (self.constant(a), self.constant(b)) {
            (Some(x), Some(y)) => self.num(x * y),
            (Some(0.0), _) | (_, Some(0.0)) => self.num(0.0),
            (Some(1.0), _) => b,
            (_, Some(1.0)) => a,
            (Some(-1.0), _) => self.neg(b),
            (_, Some(-1.0)) => self.neg(a),
            _ => self.intern(Op::Mul(a.min(b), a.max(b))),
        }
    }

    /// `a / b`.
    pub fn div(&mut self, a: Id, b: Id) -> Id {
        match (self.constant(a), self.constant(b)) {
            (Some(x), Some(y)) => self.num(x / y),
            (Some(0.0), _) => self.num(0.0),
            (_, Some(1.0)) => a,
            _ => self.intern(Op::Div(a, b)),
        }
    }

    /// `-a`.
    pub fn neg(&mut self, a: Id) -> Id {
        if let Some(x) = self.constant(a) {
            return self.num(-x);
        }
        if let Op::Neg(inner) = self.nodes[a].op {
            return inner;
        }
        self.intern(Op::Neg(a))
    }

    /// An element-wise function of `a`.
    pub fn unary(&mut self, make: fn(Id) -> Op, eval: fn(f64) -> f64, a: Id) -> Id {
        match self.constant(a) {
            Some(x) => self.num(eval(x)),
            None => self.intern(make(a)),
        }
    }

    /// The sum over every element of the lane nodes `parts` (uniform). A uniform part counts
    /// once per element of its segment.
    pub fn sum(&mut self, parts: &[Id]) -> Id {
        let mut lanes = Vec::new();
        let mut total = self.num(0.0);
        for &p in parts {
            if self.is_lane(p) {
                lanes.push(p);
            } else {
                let n = self.seg_len();
                let scaled = self.mul(p, n);
                total = self.add(total, scaled);
            }
        }
        if lanes.is_empty() {
            return total;
        }
        let s = self.intern(Op::Sum(lanes));
        self.add(s, total)
    }

    /// Every node `roots` depend on (themselves included), ascending.
    pub fn reachable(&self, roots: &[Id]) -> Vec<Id> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack: Vec<Id> = roots.to_vec();
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut seen[id], true) {
                continue;
            }
            stack.extend(self.nodes[id].op.operands());
        }
        (0..self.nodes.len()).filter(|&i| seen[i]).collect()
    }

    /// Whether any of `roots` reads `input`.
    pub fn reads(&self, roots: &[Id], input: Input) -> bool {
        self.reachable(roots)
            .into_iter()
            .any(|i| matches!(self.nodes[i].op, Op::Load(x, _) if x == input))
    }
}

/// Evaluates the graph in `f64` on one triple's rows (`rows[i]` is `Input::ALL[i]`'s row), with
/// `seg_len` elements per segment: the reference the tests check derivation against.
#[cfg(test)]
pub fn evaluate(
    graph: &Graph,
    roots: &[Id],
    rows: [&[f64]; 3],
    seg_len: usize,
    upstream: f64,
) -> Vec<Vec<f64>> {
    // Every node's value at every element (uniform nodes repeat theirs).
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); graph.nodes.len()];
    for id in graph.reachable(roots) {
        let v = |i: Id, e: usize, values: &Vec<Vec<f64>>| {
            let vals = &values[i];
            if vals.len() == 1 { vals[0] } else { vals[e] }
        };
        let node = &graph.nodes[id];
        let width = if node.lane { seg_len } else { 1 };
        let mut out = Vec::with_capacity(width);
        for e in 0..width {
            let x = match &node.op {
                Op::Const(bits) => f64::from_bits(*bits),
                Op::Load(input, s) => {
                    let row = rows[Input::ALL.iter().position(|i| i == input).unwrap()];
                    row[*s as usize * seg_len + e]
                }
                Op::SegLen => seg_len as f64,
                Op::Upstream => upstream,
                Op::Add(a, b) => v(*a, e, &values) + v(*b, e, &values),
                Op::Sub(a, b) => v(*a, e, &values) - v(*b, e, &values),
                Op::Mul(a, b) => v(*a, e, &values) * v(*b, e, &values),
                Op::Div(a, b) => v(*a, e, &values) / v(*b, e, &values),
                Op::Neg(a) => -v(*a, e, &values),
                Op::Abs(a) => v(*a, e, &values).abs(),
                Op::Sqrt(a) => v(*a, e, &values).sqrt(),
                Op::Exp(a) => v(*a, e, &values).exp(),
                Op::Ln(a) => v(*a, e, &values).ln(),
                Op::Sin(a) => v(*a, e, &values).sin(),
                Op::Cos(a) => v(*a, e, &values).cos(),
                Op::Sigmoid(a) => 1.0 / (1.0 + (-v(*a, e, &values)).exp()),
                Op::Sign(a) => {
                    let x = v(*a, e, &values);
                    if x > 0.0 {
                        1.0
                    } else if x < 0.0 {
                        -1.0
                    } else {
                        0.0
                    }
                }
                Op::Sum(list) => list
                    .iter()
                    .map(|&l| (0..seg_len).map(|k| v(l, k, &values)).sum::<f64>())
                    .sum(),
            };
            out.push(x);
        }
        values[id] = out;
    }
    roots.iter().map(|&r| values[r].clone()).collect()
}
