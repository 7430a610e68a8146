//! The `mutant` attribute: where a kill-table mutant replaces a production
//! function.
//!
//! A mutant of the kill table (`racksim-mutants`) is a plausible bug in the
//! reconciler. Each one is a whole-function replacement: the production
//! function keeps its real body, and one line above it says which mutants
//! may stand in for it —
//!
//! ```text
//! #[cfg_attr(feature = "mutants", racksim_mutants::mutant(CompareOnlyInternalIp))]
//! pub fn plan(desired: &[NatEntry], current: &[NatEntry]) -> NatPlan { … }
//! ```
//!
//! — so that a build without the feature compiles the function as written,
//! and a reader of it sees no mutant in its control flow. With the feature,
//! the attribute puts in front of the body, for each mutant `M` named:
//!
//! ```text
//! if ::racksim_mutants::active(::racksim_mutants::Mutant::M) {
//!     return crate::mutants::m::plan(desired, current);
//! }
//! ```
//!
//! The replacement has the function's own name, in the module of the
//! calling crate's `mutants` named after the mutant (`M` in snake case, which
//! is also its command-line name with `_` for `-`), and gets the function's
//! arguments in order (`self` first for a method). For an `async fn` the call
//! is awaited. A mutant that changes several functions has a replacement for
//! each in its module.
//!
//! Arguments must be plain names (`x`, `mut x`, `self`), since they are
//! passed on by name.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, ToTokens};
use syn::{parse::Parser, punctuated::Punctuated, FnArg, Ident, ItemFn, Pat, Token};

/// `#[mutant(A, B, …)]`: while mutant `A` is selected, the function is
/// `crate::mutants::a::<its name>`; likewise `B`. See the crate doc.
#[proc_macro_attribute]
pub fn mutant(
    attr: proc_macro::TokenStream,
    item: proc_macro::TokenStream,
) -> proc_macro::TokenStream {
    expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mutants = Punctuated::<Ident, Token![,]>::parse_terminated.parse2(attr)?;
    if mutants.is_empty() {
        return Err(syn::Error::new(
            Span::call_site(),
            "name the mutants that replace this function: #[mutant(SomeMutant)]",
        ));
    }
    let mut function: ItemFn = syn::parse2(item)?;
    let name = &function.sig.ident;
    let args = function
        .sig
        .inputs
        .iter()
        .map(|arg| match arg {
            FnArg::Receiver(receiver) => Ok(receiver.self_token.to_token_stream()),
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(pat) => Ok(pat.ident.to_token_stream()),
                other => Err(syn::Error::new_spanned(
                    other,
                    "a function a mutant replaces takes its arguments by plain names",
                )),
            },
        })
        .collect::<syn::Result<Vec<_>>>()?;
    let dot_await = function.sig.asyncness.map(|_| quote!(.await));
    let replacements = mutants.iter().map(|m| {
        let module = format_ident!("{}", snake_case(&m.to_string()));
        quote! {
            if ::racksim_mutants::active(::racksim_mutants::Mutant::#m) {
                return crate::mutants::#module::#name(#(#args),*) #dot_await;
            }
        }
    });
    let body = &function.block;
    *function.block = syn::parse_quote!({
        #(#replacements)*
        #body
    });
    Ok(function.into_token_stream())
}

/// `CompareOnlyInternalIp` -> `compare_only_internal_ip`.
fn snake_case(camel: &str) -> String {
    let mut snake = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            snake.push('_');
        }
        snake.extend(c.to_lowercase());
    }
    snake
}

#[cfg(test)]
mod tests;
