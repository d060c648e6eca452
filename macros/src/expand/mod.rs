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
