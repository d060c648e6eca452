//! Seeded test data.

use rowshard::init::SplitMix64;

/// A seeded generator for test data (rowshard's SplitMix64 with test-friendly helpers).
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next_u64() % n as u64) as u32
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn values(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// A batch of ids over rows `0..rows/2` (so the upper half stays untouched), with duplicates.
pub fn ids_with_duplicates(rng: &mut Rng, rows: usize, n: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..n).map(|_| rng.below((rows / 2) as u32)).collect();
    if n >= 3 {
        ids[1] = ids[0];
        ids[n - 1] = ids[0];
    }
    ids
}
