use quote::quote;

use super::*;

fn expanded(attr: TokenStream, item: TokenStream) -> String {
    expand(attr, item).unwrap().to_string()
}

#[test]
fn a_function_is_replaced_by_its_namesake_in_the_mutants_module() {
    let out = expanded(
        quote!(CompareOnlyInternalIp),
        quote!(
            pub fn plan(desired: &[u8], mut current: Vec<u8>) -> usize {
                desired.len() + current.len()
            }
        ),
    );
    let want = quote!(
        pub fn plan(desired: &[u8], mut current: Vec<u8>) -> usize {
            if ::racksim_mutants::active(::racksim_mutants::Mutant::CompareOnlyInternalIp) {
                return crate::mutants::compare_only_internal_ip::plan(desired, current);
            }
            {
                desired.len() + current.len()
            }
        }
    );
    assert_eq!(out, want.to_string());
}

#[test]
fn an_async_method_awaits_its_replacements_and_passes_self() {
    let out = expanded(
        quote!(SagaSkipsUndo, NoPeriodicTimer),
        quote!(
            async fn undo(&self, saga: &Saga) -> Result<(), E> {
                Ok(())
            }
        ),
    );
    let want = quote!(
        async fn undo(&self, saga: &Saga) -> Result<(), E> {
            if ::racksim_mutants::active(::racksim_mutants::Mutant::SagaSkipsUndo) {
                return crate::mutants::saga_skips_undo::undo(self, saga).await;
            }
            if ::racksim_mutants::active(::racksim_mutants::Mutant::NoPeriodicTimer) {
                return crate::mutants::no_periodic_timer::undo(self, saga).await;
            }
            {
                Ok(())
            }
        }
    );
    assert_eq!(out, want.to_string());
}

#[test]
fn no_mutant_or_a_pattern_argument_is_refused() {
    let none = expand(
        quote!(),
        quote!(
            fn f() {}
        ),
    )
    .unwrap_err();
    assert!(none.to_string().contains("name the mutants"), "{none}");
    let pattern = expand(
        quote!(OwnByIp),
        quote!(
            fn f((a, b): (u8, u8)) {}
        ),
    )
    .unwrap_err();
    assert!(pattern.to_string().contains("plain names"), "{pattern}");
}

#[test]
fn snake_case_is_the_command_line_name_with_underscores() {
    assert_eq!(snake_case("OwnByIp"), "own_by_ip");
    assert_eq!(
        snake_case("StartWithoutConditionalTransition"),
        "start_without_conditional_transition"
    );
}
