//! The backward pass, derived symbolically: reverse-mode differentiation over the graph, adding
//! the gradient expressions to the same graph (so they share subexpressions with the forward
//! pass and each other).

use std::collections::BTreeMap;

use super::graph::{Graph, Id, Input, Op};

/// `∂output/∂(row segment)` times `seed`, for every segment of every row the output depends on;
/// segments it does not depend on are absent. Each value is a node of `graph` (lane, or uniform
/// when the derivative is the same for every element).
pub fn gradient(graph: &mut Graph, output: Id, seed: Id) -> BTreeMap<(Input, u32), Id> {
    let n = output + 1;
    let mut adjoint: Vec<Option<Id>> = vec![None; n];
    adjoint[output] = Some(seed);
    let mut result: BTreeMap<(Input, u32), Id> = BTreeMap::new();
    for id in (0..n).rev() {
        let Some(g) = adjoint[id] else { continue };
        let node = graph.nodes[id].clone();
        // Adds `contribution` to operand `x`'s adjoint; a uniform operand of a lane node gets
        // the contribution summed over the segment.
        let mut give = |graph: &mut Graph, x: Id, contribution: Id| {
            let c = if node.lane && !graph.is_lane(x) {
                graph.sum(&[contribution])
            } else {
                contribution
            };
            adjoint[x] = Some(match adjoint[x] {
                Some(old) => graph.add(old, c),
                None => c,
            });
        };
        match node.op {
            Op::Const(_) | Op::SegLen | Op::Upstream | Op::Sign(_) => {}
            Op::Load(input, segment) => {
                let entry = result.entry((input, segment));
                match entry {
                    std::collections::btree_map::Entry::Occupied(mut o) => {
                        let sum = graph.add(*o.get(), g);
                        o.insert(sum);
                    }
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(g);
                    }
                }
            }
            Op::Add(a, b) => {
                give(graph, a, g);
                give(graph, b, g);
            }
            Op::Sub(a, b) => {
                give(graph, a, g);
                let minus = graph.neg(g);
                give(graph, b, minus);
            }
            Op::Mul(a, b) => {
                let ga = graph.mul(g, b);
                give(graph, a, ga);
                let gb = graph.mul(g, a);
                give(graph, b, gb);
            }
            Op::Div(a, b) => {
                // d(a/b) = da/b - (a/b)·db/b
                let ga = graph.div(g, b);
                give(graph, a, ga);
                let q = graph.mul(g, id);
                let qb = graph.div(q, b);
                let gb = graph.neg(qb);
                give(graph, b, gb);
            }
            Op::Neg(a) => {
                let ga = graph.neg(g);
                give(graph, a, ga);
            }
            Op::Abs(a) => {
                let sign = graph.unary(Op::Sign, f64::signum, a);
                let ga = graph.mul(g, sign);
                give(graph, a, ga);
            }
            Op::Sqrt(a) => {
                // d sqrt(a) = da / (2 sqrt(a)), the denominator kept off 0: at a = 0 (a norm of
                // a zero vector, |z| of z = 0) the gradient is then finite, and what feeds a is
                // 0 there too (a = x², d/dx = 2x = 0), so the chain gives 0 — the subgradient
                // PyTorch's norm takes — instead of 0 · ∞ = NaN.
                let half = graph.num(0.5);
                let h = graph.mul(g, half);
                let tiny = graph.num(1e-30);
                let off_zero = graph.add(id, tiny);
                let ga = graph.div(h, off_zero);
                give(graph, a, ga);
            }
            Op::Exp(a) => {
                let ga = graph.mul(g, id);
                give(graph, a, ga);
            }
            Op::Ln(a) => {
                let ga = graph.div(g, a);
                give(graph, a, ga);
            }
            Op::Sin(a) => {
                let cos = graph.unary(Op::Cos, f64::cos, a);
                let ga = graph.mul(g, cos);
                give(graph, a, ga);
            }
            Op::Cos(a) => {
                let sin = graph.unary(Op::Sin, f64::sin, a);
                let gs = graph.mul(g, sin);
                let ga = graph.neg(gs);
                give(graph, a, ga);
            }
            Op::Sigmoid(a) => {
                // σ' = σ (1 - σ)
                let one = graph.num(1.0);
                let rest = graph.sub(one, id);
                let d = graph.mul(id, rest);
                let ga = graph.mul(g, d);
                give(graph, a, ga);
            }
            Op::Sum(lanes) => {
                for lane in lanes {
                    // The uniform `g` broadcast to every element.
                    adjoint[lane] = Some(match adjoint[lane] {
                        Some(old) => graph.add(old, g),
                        None => g,
                    });
                }
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::super::graph::evaluate;
    use super::super::lower::{Frac, lower};
    use super::super::parse::parse_score_fn;
    use super::*;
    use crate::ctxt::Ctxt;

    /// Deterministic pseudo-random rows in [-1, 1] (away from 0, where abs and sqrt kink).
    fn rows(seed: u64, len: usize) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                let v = 0.2 + 0.8 * u;
                if x & 1 == 0 { v } else { -v }
            })
            .collect()
    }

    /// Checks the derived gradient of `body` against central finite differences of the
    /// graph's own forward value, at every element of every row.
    fn check(body: proc_macro2::TokenStream, relation: Frac) {
        let f: syn::ImplItemFn = syn::parse2(quote::quote! {
            fn score(h: Row, r: Row, t: Row) -> Scalar { #body }
        })
        .unwrap();
        let mut cx = Ctxt::default();
        let parsed = parse_score_fn(&f, &mut cx).unwrap();
        let mut lowered = lower(&parsed, relation, &mut cx).unwrap();
        cx.check().unwrap();
        let dim = 8 * lowered.segments as usize;
        let seg_len = dim / lowered.segments as usize;
        let rel_dim = seg_len * lowered.relation_segments as usize;
        let seed = lowered.graph.upstream();
        let grads = gradient(&mut lowered.graph, lowered.score, seed);
        let inputs = [rows(1, dim), rows(2, rel_dim), rows(3, dim)];
        let forward = |x: &[Vec<f64>; 3]| {
            evaluate(
                &lowered.graph,
                &[lowered.score],
                [&x[0], &x[1], &x[2]],
                seg_len,
                1.0,
            )[0][0]
        };
        for (k, input) in Input::ALL.into_iter().enumerate() {
            let segs = inputs[k].len() / seg_len;
            for s in 0..segs as u32 {
                let derived = grads.get(&(input, s)).map(|&id| {
                    evaluate(
                        &lowered.graph,
                        &[id],
                        [&inputs[0], &inputs[1], &inputs[2]],
                        seg_len,
                        1.0,
                    )[0]
                    .clone()
                });
                for e in 0..seg_len {
                    let at = s as usize * seg_len + e;
                    let step = 1e-6;
                    let mut plus = inputs.clone();
                    plus[k][at] += step;
                    let mut minus = inputs.clone();
                    minus[k][at] -= step;
                    let numeric = (forward(&plus) - forward(&minus)) / (2.0 * step);
                    let symbolic = derived
                        .as_ref()
                        .map_or(0.0, |d| if d.len() == 1 { d[0] } else { d[e] });
                    assert!(
                        (numeric - symbolic).abs() <= 1e-6 * (1.0 + numeric.abs()),
                        "{input:?}[{at}]: finite differences {numeric}, derived {symbolic}"
                    );
                }
            }
        }
    }

    #[test]
    fn derived_gradients_match_finite_differences() {
        let full = Frac::new(1, 1);
        check(quote::quote!(sum(h * r * t)), full);
        check(quote::quote!(-norm_l1(h + r - t)), full);
        check(quote::quote!(6.0 - norm_l2(h + r - t)), full);
        check(
            quote::quote! {
                let (h_re, h_im) = halves(h);
                let (r_re, r_im) = halves(r);
                let (t_re, t_im) = halves(t);
                sum(h_re * r_re * t_re + h_im * r_re * t_im + h_re * r_im * t_im - h_im * r_im * t_re)
            },
            full,
        );
        check(
            quote::quote! {
                let (h_re, h_im) = halves(h);
                let (t_re, t_im) = halves(t);
                let re = h_re * cos(r) - h_im * sin(r) - t_re;
                let im = h_re * sin(r) + h_im * cos(r) - t_im;
                9.0 - sum(sqrt(re * re + im * im))
            },
            Frac::new(1, 2),
        );
        check(
            quote::quote! {
                let n = norm_l2(r);
                let u = r / n;
                mean(exp(h) * u) + dot(sigmoid(h), ln(abs(t))) / (1.0 + sum(t * t))
            },
            full,
        );
        check(
            quote::quote! {
                let (a, b, c, d) = quarters(h);
                let (_, x, _, y) = quarters(t);
                let q = quarters(r);
                let (p, _, _, s) = q;
                sum(a * p * x - b * s * y) + mean(c * d) * sum(x)
            },
            full,
        );
    }

    /// At a zero distance the norm's gradient is 0, not NaN (0 · ∞): a corruption can equal
    /// the true triple's translation, and one NaN refuses a whole training step.
    #[test]
    fn the_gradient_of_a_norm_at_zero_is_finite() {
        let f: syn::ImplItemFn = syn::parse2(quote::quote! {
            fn score(h: Row, r: Row, t: Row) -> Scalar { 6.0 - norm_l2(h + r - t) }
        })
        .unwrap();
        let mut cx = Ctxt::default();
        let parsed = parse_score_fn(&f, &mut cx).unwrap();
        let mut lowered = lower(&parsed, Frac::new(1, 1), &mut cx).unwrap();
        let seed = lowered.graph.upstream();
        let grads = gradient(&mut lowered.graph, lowered.score, seed);
        let (h, r) = (rows(1, 8), vec![0.0; 8]);
        for (_, &id) in grads.iter() {
            let g = evaluate(&lowered.graph, &[id], [&h, &r, &h], 8, 1.0)[0].clone();
            assert!(g.iter().all(|x| *x == 0.0), "{g:?}");
        }
    }
}
