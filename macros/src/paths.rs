//! Every path the macros emit into user code: absolute, through the runtime's hidden module, so
//! the output compiles whatever the user's crate shadows (`Option`, `Result`, `Vec`, `Box`, …).

use proc_macro2::TokenStream;
use quote::quote;

/// `::rowshard::__private`.
pub fn private() -> TokenStream {
    quote!(::rowshard::__private)
}
