//! The two gradient products of a block: the table's `G·Q` and the queries' `Gᵀ·W` (with the
//! softmax gradient made inside it on the `cpu` runtime), and the queries' gradient read back.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::{DenseKernels, DeviceLabels, DeviceQueries, SoftmaxGradient, Split, TableBlock};
use crate::kernels::dense::query_grad::dense_query_grad;
use crate::kernels::dense::table_grad::dense_table_grad;
use crate::shape::cpu_cores;
use crate::{KernelError, with_dtype};

impl DenseKernels {
    /// Enqueues [`dense_table_grad()`]: the gradient of `block`'s rows into `out` (a buffer of the
    /// whole shard's rows, `f32`).
    pub fn table_grad(
        &self,
        queries: &DeviceQueries,
        block: &TableBlock,
        grads: &Handle,
        out: &Handle,
    ) {
        if block.rows == 0 {
            return;
        }
        let tile = self.tiles.table_grad;
        let row_vectors = self.dim / self.row_lanes;
        let split = Split::new(
            &self.client,
            block.rows,
            tile.rows,
            row_vectors.div_ceil(tile.vectors),
        );
        // Four query panels a pass where each unit has tiles enough to reuse them from the
        // caches (see `dense_table_grad`).
        let query_panels = queries.count.div_ceil(queries.panel).max(1);
        let reuse = (split.per_unit as usize / tile.rows) * split.panels_per_unit as usize;
        let pass_panels = if reuse >= 4 { 4 } else { query_panels };
        // SAFETY: `grads` holds rows × padded values, `out` at least (first + rows) rows, and
        // each unit writes only its own rows' panels.
        unsafe {
            dense_table_grad::launch_unchecked(
                &self.client,
                split.count(),
                split.dim(),
                self.row_lanes,
                BufferArg::from_raw_parts(queries.rows.clone(), queries.count.max(1) * self.dim),
                BufferArg::from_raw_parts(grads.clone(), block.rows * queries.padded),
                BufferArg::from_raw_parts(out.clone(), (block.first + block.rows) * self.dim),
                block.first as u32,
                block.rows as u32,
                row_vectors as u32,
                queries.count as u32,
                queries.panel as u32,
                split.per_unit,
                split.panels_per_unit,
                pass_panels as u32,
                tile,
            )
        }
    }

    /// A buffer for the queries' gradient: `dim × padded` values, laid out like `Qᵀ` (see
    /// [`DenseKernels::read_query_grad`]).
    pub fn query_grad_buffer(&self, queries: &DeviceQueries) -> Handle {
        self.client.empty(self.query_grad_len(queries) * 4)
    }

    /// Reads a query gradient back, row-major (`count × dim`).
    pub fn read_query_grad(
        &self,
        grad: Handle,
        queries: &DeviceQueries,
    ) -> Result<Vec<f32>, KernelError> {
        let transposed = self.read(grad, self.query_grad_len(queries))?;
        Ok(self.query_grad_rows(&transposed, queries))
    }

    /// Values in a [`DenseKernels::query_grad_buffer`] of `queries`, as read back.
    pub fn query_grad_len(&self, queries: &DeviceQueries) -> usize {
        self.dim * queries.padded
    }

    /// The query gradient read back from a [`DenseKernels::query_grad_buffer`] (its
    /// [`DenseKernels::query_grad_len`] values) as a row per query, `count × dim`.
    pub fn query_grad_rows(&self, transposed: &[f32], queries: &DeviceQueries) -> Vec<f32> {
        let mut out = vec![0.0f32; queries.count * self.dim];
        self.query_grad_rows_into(transposed, queries, &mut out);
        out
    }

    /// [`DenseKernels::query_grad_rows`] into `out` (`count × dim` values), a panel at a time:
    /// each panel's `dim × panel` values are read in order and written a row per query.
    pub fn query_grad_rows_into(
        &self,
        transposed: &[f32],
        queries: &DeviceQueries,
        out: &mut [f32],
    ) {
        let (dim, panel) = (self.dim, queries.panel);
        for (p, rows) in out.chunks_mut(panel * dim).enumerate() {
            let source = &transposed[p * dim * panel..(p + 1) * dim * panel];
            for (k, column) in source.chunks_exact(panel).enumerate() {
                for (row, &x) in rows.chunks_exact_mut(dim).zip(column) {
                    row[k] = x;
                }
            }
        }
    }

    /// Enqueues [`dense_query_grad()`]: `block`'s contribution to the gradient of `queries`,
    /// written into `out` (a [`DenseKernels::query_grad_buffer`]) or added to it when
    /// `accumulate`. `grads` holds the block's `rows × padded` values.
    pub fn query_grad(
        &self,
        grads: &Handle,
        block: &TableBlock,
        queries: &DeviceQueries,
        out: &Handle,
        accumulate: bool,
    ) {
        self.launch_query_grad(grads, block, queries, out, accumulate, None);
    }

    /// Whether [`DenseKernels::softmax_query_grad`] runs on this runtime: the `cpu` runtime's,
    /// where a unit owns every coordinate of its panels. Elsewhere
    /// [`DenseKernels::softmax_grad`], [`DenseKernels::label_corrections`] and
    /// [`DenseKernels::query_grad`] do the same in three launches.
    pub fn fuses_softmax(&self) -> bool {
        self.fuses_softmax
    }

    /// Enqueues [`dense_query_grad()`] with the softmax cross-entropy's gradient made on the
    /// way: `scores` holds the block's scores and becomes, chunk by chunk as the kernel first
    /// reads it, `scale · (exp(s − lse) − off)` less `scale · y` of each of `labels` — what
    /// [`DenseKernels::softmax_grad`] and [`DenseKernels::label_corrections`] make, without a
    /// pass over the block of their own —, and the queries' gradient of it goes to `out` as in
    /// [`DenseKernels::query_grad`]. [`DenseKernels::label_loss`] and
    /// [`DenseKernels::table_grad`] follow. Only where [`DenseKernels::fuses_softmax`].
    #[allow(clippy::too_many_arguments)]
    pub fn softmax_query_grad(
        &self,
        scores: &Handle,
        block: &TableBlock,
        queries: &DeviceQueries,
        out: &Handle,
        accumulate: bool,
        softmax: &SoftmaxGradient,
        labels: &DeviceLabels,
    ) {
        assert!(
            self.fuses_softmax,
            "the softmax gradient is fused on the cpu runtime only"
        );
        self.launch_query_grad(
            scores,
            block,
            queries,
            out,
            accumulate,
            Some((softmax, labels)),
        );
    }

    fn launch_query_grad(
        &self,
        grads: &Handle,
        block: &TableBlock,
        queries: &DeviceQueries,
        out: &Handle,
        accumulate: bool,
        softmax: Option<(&SoftmaxGradient, &DeviceLabels)>,
    ) {
        let padded = queries.padded;
        if block.rows == 0 || queries.count == 0 {
            return;
        }
        let tile = self.tiles.query_grad;
        debug_assert_eq!(tile.vectors, self.tiles.scores.vectors, "a panel per tile");
        let panels = padded / queries.panel;
        // On the `cpu` runtime a unit owns whole panels — every coordinate — where the block's
        // gradients outgrow the caches (a megabyte) and there are panels enough for the cores:
        // each panel's gradients then stream from memory once, not once per range of
        // coordinates (the query gradient at dim 128 +15–20 %; docs/kernels.md).
        // The softmax made in place needs whole panels. GPUs split the coordinates too.
        let large = block.rows * padded >= 1 << 18;
        let cores = cpu_cores(&self.client);
        let whole = softmax.is_some() || (large && cores.is_some_and(|cores| panels >= cores));
        let (split, coords_per_unit) = if whole {
            // Several panels a unit, so that each chunk of table rows serves them all from the
            // caches, with two units a core left to balance: 4 at FB15k-237's 16 panels on two
            // cores, +7–12 % over a panel a unit.
            let per_unit = (panels / (2 * cores.unwrap_or(1))).max(1);
            (
                Split::new(&self.client, panels, per_unit, 1),
                self.dim as u32,
            )
        } else {
            let split = Split::new(&self.client, panels, 1, self.dim.div_ceil(tile.rows));
            (split, split.panels_per_unit * tile.rows as u32)
        };
        let chunk = match self.tiles.chunk {
            0 => block.rows,
            c => c,
        };
        let one = |i: usize| (self.unused[i].clone(), 1);
        let ([lse, rows, of, excess, starts], scale, off) = match softmax {
            Some((g, labels)) => {
                let n = labels.count.max(1);
                let inputs = [
                    (g.lse.clone(), padded),
                    (labels.rows.clone(), n),
                    (labels.queries.clone(), n),
                    (labels.excess.clone(), n),
                    (labels.chunk_starts.clone(), labels.chunks),
                ];
                (inputs, g.scale, g.off)
            }
            None => ([one(0), one(1), one(2), one(3), one(4)], 0.0, 0.0),
        };
        with_dtype!(self.dtype, F => {
            // SAFETY: `grads` holds rows × padded values, the block lies inside the table, and
            // each unit writes only its own panels' coordinates of `out` (dim × padded) — and,
            // with the softmax, only its own panels of `grads`; labels lie in the block.
            unsafe {
                dense_query_grad::launch_unchecked::<F>(
                    &self.client,
                    split.count(),
                    split.dim(),
                    self.lanes,
                    BufferArg::from_raw_parts(grads.clone(), block.rows * padded),
                    BufferArg::from_raw_parts(block.table.clone(), block.table_len),
                    BufferArg::from_raw_parts(out.clone(), self.dim * padded),
                    BufferArg::from_raw_parts(lse.0, lse.1),
                    BufferArg::from_raw_parts(rows.0, rows.1),
                    BufferArg::from_raw_parts(of.0, of.1),
                    BufferArg::from_raw_parts(excess.0, excess.1),
                    BufferArg::from_raw_parts(starts.0, starts.1),
                    block.first as u32,
                    block.rows as u32,
                    self.dim as u32,
                    queries.count as u32,
                    split.per_unit,
                    coords_per_unit,
                    chunk as u32,
                    accumulate as u32,
                    scale,
                    off,
                    tile,
                    softmax.is_some(),
                    self.tiles.polynomial_exp,
                )
            }
        })
    }
}
