//! The dense products alone — scores, table gradient, query gradient — with and without their
//! losses, at the shapes training and evaluation run them: one rank's shard of FB15k-237 (1,024
//! queries × 7,253 rows, dim 128 and 256), the whole of it on one rank (14,505 rows: a table the
//! cores' second-level caches no longer hold), and UMLS's shard. Reported as GFLOP/s (2 · dim
//! flops per query–row pair and product), for comparison with torch's f32 matmul at the same
//! shapes (`benches/peers/torch_dense.py`).

use std::time::{Duration, Instant};

use super::results::Table;
use cubecl::server::Handle;
use rowshard::init::SplitMix64;
use rowshard_kernels::dense_set::{DeviceQueries, SoftmaxGradient, TableBlock};
use rowshard_kernels::kernels::dense::ScoreEpilogue;
use rowshard_kernels::{Backend, DType, DenseKernels, KernelError};

/// A shape: queries × table rows × dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseShape {
    /// What the shape is.
    pub label: &'static str,
    /// Queries.
    pub queries: usize,
    /// Table rows (one rank's shard).
    pub rows: usize,
    /// Row length.
    pub dim: usize,
}

/// The shapes `rowshard bench-kernels` measures.
pub const SHAPES: [DenseShape; 6] = [
    DenseShape {
        label: "FB15k-237 shard",
        queries: 1024,
        rows: 7253,
        dim: 128,
    },
    DenseShape {
        label: "FB15k-237 whole",
        queries: 1024,
        rows: 14505,
        dim: 128,
    },
    DenseShape {
        label: "FB15k-237 shard",
        queries: 1024,
        rows: 7253,
        dim: 256,
    },
    DenseShape {
        label: "shared negatives",
        queries: 2048,
        rows: 256,
        dim: 128,
    },
    DenseShape {
        label: "shared, a rank of 2",
        queries: 1024,
        rows: 256,
        dim: 128,
    },
    DenseShape {
        label: "UMLS shard",
        queries: 512,
        rows: 68,
        dim: 32,
    },
];

/// One measured kernel (or chain of kernels).
#[derive(Clone, Debug)]
pub struct DenseFigure {
    /// The shape.
    pub shape: DenseShape,
    /// Table dtype.
    pub dtype: DType,
    /// What ran.
    pub what: &'static str,
    /// Dense products it contains (each 2 · dim flops per pair).
    pub products: usize,
    /// Launches queued per sync (1 for all but small shapes).
    pub queued: usize,
    /// Median time of one launch (of the chain).
    pub time: Duration,
}

impl DenseFigure {
    /// Effective GFLOP/s: 2 · dim flops per query–row pair and product.
    pub fn gflops(&self) -> f64 {
        let s = self.shape;
        (2 * s.dim * s.queries * s.rows * self.products) as f64 / self.time.as_secs_f64() / 1e9
    }
}

/// The figure of a 1vsAll step's products: softmax scores, the gradient made in the query
/// gradient, and the table gradient (3 products).
pub const SOFTMAX_STEP: &str = "1vsAll step: softmax gradient made in the query gradient";

/// One figure to time: what it is, how many products it counts, and the launches.
type Case<'a> = (&'static str, usize, Box<dyn Fn() + 'a>);

/// A case faster than this (seconds) is queued several times per sync.
const QUEUED_TIME: f64 = 2e-3;

/// At most this many launches of a case are queued per sync.
const MAX_QUEUED: usize = 64;

/// True entities per query in the benchmark's labels (FB15k-237 KvsAll: 3.7 on average).
const LABELS_PER_QUERY: usize = 4;

/// Measures every figure for `shapes` and `dtypes` on `backend`: `repeats` rounds over the
/// figures of a shape (after one untimed round), each reported from its median round.
pub fn run(
    backend: Backend,
    shapes: &[DenseShape],
    dtypes: &[DType],
    repeats: usize,
) -> Result<Vec<DenseFigure>, KernelError> {
    let client = backend.client()?;
    let mut figures = Vec::new();
    for &shape in shapes {
        for &dtype in dtypes {
            match measure(&client, shape, dtype, repeats) {
                Ok(f) => figures.extend(f),
                Err(KernelError::UnsupportedDType { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(figures)
}

fn measure(
    client: &cubecl::prelude::Client,
    shape: DenseShape,
    dtype: DType,
    repeats: usize,
) -> Result<Vec<DenseFigure>, KernelError> {
    let DenseShape {
        queries: n,
        rows,
        dim,
        ..
    } = shape;
    let kernels = DenseKernels::new(client, dtype, dim)?;
    let mut rng = SplitMix64::new(7);
    let mut uniform = |len: usize, scale: f32| -> Vec<f32> {
        (0..len).map(|_| (rng.next_f32() - 0.5) * scale).collect()
    };
    let q = kernels.upload_queries(&uniform(n * dim, 0.5), n);
    let table = client.create(cubecl::bytes::Bytes::from_bytes_vec(
        dtype.encode(&uniform(rows * dim, 0.5)),
    ));
    let block = TableBlock {
        table: &table,
        table_len: rows * dim,
        first: 0,
        rows,
    };
    let label_rows: Vec<u32> = (0..n * LABELS_PER_QUERY)
        .map(|i| ((i * 7919) % rows) as u32)
        .collect();
    let label_queries: Vec<u32> = (0..n * LABELS_PER_QUERY)
        .map(|i| (i / LABELS_PER_QUERY) as u32)
        .collect();
    let mut pairs: Vec<(u32, u32)> = label_rows.into_iter().zip(label_queries).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let (lr, lq): (Vec<u32>, Vec<u32>) = pairs.into_iter().unzip();
    let labels = kernels.upload_labels(&lr, &lq, &vec![1.0; lr.len()]);
    let label_loss = kernels.label_loss_buffer(&labels);
    let out = kernels.score_buffer(rows, &q);
    let lse = client.create(cubecl::bytes::Bytes::from_elems(vec![1.0f32; q.padded]));
    let dw = client.empty(rows * dim * 4);
    let dq = kernels.query_grad_buffer(&q);
    let stats = |e| kernels.stats_buffer(e, rows, &q);
    let (bce_stats, softmax_stats, score_stats, counts) = (
        stats(ScoreEpilogue::BinaryCrossEntropy),
        stats(ScoreEpilogue::SoftmaxStats),
        stats(ScoreEpilogue::Scores),
        stats(ScoreEpilogue::CountBetter),
    );
    let sync = || rowshard_kernels::wait::sync(client).expect("sync");
    let scores = |e: ScoreEpilogue, s: &Handle| kernels.scores(&q, &block, &out, s, e, 1e-6, 0.0);
    let bce = || {
        scores(ScoreEpilogue::BinaryCrossEntropy, &bce_stats);
        kernels.label_corrections(&q, &block, &out, &labels, &label_loss, 1e-6);
    };
    let products = |q: &DeviceQueries| {
        kernels.table_grad(q, &block, &out, &dw);
        kernels.query_grad(&out, &block, q, &dq, false);
    };
    let softmax = SoftmaxGradient {
        lse: &lse,
        scale: 1e-3,
        off: 0.0,
    };
    let cases: Vec<Case> = vec![
        (
            "scores",
            1,
            Box::new(|| scores(ScoreEpilogue::Scores, &score_stats)),
        ),
        ("scores + BCE (targets on the device)", 1, Box::new(bce)),
        (
            "scores + softmax CE (stats, gradient pass, targets)",
            1,
            Box::new(|| {
                scores(ScoreEpilogue::SoftmaxStats, &softmax_stats);
                kernels.softmax_grad(&out, rows, &q, &lse, 1e-3, 0.0);
                kernels.label_corrections(&q, &block, &out, &labels, &label_loss, 1e-3);
            }),
        ),
        (
            "scores + softmax stats alone (no gradient pass)",
            1,
            Box::new(|| scores(ScoreEpilogue::SoftmaxStats, &softmax_stats)),
        ),
        (
            "table gradient G·Q",
            1,
            Box::new(|| kernels.table_grad(&q, &block, &out, &dw)),
        ),
        (
            "query gradient Gᵀ·W",
            1,
            Box::new(|| kernels.query_grad(&out, &block, &q, &dq, false)),
        ),
        (
            "filtered ranking (counted in the score tiles)",
            1,
            Box::new(|| {
                let e = ScoreEpilogue::CountBetter;
                kernels.scores(&q, &block, &lse, &counts, e, 1.0, 0.0);
            }),
        ),
        (
            "KvsAll step: BCE scores + both gradients",
            3,
            Box::new(|| {
                bce();
                products(&q);
            }),
        ),
        (
            "1vsAll step: softmax scores + both gradients, 5 launches",
            3,
            Box::new(|| {
                scores(ScoreEpilogue::SoftmaxStats, &softmax_stats);
                kernels.softmax_grad(&out, rows, &q, &lse, 1e-3, 0.0);
                kernels.label_corrections(&q, &block, &out, &labels, &label_loss, 1e-3);
                products(&q);
            }),
        ),
    ];
    let mut cases = cases;
    if kernels.fuses_softmax() {
        // The softmax gradient's own product: what the step runs after the scores and their
        // statistics. Each round turns the previous round's gradient into a new one in place
        // (finite: `lse` is 1 and the scale small), the same work as from scores.
        cases.push((
            "query gradient Gᵀ·W, the softmax gradient made in it",
            1,
            Box::new(|| {
                kernels.softmax_query_grad(&out, &block, &q, &dq, false, &softmax, &labels);
            }),
        ));
        cases.push((
            SOFTMAX_STEP,
            3,
            Box::new(|| {
                scores(ScoreEpilogue::SoftmaxStats, &softmax_stats);
                kernels.softmax_query_grad(&out, &block, &q, &dq, false, &softmax, &labels);
                kernels.label_loss(&q, &block, &labels, &label_loss);
                kernels.table_grad(&q, &block, &out, &dw);
            }),
        ));
    }
    // A case shorter than `QUEUED_TIME` is launched several times per sync, as training queues
    // its launches: otherwise a small shape (UMLS) measures the launch-and-wait round trip of
    // the runtime, not the kernels. Calibrated on an untimed round after the warm-up one.
    let mut queued = vec![1usize; cases.len()];
    for (i, (_, _, f)) in cases.iter().enumerate() {
        f();
        sync();
        let start = Instant::now();
        f();
        sync();
        let once = start.elapsed().as_secs_f64().max(1e-7);
        queued[i] = ((QUEUED_TIME / once).ceil() as usize).clamp(1, MAX_QUEUED);
    }
    // Rounds over every case, interleaved, so a slow spell of the machine hits them alike.
    let mut times = vec![Vec::with_capacity(repeats); cases.len()];
    for _ in 0..repeats {
        for (i, (_, _, f)) in cases.iter().enumerate() {
            let start = Instant::now();
            for _ in 0..queued[i] {
                f();
            }
            sync();
            times[i].push(start.elapsed() / queued[i] as u32);
        }
    }
    Ok(cases
        .iter()
        .zip(times)
        .zip(queued)
        .map(|(((what, products, _), mut t), queued)| {
            t.sort();
            DenseFigure {
                shape,
                dtype,
                what,
                products: *products,
                queued,
                time: t[t.len() / 2],
            }
        })
        .collect())
}

/// The figures as a table (the results' `dense-kernels`).
pub fn table(backend: Backend, repeats: usize, figures: &[DenseFigure]) -> Table {
    let mut table = Table::measured(
        "dense-kernels",
        "Kernels",
        &format!("Dense products on the {backend} runtime (median of {repeats})"),
        &[
            "shape", "queries", "rows", "dim", "dtype", "kernels", "queued", "ms", "GFLOP/s",
        ],
    );
    table.note = "GFLOP/s count 2·dim flops per (query, row) pair and product; compare \
                  benches/peers/torch_dense.py. `queued`: launches per sync, as training queues \
                  them, where one takes under 2 ms."
        .into();
    for f in figures {
        table.rows.push(vec![
            f.shape.label.to_string(),
            f.shape.queries.to_string(),
            f.shape.rows.to_string(),
            f.shape.dim.to_string(),
            f.dtype.name().to_string(),
            f.what.to_string(),
            f.queued.to_string(),
            format!("{:.3}", f.time.as_secs_f64() * 1e3),
            format!("{:.1}", f.gflops()),
        ]);
    }
    table
}
