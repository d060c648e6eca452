//! What the dense kernels read: blocks of table rows, queries in their two layouts (uploaded, or
//! laid out from a query kernel's output on the device), the true entities' labels and the
//! softmax gradient's inputs.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::{DenseKernels, Split};
use crate::kernels::dense::panels::query_panels;

/// A block of table rows on the device: `table` holds the whole shard, the block is its rows
/// `first..first + rows`.
#[derive(Clone, Debug)]
pub struct TableBlock<'a> {
    /// The shard's weights.
    pub table: &'a Handle,
    /// Elements in `table`.
    pub table_len: usize,
    /// First row of the block.
    pub first: usize,
    /// Rows in the block.
    pub rows: usize,
}

/// Queries on the device in the two layouts the kernels read.
#[derive(Clone, Debug)]
pub struct DeviceQueries {
    /// `Q`, row-major: `count × dim` `f32`.
    pub rows: Handle,
    /// `Qᵀ` panel by panel: `padded / panel` panels of `dim × panel` `f32`, zero past `count`.
    pub transposed: Handle,
    /// Queries.
    pub count: usize,
    /// Queries per panel: the score tile's vectors × lanes.
    pub panel: usize,
    /// Queries rounded up to whole panels: the values per row of a score block.
    pub padded: usize,
}

impl DeviceQueries {
    /// Where the score of (block row `e`, query `b`) lies in a block of `rows` rows.
    pub fn index(&self, rows: usize, e: usize, b: usize) -> usize {
        ((b / self.panel) * rows + e) * self.panel + b % self.panel
    }
}

/// The true entities of a block's queries, as the label kernel reads them.
#[derive(Clone, Debug)]
pub struct DeviceLabels {
    pub(super) rows: Handle,
    pub(super) queries: Handle,
    pub(super) excess: Handle,
    /// Per chunk of rows of the query gradient, where its labels start (one more than there
    /// are chunks with labels): the labels are sorted by row.
    pub(super) chunk_starts: Handle,
    pub(super) chunks: usize,
    pub(super) count: usize,
}

impl DeviceLabels {
    /// How many labels.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// What the softmax cross-entropy's gradient of a block needs besides its scores.
pub struct SoftmaxGradient<'a> {
    /// Each query's log-sum-exp over every rank's candidates (`padded` values).
    pub lse: &'a Handle,
    /// The loss's scale (`1 / queries`).
    pub scale: f32,
    /// The target everywhere but the labels (`ε / entities` with label smoothing).
    pub off: f32,
}

impl DenseKernels {
    /// Uploads `count` queries (`count × dim`, row-major) in both layouts.
    pub fn upload_queries(&self, q: &[f32], count: usize) -> DeviceQueries {
        let rows = if q.is_empty() {
            vec![0.0; self.dim]
        } else {
            q.to_vec()
        };
        let dim = self.dim;
        assert_eq!(q.len(), count * dim, "queries are count × dim values");
        let (panel, padded) = (self.panel(), self.padded(count));
        let mut transposed = vec![0.0f32; dim * padded];
        for (b, row) in q.chunks_exact(dim).enumerate() {
            let (p, j) = (b / panel, b % panel);
            for (k, &x) in row.iter().enumerate() {
                transposed[(p * dim + k) * panel + j] = x;
            }
        }
        DeviceQueries {
            rows: self.upload(rows),
            transposed: self.upload(transposed),
            count,
            panel,
            padded,
        }
    }

    /// [`DenseKernels::upload_queries`] where `Q` is on the device already: `rows` holds the
    /// `count × dim` queries (a query kernel's output, say), and [`query_panels()`] lays them out
    /// as `Qᵀ` there — nothing crosses to the host.
    pub fn queries_on_device(&self, rows: Handle, count: usize) -> DeviceQueries {
        let dim = self.dim;
        assert!(
            rows.size_in_used() >= (count * dim * 4) as u64,
            "queries on the device hold count × dim f32 values"
        );
        let (panel, padded) = (self.panel(), self.padded(count));
        let transposed = self.client.empty(dim * padded * 4);
        let split = Split::new(&self.client, padded, 1, 1);
        // SAFETY: `rows` holds `count × dim` values (asserted), `transposed` `padded × dim`;
        // each unit writes the panels' entries of its own queries.
        unsafe {
            query_panels::launch_unchecked(
                &self.client,
                split.count(),
                split.dim(),
                BufferArg::from_raw_parts(rows.clone(), (count * dim).max(1)),
                BufferArg::from_raw_parts(transposed.clone(), dim * padded),
                count as u32,
                padded as u32,
                dim as u32,
                panel as u32,
                split.per_unit,
            )
        }
        DeviceQueries {
            rows,
            transposed,
            count,
            panel,
            padded,
        }
    }

    /// Queries per panel of a score block.
    pub fn panel(&self) -> usize {
        self.tiles.scores.vectors * self.lanes
    }

    /// `count` queries rounded up to whole panels (at least one).
    pub(super) fn padded(&self, count: usize) -> usize {
        count.max(1).div_ceil(self.panel()) * self.panel()
    }
}
