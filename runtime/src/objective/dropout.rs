//! Dropout on the rows a query is built from (the head and the relation), in steps that score
//! against every entity: inverted dropout — each value kept with probability `1 − p` and scaled
//! by `1 / (1 − p)` — on the host, before the query kernel; the backward pass goes through the
//! same mask. The generated kernels need nothing new: they read the masked rows as they read
//! any rows. The table side of the dense product is not dropped (that would take a mask inside
//! the score tile's inner loop).
//!
//! The mask of a value is a hash of (seed, step, the query's position in the global batch, the
//! table, the value's index): it does not depend on the number of ranks.

use crate::init::SplitMix64;

/// Dropout probabilities of the rows a query is built from, each in `[0, 1)` (LibKGE's
/// per-embedder `dropout`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dropout {
    /// Of the head rows (the entity table).
    pub entity: f32,
    /// Of the relation rows.
    pub relation: f32,
}

impl Dropout {
    /// Both tables' rows with probability `p`.
    pub fn both(p: f32) -> Self {
        Self {
            entity: p,
            relation: p,
        }
    }

    /// Whether nothing is dropped.
    pub fn is_none(&self) -> bool {
        self.entity == 0.0 && self.relation == 0.0
    }
}

/// Which table a masked row comes from (part of the mask's key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropoutSide {
    /// The query's head row.
    Head = 1,
    /// The query's relation row.
    Relation = 2,
}

/// The mask values (`0` or `1/(1 − p)`) of `n` rows of `width` values for the queries at global
/// batch positions `first..first + n` in step `step` of a model seeded `seed`: what a step with
/// dropout `p` multiplies the rows by. Public so that a test can redo such a step on the host.
pub fn dropout_mask(
    p: f32,
    seed: u64,
    step: u64,
    side: DropoutSide,
    first: usize,
    n: usize,
    width: usize,
) -> Vec<f32> {
    Masks::new(p, seed, step, side, first, n, width).values
}

/// The masks of a step's query rows: `1/(1 − p)` or `0` per value.
pub(crate) struct Masks {
    /// `n × width` values.
    pub values: Vec<f32>,
}

impl Masks {
    /// The masks of `n` rows of `width` values, for the queries at global batch positions
    /// `first..first + n` of step `step`.
    pub fn new(
        p: f32,
        seed: u64,
        step: u64,
        side: DropoutSide,
        first: usize,
        n: usize,
        width: usize,
    ) -> Self {
        let keep = 1.0 / (1.0 - p);
        let mut values = Vec::with_capacity(n * width);
        for b in first..first + n {
            let key = seed
                ^ step.wrapping_mul(0xd1b5_4a32_d192_ed03)
                ^ (b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ (side as u64).wrapping_mul(0x94d0_49bb_1331_11eb);
            let mut rng = SplitMix64::new(key);
            values.extend((0..width).map(|_| if rng.next_f32() < p { 0.0 } else { keep }));
        }
        Self { values }
    }

    /// Multiplies `rows` (the same shape) by the mask, in place.
    pub fn apply(&self, rows: &mut [f32]) {
        for (x, m) in rows.iter_mut().zip(&self.values) {
            *x *= m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keep_about_one_minus_p_scaled_and_do_not_depend_on_the_split() {
        let whole = Masks::new(0.3, 7, 2, DropoutSide::Head, 0, 100, 64);
        let kept = whole.values.iter().filter(|&&m| m > 0.0).count() as f64 / 6400.0;
        assert!((kept - 0.7).abs() < 0.03, "{kept}");
        assert!(
            whole
                .values
                .iter()
                .all(|&m| m == 0.0 || (m - 1.0 / 0.7).abs() < 1e-6)
        );
        // Rows 40..100 of the batch, as a second rank would make them.
        let part = Masks::new(0.3, 7, 2, DropoutSide::Head, 40, 60, 64);
        assert_eq!(part.values, whole.values[40 * 64..]);
        let other = Masks::new(0.3, 7, 2, DropoutSide::Relation, 0, 100, 64);
        assert_ne!(other.values, whole.values);
    }
}
