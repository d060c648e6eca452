//! Medians of repeated timings.

use std::time::{Duration, Instant};

/// Runs `f` `warmup` times untimed, then `repeats` times, and returns the median duration.
pub fn median_time(warmup: usize, repeats: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..warmup {
        f();
    }
    let mut times: Vec<Duration> = (0..repeats.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// Bytes per second as GB/s.
pub fn gb_per_s(bytes: f64, time: Duration) -> f64 {
    bytes / time.as_secs_f64() / 1e9
}
