//! The losses' gradients of a block of scores that need each query's log-sum-exp or thresholds
//! first: softmax cross-entropy (three-launch form), self-adversarial weighting and margin
//! ranking.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::{DenseKernels, DeviceQueries, Split};
use crate::kernels::dense::adversarial::adversarial_grad;
use crate::kernels::dense::margin::margin_grad;
use crate::kernels::dense::softmax::softmax_grad;

impl DenseKernels {
    /// Enqueues [`softmax_grad()`] over `rows` rows of scores: `lse` holds each query's
    /// log-sum-exp (`padded` values).
    pub fn softmax_grad(
        &self,
        scores: &Handle,
        rows: usize,
        queries: &DeviceQueries,
        lse: &Handle,
        scale: f32,
        off: f32,
    ) {
        if rows == 0 || queries.count == 0 {
            return;
        }
        let split = Split::new(&self.client, rows, 1, 1);
        // SAFETY: `scores` holds rows × padded values, `lse` padded; units own disjoint rows.
        unsafe {
            softmax_grad::launch_unchecked(
                &self.client,
                split.count(),
                split.dim(),
                self.lanes,
                BufferArg::from_raw_parts(scores.clone(), rows * queries.padded),
                BufferArg::from_raw_parts(lse.clone(), queries.padded),
                rows as u32,
                queries.count as u32,
                split.per_unit,
                scale,
                off,
                self.tiles.scores.vectors,
                self.tiles.polynomial_exp,
            )
        }
    }

    /// Values in the loss buffer of [`DenseKernels::adversarial_grad`] over `rows` rows (0
    /// when nothing is launched).
    pub fn adversarial_loss_len(&self, rows: usize, queries: &DeviceQueries) -> usize {
        if rows == 0 || queries.count == 0 {
            return 0;
        }
        Split::new(&self.client, rows, 1, 1).units() * self.lanes
    }

    /// A buffer for the loss of a [`DenseKernels::adversarial_grad`] launch.
    pub fn adversarial_loss_buffer(&self, rows: usize, queries: &DeviceQueries) -> Handle {
        self.client
            .empty(self.adversarial_loss_len(rows, queries).max(1) * 4)
    }

    /// Enqueues [`adversarial_grad()`] over `rows` rows of scores that hold `α·s`: `lse` holds
    /// each query's log-sum-exp of `α·s` over the negatives (`padded` values), `loss` gets the
    /// units' `Σ p·softplus(s)` ([`DenseKernels::adversarial_loss_len`] values).
    #[allow(clippy::too_many_arguments)]
    pub fn adversarial_grad(
        &self,
        scores: &Handle,
        rows: usize,
        queries: &DeviceQueries,
        lse: &Handle,
        loss: &Handle,
        alpha: f32,
        scale: f32,
    ) {
        if rows == 0 || queries.count == 0 {
            return;
        }
        let split = Split::new(&self.client, rows, 1, 1);
        // SAFETY: `scores` holds rows × padded values, `lse` padded, `loss` a vector per unit;
        // units own disjoint rows and their own loss.
        unsafe {
            adversarial_grad::launch_unchecked(
                &self.client,
                split.count(),
                split.dim(),
                self.lanes,
                BufferArg::from_raw_parts(scores.clone(), rows * queries.padded),
                BufferArg::from_raw_parts(lse.clone(), queries.padded),
                BufferArg::from_raw_parts(loss.clone(), self.adversarial_loss_len(rows, queries)),
                rows as u32,
                queries.count as u32,
                split.per_unit,
                1.0 / alpha,
                scale,
                self.tiles.scores.vectors,
                self.tiles.polynomial_exp,
            )
        }
    }

    /// The layout of a [`DenseKernels::margin_grad`] launch over `rows` rows with `positives`
    /// thresholds per query: (units, values in its counts buffer, values in its loss buffer; 0
    /// when nothing is launched).
    pub fn margin_lens(
        &self,
        rows: usize,
        queries: &DeviceQueries,
        positives: usize,
    ) -> (usize, usize, usize) {
        if rows == 0 || queries.count == 0 {
            return (0, 0, 0);
        }
        let units = Split::new(&self.client, rows, 1, 1).units();
        (
            units,
            units * positives * queries.padded,
            units * self.lanes,
        )
    }

    /// Enqueues [`margin_grad()`] over `rows` rows of `scores`: `grads` (a score buffer) gets the
    /// margin ranking gradient against `thresholds` (`positives × padded` values: `s₊ − γ`,
    /// `+∞` past a query's positives) with per-query `weights` (`padded`, 0 past the queries)
    /// and `scale`; `counts` and `loss` get each unit's violations per (positive, query) and its
    /// `Σ w·max(0, s − t)` ([`DenseKernels::margin_lens`] values). `positives ≥ 1`.
    #[allow(clippy::too_many_arguments)]
    pub fn margin_grad(
        &self,
        scores: &Handle,
        grads: &Handle,
        rows: usize,
        queries: &DeviceQueries,
        thresholds: &Handle,
        positives: usize,
        weights: &Handle,
        counts: &Handle,
        loss: &Handle,
        scale: f32,
    ) {
        let (_, counts_len, loss_len) = self.margin_lens(rows, queries, positives);
        if counts_len == 0 {
            return;
        }
        assert!(
            positives >= 1,
            "a margin launch compares against at least one positive"
        );
        let split = Split::new(&self.client, rows, 1, 1);
        let values = rows * queries.padded;
        // SAFETY: `scores` and `grads` hold rows × padded values, `thresholds` positives ×
        // padded, `weights` padded, `counts` and `loss` what margin_lens says; units own
        // disjoint rows and their own counts and loss.
        unsafe {
            margin_grad::launch_unchecked(
                &self.client,
                split.count(),
                split.dim(),
                self.lanes,
                BufferArg::from_raw_parts(scores.clone(), values),
                BufferArg::from_raw_parts(thresholds.clone(), positives * queries.padded),
                BufferArg::from_raw_parts(weights.clone(), queries.padded),
                BufferArg::from_raw_parts(grads.clone(), values),
                BufferArg::from_raw_parts(counts.clone(), counts_len),
                BufferArg::from_raw_parts(loss.clone(), loss_len),
                rows as u32,
                queries.count as u32,
                positives as u32,
                split.per_unit,
                scale,
                self.tiles.scores.vectors,
            )
        }
    }
}
