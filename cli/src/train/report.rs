//! What `rowshard train` prints as a run goes: the start line, an evaluation line per
//! evaluation (or an epoch line now and then without evaluations), checkpoints, early stopping,
//! the restored best model, and the final figures and metrics — a [`Progress`], drawing bars on
//! a terminal.

use std::time::Instant;

use rowshard::data::{Dataset, UnseenPolicy};
use rowshard::train::{
    EpochReport, Evaluation, Event, FitReport, Mode, Plan, Progress, Start, stream_buffer_bytes,
};

use crate::progress::Bars;

/// Rank 0's printout of a training run.
pub struct Report<'a> {
    plan: &'a Plan,
    bars: Bars,
    /// Seconds of training so far.
    train_seconds: f64,
    /// When the run began (before the model was built).
    began: Instant,
    /// Epochs between plain epoch lines (without evaluations or bars).
    log_every: usize,
}

impl<'a> Report<'a> {
    /// Prints the start of a run and returns the reporter of the rest; `bars` asks for progress
    /// bars (default: when stderr is a terminal).
    pub fn start(start: &Start<'a>, bars: Option<bool>, began: Instant) -> Self {
        let (plan, data) = (start.plan, start.data);
        let s = &plan.spec.settings;
        eprintln!(
            "rowshard train: {} on {} ({} entities, {} relations; {} / {} / {} triples{}), {}, \
             {} {}, dim {}, {} lr {}{}, {:?}",
            start.model,
            data.folder.display(),
            data.entities.len(),
            data.relations.len(),
            data.train_len(),
            data.valid.len(),
            data.test.len(),
            unseen_note(data),
            match plan.run.ranks_note {
                Some(note) if start.world == plan.run.ranks => {
                    format!("{} ranks ({note}; --ranks to choose)", start.world)
                }
                _ => format!("{} ranks", start.world),
            },
            plan.run.runtime,
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
        );
        eprintln!(
            "  kernels compiled (JIT) in {:.0} ms",
            start.jit.as_secs_f64() * 1e3
        );
        if let Some(file) = &data.stream {
            eprintln!(
                "  training triples streamed from {} in blocks of {} ({:.1} MiB a block per rank)",
                file.path().display(),
                plan.config.stream_block,
                stream_buffer_bytes(&plan.config, data) as f64 / (1u64 << 20) as f64
            );
        }
        let visible = bars.unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr()));
        let steps = rowshard::train::Trainer::new(data, plan.config.clone())
            .map_or(0, |t| t.steps_per_epoch());
        Report {
            plan,
            train_seconds: 0.0,
            bars: Bars::new(visible, plan.config.epochs, steps),
            began,
            log_every: (plan.config.epochs / 16).max(1),
        }
    }

    /// `, N effective GFLOP/s` for an epoch that scores against every entity (6 · dim flops per
    /// (query, entity) pair: scores, table gradient, query gradient), else nothing.
    fn speed(&self, report: &EpochReport) -> String {
        let config = &self.plan.config;
        if !config.mode.all_entities() || config.negatives.is_shared() || report.seconds <= 0.0 {
            return String::new();
        }
        let pairs = report.examples as f64 * self.plan.spec.entities as f64;
        let flops = 6.0 * self.plan.spec.settings.dim as f64 * pairs;
        format!(", {:.0} effective GFLOP/s", flops / report.seconds / 1e9)
    }
}

impl Progress for Report<'_> {
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        self.bars.step(epoch, step, steps, loss);
    }

    fn epoch(&mut self, report: &EpochReport) {
        self.bars.epoch(report);
        self.train_seconds += report.seconds;
        let (e, epochs) = (report.epoch, self.plan.config.epochs);
        let every = self.plan.stopping.eval_every;
        let evaluated = every > 0 && e.is_multiple_of(every);
        if !evaluated && !self.bars.visible() && (e.is_multiple_of(self.log_every) || e == epochs) {
            eprintln!(
                "  epoch {e}/{epochs}: loss {:.5} ({:.1} s{})",
                report.loss,
                self.train_seconds,
                self.speed(report)
            );
        }
    }

    fn evaluated(&mut self, report: &EpochReport, evaluation: &Evaluation) {
        let m = evaluation.valid;
        self.bars.println(format!(
            "  epoch {}: loss {:.5}, valid MRR {:.4} H@1 {:.4} H@10 {:.4} ({:.1} s of training{}{})",
            report.epoch,
            report.loss,
            m.mrr,
            m.hits1,
            m.hits10,
            evaluation.train_seconds,
            self.speed(report),
            if m.sampled_candidates.is_some() {
                format!("; {}", m.protocol())
            } else {
                String::new()
            }
        ));
    }

    fn event(&mut self, event: &Event) {
        match *event {
            Event::Resumed {
                from,
                epochs_done,
                world,
            } => eprintln!(
                "  resumed from {} after epoch {epochs_done} (written by {world} ranks)",
                from.display()
            ),
            Event::Checkpoint(folder) => {
                self.bars
                    .println(format!("  checkpoint written to {}", folder.display()));
            }
            Event::StoppedEarly {
                min_delta,
                patience,
            } => self.bars.println(format!(
                "  stopping early: no gain of more than {min_delta} in valid MRR for {patience} \
                 evaluations"
            )),
            Event::Trained => self.bars.finish(),
            Event::Restored { epoch, from } => eprintln!(
                "  restored the best model, after epoch {epoch}, from {}",
                from.display()
            ),
        }
    }

    fn finished(&mut self, report: &FitReport) {
        let unit = match self.plan.config.mode {
            Mode::KvsAll => "KvsAll queries",
            Mode::OneVsAll => "1vsAll queries",
            Mode::NegSample { .. } => "true triples",
        };
        eprintln!(
            "  trained {} epochs in {:.1} s ({:.0} {unit}/s); total {:.1} s",
            report.epochs_this_run,
            report.train_seconds,
            report.train.examples_per_s,
            self.began.elapsed().as_secs_f64()
        );
        for (name, m) in [("valid", Some(report.valid)), ("test", report.test)] {
            let Some(m) = m else { continue };
            eprintln!(
                "  {name:5}  MRR {:.4}  H@1 {:.4}  H@3 {:.4}  H@10 {:.4}  ({} queries, {})",
                m.mrr,
                m.hits1,
                m.hits3,
                m.hits10,
                m.queries,
                m.protocol()
            );
        }
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let figures = report.train;
        eprintln!(
            "  peak resident memory {:.2} GiB (the largest process); tables and optimizer states \
             {:.2} GiB over all ranks{}",
            gib(figures.peak_rss_bytes),
            gib(figures.tables_bytes),
            if figures.stream_buffer_bytes > 0 {
                format!(
                    ", stream buffers {:.2} GiB",
                    gib(figures.stream_buffer_bytes)
                )
            } else {
                String::new()
            }
        );
    }
}

/// What was done with valid and test triples whose entities or relations training never saw.
fn unseen_note(data: &Dataset) -> String {
    let u = data.unseen;
    match data.unseen_policy {
        _ if u.valid + u.test == 0 => String::new(),
        UnseenPolicy::Drop => format!(
            "; left out {} valid and {} test triples with entities or relations unseen in training",
            u.valid, u.test
        ),
        UnseenPolicy::Count => format!(
            "; ranking {} valid and {} test triples with entities or relations unseen in \
             training against untrained rows (--unseen count)",
            u.valid, u.test
        ),
    }
}
