//! Compile-fail tests: each file under `ui/` is a bad use of the macros, and its `.stderr` pins
//! the message and the span. Regenerate after reviewing with `TRYBUILD=overwrite`.

#[test]
fn bad_arguments_and_scoring_functions_fail_to_compile_with_their_messages() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
