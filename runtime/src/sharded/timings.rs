//! Where a rank's time goes, by phase of its calls.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The phases of a lookup or an apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Input checks and the agreement on them.
    Check,
    /// Deduplication (grouping a batch's ids).
    Dedup,
    /// Owners of the unique ids, and the messages to them (gradient sums included).
    Bucket,
    /// The exchanges between ranks: waiting, less the work overlapped with them.
    Exchange,
    /// The gather kernel, upload to completed read, and the replies cut from its rows.
    Gather,
    /// Rows into the caller's order (this rank's own while the replies travel); this rank's own
    /// gradients summed for the upload, and the received messages' local rows read.
    Decode,
    /// The fused update: grouping on the owner, upload, kernel, sync.
    Apply,
}

impl Phase {
    /// Every phase, in step order.
    pub const ALL: [Phase; 7] = [
        Phase::Check,
        Phase::Dedup,
        Phase::Bucket,
        Phase::Exchange,
        Phase::Gather,
        Phase::Decode,
        Phase::Apply,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Check => "check",
            Phase::Dedup => "dedup",
            Phase::Bucket => "bucket",
            Phase::Exchange => "exchange",
            Phase::Gather => "gather",
            Phase::Decode => "decode",
            Phase::Apply => "apply",
        }
    }
}

/// Accumulated time of one rank's calls, per phase.
#[derive(Default, Debug, Clone)]
pub struct Timings {
    phases: [Cell<Duration>; 7],
}

impl Timings {
    /// Time spent in `phase`.
    pub fn get(&self, phase: Phase) -> Duration {
        self.phases[phase as usize].get()
    }

    fn add(&self, phase: Phase, d: Duration) {
        let cell = &self.phases[phase as usize];
        cell.set(cell.get() + d);
    }

    /// All of it.
    pub fn total(&self) -> Duration {
        self.phases.iter().map(Cell::get).sum()
    }

    /// Time outside the kernels: checks, dedup, bucketing, exchanges, decoding.
    pub fn route(&self) -> Duration {
        self.total().saturating_sub(self.gather() + self.apply())
    }

    /// Time in the gather kernel (launch to completed read) and cutting the replies.
    pub fn gather(&self) -> Duration {
        self.get(Phase::Gather)
    }

    /// Time in the fused apply (grouping, upload, launch, sync).
    pub fn apply(&self) -> Duration {
        self.get(Phase::Apply)
    }
}

/// Charges the time between laps to phases.
pub(crate) struct Clock {
    last: Instant,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Self {
            last: Instant::now(),
        }
    }

    /// Charges the time since the last lap to `phase` of `timings`.
    pub(crate) fn lap(&mut self, timings: &Timings, phase: Phase) {
        let now = Instant::now();
        timings.add(phase, now - self.last);
        self.last = now;
    }

    /// Charges the time since the last lap to `phase`, less `inside`, which goes to `nested`:
    /// work done while `phase` waited (an overlapped exchange).
    pub(crate) fn lap_nested(
        &mut self,
        timings: &Timings,
        phase: Phase,
        nested: Phase,
        inside: Duration,
    ) {
        let now = Instant::now();
        let total = now - self.last;
        timings.add(nested, inside.min(total));
        timings.add(phase, total.saturating_sub(inside));
        self.last = now;
    }
}
