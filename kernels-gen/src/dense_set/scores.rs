//! Scores of queries against a block of rows, with a loss's statistics fused in: the launch, its
//! buffers, and the statistics combined on the host.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::{DenseKernels, DeviceQueries, Split, TableBlock};
use crate::kernels::dense::ScoreEpilogue;
use crate::kernels::dense::scores::dense_scores;
use crate::{KernelError, with_dtype};

impl DenseKernels {
    /// A buffer for the scores of `queries` against `rows` table rows.
    pub fn score_buffer(&self, rows: usize, queries: &DeviceQueries) -> Handle {
        self.client.empty(rows.max(1) * queries.padded * 4)
    }

    fn score_split(&self, rows: usize, queries: &DeviceQueries) -> Split {
        let panels = queries.padded / queries.panel;
        Split::with_min_tiles(&self.client, rows, self.tiles.scores.rows, panels, 8)
    }

    /// Values in the `stats` buffer of a [`DenseKernels::scores`] launch.
    pub fn stats_len(
        &self,
        epilogue: ScoreEpilogue,
        rows: usize,
        queries: &DeviceQueries,
    ) -> usize {
        let split = self.score_split(rows, queries);
        match epilogue {
            ScoreEpilogue::Scores => self.lanes,
            ScoreEpilogue::BinaryCrossEntropy => split.units() * self.lanes,
            ScoreEpilogue::SoftmaxStats => split.groups * 3 * queries.padded,
            ScoreEpilogue::CountBetter => split.groups * 2 * queries.padded,
        }
    }

    /// The loss of a [`DenseKernels::scores`] launch with the binary cross-entropy over `rows`
    /// rows: the sum of its `stats`, less the `ln 2` a row that each padding lane adds.
    pub fn bce_loss(
        &self,
        stats: Handle,
        rows: usize,
        queries: &DeviceQueries,
    ) -> Result<f64, KernelError> {
        if rows == 0 || queries.count == 0 {
            return Ok(0.0); // nothing was launched
        }
        let len = self.stats_len(ScoreEpilogue::BinaryCrossEntropy, rows, queries);
        let sum: f64 = self.read(stats, len)?.iter().map(|&x| x as f64).sum();
        let padding = (queries.padded - queries.count) as f64 * rows as f64;
        Ok(sum - padding * core::f64::consts::LN_2)
    }

    /// A buffer for the statistics of a [`DenseKernels::scores`] launch.
    pub fn stats_buffer(
        &self,
        epilogue: ScoreEpilogue,
        rows: usize,
        queries: &DeviceQueries,
    ) -> Handle {
        self.client
            .empty(self.stats_len(epilogue, rows, queries) * 4)
    }

    /// Enqueues [`dense_scores()`]: `queries` against `block` into `out` (`block.rows × padded`),
    /// with `epilogue`'s statistics in `stats` (see [`DenseKernels::stats_len`]). With
    /// [`ScoreEpilogue::CountBetter`], `out` holds the `padded` true scores instead, and is
    /// only read.
    #[allow(clippy::too_many_arguments)]
    pub fn scores(
        &self,
        queries: &DeviceQueries,
        block: &TableBlock,
        out: &Handle,
        stats: &Handle,
        epilogue: ScoreEpilogue,
        scale: f32,
        off: f32,
    ) {
        if block.rows == 0 || queries.count == 0 {
            return;
        }
        let split = self.score_split(block.rows, queries);
        let stats_len = self.stats_len(epilogue, block.rows, queries);
        let out_len = match epilogue {
            ScoreEpilogue::CountBetter => queries.padded,
            _ => block.rows * queries.padded,
        };
        with_dtype!(self.dtype, F => {
            // SAFETY: the block lies inside the table; `out` holds rows × padded values and
            // `stats` what stats_len says; each unit writes only its own rows, panels and stats.
            unsafe {
                dense_scores::launch_unchecked::<F>(
                    &self.client,
                    split.count(),
                    split.dim(),
                    self.lanes,
                    BufferArg::from_raw_parts(queries.transposed.clone(), self.dim * queries.padded),
                    BufferArg::from_raw_parts(block.table.clone(), block.table_len),
                    BufferArg::from_raw_parts(out.clone(), out_len),
                    BufferArg::from_raw_parts(stats.clone(), stats_len),
                    block.first as u32,
                    block.rows as u32,
                    self.dim as u32,
                    queries.count as u32,
                    split.per_unit,
                    split.panels_per_unit,
                    scale,
                    off,
                    self.tiles.scores,
                    epilogue,
                    self.tiles.polynomial_exp,
                )
            }
        })
    }
}

/// Per query, `(max, Σ exp(s − max), Σ s)` over the row groups of a
/// [`ScoreEpilogue::SoftmaxStats`] launch (`stats` as read back, `groups × 3 × padded`).
pub fn combine_softmax_stats(stats: &[f32], padded: usize, queries: usize) -> Vec<[f64; 3]> {
    let groups = stats.len() / (3 * padded);
    (0..queries)
        .map(|b| {
            let part = |g: usize, j: usize| stats[(g * 3 + j) * padded + b] as f64;
            let max = (0..groups)
                .map(|g| part(g, 0))
                .fold(f64::NEG_INFINITY, f64::max);
            let sum_exp = (0..groups)
                .map(|g| part(g, 1) * (part(g, 0) - max).exp())
                .sum();
            let sum = (0..groups).map(|g| part(g, 2)).sum();
            [max, sum_exp, sum]
        })
        .collect()
}
