//! The true entities of a block's queries: uploaded sorted by row, and their targets' corrections
//! of the loss's gradient and their part of the loss.

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl::server::Handle;

use super::{DenseKernels, DeviceLabels, DeviceQueries, Split, TableBlock};
use crate::kernels::dense::labels::label_corrections;
use crate::with_dtype;

impl DenseKernels {
    /// Uploads labels: block row, query and target excess `y − off` of each; a (row, query)
    /// pair at most once.
    pub fn upload_labels(&self, rows: &[u32], queries: &[u32], excess: &[f32]) -> DeviceLabels {
        assert!(rows.len() == queries.len() && rows.len() == excess.len());
        if rows.is_empty() {
            return self.no_labels.clone();
        }
        // Sorted by row, so each chunk of rows of the query gradient finds its labels together.
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| (rows[i], queries[i]));
        let pick = |v: &[u32]| -> Vec<u32> {
            if v.is_empty() {
                vec![0]
            } else {
                order.iter().map(|&i| v[i]).collect()
            }
        };
        let chunk = match self.tiles.chunk {
            0 => usize::MAX,
            c => c,
        };
        let sorted = pick(rows);
        let chunks = rows.iter().max().map_or(0, |&r| r as usize / chunk + 1);
        let chunk_starts: Vec<u32> = (0..=chunks)
            .map(|c| sorted.partition_point(|&r| (r as usize) < c.saturating_mul(chunk)) as u32)
            .map(|start| start.min(rows.len() as u32))
            .collect();
        DeviceLabels {
            rows: self.client.create(Bytes::from_elems(sorted)),
            queries: self.client.create(Bytes::from_elems(pick(queries))),
            excess: self.upload(if excess.is_empty() {
                vec![0.0]
            } else {
                order.iter().map(|&i| excess[i]).collect()
            }),
            chunk_starts: self.client.create(Bytes::from_elems(chunk_starts)),
            chunks: chunks + 1,
            count: rows.len(),
        }
    }

    fn label_split(&self, labels: &DeviceLabels) -> Split {
        Split::new(&self.client, labels.count, 1, 1)
    }

    /// A buffer for the per-unit loss sums of a [`DenseKernels::label_corrections`] launch.
    pub fn label_loss_buffer(&self, labels: &DeviceLabels) -> Handle {
        if labels.is_empty() {
            // Never written nor read: nothing is launched for no labels.
            return self.unused[0].clone();
        }
        self.client.empty(self.label_split(labels).units() * 4)
    }

    /// Values in the buffer of [`DenseKernels::label_loss_buffer`] that a launch writes (none
    /// without labels: nothing is launched).
    pub fn label_loss_len(&self, labels: &DeviceLabels) -> usize {
        if labels.is_empty() {
            return 0;
        }
        self.label_split(labels).units()
    }

    /// Enqueues [`label_corrections()`] on `grads` (the block's `rows × padded` values).
    pub fn label_corrections(
        &self,
        queries: &DeviceQueries,
        block: &TableBlock,
        grads: &Handle,
        labels: &DeviceLabels,
        loss: &Handle,
        scale: f32,
    ) {
        let grads = (grads, block.rows * queries.padded);
        self.launch_labels(queries, block, grads, labels, loss, scale, true);
    }

    /// Enqueues [`label_corrections()`] for the labels' part of the loss alone: their
    /// gradient was corrected where it was made ([`DenseKernels::softmax_query_grad`]).
    pub fn label_loss(
        &self,
        queries: &DeviceQueries,
        block: &TableBlock,
        labels: &DeviceLabels,
        loss: &Handle,
    ) {
        let unused = (&self.unused[0], 1);
        self.launch_labels(queries, block, unused, labels, loss, 0.0, false);
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_labels(
        &self,
        queries: &DeviceQueries,
        block: &TableBlock,
        (grads, grads_len): (&Handle, usize),
        labels: &DeviceLabels,
        loss: &Handle,
        scale: f32,
        correct: bool,
    ) {
        if labels.count == 0 {
            return;
        }
        let split = self.label_split(labels);
        with_dtype!(self.dtype, F => {
            // SAFETY: every label's row is a row of the block and its query one of `queries`
            // (checked by the caller); pairs are distinct, so units write distinct entries.
            unsafe {
                label_corrections::launch_unchecked::<F>(
                    &self.client,
                    split.count(),
                    split.dim(),
                    self.row_lanes,
                    BufferArg::from_raw_parts(queries.rows.clone(), queries.count * self.dim),
                    BufferArg::from_raw_parts(block.table.clone(), block.table_len),
                    BufferArg::from_raw_parts(grads.clone(), grads_len),
                    BufferArg::from_raw_parts(labels.rows.clone(), labels.count),
                    BufferArg::from_raw_parts(labels.queries.clone(), labels.count),
                    BufferArg::from_raw_parts(labels.excess.clone(), labels.count),
                    BufferArg::from_raw_parts(loss.clone(), split.units()),
                    block.first as u32,
                    block.rows as u32,
                    (self.dim / self.row_lanes) as u32,
                    queries.panel as u32,
                    split.per_unit,
                    scale,
                    correct,
                )
            }
        })
    }
}
