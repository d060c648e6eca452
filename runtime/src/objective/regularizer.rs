//! Regularisation of the rows a step uses, per table: N3 (Lacroix et al., 2018) and L2 (LibKGE's,
//! plain or frequency-weighted) — the penalties and their gradients, computed on the host from
//! the rows a step already holds; the step adds them to the rows' gradients and counts them in
//! its loss (`step/regularize.rs`).
//!
//! What a step uses: the query heads and, for every query, its true tails — each distinct true
//! tail of a query once — (entities), and the query relations (relations). Occurrences count: a
//! row used by two queries is penalised twice where the penalty is per occurrence.

use std::collections::BTreeSet;

use crate::agree::sum_f64;
use crate::comm::{Communicator, from_bytes, to_bytes};
use crate::error::ShardError;

/// The regulariser of one table.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Regularizer {
    /// None.
    #[default]
    None,
    /// N3, the weighted nuclear 3-norm of the N3 paper's code: `λ · Σ_i |x_i|³` for every
    /// occurrence of a row in the batch, divided by the queries in the global batch. For a model
    /// whose rows are cut into `k` segments (ComplEx's halves, QuatE's quarters) coordinate `i`
    /// is the complex (quaternion) number of the segments' `i`-th values and `|x_i|` its modulus.
    N3 {
        /// λ.
        weight: f64,
    },
    /// L2, LibKGE's `lp` with `p = 2`: `λ/2 · Σ x²` over the distinct rows of the global batch;
    /// weighted, over every occurrence, divided by the number of occurrences (LibKGE's
    /// `weighted: True`, frequent rows penalised more).
    L2 {
        /// λ.
        weight: f64,
        /// Per occurrence, divided by the occurrences.
        weighted: bool,
    },
}

impl Regularizer {
    /// Whether it does nothing.
    pub fn is_none(&self) -> bool {
        matches!(self, Regularizer::None)
            || matches!(*self, Regularizer::N3 { weight } | Regularizer::L2 { weight, .. } if weight == 0.0)
    }

    /// Its weight λ, if it has one.
    pub fn weight(&self) -> Option<f64> {
        match *self {
            Regularizer::None => None,
            Regularizer::N3 { weight } | Regularizer::L2 { weight, .. } => Some(weight),
        }
    }

    /// Whether it is counted per occurrence of a row (else per distinct row).
    pub(crate) fn per_occurrence(&self) -> bool {
        !matches!(
            self,
            Regularizer::L2 {
                weighted: false,
                ..
            }
        )
    }

    /// Penalty of one occurrence of `row` (cut into `segments`), scaled by `scale`; adds its
    /// gradient to `grad`.
    fn row(&self, row: &[f32], segments: usize, scale: f64, grad: &mut [f32]) -> f64 {
        match *self {
            Regularizer::None => 0.0,
            Regularizer::N3 { weight } => {
                let part = row.len() / segments;
                let mut penalty = 0.0;
                for i in 0..part {
                    let modulus = (0..segments)
                        .map(|s| (row[s * part + i] as f64).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    penalty += modulus.powi(3);
                    // ∂|x|³/∂x_s = 3 |x| x_s.
                    for s in 0..segments {
                        let at = s * part + i;
                        grad[at] += (weight * scale * 3.0 * modulus * row[at] as f64) as f32;
                    }
                }
                weight * scale * penalty
            }
            Regularizer::L2 { weight, .. } => {
                let mut penalty = 0.0;
                for (g, &x) in grad.iter_mut().zip(row) {
                    penalty += (x as f64).powi(2);
                    *g += (weight * scale * x as f64) as f32;
                }
                weight * scale * penalty / 2.0
            }
        }
    }
}

/// The regularisers of both tables.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Regularization {
    /// Of the entity rows a step uses.
    pub entities: Regularizer,
    /// Of the relation rows a step uses.
    pub relations: Regularizer,
}

/// One table's rows a step uses on this rank, and where their gradients go.
pub(crate) struct UsedRows<'a> {
    /// Global id of each occurrence.
    pub ids: &'a [u32],
    /// Its row values, `ids.len() × width`.
    pub rows: &'a [f32],
    /// Its gradient, added to: `ids.len() × width`.
    pub grads: &'a mut [f32],
    /// Row length.
    pub width: usize,
    /// Segments a row is cut into (1 when a row is not made of complex-like numbers).
    pub segments: usize,
}

/// Adds `reg`'s per-occurrence gradients to `used` and returns this rank's part of the penalty;
/// per-distinct-row regularisers are left to [`distinct_rows`]. A collective (every rank calls
/// it with the same regulariser): the occurrences are counted over the global batch.
pub(crate) fn per_occurrence(
    comm: &dyn Communicator,
    reg: &Regularizer,
    used: UsedRows,
    queries: usize,
) -> Result<f64, ShardError> {
    if reg.is_none() || !reg.per_occurrence() {
        return Ok(0.0);
    }
    let scale = match reg {
        Regularizer::L2 { .. } => {
            let occurrences = sum_f64(comm, used.ids.len() as f64)?;
            1.0 / occurrences.max(1.0)
        }
        _ => 1.0 / queries.max(1) as f64,
    };
    let w = used.width;
    let mut penalty = 0.0;
    for k in 0..used.ids.len() {
        penalty += reg.row(
            &used.rows[k * w..][..w],
            used.segments,
            scale,
            &mut used.grads[k * w..][..w],
        );
    }
    Ok(penalty)
}

/// The distinct ids of every rank's `ids`, a collective (sorted, the same on every rank).
pub(crate) fn distinct_ids(comm: &dyn Communicator, ids: &[u32]) -> Result<Vec<u32>, ShardError> {
    let mut all = BTreeSet::new();
    for part in comm.all_gather(&to_bytes(ids))? {
        all.extend(from_bytes::<u32>(&part));
    }
    Ok(all.into_iter().collect())
}

/// The penalty and gradient of plain L2 over `rows` (distinct rows, `ids.len() × width`,
/// gradients appended to `grads`): what a per-distinct-row regulariser adds for the rows a rank
/// is responsible for.
pub(crate) fn distinct_rows(
    reg: &Regularizer,
    rows: &[f32],
    width: usize,
    grads: &mut Vec<f32>,
) -> f64 {
    if reg.is_none() || reg.per_occurrence() {
        return 0.0;
    }
    let mut penalty = 0.0;
    for row in rows.chunks_exact(width.max(1)) {
        let start = grads.len();
        grads.resize(start + width, 0.0);
        penalty += reg.row(row, 1, 1.0, &mut grads[start..]);
    }
    penalty
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central finite differences of the penalty against the gradient it adds.
    fn check(reg: Regularizer, segments: usize) {
        let row = [0.3f32, -1.2, 0.7, 0.05, -0.4, 2.0];
        let mut grad = vec![0.0f32; row.len()];
        let penalty = reg.row(&row, segments, 0.5, &mut grad);
        assert!(penalty > 0.0);
        for i in 0..row.len() {
            let h = 1e-3f32;
            let at = |d: f32| {
                let mut r = row;
                r[i] += d;
                reg.row(&r, segments, 0.5, &mut [0.0; 6])
            };
            let numeric = (at(h) - at(-h)) / (2.0 * h as f64);
            assert!(
                (numeric - grad[i] as f64).abs() < 1e-3 * (1.0 + numeric.abs()),
                "{reg:?} segments {segments}, coordinate {i}: {numeric} vs {}",
                grad[i]
            );
        }
    }

    #[test]
    fn gradients_are_the_penalties_derivatives() {
        for segments in [1, 2, 3] {
            check(Regularizer::N3 { weight: 0.05 }, segments);
        }
        check(
            Regularizer::L2 {
                weight: 0.1,
                weighted: true,
            },
            1,
        );
    }

    #[test]
    fn n3_uses_the_modulus_of_complex_coordinates() {
        let mut grad = [0.0f32; 4];
        // Two complex numbers: 3 + 4i and 0 + 0i: |.|³ = 125.
        let p = Regularizer::N3 { weight: 1.0 }.row(&[3.0, 0.0, 4.0, 0.0], 2, 1.0, &mut grad);
        assert!((p - 125.0).abs() < 1e-9);
    }
}
