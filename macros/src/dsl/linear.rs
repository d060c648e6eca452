//! Whether a score is linear in the tail row — `score(h, r, t) = ⟨q(h, r), t⟩` — which is what
//! scoring a query against every entity (KvsAll, evaluation by a dense product) needs, or at
//! most quadratic in it (a squared distance such as `γ − ‖h + r − t‖²`), which the runtime turns
//! into a dense product of augmented rows when the quadratic part is `κ‖t‖²`. Decided on the
//! syntax so that a refusal can point at the expression that breaks it.

use std::collections::HashMap;

use proc_macro2::TokenStream;

use super::parse::{BinOp, Expr, ExprKind, Func, Pat, ScoreFn};

/// How an expression depends on the tail row.
#[derive(Clone, Debug)]
enum Class {
    /// Not at all.
    Free,
    /// Linearly and homogeneously (no offset).
    Linear,
    /// Linearly plus an offset free of it (where the offset is added).
    Affine(TokenStream),
    /// A polynomial of degree 2 in it (where, and why that is not linear).
    Quadratic(TokenStream, String),
    /// Otherwise: where, and why.
    Nonlinear(TokenStream, String),
    /// A tuple from a split.
    Tuple(Vec<Class>),
}

/// `Ok` when the score is linear in the tail row; else the offending expression and why.
pub fn tail_linearity(f: &ScoreFn) -> Result<(), (TokenStream, String)> {
    let env = environment(f);
    match classify(&f.result, &env) {
        Class::Linear => Ok(()),
        Class::Nonlinear(site, why) => Err((site, why)),
        Class::Affine(site) => Err((
            site,
            "it adds a term that does not depend on the tail row to one that does, so the score \
             has an offset"
                .into(),
        )),
        Class::Free => Err((
            f.result.site.clone(),
            format!(
                "the score does not depend on the tail row `{}`",
                f.params[2]
            ),
        )),
        Class::Quadratic(site, why) => Err((site, why)),
        Class::Tuple(_) => unreachable!("the score is a scalar"),
    }
}

/// Whether the score is a polynomial of degree at most 2 in the tail row without being linear
/// in it: `c(h, r) + ⟨a(h, r), t⟩ + (terms of degree 2 in t)`. Whether the degree-2 part is
/// `κ‖t‖²`, as the augmented dense product needs, is checked numerically by the runtime.
pub fn tail_quadratic(f: &ScoreFn) -> bool {
    let env = environment(f);
    matches!(
        classify(&f.result, &env),
        Class::Affine(_) | Class::Quadratic(..)
    )
}

/// The classes of the parameters and of every `let`.
fn environment(f: &ScoreFn) -> HashMap<String, Class> {
    let mut env: HashMap<String, Class> = HashMap::new();
    env.insert(f.params[0].to_string(), Class::Free);
    env.insert(f.params[1].to_string(), Class::Free);
    env.insert(f.params[2].to_string(), Class::Linear);
    for l in &f.lets {
        let c = classify(&l.expr, &env);
        bind(&l.pat, c, &mut env);
    }
    env
}

/// The degree in the tail row of a class that is a polynomial in it.
fn degree(c: &Class) -> usize {
    match c {
        Class::Free => 0,
        Class::Linear | Class::Affine(_) => 1,
        Class::Quadratic(..) => 2,
        Class::Nonlinear(..) => usize::MAX,
        Class::Tuple(items) => items.iter().map(degree).max().unwrap_or(0),
    }
}

/// The class of a product of `a` and `b` (neither `Nonlinear`) at `site`.
fn product(a: &Class, b: &Class, site: &TokenStream, what: &str) -> Class {
    match (a, b) {
        (Class::Free, Class::Free) => Class::Free,
        (x, Class::Free) | (Class::Free, x) => x.clone(),
        (x, y) if degree(x) + degree(y) <= 2 => Class::Quadratic(site.clone(), what.to_string()),
        _ => Class::Nonlinear(
            site.clone(),
            format!("{what}, and the product is of degree above 2"),
        ),
    }
}

fn bind(pat: &Pat, c: Class, env: &mut HashMap<String, Class>) {
    match (pat, c) {
        (Pat::Name(n), c) => {
            env.insert(n.to_string(), c);
        }
        (Pat::Tuple(pats, _), Class::Tuple(items)) => {
            for (p, c) in pats.iter().zip(items) {
                bind(p, c, env);
            }
        }
        _ => {}
    }
}

fn classify(e: &Expr, env: &HashMap<String, Class>) -> Class {
    let nonlinear = |why: &str| Class::Nonlinear(e.site.clone(), why.to_string());
    match &e.kind {
        ExprKind::Var(name) => env.get(&name.to_string()).cloned().unwrap_or(Class::Free),
        ExprKind::Num(_) => Class::Free,
        ExprKind::Tuple(items) => Class::Tuple(items.iter().map(|i| classify(i, env)).collect()),
        ExprKind::Neg(a) => classify(a, env),
        ExprKind::Binary(op, a, b) => {
            let (ca, cb) = (classify(a, env), classify(b, env));
            if let Class::Nonlinear(..) = ca {
                return ca;
            }
            if let Class::Nonlinear(..) = cb {
                return cb;
            }
            match (op, &ca, &cb) {
                (_, Class::Free, Class::Free) => Class::Free,
                (BinOp::Add | BinOp::Sub, Class::Linear, Class::Linear) => Class::Linear,
                (BinOp::Add | BinOp::Sub, q @ Class::Quadratic(..), _)
                | (BinOp::Add | BinOp::Sub, _, q @ Class::Quadratic(..)) => q.clone(),
                (BinOp::Add | BinOp::Sub, _, _) => Class::Affine(e.site.clone()),
                (BinOp::Mul, x, y) => product(
                    x,
                    y,
                    &e.site,
                    "it multiplies two expressions that both depend on the tail row",
                ),
                (BinOp::Div, x, Class::Free) => x.clone(),
                _ => nonlinear("it divides by an expression of the tail row"),
            }
        }
        ExprKind::Call(func, args) => {
            let classes: Vec<Class> = args.iter().map(|a| classify(a, env)).collect();
            if let Some(c) = classes.iter().find(|c| matches!(c, Class::Nonlinear(..))) {
                return c.clone();
            }
            let depends = |c: &Class| !matches!(c, Class::Free);
            match func {
                Func::Sum | Func::Mean => classes[0].clone(),
                Func::Halves | Func::Quarters => {
                    let parts = if *func == Func::Halves { 2 } else { 4 };
                    Class::Tuple(vec![classes[0].clone(); parts])
                }
                Func::Dot => product(
                    &classes[0],
                    &classes[1],
                    &e.site,
                    "it takes the dot product of two expressions of the tail row",
                ),
                other if depends(&classes[0]) => Class::Nonlinear(
                    e.site.clone(),
                    format!(
                        "`{}` is not linear, and here it applies to the tail row",
                        other.name()
                    ),
                ),
                _ => Class::Free,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctxt::Ctxt;
    use crate::dsl::parse::parse_score_fn;

    fn linearity(body: TokenStream) -> Result<(), String> {
        let f: syn::ImplItemFn =
            syn::parse2(quote::quote!(fn score(h: Row, r: Row, t: Row) -> Scalar { #body }))
                .unwrap();
        let parsed = parse_score_fn(&f, &mut Ctxt::default()).unwrap();
        tail_linearity(&parsed).map_err(|(site, why)| format!("{site}: {why}"))
    }

    #[test]
    fn linear_scores_and_what_breaks_linearity() {
        assert!(linearity(quote::quote!(sum(h * r * t))).is_ok());
        assert!(linearity(quote::quote!(dot(h * r, t) / 2.0 - mean(3.0 * t * r))).is_ok());
        assert!(linearity(quote::quote! { let (a, b) = halves(t); sum(a * h) + -sum(b) }).is_ok());
        let e = linearity(quote::quote!(6.0 - norm_l1(h + r - t))).unwrap_err();
        assert!(e.contains("`norm_l1` is not linear"), "{e}");
        let e = linearity(quote::quote!(sum(h * t) + 1.0)).unwrap_err();
        assert!(e.contains("offset"), "{e}");
        let e = linearity(quote::quote!(sum(t * t))).unwrap_err();
        assert!(e.contains("multiplies two expressions"), "{e}");
        let e = linearity(quote::quote!(sum(h / t))).unwrap_err();
        assert!(e.contains("divides"), "{e}");
        let e = linearity(quote::quote!(sum(h * r))).unwrap_err();
        assert!(e.contains("does not depend on the tail"), "{e}");
        let e = linearity(quote::quote!(sum(sigmoid(t)))).unwrap_err();
        assert!(e.starts_with("sigmoid (t)"), "{e}");
        let e = linearity(quote::quote!(sum(h * t * t * t))).unwrap_err();
        assert!(e.contains("degree above 2"), "{e}");
    }

    fn quadratic(body: TokenStream) -> bool {
        let f: syn::ImplItemFn =
            syn::parse2(quote::quote!(fn score(h: Row, r: Row, t: Row) -> Scalar { #body }))
                .unwrap();
        tail_quadratic(&parse_score_fn(&f, &mut Ctxt::default()).unwrap())
    }

    #[test]
    fn squared_distances_and_offsets_are_quadratic_and_norms_are_not() {
        assert!(quadratic(
            quote::quote! { let d = h + r - t; 6.0 - sum(d * d) }
        ));
        assert!(quadratic(quote::quote! {
            let (a, b) = halves(t);
            let (x, y) = halves(h);
            let re = x * cos(r) - y * sin(r) - a;
            let im = x * sin(r) + y * cos(r) - b;
            -sum(re * re + im * im)
        }));
        assert!(quadratic(quote::quote!(sum(h * t) + 1.0)));
        assert!(quadratic(quote::quote!(dot(h - t, r - t))));
        assert!(!quadratic(quote::quote!(sum(h * r * t))), "linear");
        assert!(!quadratic(quote::quote!(6.0 - norm_l2(h + r - t))));
        assert!(!quadratic(quote::quote!(sum(t * t * t))));
        assert!(!quadratic(quote::quote!(sum(h * r))));
    }
}
