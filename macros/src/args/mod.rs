//! `#[sharded_embedding(...)]`'s arguments: parsed into a small tree of `name = value` pairs
//! (`tree.rs`), then checked against the one table — optimizer names, their hyper-parameters,
//! ranges and options, dtypes, and what each runtime can store. Every error points at its token
//! and lists the valid choices; all of them are reported at once.

mod tree;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use rowshard_table::{BiasClock, DType, HyperParams, KernelError, Optimizer, TableConfig};
use syn::Ident;

pub use tree::{Arg, Args, Value};

use crate::ctxt::Ctxt;

/// One table's optimizer, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerArgs {
    /// The optimizer.
    pub optimizer: Optimizer,
    /// The default learning rate, if given.
    pub lr: Option<f64>,
    /// Hyper-parameters given, in the order written.
    pub hyper: Vec<(&'static str, f64)>,
    /// Adam's bias-correction clock.
    pub bias_clock: BiasClock,
    /// AdamW's decoupled weight decay.
    pub decoupled_weight_decay: bool,
    /// Storage dtype of per-element states.
    pub state_dtype: DType,
}

impl OptimizerArgs {
    fn new(optimizer: Optimizer) -> Self {
        Self {
            optimizer,
            lr: None,
            hyper: Vec::new(),
            bias_clock: BiasClock::default(),
            decoupled_weight_decay: false,
            state_dtype: DType::F32,
        }
    }
}

/// How rows are split over ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PartitionArg {
    /// Contiguous blocks of `ceil(N/W)` rows.
    Even,
    /// Blocks of this many rows dealt to ranks in turn.
    RoundRobin(usize),
}

/// How weights start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InitArg {
    /// Normal with this standard deviation.
    Normal(f64),
    /// Uniform in `[-bound, bound)`.
    Uniform(f64),
    /// Xavier (Glorot) normal over the row: std `sqrt(2 / (1 + dim))`, as torch for a 1-row fan.
    XavierNormal,
    /// All zeros.
    Zeros,
}

/// The checked arguments of `#[sharded_embedding]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelArgs {
    /// Entity row length.
    pub dim: usize,
    /// Weight dtype of both tables.
    pub dtype: DType,
    /// The entity table's optimizer.
    pub entity: OptimizerArgs,
    /// The relation table's optimizer.
    pub relation: OptimizerArgs,
    /// The entity table's partition.
    pub partition: PartitionArg,
    /// Optimizer state in host memory.
    pub state_on_host: bool,
    /// Stochastic rounding of f16/bf16 weight writes.
    pub stochastic_rounding: bool,
    /// Initial weights.
    pub init: InitArg,
}

/// Every argument `#[sharded_embedding]` accepts.
pub const MODEL_ARGS: &[&str] = &[
    "dim",
    "dtype",
    "optimizer",
    "relation_optimizer",
    "partition",
    "state",
    "stochastic_rounding",
    "runtime",
    "init",
];

fn one_of(names: &[&str]) -> String {
    names.join(", ")
}

fn dtype_names() -> Vec<&'static str> {
    DType::ALL.iter().map(|d| d.name()).collect()
}

/// Checks `args` against the table; `None` when any argument is wrong (the errors are in `cx`).
pub fn check_model_args(args: &Args, attr_span: Span, cx: &mut Ctxt) -> Option<ModelArgs> {
    let mut seen: Vec<String> = Vec::new();
    let mut dim = None;
    let mut dtype = (DType::F32, None::<TokenStream>);
    let mut entity = None;
    let mut relation = None;
    let mut partition = PartitionArg::Even;
    let mut state_on_host = false;
    let mut stochastic_rounding = (false, None::<TokenStream>);
    let mut runtimes: Vec<Ident> = Vec::new();
    let mut init = InitArg::Normal(0.1);
    let mut ok = true;
    for arg in &args.0 {
        let key = arg.name.to_string();
        if seen.contains(&key) {
            cx.error_spanned(&arg.name, format!("`{key}` is given twice"));
            ok = false;
            continue;
        }
        seen.push(key.clone());
        let checked = match key.as_str() {
            "dim" => number(arg, cx, |v| v >= 1.0, "a positive integer").map(|v| {
                dim = Some(v as usize);
            }),
            "dtype" => name_in(arg, &dtype_names(), "dtype", cx).map(|(name, tokens)| {
                dtype = (DType::from_name(&name).expect("listed"), Some(tokens));
            }),
            "optimizer" => optimizer(arg, cx).map(|o| entity = Some(o)),
            "relation_optimizer" => optimizer(arg, cx).map(|o| relation = Some(o)),
            "partition" => partition_arg(arg, cx).map(|p| partition = p),
            "state" => name_in(arg, &["with_shard", "host"], "state location", cx)
                .map(|(name, _)| state_on_host = name == "host"),
            "stochastic_rounding" => flag(arg, cx).map(|on| {
                stochastic_rounding = (on, Some(arg.name.to_token_stream()));
            }),
            "runtime" => runtime_list(arg, cx).map(|r| runtimes = r),
            "init" => init_arg(arg, cx).map(|i| init = i),
            _ => {
                cx.error_spanned(
                    &arg.name,
                    format!(
                        "unknown argument `{key}`; expected one of: {}",
                        one_of(MODEL_ARGS)
                    ),
                );
                None
            }
        };
        ok &= checked.is_some();
    }
    let Some(dim) = dim else {
        if !seen.iter().any(|s| s == "dim") {
            cx.error_at(
                attr_span,
                "missing `dim = …`: the length of an entity row (e.g. `dim = 32`)",
            );
        }
        return None;
    };
    let (dtype, dtype_tokens) = dtype;
    let entity = entity.unwrap_or_else(|| OptimizerArgs::new(Optimizer::Adam));
    let relation = relation.unwrap_or_else(|| entity.clone());
    let dtype_site = dtype_tokens.unwrap_or_else(|| quote::quote_spanned!(attr_span=> dtype));
    for runtime in &runtimes {
        let spec = rowshard_table::runtime::runtime(&runtime.to_string()).expect("checked");
        for (what, wanted) in [
            ("weights", dtype),
            ("optimizer states", entity.state_dtype),
            ("optimizer states", relation.state_dtype),
        ] {
            if !spec.weight_dtypes.contains(&wanted) {
                let supported: Vec<_> = spec.weight_dtypes.iter().map(|d| d.name()).collect();
                cx.error_spanned(
                    &dtype_site,
                    format!(
                        "the {} runtime ({}) cannot store {wanted} {what}; pick one of: {}, \
                         or leave `{}` out of `runtime`",
                        spec.name,
                        spec.doc,
                        one_of(&supported),
                        spec.name
                    ),
                );
                ok = false;
                break;
            }
        }
    }
    for (table, o) in [("entity", &entity), ("relation", &relation)] {
        let config = TableConfig::new(o.optimizer, dtype, dim)
            .with_state_dtype(o.state_dtype)
            .with_bias_clock(o.bias_clock)
            .with_decoupled_weight_decay(o.decoupled_weight_decay)
            .with_stochastic_rounding(stochastic_rounding.0);
        if let Err(e) = config.validate() {
            let site = match (&e, &stochastic_rounding.1) {
                (KernelError::UnsupportedOption { what, .. }, Some(sr))
                    if what.contains("stochastic") =>
                {
                    sr.clone()
                }
                _ => dtype_site.clone(),
            };
            cx.error_spanned(site, format!("{table} table: {e}"));
            ok = false;
        }
    }
    ok.then_some(ModelArgs {
        dim,
        dtype,
        entity,
        relation,
        partition,
        state_on_host,
        stochastic_rounding: stochastic_rounding.0,
        init,
    })
}

/// The value of `arg`, which must be given.
fn value<'a>(arg: &'a Arg, cx: &mut Ctxt, expected: &str) -> Option<&'a Value> {
    if arg.value.is_none() {
        cx.error_spanned(
            &arg.name,
            format!("`{}` needs a value: {expected}", arg.name),
        );
    }
    arg.value.as_ref()
}

fn number(arg: &Arg, cx: &mut Ctxt, valid: impl Fn(f64) -> bool, what: &str) -> Option<f64> {
    match value(arg, cx, what)? {
        Value::Number {
            value,
            integer,
            tokens,
        } => {
            let integral = what.contains("integer");
            if (integral && !integer) || !valid(*value) {
                cx.error_spanned(tokens, format!("`{}` must be {what}", arg.name));
                return None;
            }
            Some(*value)
        }
        other => {
            cx.error_spanned(other, format!("`{}` must be {what}", arg.name));
            None
        }
    }
}

fn name_in(arg: &Arg, valid: &[&str], what: &str, cx: &mut Ctxt) -> Option<(String, TokenStream)> {
    let expected = format!("one of {}", one_of(valid));
    match value(arg, cx, &expected)? {
        Value::Name(name) if valid.contains(&name.to_string().as_str()) => {
            Some((name.to_string(), name.to_token_stream()))
        }
        Value::Name(name) => {
            cx.error_spanned(
                name,
                format!(
                    "unknown {what} `{name}`; expected one of: {}",
                    one_of(valid)
                ),
            );
            None
        }
        other => {
            cx.error_spanned(
                other,
                format!("expected a {what}: one of {}", one_of(valid)),
            );
            None
        }
    }
}

fn flag(arg: &Arg, cx: &mut Ctxt) -> Option<bool> {
    match &arg.value {
        None => Some(true),
        Some(Value::Bool(b)) => Some(b.value),
        Some(other) => {
            cx.error_spanned(other, format!("`{}` is a flag: true or false", arg.name));
            None
        }
    }
}

fn runtime_list(arg: &Arg, cx: &mut Ctxt) -> Option<Vec<Ident>> {
    let names = rowshard_table::runtime::runtime_names();
    let items: Vec<&Value> = match value(arg, cx, "a runtime or a list of runtimes")? {
        Value::List { items, .. } => items.iter().collect(),
        single => vec![single],
    };
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        match item {
            Value::Name(n) if names.contains(&n.to_string().as_str()) => out.push(n.clone()),
            other => {
                cx.error_spanned(
                    other,
                    format!(
                        "unknown runtime `{}`; expected one of: {}",
                        other.to_token_stream(),
                        one_of(&names)
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn partition_arg(arg: &Arg, cx: &mut Ctxt) -> Option<PartitionArg> {
    let valid = ["even", "round_robin"];
    match value(arg, cx, "even or round_robin(block = N)")? {
        Value::Name(n) if n == "even" => Some(PartitionArg::Even),
        Value::Name(n) if n == "round_robin" => Some(PartitionArg::RoundRobin(1)),
        Value::Call { name, args } if name == "round_robin" => {
            let mut block = 1;
            let mut ok = true;
            for a in args {
                if a.name == "block" {
                    match number(a, cx, |v| v >= 1.0, "a positive integer") {
                        Some(v) => block = v as usize,
                        None => ok = false,
                    }
                } else {
                    cx.error_spanned(
                        &a.name,
                        format!(
                            "unknown argument `{}` of round_robin; expected: block",
                            a.name
                        ),
                    );
                    ok = false;
                }
            }
            ok.then_some(PartitionArg::RoundRobin(block))
        }
        other => {
            cx.error_spanned(
                other,
                format!(
                    "unknown partition `{}`; expected one of: {}",
                    other.to_token_stream(),
                    one_of(&valid)
                ),
            );
            None
        }
    }
}

fn init_arg(arg: &Arg, cx: &mut Ctxt) -> Option<InitArg> {
    let valid = [
        "normal(std = …)",
        "uniform(bound = …)",
        "xavier_normal",
        "zeros",
    ];
    let positive = |a: &Arg, cx: &mut Ctxt| number(a, cx, |v| v > 0.0 && v.is_finite(), "positive");
    match value(arg, cx, "an initialiser")? {
        Value::Name(n) if n == "xavier_normal" => Some(InitArg::XavierNormal),
        Value::Name(n) if n == "zeros" => Some(InitArg::Zeros),
        Value::Call { name, args } if name == "normal" || name == "uniform" => {
            let key = if name == "normal" { "std" } else { "bound" };
            let mut scale = None;
            for a in args {
                if a.name == key {
                    scale = positive(a, cx);
                } else {
                    cx.error_spanned(
                        &a.name,
                        format!("unknown argument `{}` of {name}; expected: {key}", a.name),
                    );
                    return None;
                }
            }
            let Some(scale) = scale else {
                cx.error_spanned(name, format!("`{name}` needs `{key} = …`"));
                return None;
            };
            Some(if name == "normal" {
                InitArg::Normal(scale)
            } else {
                InitArg::Uniform(scale)
            })
        }
        other => {
            cx.error_spanned(
                other,
                format!(
                    "unknown initialiser `{}`; expected one of: {}",
                    other.to_token_stream(),
                    one_of(&valid)
                ),
            );
            None
        }
    }
}

/// What an optimizer's argument list may hold besides its hyper-parameters.
fn optimizer_options(optimizer: Optimizer) -> Vec<&'static str> {
    let spec = optimizer.spec();
    let mut names = vec!["lr"];
    names.extend(spec.hyper_parameters.iter().map(|h| h.name));
    if spec.bias_clocks {
        names.push("bias_correction");
    }
    if spec.decoupled_weight_decay {
        names.push("decoupled_weight_decay");
    }
    if spec.state_dtypes.len() > 1 {
        names.push("state_dtype");
    }
    names
}

fn optimizer(arg: &Arg, cx: &mut Ctxt) -> Option<OptimizerArgs> {
    let names = Optimizer::names();
    let (name, args) = match value(arg, cx, "an optimizer, e.g. adam(beta2 = 0.99)")? {
        Value::Name(name) => (name, None),
        Value::Call { name, args } => (name, Some(args)),
        other => {
            cx.error_spanned(
                other,
                format!("expected an optimizer: one of {}", one_of(&names)),
            );
            return None;
        }
    };
    let Some(optimizer) = Optimizer::from_name(&name.to_string()) else {
        cx.error_spanned(
            name,
            format!(
                "unknown optimizer `{name}`; expected one of: {}",
                one_of(&names)
            ),
        );
        return None;
    };
    let spec = optimizer.spec();
    let mut out = OptimizerArgs::new(optimizer);
    let mut hyper = HyperParams::new(optimizer);
    let mut ok = true;
    let mut seen: Vec<String> = Vec::new();
    for a in args.into_iter().flatten() {
        let key = a.name.to_string();
        if seen.contains(&key) {
            cx.error_spanned(&a.name, format!("`{key}` is given twice"));
            ok = false;
            continue;
        }
        seen.push(key.clone());
        let checked = match key.as_str() {
            "lr" => number(
                a,
                cx,
                |v| v >= 0.0 && v.is_finite(),
                "a finite, non-negative number",
            )
            .map(|v| out.lr = Some(v)),
            "bias_correction" if spec.bias_clocks => {
                name_in(a, &["per_row", "global"], "bias-correction clock", cx).map(|(n, _)| {
                    out.bias_clock = if n == "global" {
                        BiasClock::Global
                    } else {
                        BiasClock::PerRow
                    }
                })
            }
            "decoupled_weight_decay" if spec.decoupled_weight_decay => {
                flag(a, cx).map(|on| out.decoupled_weight_decay = on)
            }
            "state_dtype" if spec.state_dtypes.len() > 1 => {
                let valid: Vec<_> = spec.state_dtypes.iter().map(|d| d.name()).collect();
                name_in(a, &valid, "state dtype", cx)
                    .map(|(n, _)| out.state_dtype = DType::from_name(&n).expect("listed"))
            }
            _ if spec.hyper_parameter(&key).is_some() => match value(a, cx, "a number") {
                Some(Value::Number { value, tokens, .. }) => match hyper.set(&key, *value) {
                    Ok(()) => {
                        let name = spec.hyper_parameter(&key).expect("found").name;
                        out.hyper.push((name, *value));
                        Some(())
                    }
                    Err(e) => {
                        cx.error_spanned(tokens, e);
                        None
                    }
                },
                Some(other) => {
                    cx.error_spanned(other, format!("`{key}` must be a number"));
                    None
                }
                None => None,
            },
            _ => {
                cx.error_spanned(
                    &a.name,
                    format!(
                        "{} has no argument `{key}`; expected one of: {}",
                        spec.name,
                        one_of(&optimizer_options(optimizer))
                    ),
                );
                None
            }
        };
        ok &= checked.is_some();
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(tokens: TokenStream) -> Result<ModelArgs, String> {
        let args: Args = syn::parse2(tokens).map_err(|e| e.to_string())?;
        let mut cx = Ctxt::default();
        let out = check_model_args(&args, Span::call_site(), &mut cx);
        match cx.check() {
            Ok(()) => Ok(out.expect("no errors")),
            Err(e) => Err(e
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")),
        }
    }

    #[test]
    fn defaults_and_full_arguments() {
        let a = check(quote::quote!(dim = 32)).unwrap();
        assert_eq!(a.dim, 32);
        assert_eq!(a.dtype, DType::F32);
        assert_eq!(a.entity.optimizer, Optimizer::Adam);
        assert_eq!(a.relation, a.entity);
        let a = check(quote::quote!(
            dim = 64,
            dtype = bf16,
            optimizer = adam(
                lr = 0.1,
                beta2 = 0.99,
                bias_correction = global,
                state_dtype = bf16
            ),
            relation_optimizer = rowwise_adagrad(eps = 1e-6),
            partition = round_robin(block = 8),
            state = host,
            stochastic_rounding,
            runtime = [cpu, cuda],
            init = uniform(bound = 0.5),
        ))
        .unwrap();
        assert_eq!(a.entity.lr, Some(0.1));
        assert_eq!(a.entity.hyper, vec![("beta2", 0.99)]);
        assert_eq!(a.entity.bias_clock, BiasClock::Global);
        assert_eq!(a.entity.state_dtype, DType::BF16);
        assert_eq!(a.relation.optimizer, Optimizer::RowWiseAdaGrad);
        assert_eq!(a.partition, PartitionArg::RoundRobin(8));
        assert!(a.state_on_host && a.stochastic_rounding);
        assert_eq!(a.init, InitArg::Uniform(0.5));
    }

    #[test]
    fn every_bad_argument_is_reported_at_once_with_the_valid_choices() {
        let e = check(quote::quote!(
            dim = 32,
            optimizer = adamw,
            relation_optimizer = adam(beta3 = 1, beta1 = 1.5),
            colour = red,
        ))
        .unwrap_err();
        assert!(
            e.contains("unknown optimizer `adamw`; expected one of: sgd, adam, adagrad, rowwise_adagrad, rmsprop"),
            "{e}"
        );
        assert!(e.contains("adam has no argument `beta3`; expected one of: lr, beta1, beta2, eps, weight_decay, bias_correction, decoupled_weight_decay, state_dtype"), "{e}");
        assert!(
            e.contains("beta1 = 1.5 is outside its valid range [0, 1)"),
            "{e}"
        );
        assert!(e.contains("unknown argument `colour`"), "{e}");
        assert_eq!(e.lines().count(), 4, "{e}");
    }

    #[test]
    fn dtypes_are_checked_against_the_runtimes_and_the_optimizer() {
        let e = check(quote::quote!(dim = 32, dtype = bf16, runtime = [cpu, wgpu])).unwrap_err();
        assert!(
            e.contains("the wgpu runtime") && e.contains("cannot store bf16 weights"),
            "{e}"
        );
        assert!(e.contains("pick one of: f32, f16"), "{e}");
        let e = check(quote::quote!(dim = 32, stochastic_rounding)).unwrap_err();
        assert!(e.contains("stochastic rounding"), "{e}");
        let e = check(quote::quote!(
            dim = 32,
            optimizer = sgd(bias_correction = global)
        ))
        .unwrap_err();
        assert!(
            e.contains("sgd has no argument `bias_correction`; expected one of: lr, weight_decay"),
            "{e}"
        );
        assert!(
            check(quote::quote!(dtype = f16))
                .unwrap_err()
                .contains("missing `dim")
        );
        assert!(
            check(quote::quote!(dim = 0))
                .unwrap_err()
                .contains("positive integer")
        );
        assert!(
            check(quote::quote!(dim = 3.5))
                .unwrap_err()
                .contains("positive integer")
        );
    }
}
