//! What each attribute expands to.

pub mod kernels;
pub mod model;
pub mod scoring;

use proc_macro2::TokenStream;
use quote::quote;

/// The user's item followed by the errors, so the item still exists for the rest of the crate.
pub fn with_errors(item: TokenStream, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    quote!(#item #errors)
}

#[cfg(test)]
mod tests {
    //! Expansion snapshots of two shipped models, read from their source files: the runtime
    //! crate compiles exactly these inputs, so every snapshot here is known to compile.

    use proc_macro2::TokenStream;
    use quote::ToTokens;

    /// Removes the first `#[sharded_embedding]` or `#[scoring]` attribute: (is scoring, args).
    fn take(attrs: &mut Vec<syn::Attribute>) -> Option<(bool, TokenStream)> {
        let k = attrs
            .iter()
            .position(|a| a.path().is_ident("sharded_embedding") || a.path().is_ident("scoring"))?;
        let attr = attrs.remove(k);
        let args = match &attr.meta {
            syn::Meta::List(l) => l.tokens.clone(),
            _ => TokenStream::new(),
        };
        Some((attr.path().is_ident("scoring"), args))
    }

    /// Expands every `#[sharded_embedding]` and `#[scoring]` item of a source file and prints
    /// the result.
    fn expand_file(path: &str) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        let file: syn::File = syn::parse_str(&text).unwrap();
        let mut out = TokenStream::new();
        for item in file.items {
            let (attr, item) = match item {
                syn::Item::Struct(mut s) => (take(&mut s.attrs), s.into_token_stream()),
                syn::Item::Impl(mut i) => (take(&mut i.attrs), i.into_token_stream()),
                _ => continue,
            };
            out.extend(match attr {
                Some((true, args)) => super::scoring::expand(args, item),
                Some((false, args)) => super::model::expand(args, item),
                None => item,
            });
        }
        let expanded: syn::File = syn::parse2(out).unwrap();
        prettyplease::unparse(&expanded)
    }

    #[test]
    fn distmult_expansion() {
        insta::assert_snapshot!(expand_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../runtime/src/models/distmult.rs"
        )));
    }

    #[test]
    fn complex_expansion() {
        insta::assert_snapshot!(expand_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../runtime/src/models/complex.rs"
        )));
    }
}
