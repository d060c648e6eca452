//! Filtered ranking: per query, how many rows of a block score better than (or tie with) its true
//! entity.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::{DenseKernels, DeviceQueries, Split};
use crate::kernels::dense::count::count_better;

impl DenseKernels {
    fn count_split(&self, rows: usize) -> Split {
        Split::new(&self.client, rows, 1, 1)
    }

    /// A buffer for the counts of a [`DenseKernels::count_better`] launch over `rows` rows.
    pub fn count_buffer(&self, rows: usize, queries: &DeviceQueries) -> Handle {
        self.client.empty(self.count_len(rows, queries) * 4)
    }

    /// Values in the buffer of [`DenseKernels::count_buffer`]: for each unit, the `padded`
    /// counts of better scores, then the `padded` counts of tied ones.
    pub fn count_len(&self, rows: usize, queries: &DeviceQueries) -> usize {
        self.count_split(rows).units() * 2 * queries.padded
    }

    /// Enqueues [`count_better()`] over `rows` rows of `scores` against `truth` (`padded`
    /// values).
    pub fn count_better(
        &self,
        scores: &Handle,
        rows: usize,
        queries: &DeviceQueries,
        truth: &Handle,
        counts: &Handle,
    ) {
        let split = self.count_split(rows);
        // SAFETY: `scores` holds rows × padded values, `truth` padded, `counts` what count_len
        // says; each unit writes only its own counts.
        unsafe {
            count_better::launch_unchecked(
                &self.client,
                split.count(),
                split.dim(),
                self.lanes,
                BufferArg::from_raw_parts(scores.clone(), rows.max(1) * queries.padded),
                BufferArg::from_raw_parts(truth.clone(), queries.padded),
                BufferArg::from_raw_parts(counts.clone(), self.count_len(rows, queries)),
                rows as u32,
                queries.count as u32,
                split.per_unit,
                self.tiles.scores.vectors,
            )
        }
    }
}

/// Per query, `(better, tied)` summed over the units of a [`DenseKernels::count_better`] launch
/// (`counts` as read back).
pub fn combine_counts(counts: &[f32], padded: usize, queries: usize) -> Vec<[u64; 2]> {
    let units = counts.len() / (2 * padded);
    (0..queries)
        .map(|b| {
            let mut out = [0u64; 2];
            for u in 0..units {
                out[0] += counts[2 * u * padded + b] as u64;
                out[1] += counts[(2 * u + 1) * padded + b] as u64;
            }
            out
        })
        .collect()
}
