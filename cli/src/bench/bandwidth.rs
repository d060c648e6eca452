//! The machine's memory-copy bandwidth, measured in the same run as the kernels it is compared to.

use super::stats::{gb_per_s, median_time};

/// Copy bandwidth in GB/s, counting bytes read plus bytes written.
#[derive(Clone, Copy, Debug)]
pub struct CopyBandwidth {
    /// One thread.
    pub one_thread: f64,
    /// All available cores.
    pub all_threads: f64,
    /// Threads used for `all_threads`.
    pub threads: usize,
}

/// Copies a `bytes`-sized buffer (larger than the caches) with one thread and with every core.
pub fn measure(bytes: usize) -> CopyBandwidth {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let one = median_time(1, 5, || dst.copy_from_slice(&src));
    let all = median_time(1, 5, || {
        let chunk = bytes.div_ceil(threads);
        std::thread::scope(|s| {
            for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(c));
            }
        });
    });
    std::hint::black_box(&dst);
    CopyBandwidth {
        one_thread: gb_per_s(2.0 * bytes as f64, one),
        all_threads: gb_per_s(2.0 * bytes as f64, all),
        threads,
    }
}
