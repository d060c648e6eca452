//! `#[sharded_embedding(...)]` on a struct: the model's settings as written (checked against the
//! one table at compile time), replayed into `ModelSettings` at run time, and a type alias for
//! the sharded model.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use rowshard_table::{BiasClock, DType};

use super::with_errors;
use crate::args::{Args, InitArg, ModelArgs, OptimizerArgs, PartitionArg, check_model_args};
use crate::ctxt::Ctxt;
use crate::paths;

/// Expands the attribute; errors come with the struct unchanged.
pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let strukt: syn::ItemStruct = match syn::parse2(item.clone()) {
        Ok(s) => s,
        Err(_) => {
            let e = syn::Error::new(
                Span::call_site(),
                "#[sharded_embedding] goes on the model's struct; its scoring function goes in an \
                 `impl` block of that struct marked #[scoring]",
            );
            return with_errors(item, e);
        }
    };
    let args: Args = match syn::parse2(args) {
        Ok(a) => a,
        Err(e) => return with_errors(item, e),
    };
    let mut cx = Ctxt::default();
    if !strukt.generics.params.is_empty() {
        cx.error_spanned(
            &strukt.generics,
            "a model struct has no generic parameters: the macro generates one model per struct",
        );
    }
    let checked = check_model_args(&args, Span::call_site(), &mut cx);
    if let Err(e) = cx.check() {
        return with_errors(item, e);
    }
    let checked = checked.expect("no errors");
    let generated = generate(&strukt, &checked);
    quote!(#strukt #generated)
}

fn dtype(d: DType) -> TokenStream {
    let p = paths::private();
    match d {
        DType::F32 => quote!(#p::DType::F32),
        DType::F16 => quote!(#p::DType::F16),
        DType::BF16 => quote!(#p::DType::BF16),
    }
}

fn optimizer(o: &OptimizerArgs) -> TokenStream {
    let p = paths::private();
    let variant = format_ident!("{}", format!("{:?}", o.optimizer));
    let mut out = quote!(#p::OptimizerSettings::new(#p::Optimizer::#variant));
    if let Some(lr) = o.lr {
        out.extend(quote!(.with_lr(#lr)));
    }
    for (name, value) in &o.hyper {
        out.extend(quote!(.with(#name, #value)));
    }
    if o.bias_clock == BiasClock::Global {
        out.extend(quote!(.with_bias_clock(#p::BiasClock::Global)));
    }
    if o.decoupled_weight_decay {
        out.extend(quote!(.with_decoupled_weight_decay(true)));
    }
    if o.state_dtype != DType::F32 {
        let d = dtype(o.state_dtype);
        out.extend(quote!(.with_state_dtype(#d)));
    }
    out
}

fn generate(strukt: &syn::ItemStruct, a: &ModelArgs) -> TokenStream {
    let p = paths::private();
    let name = &strukt.ident;
    let vis = &strukt.vis;
    let dim = a.dim;
    let weights = dtype(a.dtype);
    let entity = optimizer(&a.entity);
    let relation = optimizer(&a.relation);
    let mut extra = TokenStream::new();
    if let PartitionArg::RoundRobin(block) = a.partition {
        extra.extend(
            quote!(settings.partition = #p::PartitionScheme::RoundRobin { block: #block };),
        );
    }
    if a.state_on_host {
        extra.extend(quote!(settings.state_location = #p::StateLocation::Host;));
    }
    if a.stochastic_rounding {
        extra.extend(quote!(settings.stochastic_rounding = true;));
    }
    let init = match a.init {
        InitArg::Normal(std) => quote!(#p::InitScheme::Normal { std: #std }),
        InitArg::Uniform(bound) => quote!(#p::InitScheme::Uniform { bound: #bound }),
        InitArg::XavierNormal => quote!(#p::InitScheme::XavierNormal),
        InitArg::Zeros => quote!(#p::InitScheme::Zeros),
    };
    let alias = format_ident!("{name}Model");
    let alias_doc = format!(
        "`{name}` as a sharded model: its entity table row-sharded over the ranks, its relation \
         table replicated on each."
    );
    quote! {
        impl #p::ModelDefaults for #name {
            fn settings() -> #p::ModelSettings {
                let mut settings = #p::ModelSettings::new(#dim, #weights);
                settings.entity = #entity;
                settings.relation = #relation;
                settings.init = #init;
                #extra
                settings
            }
        }

        #[doc = #alias_doc]
        #vis type #alias<'c> = #p::ShardedModel<'c, #name>;
    }
}
