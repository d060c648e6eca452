//! A user's model is not second class: ComplEx written again with the scoring DSL, as a user
//! would in a crate of their own, trains through the user's paths — the command line of a
//! registry holding it, and the library's `fit` with the recipe loaded in code — to the same
//! metrics, bit for bit, as the shipped `complex` through the `rowshard` binary, with the same
//! recipe, seed and ranks.

use std::path::{Path, PathBuf};
use std::process::Command;

use rowshard::data::Dataset;
use rowshard::recipe::Recipe;
use rowshard::train::{Progress, Silent, Start};
use rowshard::{scoring, sharded_embedding};

/// ComplEx, the shipped formula and settings, under another name.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.1), init = normal(std = 1.0))]
pub struct MyComplEx;

#[scoring(kvsall)]
impl MyComplEx {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (h_re, h_im) = halves(h);
        let (r_re, r_im) = halves(r);
        let (t_re, t_im) = halves(t);
        sum(h_re * r_re * t_re + h_im * r_re * t_im + h_re * r_im * t_im - h_im * r_im * t_re)
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The shipped ComplEx recipe, shortened.
fn flags(model: &str, metrics: &Path) -> Vec<String> {
    [
        "train",
        "--config",
        "recipes/complex.toml",
        "--model",
        model,
        "--dim",
        "32",
        "--epochs",
        "4",
        "--ranks",
        "3",
        "--progress",
        "false",
        "--metrics-json",
        metrics.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// The metrics of a report: everything but its times and memory.
fn metrics(report: &serde_json::Value) -> serde_json::Value {
    let mut m = report.clone();
    let object = m.as_object_mut().unwrap();
    object.remove("train");
    object.remove("train_seconds");
    for evaluation in object["evaluations"].as_array_mut().unwrap() {
        evaluation.as_object_mut().unwrap().remove("train_seconds");
    }
    m
}

#[test]
fn complex_written_by_a_user_trains_to_the_shipped_models_metrics_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("rowshard-user-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The shipped model, through the `rowshard` binary.
    let shipped = dir.join("shipped.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rowshard"))
        .args(flags("complex", &shipped))
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shipped: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&shipped).unwrap()).unwrap();
    // The user's, through the command line of a registry holding it.
    std::env::set_current_dir(root()).unwrap();
    let registry = rowshard_cli::models![MyComplEx].unwrap();
    let by_command = dir.join("command.json");
    let mut args = vec!["transh".to_string()];
    args.extend(flags("mycomplex", &by_command));
    rowshard_cli::run(args, &registry).unwrap();
    let by_command: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&by_command).unwrap()).unwrap();
    // The user's, through `fit` with the recipe in code.
    let recipe = Recipe::from_file(&root().join("recipes/complex.toml"))
        .unwrap()
        .overlay(&Recipe::from_args(["--dim=32", "--epochs=4", "--ranks=3"]).unwrap());
    let data = Dataset::load(root().join("datasets/umls")).unwrap();
    let plan = recipe.plan::<MyComplEx>(&data, "mycomplex").unwrap();
    let report = rowshard::train::run::<MyComplEx>(&data, &plan, &|_: &Start| {
        Box::new(Silent) as Box<dyn Progress>
    })
    .unwrap()
    .unwrap();
    let by_fit = serde_json::to_value(&report).unwrap();
    assert!(shipped["test"]["mrr"].as_f64().unwrap() > 0.5, "{shipped}");
    assert_eq!(metrics(&by_command), metrics(&shipped));
    assert_eq!(metrics(&by_fit), metrics(&shipped));
    std::fs::remove_dir_all(dir).unwrap();
}
