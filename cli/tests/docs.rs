//! `docs/benchmarks.md` is generated from `benches/results.json` and `benches/page.md`; this
//! test fails when the committed page is stale. `ROWSHARD_BLESS=1` (`bash scripts/benchmarks.sh`)
//! rewrites it.

use std::path::Path;

use rowshard_cli::bench::results::{Results, render};

#[test]
fn benchmarks_page_is_generated_from_the_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let results = Results::load(&root.join("benches/results.json")).unwrap();
    for t in &results.tables {
        assert!(
            t.rows.iter().all(|r| r.len() == t.columns.len()),
            "table `{}`: a row's cells do not match its columns",
            t.id
        );
    }
    let template = std::fs::read_to_string(root.join("benches/page.md")).unwrap();
    let generated = render(&results, &template);
    let page = root.join("docs/benchmarks.md");
    if std::env::var_os("ROWSHARD_BLESS").is_some() {
        std::fs::write(&page, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/benchmarks.md is stale: regenerate it with `bash scripts/benchmarks.sh`"
    );
}
