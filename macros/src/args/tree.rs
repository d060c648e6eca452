//! The parsed form of an attribute's arguments: a small tree of `name` and `name = value`
//! pairs, whose values are numbers, booleans, names, calls `name(args)` and lists `[a, b]`;
//! printed back as written, for spans and messages.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, LitBool, Token};

/// `name` or `name = value`.
pub struct Arg {
    /// The argument's name.
    pub name: Ident,
    /// Its value, if given.
    pub value: Option<Value>,
}

/// An argument's value.
pub enum Value {
    /// An integer or float literal, possibly negated.
    Number {
        /// The value.
        value: f64,
        /// Whether it was written as an integer.
        integer: bool,
        /// The tokens, for spans.
        tokens: TokenStream,
    },
    /// `true` or `false`.
    Bool(LitBool),
    /// A bare name: `f32`, `even`, `adam`.
    Name(Ident),
    /// `name(args)`: `adam(beta1 = 0.8)`, `round_robin(block = 4)`.
    Call {
        /// The name.
        name: Ident,
        /// Its arguments.
        args: Punctuated<Arg, Token![,]>,
    },
    /// `[a, b]`.
    List {
        /// The items.
        items: Punctuated<Value, Token![,]>,
        /// The tokens, for spans.
        tokens: TokenStream,
    },
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.call(syn::ext::IdentExt::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Arg { name, value })
    }
}

impl Parse for Value {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(LitBool) {
            return Ok(Value::Bool(input.parse()?));
        }
        if input.peek(syn::token::Bracket) {
            let content;
            let bracket = syn::bracketed!(content in input);
            let items = Punctuated::parse_terminated(&content)?;
            let mut tokens = TokenStream::new();
            bracket.surround(&mut tokens, |t| items.to_tokens(t));
            return Ok(Value::List { items, tokens });
        }
        if input.peek(Token![-]) || input.peek(syn::LitInt) || input.peek(syn::LitFloat) {
            let mut tokens = TokenStream::new();
            let negative = if input.peek(Token![-]) {
                input.parse::<Token![-]>()?.to_tokens(&mut tokens);
                true
            } else {
                false
            };
            let lit: syn::Lit = input.parse()?;
            lit.to_tokens(&mut tokens);
            let (value, integer) = match &lit {
                syn::Lit::Int(i) => (i.base10_parse::<f64>()?, true),
                syn::Lit::Float(f) => (f.base10_parse::<f64>()?, false),
                other => return Err(syn::Error::new_spanned(other, "expected a number")),
            };
            let value = if negative { -value } else { value };
            return Ok(Value::Number {
                value,
                integer,
                tokens,
            });
        }
        let name: Ident = input.call(syn::ext::IdentExt::parse_any)?;
        if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            let args = Punctuated::parse_terminated(&content)?;
            return Ok(Value::Call { name, args });
        }
        Ok(Value::Name(name))
    }
}

impl ToTokens for Value {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            Value::Number { tokens: t, .. } | Value::List { tokens: t, .. } => {
                tokens.extend(t.clone())
            }
            Value::Bool(b) => b.to_tokens(tokens),
            Value::Name(n) => n.to_tokens(tokens),
            Value::Call { name, args } => {
                name.to_tokens(tokens);
                syn::token::Paren::default().surround(tokens, |t| args.to_tokens(t));
            }
        }
    }
}

impl ToTokens for Arg {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        self.name.to_tokens(tokens);
        if let Some(v) = &self.value {
            <Token![=]>::default().to_tokens(tokens);
            v.to_tokens(tokens);
        }
    }
}

/// The arguments of one attribute, comma-separated.
pub struct Args(pub Punctuated<Arg, Token![,]>);

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(Args(Punctuated::parse_terminated(input)?))
    }
}
