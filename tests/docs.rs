//! `docs/optimizers.md` is generated from the optimizer table; this test fails when the committed
//! file is stale. `ROWSHARD_BLESS=1` rewrites it.

use std::path::Path;

#[test]
fn optimizers_doc_is_generated_from_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/optimizers.md");
    let generated = rowshard_kernels::docs::optimizers_markdown();
    if std::env::var_os("ROWSHARD_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/optimizers.md is stale: regenerate it with `ROWSHARD_BLESS=1 cargo test -p rowshard-tests --test docs`"
    );
}
