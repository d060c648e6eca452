//! Quasi-random points in the unit cube: a Sobol sequence (Joe and Kuo's direction numbers) with
//! a digital shift drawn from a seed, so that the first points of a search already spread over
//! every dimension of its space, as LibKGE's Sobol trials do.

use rowshard::init::SplitMix64;

/// `(s, a, m₁ … m_s)` of dimensions 2 to 16: the degree and coefficients of each primitive
/// polynomial and the initial direction numbers (new-joe-kuo-6.21201). Dimension 1 is the van der
/// Corput sequence.
const DIRECTIONS: [(u32, u32, &[u32]); 15] = [
    (1, 0, &[1]),
    (2, 1, &[1, 3]),
    (3, 1, &[1, 3, 1]),
    (3, 2, &[1, 1, 1]),
    (4, 1, &[1, 1, 3, 3]),
    (4, 4, &[1, 3, 5, 13]),
    (5, 2, &[1, 1, 5, 5, 17]),
    (5, 4, &[1, 1, 5, 5, 5]),
    (5, 7, &[1, 1, 7, 11, 19]),
    (5, 11, &[1, 1, 5, 1, 1]),
    (5, 13, &[1, 1, 1, 3, 11]),
    (5, 14, &[1, 3, 5, 5, 31]),
    (6, 1, &[1, 3, 3, 9, 7, 49]),
    (6, 13, &[1, 1, 1, 15, 21, 21]),
    (6, 16, &[1, 3, 1, 13, 27, 49]),
];

/// The most dimensions a search space may have.
pub const MAX_DIMENSIONS: usize = DIRECTIONS.len() + 1;

const BITS: usize = 32;

/// A shifted Sobol sequence in `dims` dimensions.
pub struct Sobol {
    /// Direction numbers, `BITS` per dimension.
    v: Vec<[u32; BITS]>,
    /// Each dimension's digital shift.
    shift: Vec<u32>,
}

impl Sobol {
    /// The sequence in `dims` dimensions (at most [`MAX_DIMENSIONS`]), shifted by `seed`.
    pub fn new(dims: usize, seed: u64) -> Self {
        assert!(
            dims <= MAX_DIMENSIONS,
            "at most {MAX_DIMENSIONS} dimensions"
        );
        let mut v = Vec::with_capacity(dims);
        for d in 0..dims {
            let mut row = [0u32; BITS];
            if d == 0 {
                for (k, x) in row.iter_mut().enumerate() {
                    *x = 1 << (BITS - 1 - k);
                }
            } else {
                let (s, a, m) = DIRECTIONS[d - 1];
                let s = s as usize;
                for k in 0..BITS {
                    row[k] = if k < s {
                        m[k] << (BITS - 1 - k)
                    } else {
                        let mut x = row[k - s] ^ (row[k - s] >> s);
                        for l in 1..s {
                            if (a >> (s - 1 - l)) & 1 == 1 {
                                x ^= row[k - l];
                            }
                        }
                        x
                    };
                }
            }
            v.push(row);
        }
        let mut rng = SplitMix64::new(seed ^ 0x0073_6f62_6f6c);
        let shift = (0..dims).map(|_| rng.next_u64() as u32).collect();
        Self { v, shift }
    }

    /// Point `index` (from 0) of the sequence, each coordinate in `[0, 1)`.
    pub fn point(&self, index: u64) -> Vec<f64> {
        self.v
            .iter()
            .zip(&self.shift)
            .map(|(row, &shift)| {
                let mut x = 0u32;
                for (k, &direction) in row.iter().enumerate() {
                    if (index >> k) & 1 == 1 {
                        x ^= direction;
                    }
                }
                (x ^ shift) as f64 / (1u64 << BITS) as f64
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every elementary interval of the first 2ᵏ points holds one point per cell in each pair
    /// of the first dimensions' halves and quarters: the points spread as a Sobol sequence's do.
    #[test]
    fn the_first_points_fill_every_cell_of_each_dimension() {
        let sobol = Sobol::new(MAX_DIMENSIONS, 7);
        let points: Vec<Vec<f64>> = (0..64).map(|i| sobol.point(i)).collect();
        for d in 0..MAX_DIMENSIONS {
            let mut cells = [0usize; 64];
            for p in &points {
                assert!((0.0..1.0).contains(&p[d]));
                cells[(p[d] * 64.0) as usize] += 1;
            }
            assert!(cells.iter().all(|&c| c == 1), "dimension {d}: {cells:?}");
        }
        for d in 1..4 {
            let mut cells = [0usize; 16];
            for p in &points {
                cells[(p[0] * 4.0) as usize * 4 + (p[d] * 4.0) as usize] += 1;
            }
            assert!(
                cells.iter().all(|&c| c == 4),
                "dimensions 0 and {d}: {cells:?}"
            );
        }
    }
}
