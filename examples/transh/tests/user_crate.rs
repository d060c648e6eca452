//! The user crate's own binary, as a user runs it: TransH trained with a shipped recipe, stopped
//! early on its best epoch, checkpointed, resumed, recorded and exported — every subcommand the
//! shipped models have.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the crate's `transh` binary from the repository's root; (success, stderr).
fn transh(args: &[&str]) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_transh"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("the transh binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("transh-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The shipped TransE recipe with a rate and size for UMLS.
const RECIPE: [&str; 12] = [
    "--config",
    "recipes/transe.toml",
    "--model",
    "transh",
    "--dim",
    "32",
    "--neg-ratio",
    "16",
    "--lr",
    "0.1",
    "--progress",
    "false",
];

#[test]
fn a_shipped_recipe_trains_it_stops_early_on_its_best_epoch_and_records_it() {
    let dir = temp("early");
    let metrics = dir.join("metrics.json");
    let mut args = vec!["train"];
    args.extend(RECIPE);
    args.extend([
        "--epochs",
        "200",
        "--eval-every",
        "5",
        "--patience",
        "2",
        "--min-delta",
        "0.002",
        "--metrics-json",
        metrics.to_str().unwrap(),
    ]);
    let (ok, stderr) = transh(&args);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("rowshard train: TransH"), "{stderr}");
    let m = json(&metrics);
    assert_eq!(m["stopped_early"], true, "{m}");
    let evaluations = m["evaluations"].as_array().unwrap();
    let best = evaluations
        .iter()
        .max_by(|a, b| {
            let mrr = |v: &serde_json::Value| v["valid"]["mrr"].as_f64().unwrap();
            mrr(a).total_cmp(&mrr(b))
        })
        .unwrap();
    assert_eq!(m["best_epoch"], best["epoch"], "{m}");
    assert!(best["epoch"].as_u64() < m["epochs"].as_u64(), "{m}");
    // The reported model is the best one, restored bit for bit.
    assert_eq!(m["valid"], best["valid"], "{m}");
    assert!(stderr.contains("restored the best model"), "{stderr}");
    assert!(m["test"]["mrr"].as_f64().unwrap() > 0.5, "{m}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn it_checkpoints_resumes_and_exports() {
    let dir = temp("resume");
    let checkpoints = dir.join("checkpoints");
    let metrics = dir.join("metrics.json");
    let mut first = vec!["train"];
    first.extend(RECIPE);
    first.extend([
        "--epochs",
        "3",
        "--checkpoint-dir",
        checkpoints.to_str().unwrap(),
    ]);
    let (ok, stderr) = transh(&first);
    assert!(ok && stderr.contains("checkpoint written to"), "{stderr}");
    // Resumed on another number of ranks, to 6 epochs in all.
    let mut second = vec!["train"];
    second.extend(RECIPE);
    second.extend([
        "--epochs",
        "6",
        "--ranks",
        "3",
        "--resume",
        checkpoints.to_str().unwrap(),
        "--metrics-json",
        metrics.to_str().unwrap(),
    ]);
    let (ok, stderr) = transh(&second);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("after epoch 3 (written by 2 ranks)"),
        "{stderr}"
    );
    let m = json(&metrics);
    assert_eq!(
        (m["epochs"].as_u64(), m["epochs_this_run"].as_u64()),
        (Some(6), Some(3))
    );
    let out = dir.join("export");
    let (ok, stderr) = transh(&[
        "export",
        "--checkpoint",
        checkpoints.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("rowshard export: TransH"), "{stderr}");
    let entities = std::fs::read_to_string(out.join("entities.txt")).unwrap();
    assert_eq!(entities.lines().count(), 135);
    assert!(out.join("embeddings.safetensors").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_unknown_model_lists_the_registered_ones() {
    let (ok, stderr) = transh(&["train", "--model", "transx"]);
    assert!(!ok);
    assert!(
        stderr.contains("unknown model `transx`; expected one of:") && stderr.contains("transh"),
        "{stderr}"
    );
}
