//! The dense scoring kernels of one table dtype and row length, compiled when a model is created,
//! with the launch shapes and tiles chosen for the runtime (see [`crate::kernels::dense`]).

use std::time::{Duration, Instant};

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::kernels::dense::adversarial::adversarial_grad;
use crate::kernels::dense::count::count_better;
use crate::kernels::dense::labels::label_corrections;
use crate::kernels::dense::margin::margin_grad;
use crate::kernels::dense::panels::query_panels;
use crate::kernels::dense::query_grad::dense_query_grad;
use crate::kernels::dense::scores::dense_scores;
use crate::kernels::dense::softmax::softmax_grad;
use crate::kernels::dense::table_grad::dense_table_grad;
use crate::kernels::dense::{ScoreEpilogue, Tile};
use crate::shape::{CPU_UNITS, GPU_UNITS, cpu_cores, is_cpu_runtime, vector_size};
use crate::{DType, KernelError, with_dtype};

/// Rows of the second warm-up block on the `cpu` runtime (see `DenseKernels::warm_up`): 64 a
/// unit, enough whole tiles for every unit and, with two panels of queries, a block whose
/// gradients outgrow the caches as a shard's do (`rows × queries ≥ 2¹⁸`).
const WARM_UP_ROWS: usize = 64 * CPU_UNITS as usize;

/// The tiles and chunking of the dense kernels on one runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseTiles {
    /// Scores: table rows × query vectors.
    pub scores: Tile,
    /// Table gradient: table rows × row vectors.
    pub table_grad: Tile,
    /// Query gradient: coordinates × query vectors (a score panel's: the same as `scores`).
    pub query_grad: Tile,
    /// Table rows per pass of the query gradient (`0`: all of them).
    pub chunk: usize,
    /// Exponentials of the losses by [`exp_lanes()`](crate::kernels::dense::tile::exp_lanes())
    /// (a polynomial, on the `cpu` runtime) instead of the runtime's own.
    pub polynomial_exp: bool,
}

impl DenseTiles {
    /// What was measured fastest on the `cpu` runtime (AVX-512, 32 vector registers; see
    /// docs/kernels.md), with `row_vectors` vectors per table row.
    pub fn cpu(row_vectors: usize) -> Self {
        let v = row_vectors.min(4);
        Self {
            scores: Tile {
                rows: 6,
                vectors: 4,
            },
            table_grad: Tile {
                rows: 6,
                vectors: v,
            },
            query_grad: Tile {
                rows: 6,
                vectors: 4,
            },
            chunk: 64,
            polynomial_exp: true,
        }
    }

    /// Small register tiles, one per unit, for GPU runtimes.
    pub fn gpu(row_vectors: usize) -> Self {
        let v = row_vectors.min(2);
        Self {
            scores: Tile {
                rows: 4,
                vectors: 2,
            },
            table_grad: Tile {
                rows: 4,
                vectors: v,
            },
            query_grad: Tile {
                rows: 4,
                vectors: 2,
            },
            chunk: 0,
            polynomial_exp: false,
        }
    }
}

/// How a launch splits its work: items (rows or queries) in `groups` of `per_unit` — the unit's
/// `x` position —, and `panels` in `panel_groups` ranges of `panels_per_unit` — its `y`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Items each group owns.
    pub per_unit: u32,
    /// Panels each unit owns within its group.
    pub panels_per_unit: u32,
    /// Ranges of panels (units along `y`).
    pub panel_groups: u32,
    /// Groups that own items (units along `x`).
    pub groups: usize,
    /// Cubes along `x`.
    pub cubes: u32,
    /// Units per cube along `x`.
    pub cube_dim: u32,
    /// Whether the units along `y` are a cube's (cpu) or cubes (GPUs).
    cpu: bool,
}

impl Split {
    /// The split of `items` in tiles of `tile_rows` and `panels` panels: on the `cpu` runtime one
    /// cube of [`CPU_UNITS`] units, each a contiguous range of whole tiles or nothing (panels
    /// are split only when there are too few items to keep the units busy); on GPUs a unit per
    /// tile and panel.
    pub fn new(client: &Client, items: usize, tile_rows: usize, panels: usize) -> Self {
        Self::with_min_tiles(client, items, tile_rows, panels, 1)
    }

    /// [`Split::new`], where on the `cpu` runtime a group owns at least `min_tiles` tiles as
    /// long as the panels keep [`CPU_UNITS`] units busy: a block of few rows against many
    /// panels (shared negatives: 256 rows × 32 panels) is then cut into squarer rectangles, and
    /// each unit streams a few panels instead of all of them (and a score block leaves fewer
    /// groups' statistics to combine).
    pub fn with_min_tiles(
        client: &Client,
        items: usize,
        tile_rows: usize,
        panels: usize,
        min_tiles: usize,
    ) -> Self {
        let items = items.max(1);
        let panels = panels.max(1);
        let tiles = items.div_ceil(tile_rows);
        let cpu = is_cpu_runtime(client);
        let (per_unit, panels_per_unit) = if cpu {
            let cap = CPU_UNITS as usize;
            let units = tiles
                .div_ceil(min_tiles.max(1))
                .max(cap / panels)
                .clamp(1, tiles.min(cap));
            let per_unit = tiles.div_ceil(units) * tile_rows;
            let groups = items.div_ceil(per_unit);
            let panel_groups = (cap / groups).clamp(1, panels);
            (per_unit, panels.div_ceil(panel_groups))
        } else {
            let max_cubes = client.properties().hardware.max_cube_count.0.max(1) as usize;
            let widen = tiles.div_ceil(GPU_UNITS as usize).div_ceil(max_cubes);
            (tile_rows * widen, 1)
        };
        let groups = items.div_ceil(per_unit);
        let panel_groups = panels.div_ceil(panels_per_unit) as u32;
        let (cubes, cube_dim) = if cpu {
            // As many units along `x` as fit beside the panel groups, whether or not each owns
            // items: a launch's shape then depends on `panel_groups` alone, and the `cpu`
            // runtime compiles a kernel once per shape (hundreds of milliseconds) — a block
            // whose row count changes from step to step (shared negatives) would otherwise
            // compile anew at every step.
            let fit = CPU_UNITS as usize / panel_groups as usize;
            (1, fit.max(groups) as u32)
        } else {
            (groups.div_ceil(GPU_UNITS as usize) as u32, GPU_UNITS)
        };
        Self {
            per_unit: per_unit as u32,
            panels_per_unit: panels_per_unit as u32,
            panel_groups,
            groups,
            cubes,
            cube_dim,
            cpu,
        }
    }

    /// Units launched (some past the last group may have nothing to do); a unit's
    /// `ABSOLUTE_POS` is below this.
    pub fn units(&self) -> usize {
        self.cubes as usize * self.cube_dim as usize * self.panel_groups as usize
    }

    fn count(&self) -> CubeCount {
        if self.cpu {
            CubeCount::Static(1, 1, 1)
        } else {
            CubeCount::Static(self.cubes, self.panel_groups, 1)
        }
    }

    fn dim(&self) -> CubeDim {
        if self.cpu {
            CubeDim::new_2d(self.cube_dim, self.panel_groups)
        } else {
            CubeDim::new_1d(self.cube_dim)
        }
    }
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
    rows: Handle,
    queries: Handle,
    excess: Handle,
    /// Per chunk of rows of the query gradient, where its labels start (one more than there
    /// are chunks with labels): the labels are sorted by row.
    chunk_starts: Handle,
    chunks: usize,
    count: usize,
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
        let counts = self.count_buffer(rows, &queries);
        self.count_better(&out, rows, &queries, &lse, &counts);
        let on_device = self.queries_on_device(queries.rows.clone(), n);
        crate::wait::read_one(&self.client, counts)?;
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
    fn padded(&self, count: usize) -> usize {
        count.max(1).div_ceil(self.panel()) * self.panel()
    }

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
    /// with `epilogue`'s statistics in `stats` (see [`DenseKernels::stats_len`]).
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
                    BufferArg::from_raw_parts(out.clone(), block.rows * queries.padded),
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
        let (dim, panel) = (self.dim, queries.panel);
        let mut out = vec![0.0f32; queries.count * dim];
        for (b, row) in out.chunks_exact_mut(dim).enumerate() {
            let (p, j) = (b / panel, b % panel);
            for (k, x) in row.iter_mut().enumerate() {
                *x = transposed[(p * dim + k) * panel + j];
            }
        }
        out
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
