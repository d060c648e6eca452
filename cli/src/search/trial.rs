//! One trial at one rung: its recipe written to the search folder and trained by this same
//! program's `train` in a process of its own — exactly as `rowshard train` trains it, and so that
//! a trial that diverges, runs out of memory or crashes is recorded as failed while the search
//! goes on.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use rowshard::recipe::Recipe;

use super::ledger::{Record, Status};

/// What a trial is.
pub struct Trial<'a> {
    /// Its number (0: the base recipe's settings).
    pub trial: usize,
    /// Its rung.
    pub rung: usize,
    /// Its settings: each searched key and its value.
    pub settings: &'a [(String, String)],
    /// Its whole recipe.
    pub recipe: &'a Recipe,
    /// Epochs it is given.
    pub epochs: usize,
    /// The fraction of the training triples it trains on.
    pub train_fraction: f64,
}

impl Trial<'_> {
    /// Trains the trial with `program` (this program), its files in `folder`; returns its
    /// record.
    pub fn run(&self, program: &Path, folder: &Path) -> Record {
        let name = format!("{:04}-rung{}", self.trial, self.rung);
        let recipe_path = folder.join(format!("{name}.toml"));
        let metrics = folder.join(format!("{name}.json"));
        let log = folder.join(format!("{name}.log"));
        let _ = std::fs::remove_file(&metrics);
        let start = Instant::now();
        let outcome = std::fs::write(&recipe_path, self.recipe.to_toml())
            .map_err(|e| format!("{}: {e}", recipe_path.display()))
            .and_then(|_| {
                std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))
            })
            .and_then(|file| {
                let err = file.try_clone().map_err(|e| e.to_string())?;
                Command::new(program)
                    .arg("train")
                    .arg("--config")
                    .arg(&recipe_path)
                    .arg("--metrics-json")
                    .arg(&metrics)
                    .args(["--progress", "false"])
                    .stdin(Stdio::null())
                    .stdout(file)
                    .stderr(err)
                    .status()
                    .map_err(|e| format!("{}: {e}", program.display()))
            });
        let seconds = start.elapsed().as_secs_f64();
        let mut record = Record {
            trial: self.trial,
            rung: self.rung,
            settings: self.settings.to_vec(),
            epochs: self.epochs,
            train_fraction: self.train_fraction,
            status: Status::Failed,
            epochs_trained: 0,
            best_epoch: None,
            train_seconds: 0.0,
            seconds,
            valid: None,
            error: None,
        };
        let status = match outcome {
            Ok(status) => status,
            Err(e) => {
                record.error = Some(e);
                return record;
            }
        };
        if !status.success() {
            record.error = Some(failure(&log, status));
            return record;
        }
        let report: Option<serde_json::Value> = std::fs::read(&metrics)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let Some(report) = report else {
            record.error = Some(format!("{}: no metrics were written", metrics.display()));
            return record;
        };
        record.valid = serde_json::from_value(report["valid"].clone()).ok();
        record.best_epoch = report["best_epoch"].as_u64().map(|e| e as usize);
        record.epochs_trained = report["epochs_this_run"].as_u64().unwrap_or(0) as usize;
        record.train_seconds = report["train_seconds"].as_f64().unwrap_or(0.0);
        match record.valid {
            Some(m) if m.mrr.is_finite() => record.status = Status::Finished,
            _ => record.error = Some("diverged: valid MRR is not a number".into()),
        }
        record
    }
}

/// Why a trial's process failed: its last `rowshard:` line, or the signal that ended it.
fn failure(log: &Path, status: std::process::ExitStatus) -> String {
    let said = std::fs::read_to_string(log).ok().and_then(|text| {
        text.lines()
            .rev()
            .find(|l| l.starts_with("rowshard:"))
            .map(|l| l.trim_start_matches("rowshard: ").to_string())
    });
    if let Some(said) = said {
        return said;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!(
                "killed by signal {signal}{}",
                if signal == 9 {
                    " (out of memory, or killed)"
                } else {
                    ""
                }
            );
        }
    }
    format!("exited with {status}")
}
