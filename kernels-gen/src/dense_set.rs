//! The dense scoring kernels of one table dtype and row length, compiled when a model is created.

use std::time::{Duration, Instant};

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::element::runtime_error;
use crate::kernels::dense::{DenseMode, dense_query_grad, dense_scores, dense_table_grad};
use crate::shape::{LaunchShape, vector_size};
use crate::{DType, KernelError, with_dtype};

/// Queries against table rows on one client: scores, BCE gradients, and the two gradient products.
#[derive(Clone)]
pub struct DenseKernels {
    client: Client,
    dtype: DType,
    dim: usize,
    vector_size: usize,
    jit_time: Duration,
}

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

impl DenseKernels {
    /// Compiles the kernels for tables of `dtype` with `dim`-wide rows by running each once.
    pub fn new(client: &Client, dtype: DType, dim: usize) -> Result<Self, KernelError> {
        let mut set = Self {
            client: client.clone(),
            dtype,
            dim,
            vector_size: vector_size(client, dim),
            jit_time: Duration::ZERO,
        };
        let start = Instant::now();
        let q = client.create(Bytes::from_elems(vec![0.0f32; dim]));
        let table = client.create(Bytes::from_bytes_vec(dtype.encode(&vec![0.0; dim])));
        let block = TableBlock {
            table: &table,
            table_len: dim,
            first: 0,
            rows: 1,
        };
        let out = client.create(Bytes::from_elems(vec![0.0f32; 1]));
        let loss = set.loss_buffer(1);
        for mode in [DenseMode::Scores, DenseMode::BinaryCrossEntropy] {
            set.scores(&q, 1, &block, &out, &loss, 1.0, mode);
        }
        let grad = client.create(Bytes::from_elems(vec![0.0f32; dim]));
        set.table_grad(&q, 1, &block, &out, &grad);
        set.query_grad(&out, &block, &grad, 1);
        client.read_one(grad).map_err(runtime_error)?;
        set.jit_time = start.elapsed();
        Ok(set)
    }

    /// How long compiling and the first launches took.
    pub fn jit_time(&self) -> Duration {
        self.jit_time
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How many per-unit loss sums a BCE launch over `rows` table rows writes.
    pub fn loss_units(&self, rows: usize) -> usize {
        let shape = LaunchShape::for_rows(&self.client, rows);
        shape.cube_count as usize * shape.cube_dim as usize
    }

    /// A buffer for the per-unit loss sums of a BCE launch over `rows` table rows.
    pub fn loss_buffer(&self, rows: usize) -> Handle {
        self.client
            .create(Bytes::from_elems(vec![0.0f32; self.loss_units(rows)]))
    }

    fn row_vectors(&self) -> u32 {
        (self.dim / self.vector_size) as u32
    }

    /// Enqueues [`dense_scores()`] for `queries` (`n_queries × dim`, f32) against `block`;
    /// `out` holds `block.rows × n_queries` values (the targets, for BCE).
    #[allow(clippy::too_many_arguments)]
    pub fn scores(
        &self,
        queries: &Handle,
        n_queries: usize,
        block: &TableBlock,
        out: &Handle,
        loss: &Handle,
        scale: f32,
        mode: DenseMode,
    ) {
        if block.rows == 0 || n_queries == 0 {
            return;
        }
        let shape = LaunchShape::for_rows(&self.client, block.rows);
        let units = shape.cube_count as usize * shape.cube_dim as usize;
        with_dtype!(self.dtype, F => {
            // SAFETY: the block lies inside the table, `out` holds rows × queries values, `loss`
            // one per unit, and each unit writes only its own rows' entries and its loss slot.
            unsafe {
                dense_scores::launch_unchecked::<F>(
                    &self.client,
                    shape.count(),
                    shape.dim(),
                    self.vector_size,
                    BufferArg::from_raw_parts(queries.clone(), n_queries * self.dim),
                    BufferArg::from_raw_parts(block.table.clone(), block.table_len),
                    BufferArg::from_raw_parts(out.clone(), block.rows * n_queries),
                    BufferArg::from_raw_parts(loss.clone(), units),
                    block.first as u32,
                    block.rows as u32,
                    self.row_vectors(),
                    shape.rows_per_unit,
                    scale,
                    mode,
                )
            }
        })
    }

    /// Enqueues [`dense_table_grad()`]: the gradient of `block`'s rows into `out` (a buffer of the
    /// whole shard's rows, `f32`).
    pub fn table_grad(
        &self,
        queries: &Handle,
        n_queries: usize,
        block: &TableBlock,
        grads: &Handle,
        out: &Handle,
    ) {
        if block.rows == 0 {
            return;
        }
        let shape = LaunchShape::for_rows(&self.client, block.rows);
        let out_len = (block.first + block.rows) * self.dim;
        // SAFETY: `grads` holds rows × queries values, `out` at least (first + rows) rows, and
        // each unit writes only its own rows.
        unsafe {
            dense_table_grad::launch_unchecked(
                &self.client,
                shape.count(),
                shape.dim(),
                self.vector_size,
                BufferArg::from_raw_parts(queries.clone(), n_queries * self.dim),
                BufferArg::from_raw_parts(grads.clone(), block.rows * n_queries),
                BufferArg::from_raw_parts(out.clone(), out_len),
                block.first as u32,
                block.rows as u32,
                self.row_vectors(),
                shape.rows_per_unit,
            )
        }
    }

    /// Enqueues [`dense_query_grad()`]: adds `block`'s contribution to the queries' gradient
    /// `out` (`n_queries × dim`, zeroed before the first block).
    pub fn query_grad(&self, grads: &Handle, block: &TableBlock, out: &Handle, n_queries: usize) {
        if block.rows == 0 || n_queries == 0 {
            return;
        }
        let shape = LaunchShape::for_rows(&self.client, n_queries);
        with_dtype!(self.dtype, F => {
            // SAFETY: `grads` holds rows × queries values, the block lies inside the table, and
            // each unit writes only its own queries' rows of `out`.
            unsafe {
                dense_query_grad::launch_unchecked::<F>(
                    &self.client,
                    shape.count(),
                    shape.dim(),
                    self.vector_size,
                    BufferArg::from_raw_parts(grads.clone(), block.rows * n_queries),
                    BufferArg::from_raw_parts(block.table.clone(), block.table_len),
                    BufferArg::from_raw_parts(out.clone(), n_queries * self.dim),
                    block.first as u32,
                    block.rows as u32,
                    self.row_vectors(),
                    shape.rows_per_unit,
                )
            }
        })
    }
}

impl std::fmt::Debug for DenseKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseKernels")
            .field("dtype", &self.dtype)
            .field("dim", &self.dim)
            .field("vector_size", &self.vector_size)
            .finish()
    }
}
