//! The scoring DSL's syntax: `fn score(h: Row, r: Row, t: Row) -> Scalar { … }` read from a
//! `syn` function into a small tree. Anything outside the language is an error on its token that
//! says what is allowed.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{BinOp as SynBinOp, Ident};

use crate::ctxt::Ctxt;

/// What the DSL allows, for error messages.
pub const ALLOWED: &str = "the scoring DSL allows `let` bindings (of a name, `_` or a tuple), \
    tuples to take apart, numbers, the rows' names, `+ - * /`, unary `-`, parentheses, and the functions abs, sqrt, \
    exp, ln, sin, cos, sigmoid, sum, mean, dot, norm_l1, norm_l2, halves, quarters (as `f(x)` or \
    `x.f()`); see docs/dsl.md";

/// A DSL function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// `|x|`, element-wise.
    Abs,
    /// Square root, element-wise.
    Sqrt,
    /// `e^x`, element-wise.
    Exp,
    /// Natural logarithm, element-wise.
    Ln,
    /// Sine, element-wise.
    Sin,
    /// Cosine, element-wise.
    Cos,
    /// `1 / (1 + e^-x)`, element-wise.
    Sigmoid,
    /// Sum of a row's elements.
    Sum,
    /// Mean of a row's elements.
    Mean,
    /// `sum(a * b)`.
    Dot,
    /// `sum(abs(x))`.
    NormL1,
    /// `sqrt(sum(x * x))`.
    NormL2,
    /// A row split into two equal halves (complex numbers: real, imaginary).
    Halves,
    /// A row split into four equal quarters (quaternions).
    Quarters,
}

impl Func {
    /// Every function with its DSL name.
    pub const ALL: [(Func, &'static str); 14] = [
        (Func::Abs, "abs"),
        (Func::Sqrt, "sqrt"),
        (Func::Exp, "exp"),
        (Func::Ln, "ln"),
        (Func::Sin, "sin"),
        (Func::Cos, "cos"),
        (Func::Sigmoid, "sigmoid"),
        (Func::Sum, "sum"),
        (Func::Mean, "mean"),
        (Func::Dot, "dot"),
        (Func::NormL1, "norm_l1"),
        (Func::NormL2, "norm_l2"),
        (Func::Halves, "halves"),
        (Func::Quarters, "quarters"),
    ];

    fn from_name(name: &str) -> Option<Func> {
        Func::ALL.iter().find(|(_, n)| *n == name).map(|(f, _)| *f)
    }

    /// The DSL name.
    pub fn name(self) -> &'static str {
        Func::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .expect("listed")
            .1
    }

    /// How many arguments it takes.
    pub fn arity(self) -> usize {
        if self == Func::Dot { 2 } else { 1 }
    }
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

/// An expression, with the tokens it was written as (for error spans).
#[derive(Clone, Debug)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it was written.
    pub site: TokenStream,
}

/// The expression forms.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A bound name or one of the three rows.
    Var(Ident),
    /// A number.
    Num(f64),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `-a`.
    Neg(Box<Expr>),
    /// `f(args)` or `args[0].f(args[1..])`.
    Call(Func, Vec<Expr>),
    /// `(a, b, …)`, to be taken apart by a `let`.
    Tuple(Vec<Expr>),
}

/// The left side of a `let`.
#[derive(Clone, Debug)]
pub enum Pat {
    /// A name.
    Name(Ident),
    /// `_`.
    Wild,
    /// `(a, b, …)`.
    Tuple(Vec<Pat>, TokenStream),
}

/// `let pat = expr;`
#[derive(Clone, Debug)]
pub struct Let {
    /// What is bound.
    pub pat: Pat,
    /// To what.
    pub expr: Expr,
}

/// A parsed scoring function.
#[derive(Clone, Debug)]
pub struct ScoreFn {
    /// The head, relation and tail rows' names.
    pub params: [Ident; 3],
    /// The `let` statements, in order.
    pub lets: Vec<Let>,
    /// The final expression: the score.
    pub result: Expr,
}

/// Reads `function` as a scoring function; errors go to `cx`.
pub fn parse_score_fn(function: &syn::ImplItemFn, cx: &mut Ctxt) -> Option<ScoreFn> {
    let sig = &function.sig;
    let shape = "the scoring function is `fn score(h: Row, r: Row, t: Row) -> Scalar`";
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned(&sig.generics, format!("{shape}: no generics"));
    }
    if let Some(t) = sig
        .asyncness
        .map(|t| t.to_token_stream())
        .or(sig.constness.map(|t| t.to_token_stream()))
        .or(sig.unsafety.map(|t| t.to_token_stream()))
    {
        cx.error_spanned(t, format!("{shape}: a plain `fn`"));
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            syn::FnArg::Typed(pt) => {
                let is_row = matches!(&*pt.ty, syn::Type::Path(p)
                    if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Row" && s.arguments.is_none()));
                if !is_row {
                    cx.error_spanned(&pt.ty, format!("{shape}: every argument is a `Row`"));
                }
                match &*pt.pat {
                    syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        params.push(pi.ident.clone())
                    }
                    other => cx.error_spanned(other, format!("{shape}: name each row")),
                }
            }
            syn::FnArg::Receiver(r) => {
                cx.error_spanned(r, format!("{shape}: no `self`; the rows are the arguments"))
            }
        }
    }
    if sig.inputs.len() != 3 {
        cx.error_spanned(
            &sig.inputs,
            format!(
                "{shape}: three rows (head, relation, tail), not {}",
                sig.inputs.len()
            ),
        );
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        let scalar = matches!(&**ty, syn::Type::Path(p)
            if p.path.segments.last().is_some_and(|s| ["Scalar", "f32", "f64"].contains(&s.ident.to_string().as_str())));
        if !scalar {
            cx.error_spanned(ty, format!("{shape}: it returns the score, a `Scalar`"));
        }
    }
    let mut lets = Vec::new();
    let mut result = None;
    let stmts = &function.block.stmts;
    for (i, stmt) in stmts.iter().enumerate() {
        let last = i + 1 == stmts.len();
        match stmt {
            syn::Stmt::Local(local) => {
                if let Some(init) = &local.init {
                    if let Some((_, diverge)) = &init.diverge {
                        cx.error_spanned(diverge, ALLOWED);
                        continue;
                    }
                    let pat = parse_pat(&local.pat, cx);
                    let expr = parse_expr(&init.expr, cx);
                    if let (Some(pat), Some(expr)) = (pat, expr) {
                        lets.push(Let { pat, expr });
                    }
                } else {
                    cx.error_spanned(
                        local,
                        "a `let` in the scoring DSL binds a value: `let x = …;`",
                    );
                }
            }
            syn::Stmt::Expr(e, None) if last => result = parse_expr(e, cx),
            syn::Stmt::Expr(syn::Expr::Return(r), _) if last => match &r.expr {
                Some(e) => result = parse_expr(e, cx),
                None => cx.error_spanned(r, "the scoring function returns the score"),
            },
            other => cx.error_spanned(other, ALLOWED),
        }
    }
    let params: [Ident; 3] = params.try_into().ok()?;
    let Some(result) = result else {
        if stmts.is_empty() || matches!(stmts.last(), Some(syn::Stmt::Local(_))) {
            cx.error_spanned(
                &function.block,
                "the scoring function ends with the score, an expression without `;`",
            );
        }
        return None;
    };
    Some(ScoreFn {
        params,
        lets,
        result,
    })
}

fn parse_pat(pat: &syn::Pat, cx: &mut Ctxt) -> Option<Pat> {
    match pat {
        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            if pi.mutability.is_some() {
                cx.error_spanned(pi, "bindings in the scoring DSL are immutable: drop `mut`");
                return None;
            }
            Some(Pat::Name(pi.ident.clone()))
        }
        syn::Pat::Wild(_) => Some(Pat::Wild),
        syn::Pat::Tuple(t) => {
            let items: Option<Vec<Pat>> = t.elems.iter().map(|p| parse_pat(p, cx)).collect();
            Some(Pat::Tuple(items?, t.to_token_stream()))
        }
        syn::Pat::Type(pt) => {
            cx.error_spanned(
                &pt.ty,
                "the scoring DSL infers every type: drop the annotation",
            );
            None
        }
        other => {
            cx.error_spanned(other, ALLOWED);
            None
        }
    }
}

fn expr(kind: ExprKind, site: &impl ToTokens) -> Expr {
    Expr {
        kind,
        site: site.to_token_stream(),
    }
}

fn parse_expr(e: &syn::Expr, cx: &mut Ctxt) -> Option<Expr> {
    match e {
        syn::Expr::Paren(p) => parse_expr(&p.expr, cx).map(|inner| Expr {
            site: p.to_token_stream(),
            ..inner
        }),
        syn::Expr::Group(g) => parse_expr(&g.expr, cx),
        syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            Some(expr(ExprKind::Var(p.path.get_ident()?.clone()), p))
        }
        syn::Expr::Lit(lit) => match &lit.lit {
            syn::Lit::Float(f) => f
                .base10_parse::<f64>()
                .map_err(|e| cx.push(e))
                .ok()
                .map(|v| expr(ExprKind::Num(v), lit)),
            syn::Lit::Int(i) => i
                .base10_parse::<f64>()
                .map_err(|e| cx.push(e))
                .ok()
                .map(|v| expr(ExprKind::Num(v), lit)),
            _ => {
                cx.error_spanned(lit, format!("only numbers are literals here; {ALLOWED}"));
                None
            }
        },
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
            parse_expr(&u.expr, cx).map(|a| expr(ExprKind::Neg(Box::new(a)), u))
        }
        syn::Expr::Binary(b) => {
            let op = match b.op {
                SynBinOp::Add(_) => BinOp::Add,
                SynBinOp::Sub(_) => BinOp::Sub,
                SynBinOp::Mul(_) => BinOp::Mul,
                SynBinOp::Div(_) => BinOp::Div,
                other => {
                    cx.error_spanned(
                        other,
                        format!(
                            "`{}` is not in the scoring DSL; {ALLOWED}",
                            other.to_token_stream()
                        ),
                    );
                    return None;
                }
            };
            let lhs = parse_expr(&b.left, cx);
            let rhs = parse_expr(&b.right, cx);
            Some(expr(
                ExprKind::Binary(op, Box::new(lhs?), Box::new(rhs?)),
                b,
            ))
        }
        syn::Expr::Call(c) => {
            let name = match &*c.func {
                syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().cloned(),
                _ => None,
            };
            let Some(name) = name else {
                cx.error_spanned(&c.func, format!("unknown function; {ALLOWED}"));
                return None;
            };
            let args: Vec<Option<Expr>> = c.args.iter().map(|a| parse_expr(a, cx)).collect();
            call(&name, args, c, cx)
        }
        syn::Expr::Tuple(t) if t.elems.len() >= 2 => {
            let items: Vec<Option<Expr>> = t.elems.iter().map(|e| parse_expr(e, cx)).collect();
            let items: Option<Vec<Expr>> = items.into_iter().collect();
            Some(expr(ExprKind::Tuple(items?), t))
        }
        syn::Expr::MethodCall(m) => {
            if let Some(turbofish) = &m.turbofish {
                cx.error_spanned(turbofish, ALLOWED);
                return None;
            }
            let mut args = vec![parse_expr(&m.receiver, cx)];
            args.extend(m.args.iter().map(|a| parse_expr(a, cx)));
            call(&m.method, args, m, cx)
        }
        other => {
            let what = describe(other);
            cx.error_spanned(
                other,
                format!("{what} is not in the scoring DSL; {ALLOWED}"),
            );
            None
        }
    }
}

fn call(
    name: &Ident,
    args: Vec<Option<Expr>>,
    site: &impl ToTokens,
    cx: &mut Ctxt,
) -> Option<Expr> {
    let Some(func) = Func::from_name(&name.to_string()) else {
        cx.error_spanned(name, format!("unknown function `{name}`; {ALLOWED}"));
        return None;
    };
    if args.len() != func.arity() {
        cx.error_spanned(
            site,
            format!(
                "`{}` takes {} argument{}, not {}",
                func.name(),
                func.arity(),
                if func.arity() == 1 { "" } else { "s" },
                args.len()
            ),
        );
        return None;
    }
    let args: Option<Vec<Expr>> = args.into_iter().collect();
    Some(expr(ExprKind::Call(func, args?), site))
}

/// A short name for an unsupported expression, for the error.
fn describe(e: &syn::Expr) -> String {
    let what = match e {
        syn::Expr::If(_) => "`if`",
        syn::Expr::Match(_) => "`match`",
        syn::Expr::ForLoop(_) | syn::Expr::While(_) | syn::Expr::Loop(_) => "a loop",
        syn::Expr::Index(_) => "indexing",
        syn::Expr::Field(_) => "a field access",
        syn::Expr::Closure(_) => "a closure",
        syn::Expr::Macro(_) => "a macro call",
        syn::Expr::Assign(_) => "an assignment",
        syn::Expr::Block(_) | syn::Expr::Unsafe(_) => "a block",
        syn::Expr::Reference(_) => "a reference",
        syn::Expr::Cast(_) => "a cast",
        syn::Expr::Tuple(_) => "an empty or one-element tuple",
        syn::Expr::Array(_) => "an array",
        syn::Expr::Range(_) => "a range",
        syn::Expr::Path(_) => "a path",
        syn::Expr::Unary(_) => "this unary operator",
        _ => "this expression",
    };
    what.to_string()
}
