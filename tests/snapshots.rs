//! Snapshot tests of the generated kernel source, compiled without any device: CUDA C++ for every
//! (optimizer × weight dtype) of the table and WGSL where the dtype allows, plus the gather kernel
//! per dtype, the row-copy kernel, the dense products and losses, and the kernels `#[scoring]`
//! generates for DistMult and ComplEx. Entry-point hashes are redacted. The set of snapshot files must equal the set the
//! table implies, so a new table row without a snapshot fails here.

use std::collections::BTreeSet;
use std::path::Path;

use rowshard::model::{ScoreKernel, ScoringFunction, kernel_source};
use rowshard::models::{ComplEx, DistMult};
use rowshard_kernels::source::{Language, apply_source, copy_source, dense_sources, gather_source};
use rowshard_kernels::{DType, TABLE, TableConfig};

const LANGUAGES: [Language; 2] = [Language::CudaCpp, Language::Wgsl];

/// `(snapshot name, source)` for every kernel the table implies.
fn expected_kernels() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for spec in TABLE {
        for &dtype in spec.weight_dtypes {
            for language in LANGUAGES.into_iter().filter(|l| l.supports(dtype)) {
                let config = TableConfig::new(spec.optimizer, dtype, 128);
                let source = apply_source(&config, language).expect("apply source");
                out.push((
                    format!("apply_{}_{}_{}", spec.name, dtype.name(), language.name()),
                    source,
                ));
            }
        }
    }
    for dtype in DType::ALL {
        for language in LANGUAGES.into_iter().filter(|l| l.supports(dtype)) {
            let source = gather_source(dtype, language).expect("gather source");
            out.push((
                format!("gather_{}_{}", dtype.name(), language.name()),
                source,
            ));
        }
    }
    for language in LANGUAGES {
        let source = copy_source(language).expect("copy source");
        out.push((format!("copy_rows_{}", language.name()), source));
    }
    for dtype in DType::ALL {
        for language in LANGUAGES.into_iter().filter(|l| l.supports(dtype)) {
            for (kernel, source) in dense_sources(dtype, language).expect("dense sources") {
                out.push((
                    format!("{kernel}_{}_{}", dtype.name(), language.name()),
                    source,
                ));
            }
        }
    }
    out.extend(model_kernels::<DistMult>("distmult"));
    out.extend(model_kernels::<ComplEx>("complex"));
    out
}

/// The kernels `#[scoring]` generated for a shipped model: forward, backward and query, with
/// rows stored as f32 and bf16.
fn model_kernels<S: ScoringFunction>(name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kernel in ScoreKernel::ALL {
        for dtype in [DType::F32, DType::BF16] {
            for language in LANGUAGES.into_iter().filter(|l| l.supports(dtype)) {
                let source = kernel_source::<S>(kernel, dtype, language)
                    .expect("model kernel source")
                    .expect("linear in the tail: has a query");
                out.push((
                    format!(
                        "model_{name}_{}_{}_{}",
                        kernel.name(),
                        dtype.name(),
                        language.name()
                    ),
                    source,
                ));
            }
        }
    }
    out
}

#[test]
fn kernel_sources_match_their_snapshots() {
    for (name, source) in expected_kernels() {
        insta::assert_snapshot!(name, source);
    }
}

#[test]
fn every_table_row_has_a_snapshot_and_no_snapshot_is_stale() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|n| {
                    n.strip_suffix(".snap")
                        .map(|s| s.trim_start_matches("snapshots__").to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let expected: BTreeSet<String> = expected_kernels().into_iter().map(|(n, _)| n).collect();
    let missing: Vec<_> = expected.difference(&on_disk).collect();
    let stale: Vec<_> = on_disk.difference(&expected).collect();
    assert!(
        missing.is_empty(),
        "kernels without a snapshot (run `cargo insta accept` after reviewing): {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "snapshots no table row produces: {stale:?}"
    );
}

#[test]
fn snapshots_are_redacted_and_specialised() {
    let adam = apply_source(
        &TableConfig::new(rowshard_kernels::Optimizer::Adam, DType::F32, 128),
        Language::CudaCpp,
    )
    .unwrap();
    assert!(
        adam.contains("fused_apply") && adam.contains("_HASH"),
        "entry point not redacted"
    );
    assert!(
        adam.contains("sqrt"),
        "Adam's kernel computes a square root"
    );
    let sgd = apply_source(
        &TableConfig::new(rowshard_kernels::Optimizer::Sgd, DType::F32, 128),
        Language::CudaCpp,
    )
    .unwrap();
    assert!(
        !sgd.contains("sqrt"),
        "SGD's kernel is specialised: no square root"
    );
    let err = gather_source(DType::BF16, Language::Wgsl).unwrap_err();
    assert!(matches!(
        err,
        rowshard_kernels::KernelError::UnsupportedDType { .. }
    ));
}
