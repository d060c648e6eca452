//! A search's record: `ledger.jsonl`, a line per trial run to its end (finished or failed), and
//! `search.json`, what the search is (its space, its budget, its base recipe, the trials it
//! planned). A trial is written only once it ended, so a search killed at any moment and started
//! again reads back exactly the trials that ran and runs the others — a torn one again.

use std::io::Write;
use std::path::{Path, PathBuf};

use rowshard::train::Metrics;
use serde::{Deserialize, Serialize};

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Trained and evaluated.
    Finished,
    /// It failed: diverged (a non-finite gradient), ran out of memory, or was refused.
    Failed,
}

/// One trial at one rung.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The trial (0: the base recipe's own settings).
    pub trial: usize,
    /// The rung (0: the cheapest).
    pub rung: usize,
    /// Its settings: each searched key and its value's text.
    pub settings: Vec<(String, String)>,
    /// Epochs it was given.
    pub epochs: usize,
    /// The fraction of the training triples it trained on.
    pub train_fraction: f64,
    /// How it ended.
    pub status: Status,
    /// Epochs it trained (fewer when it stopped early).
    pub epochs_trained: usize,
    /// Its best evaluated epoch.
    pub best_epoch: Option<usize>,
    /// Seconds of training.
    pub train_seconds: f64,
    /// Seconds in all (start, training, evaluations).
    pub seconds: f64,
    /// Filtered metrics on valid of its best evaluated model.
    pub valid: Option<Metrics>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Record {
    /// Its valid MRR; a failed trial ranks below any that finished.
    pub fn mrr(&self) -> f64 {
        match (self.status, self.valid) {
            (Status::Finished, Some(m)) if m.mrr.is_finite() => m.mrr,
            _ => f64::NEG_INFINITY,
        }
    }
}

/// What a search is, written when it starts and checked when it is started again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The space file's text.
    pub space: String,
    /// The base recipe the trials start from, as TOML (the file's with the flags over it).
    pub base: String,
    /// The budget, as given.
    pub budget: String,
    /// Quasi-random trials of the first rung, once decided (a time budget decides it after the
    /// first trial).
    pub trials: Option<usize>,
}

/// The ledger of a search folder.
pub struct Ledger {
    folder: PathBuf,
    /// Every trial that ended, in the order they ended.
    pub records: Vec<Record>,
}

impl Ledger {
    /// The ledger in `folder` (made if new), with what `header` says the search is; a folder
    /// holding another search is refused.
    pub fn open(folder: &Path, header: &mut Header) -> Result<Self, String> {
        std::fs::create_dir_all(folder.join("trials"))
            .map_err(|e| format!("{}: {e}", folder.display()))?;
        let head = folder.join("search.json");
        if head.exists() {
            let text =
                std::fs::read_to_string(&head).map_err(|e| format!("{}: {e}", head.display()))?;
            let found: Header =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", head.display()))?;
            if (&found.space, &found.base, &found.budget)
                != (&header.space, &header.base, &header.budget)
            {
                return Err(format!(
                    "{} holds another search (its space, base recipe or budget differ); choose \
                     another --out",
                    folder.display()
                ));
            }
            header.trials = found.trials;
        } else {
            write_atomic(
                &head,
                &serde_json::to_string_pretty(header).unwrap_or_default(),
            )?;
        }
        let path = folder.join("ledger.jsonl");
        let mut records = Vec::new();
        if let Ok(text) = std::fs::read_to_string(&path) {
            for (i, line) in text.lines().enumerate() {
                // A line cut short by a kill is not a record: its trial runs again.
                match serde_json::from_str::<Record>(line) {
                    Ok(record) => records.push(record),
                    Err(_) if i + 1 == text.lines().count() => {}
                    Err(e) => return Err(format!("{}:{}: {e}", path.display(), i + 1)),
                }
            }
        }
        let ledger = Ledger {
            folder: folder.to_path_buf(),
            records,
        };
        // Rewritten whole, without a torn last line.
        ledger.rewrite()?;
        Ok(ledger)
    }

    /// Records that the search's first rung has `trials` trials.
    pub fn decide(&self, header: &mut Header, trials: usize) -> Result<(), String> {
        header.trials = Some(trials);
        write_atomic(
            &self.folder.join("search.json"),
            &serde_json::to_string_pretty(header).unwrap_or_default(),
        )
    }

    /// The record of `trial` at `rung`, if it ended.
    pub fn find(&self, trial: usize, rung: usize) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.trial == trial && r.rung == rung)
    }

    /// Appends `record`.
    pub fn push(&mut self, record: Record) -> Result<(), String> {
        let path = self.folder.join("ledger.jsonl");
        let line = serde_json::to_string(&record).map_err(|e| e.to_string())?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(file, "{line}")
            .and_then(|_| file.sync_data())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        self.records.push(record);
        Ok(())
    }

    /// Seconds the ended trials took.
    pub fn seconds(&self) -> f64 {
        self.records.iter().map(|r| r.seconds).sum()
    }

    fn rewrite(&self) -> Result<(), String> {
        let mut text = String::new();
        for r in &self.records {
            text.push_str(&serde_json::to_string(r).map_err(|e| e.to_string())?);
            text.push('\n');
        }
        write_atomic(&self.folder.join("ledger.jsonl"), &text)
    }
}

/// Writes `text` to `path` through a temporary file.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}
