//! The `rowshard` command: a short training run writes its metrics as JSON; bad input of every
//! kind is one line naming the problem, a non-zero exit, and nothing written over.

use std::path::PathBuf;
use std::process::Command;

fn rowshard(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rowshard"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rowshard-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `args`, expects failure with a one-line error containing `expected`.
fn refused(args: &[&str], expected: &str) {
    let (ok, _, stderr) = rowshard(args);
    assert!(!ok, "{args:?} succeeded");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rowshard:"))
        .collect();
    assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
    assert!(errors[0].contains(expected), "{args:?}: {}", errors[0]);
}

#[test]
fn a_short_run_trains_checkpoints_and_writes_its_metrics() {
    let dir = temp("run");
    let json = dir.join("metrics.json");
    let ck = dir.join("ck");
    let (ok, _, stderr) = rowshard(&[
        "train",
        "--epochs",
        "3",
        "--eval-every",
        "2",
        "--metrics-json",
        json.to_str().unwrap(),
        "--checkpoint-dir",
        ck.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("DistMult") && stderr.contains("2 ranks"),
        "{stderr}"
    );
    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for split in ["valid", "test"] {
        for key in ["mrr", "hits@1", "hits@3", "hits@10"] {
            let v = metrics[split][key].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{split} {key} = {v}");
        }
    }
    // What training cost: KvsAll looks up each query's head (one row an example) and scores
    // the shards where they lie.
    let train = &metrics["train"];
    assert!(train["seconds"].as_f64().unwrap() > 0.0, "{train}");
    assert!(train["examples_per_s"].as_f64().unwrap() > 0.0, "{train}");
    assert_eq!(
        train["rows_looked_up_per_example"].as_f64(),
        Some(1.0),
        "{train}"
    );
    assert!(
        train["peak_rss_bytes"].as_u64().unwrap() > 1 << 20,
        "{train}"
    );
    assert!(ck.join("epoch-000002/manifest.json").is_file());
    assert!(ck.join("epoch-000003/manifest.json").is_file());

    // Resuming under another rank count, and refusing a checkpoint of another shape.
    let (ok, _, stderr) = rowshard(&[
        "train",
        "--epochs",
        "4",
        "--ranks",
        "1",
        "--resume",
        ck.to_str().unwrap(),
    ]);
    assert!(ok && stderr.contains("after epoch 3"), "{stderr}");
    refused(
        &[
            "train",
            "--epochs",
            "4",
            "--dim",
            "16",
            "--resume",
            ck.to_str().unwrap(),
        ],
        "the checkpoint's dim is 32, the model's is 16",
    );
    refused(
        &[
            "train",
            "--model",
            "complex",
            "--resume",
            ck.to_str().unwrap(),
        ],
        "the checkpoint's model is DistMult, the model's is ComplEx",
    );
    // A checkpoint folder is never written over.
    let manifest = std::fs::read(ck.join("epoch-000003/manifest.json")).unwrap();
    refused(
        &[
            "train",
            "--epochs",
            "3",
            "--checkpoint-dir",
            ck.to_str().unwrap(),
        ],
        "already holds a checkpoint",
    );
    assert_eq!(
        manifest,
        std::fs::read(ck.join("epoch-000003/manifest.json")).unwrap()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The tensors of an exported `embeddings.safetensors`, by name: its JSON header read by hand
/// (eight bytes of length, the header, the data).
fn exported_tensors(file: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let bytes = std::fs::read(file).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let data = &bytes[8 + len..];
    header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, t)| {
            let at = |i: usize| t["data_offsets"][i].as_u64().unwrap() as usize;
            (name.clone(), data[at(0)..at(1)].to_vec())
        })
        .collect()
}

/// `--relation-lr` trains the relation table at its own rate: at 0 the relations stay as
/// initialised (those of a run at `--lr 0`, bit for bit) while the entities train.
#[test]
fn relation_lr_sets_the_relation_tables_rate_alone() {
    let dir = temp("relation-lr");
    let export = |name: &str, rates: &[&str]| {
        let ck = dir.join(name).join("ck");
        let out = dir.join(name).join("out");
        let mut args = vec![
            "train",
            "--epochs",
            "2",
            "--eval-every",
            "2",
            "--checkpoint-dir",
            ck.to_str().unwrap(),
        ];
        args.extend_from_slice(rates);
        let (ok, _, stderr) = rowshard(&args);
        assert!(ok, "{stderr}");
        let (ok, _, stderr) = rowshard(&[
            "export",
            "--checkpoint",
            ck.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(ok, "{stderr}");
        exported_tensors(&out.join("embeddings.safetensors"))
    };
    let frozen = export("frozen", &["--lr", "0"]);
    let relations_frozen = export("relations-frozen", &["--lr", "0.1", "--relation-lr", "0"]);
    let trained = export("trained", &["--lr", "0.1"]);
    assert_eq!(relations_frozen["relations"], frozen["relations"]);
    assert_ne!(relations_frozen["entities"], frozen["entities"]);
    assert_ne!(trained["relations"], frozen["relations"]);
    let (ok, _, stderr) = rowshard(&["train", "--epochs", "1", "--relation-lr", "0.5"]);
    assert!(ok && stderr.contains("(relations 0.5)"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    let dir = temp("bad");
    refused(
        &["train", "--dataset", dir.join("nowhere").to_str().unwrap()],
        "does not exist",
    );
    refused(
        &["train", "--model", "holE"],
        "unknown model `holE`; expected one of: distmult",
    );
    refused(
        &["train", "--optimizer", "lamb"],
        "unknown optimizer `lamb`; expected one of: sgd, adam",
    );
    refused(
        &["train", "--optimizer", "sgd", "--beta1", "0.5"],
        "sgd has no hyper-parameter `beta1`; expected one of: weight_decay",
    );
    refused(
        &["train", "--beta2", "1.5"],
        "beta2 = 1.5 is outside its valid range [0, 1)",
    );
    refused(
        &["train", "--model", "transe", "--mode", "kvsall"],
        "transe cannot train with KvsAll",
    );
    refused(
        &["train", "--model", "rotate", "--mode", "1vsall"],
        "rotate cannot train with 1vsAll: its score is not linear in the tail nor quadratic",
    );
    refused(
        &[
            "train",
            "--model",
            "rotate-sq",
            "--mode",
            "1vsall",
            "--negatives",
            "uniform:8,batch",
            "--loss",
            "self-adversarial",
        ],
        "self-adversarial weighting needs shared negatives without batch negatives",
    );
    refused(
        &["train", "--adversarial-temperature", "1"],
        "--adversarial-temperature applies to --loss self-adversarial",
    );
    refused(
        &["train", "--model", "complex", "--dim", "31"],
        "multiple of 2",
    );
    refused(
        &["train", "--mode", "negsample", "--negatives", "uniform:8"],
        "--negatives applies to kvsall and 1vsall",
    );
    // Flags the parser refuses on its own (clap's message, before anything is loaded).
    for (bad, why) in [
        ("degree:x", "a positive number of negatives"),
        ("uniform:4,zipf:2", "unknown negatives `uniform:4,zipf:2`"),
        ("batch:64", "set the queries per chunk with --chunk 64"),
    ] {
        let (ok, _, stderr) = rowshard(&["train", "--negatives", bad]);
        assert!(!ok && stderr.contains(why), "{bad}: {stderr}");
    }
    let (ok, _, stderr) = rowshard(&["train", "--negatives", "uniform:0"]);
    assert!(
        !ok && stderr.contains("a positive number of negatives is needed"),
        "{stderr}"
    );
    let (ok, _, stderr) = rowshard(&["train", "--ranks", "0"]);
    assert!(
        !ok && stderr.contains("invalid value '0' for '--ranks <RANKS>'"),
        "{stderr}"
    );
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("train.txt"), "a\tr\tb\nb r c\n").unwrap();
    std::fs::write(data.join("valid.txt"), "").unwrap();
    std::fs::write(data.join("test.txt"), "").unwrap();
    let json = dir.join("metrics.json");
    std::fs::write(&json, "kept").unwrap();
    refused(
        &[
            "train",
            "--dataset",
            data.to_str().unwrap(),
            "--metrics-json",
            json.to_str().unwrap(),
        ],
        "train.txt:2: expected head<TAB>relation<TAB>tail",
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "kept");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_recipe_is_read_overridden_and_refused_naming_file_line_and_key() {
    let dir = temp("recipe");
    let recipe = dir.join("r.toml");
    std::fs::write(
        &recipe,
        "# a comment\nmodel = \"complex\"\ndim = 16\nepochs = 5\nlabel_smoothing = 0.1\n",
    )
    .unwrap();
    let json = dir.join("metrics.json");
    let (ok, _, stderr) = rowshard(&[
        "train",
        "--config",
        recipe.to_str().unwrap(),
        "--epochs",
        "2",
        "--metrics-json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("ComplEx") && stderr.contains("dim 16"),
        "the recipe's model and dim: {stderr}"
    );
    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        metrics["epochs"], 2,
        "the command line overrides the recipe"
    );
    std::fs::remove_file(&json).unwrap();
    for (text, expected) in [
        (
            "model = \"complex\"\nbogus = 1\n",
            "r.toml:2: unknown key `bogus`",
        ),
        (
            "epochs = \"three\"\n",
            "r.toml:1: `epochs`: invalid value 'three'",
        ),
        ("\nlr = -0.1\n", "r.toml:2: `lr`: invalid value '-0.1'"),
        (
            "beta1 = 1.5\n",
            "r.toml:1: `beta1`: 1.5 is outside the valid range [0, 1)",
        ),
        (
            "label-smoothing = 1.0\n",
            "r.toml:1: `label-smoothing`: invalid value '1'",
        ),
        (
            "reg = \"n4:0.1\"\n",
            "r.toml:1: `reg`: invalid value 'n4:0.1'",
        ),
        ("dim = [1, 2\n", "r.toml:1:"),
        (
            "mode = { a = 1 }\n",
            "r.toml:1: `mode`: expected a number, a string or a boolean",
        ),
    ] {
        std::fs::write(&recipe, text).unwrap();
        refused(
            &[
                "train",
                "--config",
                recipe.to_str().unwrap(),
                "--metrics-json",
                json.to_str().unwrap(),
            ],
            expected,
        );
        assert!(!json.exists(), "{text}: nothing was trained");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_shipped_recipe_trains() {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../recipes");
    let mut recipes: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    recipes.sort();
    assert!(recipes.len() >= 2, "{recipes:?}");
    for recipe in recipes {
        // One small epoch of each: the file parses, its flags combine, and it trains.
        let (ok, _, stderr) = rowshard(&[
            "train",
            "--config",
            recipe.to_str().unwrap(),
            "--epochs",
            "1",
            "--dim",
            "8",
        ]);
        assert!(ok, "{}: {stderr}", recipe.display());
        assert!(
            stderr.contains("test   MRR"),
            "{}: {stderr}",
            recipe.display()
        );
    }
}

#[test]
fn early_stopping_ends_on_the_best_evaluated_model() {
    let dir = temp("early");
    let json = dir.join("metrics.json");
    let (ok, _, stderr) = rowshard(&[
        "train",
        "--epochs",
        "400",
        "--eval-every",
        "10",
        "--patience",
        "2",
        "--min-delta",
        "0.01",
        "--metrics-json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(m["stopped_early"], true, "{stderr}");
    let evaluations = m["evaluations"].as_array().unwrap();
    let last = evaluations.last().unwrap()["epoch"].as_u64().unwrap();
    assert!(last < 400 && m["epochs"].as_u64() == Some(last), "{m}");
    let best = evaluations
        .iter()
        .max_by(|a, b| {
            let mrr = |v: &serde_json::Value| v["valid"]["mrr"].as_f64().unwrap();
            mrr(a).total_cmp(&mrr(b))
        })
        .unwrap();
    assert_eq!(m["best_epoch"], best["epoch"], "{m}");
    assert!(
        best["epoch"].as_u64().unwrap() < last,
        "the best is not the last: {m}"
    );
    // The reported model is the best one, restored bit for bit: the same metrics, exactly.
    assert_eq!(m["valid"], best["valid"], "{m}");
    assert!(stderr.contains("restored the best model"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn prepared_and_synthetic_graphs_stream_and_bad_files_are_refused_before_training() {
    let dir = temp("prepared");
    let prepared = dir.join("umls");
    let p = prepared.to_str().unwrap();
    let (ok, _, stderr) = rowshard(&["prepare", "datasets/umls", "--out", p]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("135 entities, 46 relations; 5216 / 652 / 661 triples"),
        "{stderr}"
    );

    // The prepared folder trains as the text one does when a block holds every triple, and
    // streams in blocks otherwise.
    let run = |dataset: &str, extra: &[&str]| -> String {
        let mut args = vec![
            "train",
            "--dataset",
            dataset,
            "--model",
            "complex",
            "--mode",
            "1vsall",
            "--dim",
            "16",
            "--epochs",
            "2",
            "--ranks",
            "2",
        ];
        args.extend_from_slice(extra);
        let (ok, _, stderr) = rowshard(&args);
        assert!(ok, "{stderr}");
        stderr
            .lines()
            .filter(|l| l.contains("MRR"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(run(p, &[]), run("datasets/umls", &[]));
    let streamed = run(p, &["--stream-block", "1000"]);
    assert!(streamed.contains("test   MRR"), "{streamed}");
    let (ok, _, stderr) = rowshard(&[
        "train",
        "--dataset",
        p,
        "--model",
        "complex",
        "--mode",
        "negsample",
        "--dim",
        "16",
        "--epochs",
        "1",
        "--stream-block",
        "700",
        "--eval-sample",
        "50",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("streamed from") && stderr.contains("blocks of 700"),
        "{stderr}"
    );
    assert!(
        stderr.contains("queries, filtered, against 50 sampled entities)"),
        "{stderr}"
    );

    // A truncated training file and a foreign one: refused naming the file, nothing trained.
    let train_bin = prepared.join("train.bin");
    let whole = std::fs::read(&train_bin).unwrap();
    std::fs::write(&train_bin, &whole[..whole.len() - 7]).unwrap();
    let args = ["train", "--dataset", p, "--epochs", "1"];
    refused(&args, "train.bin: truncated or damaged");
    let (_, _, stderr) = rowshard(&args);
    assert!(!stderr.contains("epoch"), "{stderr}");
    std::fs::write(
        &train_bin,
        "not\ttriples\tat all, but long enough to have a header\n",
    )
    .unwrap();
    refused(&args, "train.bin: not a rowshard triples file");
    std::fs::write(&train_bin, &whole).unwrap();

    // A synthetic graph, drawn and trained on; the same seed draws the same files.
    let synth = dir.join("synth");
    let s = synth.to_str().unwrap();
    let draw = |out: &str| {
        let (ok, _, stderr) = rowshard(&[
            "synth",
            "--entities",
            "3000",
            "--relations",
            "4",
            "--triples",
            "30000",
            "--seed",
            "5",
            "--out",
            out,
        ]);
        assert!(ok, "{stderr}");
    };
    draw(s);
    let again = dir.join("again");
    draw(again.to_str().unwrap());
    for file in [
        "entities.txt",
        "relations.txt",
        "train.bin",
        "valid.bin",
        "test.bin",
    ] {
        assert_eq!(
            std::fs::read(synth.join(file)).unwrap(),
            std::fs::read(again.join(file)).unwrap(),
            "{file}"
        );
    }
    let metrics = dir.join("m.json");
    let (ok, _, stderr) = rowshard(&[
        "train",
        "--dataset",
        s,
        "--model",
        "complex",
        "--mode",
        "1vsall",
        "--negatives",
        "uniform:64",
        "--dim",
        "16",
        "--epochs",
        "1",
        "--stream-block",
        "4096",
        // Two ranks, each with its buffers (without `--ranks` this run takes one on 2 cores).
        "--ranks",
        "2",
        "--metrics-json",
        metrics.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
    assert!(json["train"]["tables_bytes"].as_u64().unwrap() > 3000 * 16 * 4);
    assert!(json["test"]["sampled_candidates"].is_null(), "{json}");
    assert_eq!(
        json["train"]["stream_buffer_bytes"].as_u64().unwrap(),
        2 * 4096 * (12 + 2 * 16)
    );
    refused(
        &[
            "synth",
            "--entities",
            "10",
            "--relations",
            "1",
            "--triples",
            "5",
            "--clusters",
            "11",
            "--out",
            s,
        ],
        "clusters must be in 1..=10",
    );
    std::fs::remove_dir_all(dir).unwrap();
}
