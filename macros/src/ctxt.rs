//! Collects every error a macro finds, so the user sees all bad arguments at once (serde's
//! `Ctxt`).

use std::fmt::Display;

use quote::ToTokens;

/// Errors found so far.
#[derive(Default)]
pub struct Ctxt {
    errors: Option<syn::Error>,
}

impl Ctxt {
    /// Records an error spanning `tokens`.
    pub fn error_spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error at `span`.
    pub fn error_at(&mut self, span: proc_macro2::Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Records an already built error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(all) => all.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        self.errors.is_some()
    }

    /// `Ok` when nothing went wrong, else every error combined.
    pub fn check(self) -> syn::Result<()> {
        match self.errors {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
