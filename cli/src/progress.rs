//! Progress bars for `rowshard train` (indicatif) on a terminal; nothing otherwise (the caller
//! logs plain lines instead).

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rowshard::train::{EpochReport, Progress};

/// An overall bar over the epochs and one over the current epoch's steps.
pub struct Bars {
    bars: Option<(MultiProgress, ProgressBar, ProgressBar)>,
}

impl Bars {
    /// Bars for `epochs` epochs of `steps` steps, when `visible`.
    pub fn new(visible: bool, epochs: usize, steps: usize) -> Self {
        if !visible {
            return Self { bars: None };
        }
        let multi = MultiProgress::new();
        let run = multi.add(ProgressBar::new(epochs as u64));
        run.set_style(
            ProgressStyle::with_template(
                "{prefix:>7} [{bar:30}] {pos}/{len} epochs  {msg}  ETA {eta}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        run.set_prefix("train");
        let epoch = multi.add(ProgressBar::new(steps as u64));
        epoch.set_style(
            ProgressStyle::with_template(
                "{prefix:>7} [{bar:30}] {pos}/{len} steps  {per_sec}  loss {msg}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        Self {
            bars: Some((multi, run, epoch)),
        }
    }

    /// Whether bars are drawn.
    pub fn visible(&self) -> bool {
        self.bars.is_some()
    }

    /// Prints a line above the bars (or plainly when there are none).
    pub fn println(&self, line: String) {
        match &self.bars {
            Some((multi, _, _)) => {
                let _ = multi.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        if let Some((_, run, epoch)) = &self.bars {
            epoch.finish_and_clear();
            run.finish();
        }
    }
}

impl Progress for Bars {
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        if let Some((_, _, bar)) = &self.bars {
            if step == 1 {
                bar.reset();
                bar.set_length(steps as u64);
                bar.set_prefix(format!("epoch {epoch}"));
            }
            bar.set_position(step as u64);
            bar.set_message(format!("{loss:.5}"));
        }
    }

    fn epoch(&mut self, report: &EpochReport) {
        if let Some((_, run, _)) = &self.bars {
            run.set_position(report.epoch as u64);
            run.set_message(format!("loss {:.5}", report.loss));
        }
    }
}
