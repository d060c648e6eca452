//! What a training run tells as it goes ([`Progress`]): the command line draws bars and prints
//! lines with it; a search records trials with it. Only rank 0's is told anything by
//! [`run`](super::run).

use std::path::Path;

use super::report::{EpochReport, Evaluation, FitReport};

/// Told about a run as it goes. Every method has a default that does nothing.
pub trait Progress {
    /// Step `step` (1-based) of `steps` of `epoch` finished with `loss`.
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        let _ = (epoch, step, steps, loss);
    }

    /// An epoch finished (before its evaluation, if it has one).
    fn epoch(&mut self, report: &EpochReport) {
        let _ = report;
    }

    /// The model after `report`'s epoch was evaluated on valid.
    fn evaluated(&mut self, report: &EpochReport, evaluation: &Evaluation) {
        let _ = (report, evaluation);
    }

    /// Something else happened.
    fn event(&mut self, event: &Event) {
        let _ = event;
    }

    /// The run finished: its report.
    fn finished(&mut self, report: &FitReport) {
        let _ = report;
    }
}

/// What else happens in a run.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// The model was loaded from a checkpoint written after `epochs_done` epochs by `world`
    /// ranks.
    Resumed {
        /// The checkpoint.
        from: &'a Path,
        /// Epochs trained before it.
        epochs_done: usize,
        /// Ranks that wrote it.
        world: usize,
    },
    /// A checkpoint was written.
    Checkpoint(&'a Path),
    /// Training stopped: `patience` evaluations without a gain of more than `min_delta`.
    StoppedEarly {
        /// The smallest gain that counts.
        min_delta: f64,
        /// Evaluations waited.
        patience: usize,
    },
    /// The training epochs are over; the final evaluations follow.
    Trained,
    /// The best evaluated model, after `epoch`, was loaded back from `from`.
    Restored {
        /// Its epoch.
        epoch: usize,
        /// Its checkpoint.
        from: &'a Path,
    },
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {}
