//! [`fit`]: the one epoch loop — for every model, shipped or a user's, called by the command
//! line, by a user's crate and by a search alike. Epochs under the learning-rate schedule,
//! evaluation on valid every few epochs, the best evaluated model kept (checkpointed) and
//! restored exactly at the end, early stopping, checkpoints at every evaluation, resuming (under
//! any number of ranks), and the record of it all ([`FitReport`]).

use super::best::Best;
use super::config::TrainConfig;
use super::eval::Filters;
use super::plan::Plan;
use super::progress::{Event, Progress};
use super::report::{Evaluation, FitError, FitReport, TrainFigures};
use super::trainer::Trainer;
use crate::agree::all_values;
use crate::checkpoint::{self, RunState};
use crate::data::{Dataset, Split};
use crate::model::{ScoringFunction, ShardedModel};
use crate::objective::Mode;

/// Trains `model` on `data` as `plan` says, evaluating, checkpointing and stopping on the way,
/// and ends on the best evaluated model (restored from its checkpoint); tells `progress` as it
/// goes. A collective: every rank calls it with its part of the model, and every rank returns
/// the same report.
pub fn fit<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    data: &Dataset,
    plan: &Plan,
    progress: &mut dyn Progress,
) -> Result<FitReport, FitError> {
    let comm = model.comm();
    let config = &plan.config;
    let stopping = plan.stopping;
    let mut trainer = Trainer::new(data, config.clone())?;
    if let Some(path) = &plan.checkpoints.resume {
        let manifest = checkpoint::load(model, path, data.vocabulary_digest())?;
        if manifest.state.mode != config.mode.name() {
            return Err(FitError::Other(format!(
                "{}: the checkpoint was trained with {}, not {}; resume with the same mode",
                path.display(),
                manifest.state.mode,
                config.mode.name()
            )));
        }
        trainer.epochs_done = manifest.state.epochs_done;
        progress.event(&Event::Resumed {
            from: path,
            epochs_done: manifest.state.epochs_done,
            world: manifest.world,
        });
    }
    let filters = Filters::new(data)?;
    let state = |epochs_done: usize| RunState {
        epochs_done,
        mode: config.mode.name().into(),
        seed: config.seed,
        dataset: data.folder.display().to_string(),
        vocabulary: format!("{:016x}", data.vocabulary_digest()),
    };
    let save = |model: &ShardedModel<S>,
                progress: &mut dyn Progress,
                epochs_done: usize|
     -> Result<(), FitError> {
        let Some(dir) = &plan.checkpoints.dir else {
            return Ok(());
        };
        let folder = checkpoint::save(model, state(epochs_done), dir)?;
        progress.event(&Event::Checkpoint(&folder));
        Ok(())
    };
    let mut best = Best::new(
        comm,
        plan.checkpoints.dir.as_deref(),
        stopping.patience,
        stopping.min_delta,
    )
    .map_err(FitError::Other)?;
    let mut evaluations: Vec<Evaluation> = Vec::new();
    let mut stopped_early = false;
    let first_epoch = trainer.epochs_done;
    let mut train_seconds = 0.0;
    // Rows read by this rank's training steps (evaluations left out).
    let mut rows_read = 0u64;
    while trainer.epochs_done < config.epochs {
        let before = model.entities().rows_read();
        let report = trainer.epoch(model, progress)?;
        rows_read += model.entities().rows_read() - before;
        train_seconds += report.seconds;
        let e = report.epoch;
        if stopping.eval_every == 0 || !e.is_multiple_of(stopping.eval_every) {
            continue;
        }
        let evaluation = Evaluation {
            epoch: e,
            train_seconds,
            valid: trainer.evaluate(model, &filters, Split::Valid)?,
        };
        progress.evaluated(&report, &evaluation);
        evaluations.push(evaluation);
        if e < config.epochs {
            save(model, progress, e)?;
        }
        best.offer(model, e, evaluation.valid.mrr, state(e))
            .map_err(FitError::Other)?;
        if best.out_of_patience() && e < config.epochs {
            progress.event(&Event::StoppedEarly {
                min_delta: stopping.min_delta,
                patience: stopping.patience,
            });
            stopped_early = true;
            break;
        }
    }
    progress.event(&Event::Trained);
    if trainer.epochs_done > first_epoch && !stopped_early {
        save(model, progress, trainer.epochs_done)?;
    }
    // With evaluations, the last epoch is evaluated too, and the best model is the one reported.
    let last = trainer.epochs_done;
    if stopping.eval_every > 0 && evaluations.last().is_none_or(|v| v.epoch != last) {
        let valid = trainer.evaluate(model, &filters, Split::Valid)?;
        evaluations.push(Evaluation {
            epoch: last,
            train_seconds,
            valid,
        });
        best.offer(model, last, valid.mrr, state(last))
            .map_err(FitError::Other)?;
    }
    let best_epoch = best.best().map(|(epoch, _)| epoch);
    if let Some((epoch, folder)) = best.best()
        && epoch != last
    {
        checkpoint::load(model, folder, data.vocabulary_digest())?;
        progress.event(&Event::Restored {
            epoch,
            from: folder,
        });
    }
    best.finish(comm).map_err(FitError::Other)?;
    let valid = trainer.evaluate(model, &filters, Split::Valid)?;
    let test = match plan.test {
        true => Some(trainer.evaluate(model, &filters, Split::Test)?),
        false => None,
    };
    let epochs = last - first_epoch;
    let examples = trainer.examples_per_epoch() as f64 * epochs as f64;
    let rows_read: u64 = all_values(comm, rows_read)?.iter().sum();
    let peak = all_values(comm, peak_rss_bytes())?;
    let tables = model.entities().shard().resident_bytes() + model.relations().resident_bytes();
    let tables: u64 = all_values(comm, tables)?.iter().sum();
    let stream_buffer = if data.stream.is_some() {
        stream_buffer_bytes(config, data) * comm.world() as u64
    } else {
        0
    };
    let report = FitReport {
        valid,
        test,
        best_epoch,
        epochs: last,
        epochs_this_run: epochs,
        train_seconds,
        stopped_early,
        evaluations,
        train: TrainFigures {
            seconds: train_seconds,
            examples_per_s: examples / train_seconds.max(1e-9),
            rows_looked_up_per_example: rows_read as f64 / examples.max(1.0),
            peak_rss_bytes: peak.into_iter().max().unwrap_or(0),
            tables_bytes: tables,
            stream_buffer_bytes: stream_buffer,
        },
        unseen_policy: data.unseen_policy,
        unseen: data.unseen,
    };
    progress.finished(&report);
    Ok(report)
}

/// What a rank holds of a block of streamed triples: the triples (12 bytes each), and per
/// example its place in the shuffled order, head, relation and label (16 bytes; 1vsAll has two
/// examples a triple).
pub fn stream_buffer_bytes(config: &TrainConfig, data: &Dataset) -> u64 {
    let per_triple = match config.mode {
        Mode::OneVsAll => 12 + 2 * 16,
        _ => 12 + 16,
    };
    config.stream_block.min(data.train_len()) as u64 * per_triple
}

/// The peak resident memory of this process (`VmHWM`), in bytes; 0 where `/proc` has none.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}
