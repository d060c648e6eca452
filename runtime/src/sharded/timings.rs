//! Where a rank's time goes: routing (dedup, bucketing, exchanges), the gather kernel, the fused
//! apply kernel.

use std::cell::Cell;
use std::time::Duration;

/// Accumulated time of one rank's calls.
#[derive(Default, Debug, Clone)]
pub struct Timings {
    total: Cell<Duration>,
    gather: Cell<Duration>,
    apply: Cell<Duration>,
}

impl Timings {
    pub(crate) fn record(&self, total: Duration, gather: Duration, apply: Duration) {
        self.total.set(self.total.get() + total);
        self.gather.set(self.gather.get() + gather);
        self.apply.set(self.apply.get() + apply);
    }

    /// Time outside the kernels: validation, dedup, bucketing, exchanges, decoding.
    pub fn route(&self) -> Duration {
        self.total
            .get()
            .saturating_sub(self.gather.get() + self.apply.get())
    }

    /// Time in the gather kernel (launch to completed read).
    pub fn gather(&self) -> Duration {
        self.gather.get()
    }

    /// Time in the fused apply kernel (upload, launch, sync).
    pub fn apply(&self) -> Duration {
        self.apply.get()
    }

    /// All of it.
    pub fn total(&self) -> Duration {
        self.total.get()
    }
}
