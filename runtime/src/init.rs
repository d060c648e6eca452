//! Seeded initialisers for table weights. A row's values depend only on the seed and its global
//! row index, so any partition of a table starts with the same weights.

/// SplitMix64, the seeded generator behind the initialisers.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// How a table's weights start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Initializer {
    /// Every weight zero.
    Zeros,
    /// Uniform in `[-bound, bound)`.
    Uniform {
        /// Half-width.
        bound: f32,
        /// Seed.
        seed: u64,
    },
    /// Normal with mean 0 (Box–Muller).
    Normal {
        /// Standard deviation.
        std: f32,
        /// Seed.
        seed: u64,
    },
}

impl Initializer {
    /// The values of global rows `first..first + rows`, `dim` each.
    pub fn values(&self, first: usize, rows: usize, dim: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(rows * dim);
        for row in first..first + rows {
            self.extend_row(row, dim, &mut out);
        }
        out
    }

    /// Appends global row `row`'s values.
    pub fn extend_row(&self, row: usize, dim: usize, out: &mut Vec<f32>) {
        match *self {
            Initializer::Zeros => out.extend(std::iter::repeat_n(0.0, dim)),
            Initializer::Uniform { bound, seed } => {
                let mut rng =
                    SplitMix64::new(seed ^ (row as u64).wrapping_mul(0xd1b5_4a32_d192_ed03));
                out.extend((0..dim).map(|_| (2.0 * rng.next_f32() - 1.0) * bound));
            }
            Initializer::Normal { std, seed } => {
                let mut rng =
                    SplitMix64::new(seed ^ (row as u64).wrapping_mul(0xd1b5_4a32_d192_ed03));
                out.extend((0..dim).map(|_| {
                    let u1 = rng.next_f32().max(f32::MIN_POSITIVE);
                    let u2 = rng.next_f32();
                    std * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
                }));
            }
        }
    }
}
