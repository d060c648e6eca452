//! Where a rank's training steps spend their time, by phase: what `rowshard bench` prints as a
//! step's time split.
//!
//! Each phase ends when its results are on the host (a read back from the device ends the
//! launches queued before it), so the split is wall-clock time on the rank's thread, the
//! waits on the runtime's workers included.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The phases of a step against every entity or shared negatives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepPhase {
    /// The rows the step reads (heads, true tails, the sample), routed and gathered.
    Lookup,
    /// The query kernel over the heads and relations.
    Queries,
    /// The scores and the loss's statistics, read back.
    Scores,
    /// The loss's gradients of the scores, the table's and the queries', read back.
    Gradients,
    /// The queries' gradient back through the query kernel to the head and relation rows.
    Backward,
    /// The entity rows' update: gradients summed per row, routed and applied.
    ApplyEntities,
    /// The relation rows' update.
    ApplyRelations,
    /// Everything else on the rank's thread: batches, host-side losses, regularisers.
    Host,
}

impl StepPhase {
    /// Every phase, in step order.
    pub const ALL: [StepPhase; 8] = [
        StepPhase::Lookup,
        StepPhase::Queries,
        StepPhase::Scores,
        StepPhase::Gradients,
        StepPhase::Backward,
        StepPhase::ApplyEntities,
        StepPhase::ApplyRelations,
        StepPhase::Host,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            StepPhase::Lookup => "lookup",
            StepPhase::Queries => "queries",
            StepPhase::Scores => "scores",
            StepPhase::Gradients => "gradients",
            StepPhase::Backward => "backward",
            StepPhase::ApplyEntities => "apply entities",
            StepPhase::ApplyRelations => "apply relations",
            StepPhase::Host => "host",
        }
    }
}

/// Accumulated time of one rank's steps, per phase, and how many steps.
#[derive(Default, Debug, Clone)]
pub struct StepTimings {
    phases: [Cell<Duration>; 8],
    steps: Cell<u64>,
}

impl StepTimings {
    /// Time spent in `phase`.
    pub fn get(&self, phase: StepPhase) -> Duration {
        self.phases[phase as usize].get()
    }

    /// Steps timed.
    pub fn steps(&self) -> u64 {
        self.steps.get()
    }

    /// All of it.
    pub fn total(&self) -> Duration {
        self.phases.iter().map(Cell::get).sum()
    }

    fn add(&self, phase: StepPhase, d: Duration) {
        let cell = &self.phases[phase as usize];
        cell.set(cell.get() + d);
    }

    pub(crate) fn count_step(&self) {
        self.steps.set(self.steps.get() + 1);
    }
}

/// Charges the time between laps to a step's phases.
pub(crate) struct StepClock {
    last: Cell<Instant>,
}

impl StepClock {
    pub(crate) fn start() -> Self {
        Self {
            last: Cell::new(Instant::now()),
        }
    }

    /// Starts over: the time since the last lap is nobody's.
    pub(crate) fn restart(&self) {
        self.last.set(Instant::now());
    }

    /// Charges the time since the last lap to `phase` of `timings`.
    pub(crate) fn lap(&self, timings: &StepTimings, phase: StepPhase) {
        let now = Instant::now();
        timings.add(phase, now - self.last.get());
        self.last.set(now);
    }
}
