//! One rank's run: build the model, resume, train epoch by epoch with evaluations on valid,
//! keep the best evaluated model and stop early, then evaluate and report.

use std::time::Instant;

use rowshard::ShardedModel;
use rowshard::agree::all_values;
use rowshard::checkpoint::{self, RunState};
use rowshard::comm::Communicator;
use rowshard::data::{Dataset, Split};
use rowshard::error::ShardError;
use rowshard::model::ScoringFunction;
use rowshard::train::{EpochReport, Filters, Mode, Trainer};

use super::best::Best;
use super::plan::Plan;
use super::{Evaluation, Outcome, TrainFigures};
use crate::progress::Bars;

pub(super) fn run_rank<S: ScoringFunction>(
    comm: &dyn Communicator,
    plan: &Plan,
) -> Result<Option<Outcome>, String> {
    let leader = comm.rank() == 0;
    let say = |line: String| {
        if leader {
            eprintln!("{line}");
        }
    };
    let fail = |e: ShardError| e.to_string();
    let client = plan.args.runtime.client().map_err(|e| e.to_string())?;
    let data = plan.data;
    let start = Instant::now();
    let mut model = ShardedModel::<S>::new(comm, &client, &plan.spec).map_err(fail)?;
    let s = &plan.spec.settings;
    say(format!(
        "rowshard train: {} on {} ({} entities, {} relations; {} / {} / {} triples{}), {} ranks, \
         {} {}, dim {}, {} lr {}{}, {:?}",
        S::NAME,
        data.folder.display(),
        data.entities.len(),
        data.relations.len(),
        data.train_len(),
        data.valid.len(),
        data.test.len(),
        unseen_note(data),
        comm.world(),
        plan.args.runtime,
        s.dtype,
        s.dim,
        s.entity.optimizer(),
        s.entity.lr,
        if s.relation.lr == s.entity.lr {
            String::new()
        } else {
            format!(" (relations {})", s.relation.lr)
        },
        plan.config.mode,
    ));
    say(format!(
        "  kernels compiled (JIT) in {:.0} ms",
        model.jit_time().as_secs_f64() * 1e3
    ));
    if let Some(file) = &data.stream {
        say(format!(
            "  training triples streamed from {} in blocks of {} ({:.1} MiB a block per rank)",
            file.path().display(),
            plan.config.stream_block,
            stream_buffer_bytes(plan) as f64 / (1u64 << 20) as f64
        ));
    }
    model.set_regularization(plan.regularization);
    let args = &plan.args;
    model
        .set_dropouts(
            args.entity_dropout.unwrap_or(args.dropout),
            args.relation_dropout.unwrap_or(args.dropout),
        )
        .map_err(fail)?;
    let mut trainer = Trainer::new(data, plan.config.clone()).map_err(|e| e.to_string())?;
    if let Some(path) = &plan.args.resume {
        let manifest = checkpoint::load(&mut model, path, data.vocabulary_digest())
            .map_err(|e| e.to_string())?;
        if manifest.state.mode != plan.config.mode.name() {
            return Err(format!(
                "{}: the checkpoint was trained with {}, not {}; resume with the same --mode",
                path.display(),
                manifest.state.mode,
                plan.config.mode.name()
            ));
        }
        trainer.epochs_done = manifest.state.epochs_done;
        say(format!(
            "  resumed from {} after epoch {} (written by {} ranks)",
            path.display(),
            manifest.state.epochs_done,
            manifest.world
        ));
    }
    let filters = Filters::new(data).map_err(|e| e.to_string())?;
    let state = |epochs_done: usize| RunState {
        epochs_done,
        mode: plan.config.mode.name().into(),
        seed: plan.config.seed,
        dataset: data.folder.display().to_string(),
        vocabulary: format!("{:016x}", data.vocabulary_digest()),
    };
    let save = |model: &ShardedModel<S>, epochs_done: usize| -> Result<(), String> {
        let Some(dir) = &plan.args.checkpoint_dir else {
            return Ok(());
        };
        let folder = checkpoint::save(model, state(epochs_done), dir).map_err(|e| e.to_string())?;
        say(format!("  checkpoint written to {}", folder.display()));
        Ok(())
    };
    let mut best = Best::new(comm, plan)?;
    let mut evaluations: Vec<Evaluation> = Vec::new();
    let mut stopped_early = false;
    let mut bars = Bars::new(
        leader
            && plan
                .args
                .progress
                .unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr())),
        plan.config.epochs,
        trainer.steps_per_epoch(),
    );
    let log_every = (plan.config.epochs / 16).max(1);
    let first_epoch = trainer.epochs_done;
    let mut train_seconds = 0.0;
    // Rows read by this rank's training steps (evaluations left out).
    let mut rows_read = 0u64;
    while trainer.epochs_done < plan.config.epochs {
        let before = model.entities().rows_read();
        let report: EpochReport = trainer.epoch(&mut model, &mut bars).map_err(fail)?;
        rows_read += model.entities().rows_read() - before;
        train_seconds += report.seconds;
        let e = report.epoch;
        let speed = plan.epoch_speed(&report);
        let evaluate_now = plan.args.eval_every > 0 && e.is_multiple_of(plan.args.eval_every);
        if evaluate_now {
            let m = trainer
                .evaluate(&model, &filters, Split::Valid)
                .map_err(fail)?;
            if leader {
                bars.println(format!(
                    "  epoch {e}: loss {:.5}, valid MRR {:.4} H@1 {:.4} H@10 {:.4} \
                     ({train_seconds:.1} s of training{speed}{})",
                    report.loss,
                    m.mrr,
                    m.hits1,
                    m.hits10,
                    if m.sampled_candidates.is_some() {
                        format!("; {}", m.protocol())
                    } else {
                        String::new()
                    }
                ));
            }
            evaluations.push(Evaluation {
                epoch: e,
                train_seconds,
                valid: m,
            });
            if e < plan.config.epochs {
                save(&model, e)?;
            }
            best.offer(&model, e, m.mrr, state(e))?;
            if best.out_of_patience() && e < plan.config.epochs {
                say(format!(
                    "  stopping early: no gain of more than {} in valid MRR for {} evaluations",
                    plan.args.min_delta, plan.args.patience
                ));
                stopped_early = true;
                break;
            }
        } else if !bars.visible() && (e.is_multiple_of(log_every) || e == plan.config.epochs) {
            say(format!(
                "  epoch {e}/{}: loss {:.5} ({train_seconds:.1} s{speed})",
                plan.config.epochs, report.loss,
            ));
        }
    }
    bars.finish();
    if trainer.epochs_done > first_epoch && !stopped_early {
        save(&model, trainer.epochs_done)?;
    }
    // With evaluations, the last epoch is evaluated too, and the best model is the one reported.
    let last = trainer.epochs_done;
    if plan.args.eval_every > 0 && evaluations.last().is_none_or(|v| v.epoch != last) {
        let m = trainer
            .evaluate(&model, &filters, Split::Valid)
            .map_err(fail)?;
        evaluations.push(Evaluation {
            epoch: last,
            train_seconds,
            valid: m,
        });
        best.offer(&model, last, m.mrr, state(last))?;
    }
    let best_epoch = best.best().map(|(epoch, _)| epoch);
    if let Some((epoch, folder)) = best.best()
        && epoch != last
    {
        checkpoint::load(&mut model, folder, data.vocabulary_digest())
            .map_err(|e| e.to_string())?;
        say(format!(
            "  restored the best model, after epoch {epoch}, from {}",
            folder.display()
        ));
    }
    best.finish(comm)?;
    let valid = trainer
        .evaluate(&model, &filters, Split::Valid)
        .map_err(fail)?;
    let test = trainer
        .evaluate(&model, &filters, Split::Test)
        .map_err(fail)?;
    let epochs = last - first_epoch;
    let examples = trainer.examples_per_epoch() as f64 * epochs as f64;
    let unit = match plan.config.mode {
        Mode::KvsAll => "KvsAll queries",
        Mode::OneVsAll => "1vsAll queries",
        Mode::NegSample { .. } => "true triples",
    };
    say(format!(
        "  trained {epochs} epochs in {train_seconds:.1} s ({:.0} {unit}/s); total {:.1} s",
        examples / train_seconds.max(1e-9),
        start.elapsed().as_secs_f64()
    ));
    for (name, m) in [("valid", valid), ("test", test)] {
        say(format!(
            "  {name:5}  MRR {:.4}  H@1 {:.4}  H@3 {:.4}  H@10 {:.4}  ({} queries, {})",
            m.mrr,
            m.hits1,
            m.hits3,
            m.hits10,
            m.queries,
            m.protocol()
        ));
    }
    let rows_read: u64 = all_values(comm, rows_read).map_err(fail)?.iter().sum();
    let peak = all_values(comm, peak_rss_bytes()).map_err(fail)?;
    let tables = model.entities().shard().resident_bytes() + model.relations().resident_bytes();
    let tables: u64 = all_values(comm, tables).map_err(fail)?.iter().sum();
    let stream_buffer = if data.stream.is_some() {
        stream_buffer_bytes(plan) * comm.world() as u64
    } else {
        0
    };
    let train = TrainFigures {
        seconds: train_seconds,
        examples_per_s: examples / train_seconds.max(1e-9),
        rows_looked_up_per_example: rows_read as f64 / examples.max(1.0),
        peak_rss_bytes: peak.into_iter().max().unwrap_or(0),
        tables_bytes: tables,
        stream_buffer_bytes: stream_buffer,
    };
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    say(format!(
        "  peak resident memory {:.2} GiB (the largest process); tables and optimizer states \
         {:.2} GiB over all ranks{}",
        gib(train.peak_rss_bytes),
        gib(tables),
        if stream_buffer > 0 {
            format!(", stream buffers {:.2} GiB", gib(stream_buffer))
        } else {
            String::new()
        }
    ));
    Ok(leader.then_some(Outcome {
        valid,
        test,
        best_epoch,
        epochs: last,
        train_seconds,
        stopped_early,
        evaluations,
        train,
    }))
}

/// What a rank holds of a block of streamed triples: the triples (12 bytes each), and per
/// example its place in the shuffled order, head, relation and label (16 bytes; 1vsAll has two
/// examples a triple).
fn stream_buffer_bytes(plan: &Plan) -> u64 {
    let per_triple = match plan.config.mode {
        Mode::OneVsAll => 12 + 2 * 16,
        _ => 12 + 16,
    };
    plan.config.stream_block.min(plan.data.train_len()) as u64 * per_triple
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

fn unseen_note(data: &Dataset) -> String {
    let u = data.unseen;
    if u.valid + u.test == 0 {
        String::new()
    } else {
        format!(
            "; left out {} valid and {} test triples with entities or relations unseen in training",
            u.valid, u.test
        )
    }
}
