//! Keeping the best evaluated model, and early stopping: after every evaluation on valid, a model
//! better than the best so far in MRR is checkpointed; after `--patience` evaluations without a
//! gain of more than `--min-delta`, training stops. At the end the best checkpoint is loaded
//! back, so the final metrics are the best model's.

use std::path::{Path, PathBuf};

use crate::checkpoint::{self, RunState};
use crate::comm::Communicator;
use crate::model::{ScoringFunction, ShardedModel};

/// The best evaluated model so far, and where its checkpoint lies.
pub(super) struct Best {
    /// Where best checkpoints go: `--checkpoint-dir/best`, or a temporary folder.
    root: PathBuf,
    /// Whether `root` is ours to delete at the end.
    temporary: bool,
    /// The best epoch, its valid MRR and its checkpoint folder.
    best: Option<(usize, f64, PathBuf)>,
    /// Evaluations since the last gain.
    since_gain: usize,
    patience: usize,
    min_delta: f64,
}

impl Best {
    /// Chooses the folder — `checkpoint_dir/best`, or a temporary one (the same on every rank:
    /// rank 0's choice is broadcast) — for `patience` evaluations without a gain of more than
    /// `min_delta`. A collective.
    pub fn new(
        comm: &dyn Communicator,
        checkpoint_dir: Option<&Path>,
        patience: usize,
        min_delta: f64,
    ) -> Result<Self, String> {
        let (root, temporary) = match checkpoint_dir {
            Some(dir) => (dir.join("best"), false),
            None => {
                let mine = std::env::temp_dir().join(format!(
                    "rowshard-best-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                ));
                let chosen = comm
                    .broadcast(0, mine.to_string_lossy().into_owned().into_bytes())
                    .map_err(|e| e.to_string())?;
                (
                    PathBuf::from(String::from_utf8_lossy(&chosen).into_owned()),
                    true,
                )
            }
        };
        Ok(Self {
            root,
            temporary,
            best: None,
            since_gain: 0,
            patience,
            min_delta,
        })
    }

    /// Records the evaluation of the model after `epoch` (valid MRR `mrr`): checkpoints it when
    /// it is the best so far. A collective.
    pub fn offer<S: ScoringFunction>(
        &mut self,
        model: &ShardedModel<S>,
        epoch: usize,
        mrr: f64,
        state: RunState,
    ) -> Result<(), String> {
        let gain = self.best.as_ref().is_none_or(|&(_, b, _)| mrr > b);
        if !gain {
            self.since_gain += 1;
            return Ok(());
        }
        if self
            .best
            .as_ref()
            .is_none_or(|&(_, b, _)| mrr > b + self.min_delta)
        {
            self.since_gain = 0;
        } else {
            self.since_gain += 1;
        }
        let folder = checkpoint::save(model, state, &self.root).map_err(|e| e.to_string())?;
        model.comm().barrier().map_err(|e| e.to_string())?;
        if let Some((_, _, old)) = self.best.replace((epoch, mrr, folder))
            && model.comm().rank() == 0
        {
            std::fs::remove_dir_all(&old).map_err(|e| format!("{}: {e}", old.display()))?;
        }
        Ok(())
    }

    /// Whether `--patience` evaluations passed without a gain.
    pub fn out_of_patience(&self) -> bool {
        self.patience > 0 && self.since_gain >= self.patience
    }

    /// The best epoch and its checkpoint folder.
    pub fn best(&self) -> Option<(usize, &Path)> {
        self.best.as_ref().map(|(e, _, f)| (*e, f.as_path()))
    }

    /// Deletes a temporary folder (on rank 0, after every rank is done with it). A collective.
    pub fn finish(self, comm: &dyn Communicator) -> Result<(), String> {
        comm.barrier().map_err(|e| e.to_string())?;
        if self.temporary && comm.rank() == 0 && self.root.exists() {
            std::fs::remove_dir_all(&self.root)
                .map_err(|e| format!("{}: {e}", self.root.display()))?;
        }
        Ok(())
    }
}
