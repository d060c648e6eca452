//! The dense scoring kernels of one table dtype and row length, compiled when a model is created,
//! with the launch shapes and tiles chosen for the runtime (see [`crate::kernels::dense`]).
//!
//! [`DenseKernels`] holds them. Its launches are grouped by what they do: what the kernels
//! read (`inputs.rs`: blocks of rows, queries in both layouts, labels), scores and their
//! statistics (`scores.rs`), the losses' gradients (`losses.rs`), the true entities'
//! corrections (`labels.rs`), the two gradient products (`gradients.rs`) and rank counting
//! (`ranking.rs`); how a launch splits its work is `layout.rs`.

mod gradients;
mod inputs;
mod labels;
mod layout;
mod losses;
mod ranking;
mod scores;

use std::time::{Duration, Instant};

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl::server::Handle;

pub use inputs::{DeviceLabels, DeviceQueries, SoftmaxGradient, TableBlock};
pub use layout::{DenseTiles, Split};
pub use ranking::combine_counts;
pub use scores::combine_softmax_stats;

use crate::kernels::dense::ScoreEpilogue;
use crate::shape::{CPU_UNITS, is_cpu_runtime, vector_size};
use crate::{DType, KernelError};

/// Rows of the second warm-up block on the `cpu` runtime (see `DenseKernels::warm_up`): 64 a
/// unit, enough whole tiles for every unit and, with two panels of queries, a block whose
/// gradients outgrow the caches as a shard's do (`rows × queries ≥ 2¹⁸`).
const WARM_UP_ROWS: usize = 64 * CPU_UNITS as usize;

/// Queries against table rows on one client: scores with a loss epilogue, the softmax gradient,
/// label corrections, the two gradient products, and rank counting.
#[derive(Clone)]
pub struct DenseKernels {
    client: Client,
    dtype: DType,
    dim: usize,
    /// Lanes of a query vector (scores, softmax, counts).
    lanes: usize,
    /// Lanes of a row vector (gradients, labels).
    row_lanes: usize,
    tiles: DenseTiles,
    /// Whether the softmax gradient is made inside the query gradient
    /// ([`DenseKernels::softmax_query_grad`]).
    fuses_softmax: bool,
    /// One-value buffers for the inputs a kernel variant does not read (each its own, so no
    /// buffer is bound twice in a launch).
    unused: [Handle; 5],
    /// No labels, uploaded once: a block without true entities among its rows (shared
    /// negatives scored apart from the true tails) uploads nothing for them.
    no_labels: DeviceLabels,
    jit_time: Duration,
}

impl DenseKernels {
    /// Compiles the kernels for tables of `dtype` with `dim`-wide rows by running each once.
    pub fn new(client: &Client, dtype: DType, dim: usize) -> Result<Self, KernelError> {
        if dim == 0 {
            return Err(KernelError::InvalidShape(
                "dense kernels need dim ≥ 1".into(),
            ));
        }
        crate::kernel_set::check_dtype(client, dtype)?;
        let lanes = client.io_optimized_vector_sizes(4).next().unwrap_or(1);
        let row_lanes = vector_size(client, dim);
        let row_vectors = dim / row_lanes;
        let tiles = if is_cpu_runtime(client) {
            DenseTiles::cpu(row_vectors)
        } else {
            DenseTiles::gpu(row_vectors)
        };
        let unused = std::array::from_fn(|_| client.create(Bytes::from_elems(vec![0u32; 16])));
        let no_labels = DeviceLabels {
            rows: client.create(Bytes::from_elems(vec![0u32])),
            queries: client.create(Bytes::from_elems(vec![0u32])),
            excess: client.create(Bytes::from_elems(vec![0.0f32])),
            chunk_starts: client.create(Bytes::from_elems(vec![0u32])),
            chunks: 1,
            count: 0,
        };
        let mut set = Self {
            client: client.clone(),
            dtype,
            dim,
            lanes,
            row_lanes,
            tiles,
            fuses_softmax: is_cpu_runtime(client),
            unused,
            no_labels,
            jit_time: Duration::ZERO,
        };
        let start = Instant::now();
        set.warm_up()?;
        set.jit_time = start.elapsed();
        Ok(set)
    }

    /// Runs every kernel once on one query and one row and, on the `cpu` runtime, once more on
    /// a block of [`WARM_UP_ROWS`] rows and two panels of queries: the `cpu` runtime compiles a
    /// kernel anew for each launch shape (a cube's units along `x` and `y`, which depend on how
    /// many groups of rows and ranges of panels a block splits into), and a block of this size
    /// splits like a training shard, so the first training step compiles nothing (it compiled
    /// a third of a second's kernels on FB15k-237 before).
    fn warm_up(&self) -> Result<(), KernelError> {
        self.run_each(1, 1)?;
        if is_cpu_runtime(&self.client) {
            self.run_each(WARM_UP_ROWS, 2 * self.tiles.scores.vectors * self.lanes)?;
        }
        Ok(())
    }

    /// Runs every kernel once on `n` queries against `rows` rows.
    fn run_each(&self, rows: usize, n: usize) -> Result<(), KernelError> {
        let dim = self.dim;
        let queries = self.upload_queries(&vec![0.5; n * dim], n);
        let table = self.client.create(Bytes::from_bytes_vec(
            self.dtype.encode(&vec![0.5; rows * dim]),
        ));
        let block = TableBlock {
            table: &table,
            table_len: rows * dim,
            first: 0,
            rows,
        };
        let out = self.score_buffer(rows, &queries);
        for epilogue in [
            ScoreEpilogue::Scores,
            ScoreEpilogue::BinaryCrossEntropy,
            ScoreEpilogue::SoftmaxStats,
        ] {
            let stats = self.stats_buffer(epilogue, rows, &queries);
            self.scores(&queries, &block, &out, &stats, epilogue, 1.0, 0.0);
        }
        let lse = self.upload(vec![0.0f32; queries.padded]);
        let counted = self.stats_buffer(ScoreEpilogue::CountBetter, rows, &queries);
        self.scores(
            &queries,
            &block,
            &lse,
            &counted,
            ScoreEpilogue::CountBetter,
            1.0,
            0.0,
        );
        let loss = self.adversarial_loss_buffer(rows, &queries);
        self.adversarial_grad(&out, rows, &queries, &lse, &loss, 1.0, 1.0);
        self.softmax_grad(&out, rows, &queries, &lse, 1.0, 0.0);
        let (_, counts_len, loss_len) = self.margin_lens(rows, &queries, 1);
        let (counts, loss) = (
            self.client.empty(counts_len * 4),
            self.client.empty(loss_len * 4),
        );
        let grads = self.score_buffer(rows, &queries);
        self.margin_grad(
            &out, &grads, rows, &queries, &lse, 1, &lse, &counts, &loss, 1.0,
        );
        let labels = self.upload_labels(&[0], &[0], &[1.0]);
        let loss = self.label_loss_buffer(&labels);
        self.label_corrections(&queries, &block, &out, &labels, &loss, 1.0);
        self.label_loss(&queries, &block, &labels, &loss);
        let dw = self.client.empty(rows * dim * 4);
        self.table_grad(&queries, &block, &out, &dw);
        let dq = self.query_grad_buffer(&queries);
        self.query_grad(&out, &block, &queries, &dq, false);
        if self.fuses_softmax {
            let softmax = SoftmaxGradient {
                lse: &lse,
                scale: 1.0,
                off: 0.0,
            };
            self.softmax_query_grad(&out, &block, &queries, &dq, false, &softmax, &labels);
        }
        let on_device = self.queries_on_device(queries.rows.clone(), n);
        crate::wait::read_one(&self.client, counted)?;
        crate::wait::read_one(&self.client, dq)?;
        crate::wait::read_one(&self.client, on_device.transposed)?;
        Ok(())
    }

    /// How long compiling and the first launches took.
    pub fn jit_time(&self) -> Duration {
        self.jit_time
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The tiles in use.
    pub fn tiles(&self) -> DenseTiles {
        self.tiles
    }

    /// Lanes of a query vector: score rows are padded to a multiple of it.
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    fn upload(&self, values: Vec<f32>) -> Handle {
        self.client.create(Bytes::from_elems(values))
    }

    /// Reads `len` `f32` values of a buffer back.
    pub fn read(&self, handle: Handle, len: usize) -> Result<Vec<f32>, KernelError> {
        let mut values = self.read_each(vec![(handle, len)])?;
        Ok(values.remove(0))
    }

    /// Reads the first `len` `f32` values of each buffer back, in one round trip to the device
    /// (none for lengths of 0, nor when every length is 0).
    pub fn read_each(&self, reads: Vec<(Handle, usize)>) -> Result<Vec<Vec<f32>>, KernelError> {
        crate::wait::read_f32(&self.client, reads)
    }
}

impl std::fmt::Debug for DenseKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseKernels")
            .field("dtype", &self.dtype)
            .field("dim", &self.dim)
            .field("lanes", &self.lanes)
            .field("row_lanes", &self.row_lanes)
            .field("tiles", &self.tiles)
            .finish()
    }
}
