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

    /// Expands every `#[sharded_embedding]` and `#[scoring]` item of a source file and prints
    /// the result.
    fn expand_file(path: &str) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        let file: syn::File = syn::parse_str(&text).unwrap();
        let mut out = TokenStream::new();
        for item in file.items {
            let (mut attrs, rest): (Vec<syn::Attribute>, Box<dyn Fn(Vec<syn::Attribute>) -> TokenStream>) =
                match item {
                    syn::Item::Struct(s) => {
                        let s2 = s.clone();
                        (s.attrs, Box::new(move |a| syn::ItemStruct { attrs: a, ..s2.clone() }.into_token_stream()))
                    }
                    syn::Item::Impl(i) => {
                        let i2 = i.clone();
                        (i.attrs, Box::new(move |a| syn::ItemImpl { attrs: a, ..i2.clone() }.into_token_stream()))
                    }
                    _ => continue,
                };
            let Some(k) = attrs.iter().position(|a| {
                a.path().is_ident("sharded_embedding") || a.path().is_ident("scoring")
            }) else {
                continue;
            };
            let attr = attrs.remove(k);
            let args = match &attr.meta {
                syn::Meta::List(l) => l.tokens.clone(),
                _ => TokenStream::new(),
            };
            let item = rest(attrs);
            out.extend(if attr.path().is_ident("scoring") {
                super::scoring::expand(args, item)
            } else {
                super::model::expand(args, item)
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
