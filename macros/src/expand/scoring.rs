//! `#[scoring]` on `impl Model { fn score(h: Row, r: Row, t: Row) -> Scalar { … } }`: the
//! scoring function's kernels (forward, derived backward, and the query when the score is linear
//! in the tail), its `f64` host versions, and the `ScoringFunction` impl that hands them to the
//! runtime. The other items of the `impl` block stay as they are.
//!
//! Arguments: `relation_dim = dim | dim / k | dim * k` (relation rows relative to entity rows;
//! default `dim`), and `kvsall`, which asks for a score linear in the tail and makes anything else
//! a compile error pointing at the expression that is not.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, Token};

use super::kernels::{host_functions, kernel_module};
use super::with_errors;
use crate::ctxt::Ctxt;
use crate::dsl::{self, lower::Frac};
use crate::paths;

/// The arguments of `#[scoring]`.
struct ScoringArgs {
    relation: Frac,
    kvsall: Option<Ident>,
}

enum ScoringArg {
    RelationDim(Frac),
    KvsAll(Ident),
}

impl Parse for ScoringArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        if name == "kvsall" {
            return Ok(ScoringArg::KvsAll(name));
        }
        if name != "relation_dim" {
            return Err(syn::Error::new_spanned(
                &name,
                format!(
                    "unknown argument `{name}` of #[scoring]; expected one of: relation_dim, kvsall"
                ),
            ));
        }
        input.parse::<Token![=]>()?;
        let expr: syn::Expr = input.parse()?;
        let bad = || {
            syn::Error::new_spanned(
                &expr,
                "`relation_dim` is `dim`, `dim / k` or `dim * k` for a positive integer k",
            )
        };
        let is_dim = |e: &syn::Expr| matches!(e, syn::Expr::Path(p) if p.path.is_ident("dim"));
        let int = |e: &syn::Expr| match e {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<u32>().ok().filter(|&k| k >= 1),
            _ => None,
        };
        let frac = match &expr {
            e if is_dim(e) => Frac::new(1, 1),
            syn::Expr::Binary(b) if is_dim(&b.left) => match (b.op, int(&b.right)) {
                (syn::BinOp::Div(_), Some(k)) => Frac::new(1, k),
                (syn::BinOp::Mul(_), Some(k)) => Frac::new(k, 1),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        Ok(ScoringArg::RelationDim(frac))
    }
}

impl Parse for ScoringArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let list = Punctuated::<ScoringArg, Token![,]>::parse_terminated(input)?;
        let mut out = ScoringArgs {
            relation: Frac::new(1, 1),
            kvsall: None,
        };
        for arg in list {
            match arg {
                ScoringArg::RelationDim(f) => out.relation = f,
                ScoringArg::KvsAll(i) => out.kvsall = Some(i),
            }
        }
        Ok(out)
    }
}

/// Expands the attribute; on error, the `impl` block without its `score` function.
pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut block: syn::ItemImpl = match syn::parse2(item.clone()) {
        Ok(b) => b,
        Err(_) => {
            let e = syn::Error::new(
                Span::call_site(),
                "#[scoring] goes on an `impl` block of the model struct that holds \
                 `fn score(h: Row, r: Row, t: Row) -> Scalar`",
            );
            return with_errors(item, e);
        }
    };
    let position = block
        .items
        .iter()
        .position(|i| matches!(i, syn::ImplItem::Fn(f) if f.sig.ident == "score"));
    let score = position.map(|i| block.items.remove(i));
    let rest = if block.items.is_empty() {
        TokenStream::new()
    } else {
        block.to_token_stream()
    };
    let args: ScoringArgs = match syn::parse2(args) {
        Ok(a) => a,
        Err(e) => return with_errors(rest, e),
    };
    let mut cx = Ctxt::default();
    if let Some(t) = &block.trait_ {
        cx.error_spanned(
            &t.1,
            "#[scoring] goes on an inherent `impl` block: `impl Model { … }`",
        );
    }
    if !block.generics.params.is_empty() {
        cx.error_spanned(&block.generics, "a model struct has no generic parameters");
    }
    let name = match &*block.self_ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.clone()),
        _ => None,
    };
    if name.is_none() {
        cx.error_spanned(
            &block.self_ty,
            "#[scoring] goes on `impl Model { … }` for a model struct",
        );
    }
    let Some(syn::ImplItem::Fn(score)) = score else {
        cx.error_at(
            Span::call_site(),
            "#[scoring] needs the scoring function in this block: \
             `fn score(h: Row, r: Row, t: Row) -> Scalar { … }`",
        );
        return with_errors(rest, cx.check().unwrap_err());
    };
    let compiled = dsl::compile(&score, args.relation, &mut cx);
    if let (Some(kvsall), Some(c)) = (&args.kvsall, &compiled)
        && let Some((site, why)) = &c.not_linear
    {
        cx.error_spanned(
            site,
            format!(
                "KvsAll needs a score linear in the tail row, score = ⟨q(h, r), t⟩, to score \
                 every entity at once; this one is not: {why}"
            ),
        );
        cx.error_spanned(
            kvsall,
            "KvsAll asked for here; train this model with negative sampling instead",
        );
    }
    if let Err(e) = cx.check() {
        return with_errors(rest, e);
    }
    let (compiled, name) = (compiled.expect("no errors"), name.expect("no errors"));
    let self_ty = &block.self_ty;
    let p = paths::private();
    let module = format_ident!("__rowshard_scoring_{}", name.to_string().to_lowercase());
    let kernels = kernel_module(&compiled, &module);
    let host = host_functions(&compiled);
    let segments = compiled.lowered.segments as usize;
    let (num, den) = (args.relation.num as usize, args.relation.den as usize);
    let name_text = name.to_string();
    let (linear, launch) = match &compiled.not_linear {
        None => (
            quote!(::core::result::Result::Ok(())),
            quote!(#p::launch_scoring!(#module, kernel, launch, query)),
        ),
        Some((_, why)) => (
            quote!(::core::result::Result::Err(#why)),
            quote!(#p::launch_scoring!(#module, kernel, launch)),
        ),
    };
    let quadratic = compiled.quadratic;
    let define = match &compiled.not_linear {
        None => quote!(#p::define_scoring!(#module, kernel, context, query)),
        Some(_) => quote!(#p::define_scoring!(#module, kernel, context)),
    };
    quote! {
        #rest

        #kernels

        impl #p::ScoringFunction for #self_ty {
            const NAME: &'static str = #name_text;
            const SEGMENTS: usize = #segments;
            const RELATION_WIDTH: (usize, usize) = (#num, #den);
            const TAIL_LINEAR: ::core::result::Result<(), &'static str> = #linear;
            const TAIL_QUADRATIC: bool = #quadratic;

            fn launch(
                kernel: #p::ScoreKernel,
                launch: &#p::ScoreLaunch,
            ) -> ::core::result::Result<(), #p::KernelError> {
                #launch
            }

            fn define(
                kernel: #p::ScoreKernel,
                context: &#p::DefineContext,
            ) -> ::core::option::Option<#p::KernelDefinition> {
                #define
            }

            #host
        }
    }
}
