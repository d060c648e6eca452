//! `rowshard search`: a bad space is one line naming file, line and key before anything trains; a
//! search killed in the middle of a trial and started again ends with the ledger of one never
//! interrupted; a trial that diverges is recorded as failed and the search goes on.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rowshard-search-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small space over the shipped ComplEx recipe, fast on UMLS.
fn space(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("space.toml");
    let base = root().join("recipes/complex.toml");
    std::fs::write(
        &path,
        format!(
            "base = {:?}\n\n[search]\nrungs = 2\nkeep = 0.5\n\n[space]\n{body}",
            base
        ),
    )
    .unwrap();
    path
}

fn search(space: &Path, out: &Path, budget: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rowshard"));
    command
        .args(["search", "--space"])
        .arg(space)
        .args(["--budget", budget, "--out"])
        .arg(out)
        .args(["--dim", "16", "--epochs", "2", "--patience", "0"])
        .current_dir(root());
    command
}

/// The ledger's records without their times.
fn ledger(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("ledger.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("seconds");
            o.remove("train_seconds");
            v
        })
        .collect()
}

#[test]
fn a_bad_space_is_one_line_naming_file_line_and_key_before_anything_trains() {
    let dir = temp("bad");
    for (body, expected) in [
        (
            "lr = { log-range = [0.1, 0.5] }\nbogus = { range = [0, 1] }\n",
            ":9: `bogus`: unknown key",
        ),
        ("lr = { range = [0.5, 0.5] }\n", ":8: `lr`: an empty range"),
        (
            "lr = { log-range = [0.0, 0.5] }\n",
            ":8: `lr`: a log-range must lie above 0",
        ),
        ("dim = { int-range = [15, 17] }\n", ":8: `dim`: 15: "),
        (
            "chunk = { choice = [64] }\n",
            ":8: `chunk`: 64: --chunk applies to shared negatives",
        ),
    ] {
        let space = space(&dir, body);
        let out = dir.join("out");
        let result = search(&space, &out, "2").output().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("rowshard:"))
            .collect();
        assert!(!result.status.success(), "{body}: {stderr}");
        assert_eq!(errors.len(), 1, "{body}: {stderr}");
        assert!(
            errors[0].contains(&format!("space.toml{expected}")),
            "{body}: {}",
            errors[0]
        );
        assert!(
            !out.join("ledger.jsonl").exists(),
            "{body}: nothing trained"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_search_killed_in_a_trial_resumes_to_the_uninterrupted_ledger() {
    let dir = temp("resume");
    let space = space(
        &dir,
        "lr = { log-range = [0.05, 0.5] }\nlabel-smoothing = { choice = [0.0, 0.1] }\n",
    );
    let whole = dir.join("whole");
    let done = search(&space, &whole, "4").output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let expected = ledger(&whole);
    assert_eq!(
        expected.len(),
        6,
        "4 trials, then the best 2 at the second rung"
    );
    // Killed — the search and the trial it runs — once two trials ended and a third began.
    let cut = dir.join("cut");
    let mut child = {
        use std::os::unix::process::CommandExt;
        search(&space, &cut, "4")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let started = Instant::now();
    loop {
        let ended =
            std::fs::read_to_string(cut.join("ledger.jsonl")).map_or(0, |t| t.lines().count());
        if ended >= 2 && cut.join("trials/0002-rung0.log").exists() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the search never got there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: killpg with the group the child leads (process_group(0) above).
    assert_eq!(unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) }, 0);
    let _ = child.wait();
    assert!(ledger(&cut).len() < expected.len());
    let again = search(&space, &cut, "4").output().unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(ledger(&cut), expected);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_trial_that_diverges_is_recorded_and_the_search_goes_on() {
    let dir = temp("diverge");
    // Every quasi-random trial takes a rate that diverges; trial 0 is the base recipe's.
    let space = space(&dir, "lr = { choice = [1e30] }\n");
    let out = dir.join("out");
    let result = search(&space, &out, "3").output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let records = ledger(&out);
    let failed: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 2, "{records:?}");
    assert!(
        failed
            .iter()
            .all(|r| r["error"].as_str().unwrap().contains("is not finite")),
        "{records:?}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["best"]["trial"], 0, "{summary}");
    assert_eq!(summary["best"]["rung"], 1, "{summary}");
    assert!(out.join("best.toml").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}
