//! Kernel micro-benchmark: gather and fused Adam at the standard sizes, on one device, reported
//! as rows/s and GB/s against the machine's copy bandwidth.

use cubecl::bytes::Bytes;

use rowshard_kernels::kernel_set::DeviceStep;
use rowshard_kernels::shape::LaunchShape;
use rowshard_kernels::{
    Backend, DType, HyperParams, KernelError, KernelSet, Optimizer, Segments, TableConfig,
};

use super::bandwidth::CopyBandwidth;
use super::stats::median_time;
use rowshard::init::Initializer;

/// What to measure.
#[derive(Clone, Debug)]
pub struct KernelBench {
    /// Runtime.
    pub backend: Backend,
    /// Table rows.
    pub rows: usize,
    /// Row length.
    pub dim: usize,
    /// Ids per step (uniform, with duplicates).
    pub batch: usize,
    /// Weight dtypes to run.
    pub dtypes: Vec<DType>,
    /// Timed repeats per figure (the median is reported).
    pub repeats: usize,
}

/// One measured kernel.
#[derive(Clone, Debug)]
pub struct KernelFigure {
    /// `gather` or `fused adam`.
    pub kernel: &'static str,
    /// Weight dtype.
    pub dtype: DType,
    /// Launch shape used.
    pub shape: LaunchShape,
    /// Vector width.
    pub vector: usize,
    /// Unique rows per launch.
    pub rows: usize,
    /// Median seconds per launch (enqueue to completed sync).
    pub seconds: f64,
    /// Bytes the kernel must move per launch.
    pub bytes: f64,
}

impl KernelFigure {
    /// Rows per second.
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.seconds
    }

    /// Achieved GB/s.
    pub fn gb_per_s(&self) -> f64 {
        super::stats::gb_per_s(self.bytes, std::time::Duration::from_secs_f64(self.seconds))
    }
}

impl KernelBench {
    /// Runs every figure.
    pub fn run(&self) -> Result<Vec<KernelFigure>, KernelError> {
        let client = self.backend.client()?;
        let mut figures = Vec::new();
        let mut rng = rowshard::init::SplitMix64::new(42);
        let ids: Vec<u32> = (0..self.batch)
            .map(|_| (rng.next_u64() % self.rows as u64) as u32)
            .collect();
        let segments = Segments::group(&ids);
        let unique = segments.len();
        for &dtype in &self.dtypes {
            let config = TableConfig::new(Optimizer::Adam, dtype, self.dim);
            let kernels = KernelSet::new(&client, config)?;
            let init = Initializer::Uniform {
                bound: 0.1,
                seed: 1,
            }
            .values(0, self.rows, self.dim);
            let table = kernels.allocate(self.rows, &init)?;
            drop(init);
            let shape = LaunchShape::for_rows(&client, unique);
            let row_handle = client.create(Bytes::from_elems(segments.rows.clone()));
            let out = client.empty(unique * self.dim * dtype.size());
            let sync = || {
                cubecl::future::block_on(client.sync())
                    .map_err(rowshard_kernels::element::runtime_error)
            };
            let gather = median_time(1, self.repeats, || {
                kernels.gather(&table, &row_handle, unique, &out);
                sync().expect("gather");
            });
            let row_bytes = (self.dim * dtype.size()) as f64;
            figures.push(KernelFigure {
                kernel: "gather",
                dtype,
                shape,
                vector: kernels.vector_size(),
                rows: unique,
                seconds: gather.as_secs_f64(),
                bytes: unique as f64 * (2.0 * row_bytes + 4.0),
            });

            let params = HyperParams::new(Optimizer::Adam).kernel_block(0.01, 1, self.dim)?;
            let grads: Vec<f32> = (0..self.batch * self.dim)
                .map(|i| ((i % 7) as f32 - 3.0) * 1e-3)
                .collect();
            let step = DeviceStep {
                rows: row_handle.clone(),
                offsets: client.create(Bytes::from_elems(segments.offsets.clone())),
                order: client.create(Bytes::from_elems(segments.order.clone())),
                grads: client.create(Bytes::from_elems(grads)),
                params: client.create(Bytes::from_elems(params.to_vec())),
                unique,
                inputs: self.batch,
            };
            let mut step_index = 0;
            let apply = median_time(1, self.repeats, || {
                step_index += 1;
                kernels.apply(&table, &step, 0, step_index);
                sync().expect("apply");
            });
            // Weights, m and v read and written for every unique row; every gradient row read.
            let state_bytes = (self.dim * config.state_dtype.size()) as f64;
            let bytes = unique as f64 * (2.0 * row_bytes + 4.0 * state_bytes + 8.0 + 12.0)
                + (self.batch * self.dim * 4) as f64;
            figures.push(KernelFigure {
                kernel: "fused adam",
                dtype,
                shape,
                vector: kernels.vector_size(),
                rows: unique,
                seconds: apply.as_secs_f64(),
                bytes,
            });
        }
        Ok(figures)
    }
}

/// Prints the figures as a table, with each GB/s as a fraction of the copy bandwidth.
pub fn print(bench: &KernelBench, figures: &[KernelFigure], copy: &CopyBandwidth) {
    println!(
        "kernel micro-benchmark: {} runtime, {} rows x {} dim, batch {} ids ({} unique), median of {}",
        bench.backend,
        bench.rows,
        bench.dim,
        bench.batch,
        figures.first().map_or(0, |f| f.rows),
        bench.repeats
    );
    println!(
        "copy bandwidth (read+write): {:.1} GB/s on 1 thread, {:.1} GB/s on {} threads",
        copy.one_thread, copy.all_threads, copy.threads
    );
    println!(
        "{:<11} {:<5} {:>26} {:>6} {:>9} {:>11} {:>8} {:>8}",
        "kernel",
        "dtype",
        "shape (cubes x units, rows/unit)",
        "vector",
        "ms",
        "M rows/s",
        "GB/s",
        "of copy"
    );
    for f in figures {
        println!(
            "{:<11} {:<5} {:>26} {:>6} {:>9.2} {:>11.2} {:>8.2} {:>7.0}%",
            f.kernel,
            f.dtype.name(),
            format!(
                "{} x {}, {}",
                f.shape.cube_count, f.shape.cube_dim, f.shape.rows_per_unit
            ),
            f.vector,
            f.seconds * 1e3,
            f.rows_per_s() / 1e6,
            f.gb_per_s(),
            100.0 * f.gb_per_s() / copy.all_threads
        );
    }
}
