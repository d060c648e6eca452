//! The dense products and their losses against `f64` host math, written once and run per
//! runtime and dtype: scores, binary and softmax cross-entropy with targets from label lists,
//! both gradient products, rank counting — at awkward sizes (one query, one row, a dim that is
//! not a multiple of the vector width or the tile, blocks in the middle of a table) and with
//! scores of ±80.

// (row, query) grids are indexed by both coordinates: index loops read best.
#![allow(clippy::needless_range_loop)]

use cubecl::bytes::Bytes;
use rowshard_kernels::dense_set::{
    DeviceLabels, DeviceQueries, SoftmaxGradient, TableBlock, combine_counts, combine_softmax_stats,
};
use rowshard_kernels::kernels::dense::ScoreEpilogue;
use rowshard_kernels::{Backend, DType, DenseKernels};

use crate::data::Rng;

/// One case: `queries` against rows `first..first + rows` of a table of `table_rows` rows.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Queries.
    pub queries: usize,
    /// Rows of the block.
    pub rows: usize,
    /// First row of the block.
    pub first: usize,
    /// Rows of the whole table.
    pub table_rows: usize,
    /// Row length.
    pub dim: usize,
    /// The largest |score| (the queries are scaled to reach it).
    pub loudest: f64,
}

/// The cases every runtime and dtype runs. The last is large enough for the `cpu` runtime's
/// splits of a shard: several table-gradient passes of four query panels (the last one short),
/// query-gradient units of two whole panels (the last with one), panels outer in the scores.
pub const CASES: [Case; 10] = [
    case(1, 1, 0, 1, 8, 4.0),
    case(1, 37, 0, 37, 20, 4.0),
    case(37, 1, 0, 1, 20, 4.0),
    case(70, 50, 0, 50, 24, 6.0),
    case(33, 100, 0, 100, 128, 8.0),
    case(17, 13, 0, 13, 7, 3.0),
    case(130, 61, 5, 80, 32, 10.0),
    case(40, 29, 3, 40, 16, 80.0),
    case(70, 300, 7, 320, 24, 6.0),
    case(520, 1000, 9, 1012, 24, 6.0),
];

const fn case(
    queries: usize,
    rows: usize,
    first: usize,
    table_rows: usize,
    dim: usize,
    loudest: f64,
) -> Case {
    Case {
        queries,
        rows,
        first,
        table_rows,
        dim,
        loudest,
    }
}

/// Host data of a case, and the same on the device.
struct Setup {
    case: Case,
    kernels: DenseKernels,
    /// Table values as stored (decoded from the dtype), `table_rows × dim`.
    table: Vec<f64>,
    table_handle: cubecl::server::Handle,
    /// Queries, `queries × dim`.
    q: Vec<f32>,
    queries: DeviceQueries,
    /// Block row and query of each label (distinct), and its query's label count.
    labels: Vec<(usize, usize)>,
    counts: Vec<usize>,
}

impl Setup {
    fn new(backend: Backend, dtype: DType, case: Case, seed: u64) -> Self {
        let client = backend.client().expect("client");
        let kernels = DenseKernels::new(&client, dtype, case.dim).expect("dense kernels");
        let mut rng = Rng::new(seed);
        let raw = rng.values(case.table_rows * case.dim, -0.5, 0.5);
        let stored = dtype.encode(&raw);
        let table: Vec<f64> = dtype
            .decode(&stored)
            .into_iter()
            .map(|x| x as f64)
            .collect();
        let table_handle = client.create(Bytes::from_bytes_vec(stored));
        let mut q = rng.values(case.queries * case.dim, -0.5, 0.5);
        // Scale the queries so the loudest score is `loudest`.
        let mut loudest = 0.0f64;
        for b in 0..case.queries {
            for e in 0..case.rows {
                loudest = loudest.max(dot(&q, b, &table, case.first + e, case.dim).abs());
            }
        }
        let factor = (case.loudest / loudest.max(1e-9)) as f32;
        q.iter_mut().for_each(|x| *x *= factor);
        let queries = kernels.upload_queries(&q, case.queries);
        // Zero to three labels per query, some out of the block (other ranks' rows).
        let mut labels = Vec::new();
        let mut counts = Vec::new();
        for b in 0..case.queries {
            let mut mine: Vec<usize> = (0..rng.below(4))
                .map(|_| rng.below(case.rows as u32 + 3) as usize)
                .collect();
            mine.sort_unstable();
            mine.dedup();
            counts.push(mine.len());
            labels.extend(mine.into_iter().filter(|&e| e < case.rows).map(|e| (e, b)));
        }
        labels.sort_unstable();
        Setup {
            case,
            kernels,
            table,
            table_handle,
            q,
            queries,
            labels,
            counts,
        }
    }

    fn block(&self) -> TableBlock<'_> {
        TableBlock {
            table: &self.table_handle,
            table_len: self.case.table_rows * self.case.dim,
            first: self.case.first,
            rows: self.case.rows,
        }
    }

    /// The `f64` score of (block row `e`, query `b`), and `Σ |q_k w_k|` (for the tolerance).
    fn score(&self, e: usize, b: usize) -> (f64, f64) {
        let d = self.case.dim;
        let w = &self.table[(self.case.first + e) * d..][..d];
        let q = &self.q[b * d..][..d];
        let s = (0..d).map(|k| q[k] as f64 * w[k]).sum();
        let size = (0..d).map(|k| (q[k] as f64 * w[k]).abs()).sum();
        (s, size)
    }

    fn read(&self, handle: cubecl::server::Handle, len: usize) -> Vec<f32> {
        self.kernels.read(handle, len).expect("read")
    }

    /// The block's values in query order: `[e][b]`.
    fn unpanel(&self, values: &[f32]) -> Vec<Vec<f32>> {
        let c = self.case;
        (0..c.rows)
            .map(|e| {
                (0..c.queries)
                    .map(|b| values[self.queries.index(c.rows, e, b)])
                    .collect()
            })
            .collect()
    }

    fn upload_labels(&self, excess: impl Fn(usize) -> f32) -> DeviceLabels {
        let rows: Vec<u32> = self.labels.iter().map(|&(e, _)| e as u32).collect();
        let queries: Vec<u32> = self.labels.iter().map(|&(_, b)| b as u32).collect();
        let excess: Vec<f32> = self.labels.iter().map(|&(_, b)| excess(b)).collect();
        self.kernels.upload_labels(&rows, &queries, &excess)
    }

    fn is_label(&self, e: usize, b: usize) -> bool {
        self.labels.binary_search(&(e, b)).is_ok()
    }
}

fn dot(q: &[f32], b: usize, table: &[f64], row: usize, dim: usize) -> f64 {
    (0..dim)
        .map(|k| q[b * dim + k] as f64 * table[row * dim + k])
        .sum()
}

/// f32 math against f64: a few units in the last place of the largest term, per term.
fn close(got: f64, want: f64, size: f64, dim: usize) -> bool {
    (got - want).abs() <= 1e-6 + 4.0 * dim as f64 * f32::EPSILON as f64 * size.max(want.abs())
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// Scores, BCE and softmax cross-entropy with label targets, both gradient products and rank
/// counts, for every case.
pub fn check_dense(backend: Backend, dtype: DType) {
    for (i, &case) in CASES.iter().enumerate() {
        let setup = Setup::new(backend, dtype, case, 100 + i as u64);
        let what = format!("{backend} {dtype} {case:?}");
        check_scores(&setup, &what);
        check_bce(&setup, &what);
        check_softmax(&setup, &what);
        check_products(&setup, &what);
        check_queries_on_device(&setup, &what);
        check_counts(&setup, &what);
    }
}

fn check_scores(s: &Setup, what: &str) {
    let c = s.case;
    let k = &s.kernels;
    let out = k.score_buffer(c.rows, &s.queries);
    let stats = k.stats_buffer(ScoreEpilogue::Scores, c.rows, &s.queries);
    k.scores(
        &s.queries,
        &s.block(),
        &out,
        &stats,
        ScoreEpilogue::Scores,
        1.0,
        0.0,
    );
    let got = s.unpanel(&s.read(out, c.rows * s.queries.padded));
    for e in 0..c.rows {
        for b in 0..c.queries {
            let (want, size) = s.score(e, b);
            assert!(
                close(got[e][b] as f64, want, size, c.dim),
                "{what}: score ({e}, {b}) {} vs {want}",
                got[e][b]
            );
        }
    }
}

fn check_bce(s: &Setup, what: &str) {
    let c = s.case;
    let k = &s.kernels;
    let (epsilon, entities) = (0.1f64, (c.table_rows + 7) as f64);
    let off = epsilon / entities;
    let scale = 0.25f64;
    let out = k.score_buffer(c.rows, &s.queries);
    let epilogue = ScoreEpilogue::BinaryCrossEntropy;
    let stats = k.stats_buffer(epilogue, c.rows, &s.queries);
    k.scores(
        &s.queries,
        &s.block(),
        &out,
        &stats,
        epilogue,
        scale as f32,
        off as f32,
    );
    let labels = s.upload_labels(|_| (1.0 - epsilon) as f32);
    let label_loss = k.label_loss_buffer(&labels);
    k.label_corrections(
        &s.queries,
        &s.block(),
        &out,
        &labels,
        &label_loss,
        scale as f32,
    );
    let got = s.unpanel(&s.read(out, c.rows * s.queries.padded));
    let loss: f64 = k.bce_loss(stats, c.rows, &s.queries).expect("read")
        + s.read(label_loss, k.label_loss_len(&labels))
            .iter()
            .map(|&x| x as f64)
            .sum::<f64>();
    let (mut want_loss, mut loss_size) = (0.0, 0.0);
    for e in 0..c.rows {
        for b in 0..c.queries {
            let (score, size) = s.score(e, b);
            let y = off + (1.0 - epsilon) * s.is_label(e, b) as u8 as f64;
            let want = scale * (sigmoid(score) - y);
            assert!(
                (got[e][b] as f64 - want).abs() <= 1e-6 * scale + 1e-6 * size * scale,
                "{what}: BCE gradient ({e}, {b}) {} vs {want} (score {score})",
                got[e][b]
            );
            want_loss += softplus(score) - y * score;
            loss_size += softplus(score) + y * score.abs();
        }
    }
    assert!(
        (loss - want_loss).abs() <= 1e-5 * loss_size + 1e-4,
        "{what}: BCE loss {loss} vs {want_loss}"
    );
}

fn check_softmax(s: &Setup, what: &str) {
    let c = s.case;
    let k = &s.kernels;
    let (epsilon, entities) = (0.2f64, c.rows as f64);
    let off = epsilon / entities;
    let scale = 0.5f64;
    let out = k.score_buffer(c.rows, &s.queries);
    let epilogue = ScoreEpilogue::SoftmaxStats;
    let stats = k.stats_buffer(epilogue, c.rows, &s.queries);
    k.scores(&s.queries, &s.block(), &out, &stats, epilogue, 1.0, 0.0);
    let stats = s.read(stats, k.stats_len(epilogue, c.rows, &s.queries));
    let combined = combine_softmax_stats(&stats, s.queries.padded, c.queries);
    // The log-sum-exp over the block, each query's own.
    let mut lse = Vec::with_capacity(s.queries.padded);
    for (b, &[max, sum_exp, sum]) in combined.iter().enumerate() {
        let scores: Vec<f64> = (0..c.rows).map(|e| s.score(e, b).0).collect();
        let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let want = top + scores.iter().map(|x| (x - top).exp()).sum::<f64>().ln();
        let got = max + sum_exp.ln();
        assert!(
            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{what}: log-sum-exp of query {b}: {got} vs {want}"
        );
        let want_sum: f64 = scores.iter().sum();
        let size: f64 = scores.iter().map(|x| x.abs()).sum();
        assert!(
            (sum - want_sum).abs() <= 1e-5 * (1.0 + size),
            "{what}: score sum of query {b}: {sum} vs {want_sum}"
        );
        lse.push(want);
    }
    let mut lse_padded: Vec<f32> = lse.iter().map(|&x| x as f32).collect();
    lse_padded.resize(s.queries.padded, 0.0);
    let lse_handle = k.client().create(Bytes::from_elems(lse_padded));
    let target = |b: usize| (1.0 - epsilon) / s.counts[b].max(1) as f64;
    let labels = s.upload_labels(|b| target(b) as f32);
    // Three launches, and where the runtime fuses them, the gradient made inside the query
    // gradient's launch (which then also gives the queries' gradient).
    let mut fused = vec![false];
    if k.fuses_softmax() {
        fused.push(true);
    }
    for fused in fused {
        let what = format!("{what} (fused: {fused})");
        let out = k.score_buffer(c.rows, &s.queries);
        let stats = k.stats_buffer(epilogue, c.rows, &s.queries);
        k.scores(&s.queries, &s.block(), &out, &stats, epilogue, 1.0, 0.0);
        let label_loss = k.label_loss_buffer(&labels);
        let dq = k.query_grad_buffer(&s.queries);
        if fused {
            let softmax = SoftmaxGradient {
                lse: &lse_handle,
                scale: scale as f32,
                off: off as f32,
            };
            let block = s.block();
            k.softmax_query_grad(&out, &block, &s.queries, &dq, false, &softmax, &labels);
            k.label_loss(&s.queries, &block, &labels, &label_loss);
        } else {
            k.softmax_grad(
                &out,
                c.rows,
                &s.queries,
                &lse_handle,
                scale as f32,
                off as f32,
            );
            k.label_corrections(
                &s.queries,
                &s.block(),
                &out,
                &labels,
                &label_loss,
                scale as f32,
            );
            k.query_grad(&out, &s.block(), &s.queries, &dq, false);
        }
        let dq = k.read_query_grad(dq, &s.queries).expect("read");
        let got = s.unpanel(&s.read(out, c.rows * s.queries.padded));
        let label_part: f64 = s
            .read(label_loss, k.label_loss_len(&labels))
            .iter()
            .map(|&x| x as f64)
            .sum();
        let (mut want_labels, mut label_size) = (0.0, 0.0);
        let mut want_grads = vec![vec![0.0f64; c.queries]; c.rows];
        for e in 0..c.rows {
            for b in 0..c.queries {
                let (score, size) = s.score(e, b);
                let label = s.is_label(e, b) as u8 as f64;
                let y = off + target(b) * label;
                let p = (score - lse[b]).exp();
                let want = scale * (p - y);
                // exp(s − lse) carries the rounding of s and lse (ulps of their size) relatively.
                let slack = 8.0 * f32::EPSILON as f64 * (size + score.abs() + lse[b].abs());
                assert!(
                    (got[e][b] as f64 - want).abs() <= scale * (2e-6 + p * slack),
                    "{what}: softmax gradient ({e}, {b}) {} vs {want}",
                    got[e][b]
                );
                want_grads[e][b] = want;
                want_labels -= target(b) * label * score;
                label_size += (target(b) * label * score).abs();
            }
        }
        assert!(
            (label_part - want_labels).abs() <= 1e-5 * (1.0 + label_size),
            "{what}: label loss {label_part} vs {want_labels}"
        );
        for b in 0..c.queries {
            for i in 0..c.dim {
                let terms =
                    (0..c.rows).map(|e| want_grads[e][b] * s.table[(c.first + e) * c.dim + i]);
                let want: f64 = terms.clone().sum();
                let size: f64 = terms.map(f64::abs).sum();
                let got = dq[b * c.dim + i] as f64;
                assert!(
                    close(got, want, size, c.rows),
                    "{what}: query gradient of the softmax ({b}, {i}) {got} vs {want}"
                );
            }
        }
    }
}

fn check_products(s: &Setup, what: &str) {
    let c = s.case;
    let k = &s.kernels;
    let client = k.client();
    let mut rng = Rng::new(c.dim as u64 * 31 + c.rows as u64);
    let grads: Vec<Vec<f32>> = (0..c.rows)
        .map(|_| rng.values(c.queries, -1.0, 1.0))
        .collect();
    let mut panelled = vec![0.0f32; c.rows * s.queries.padded];
    for (e, row) in grads.iter().enumerate() {
        for (b, &g) in row.iter().enumerate() {
            panelled[s.queries.index(c.rows, e, b)] = g;
        }
    }
    let g = client.create(Bytes::from_elems(panelled));
    // The table gradient lands on the block's rows of a shard-sized buffer; others untouched.
    let sentinel = 12345.0f32;
    let dw = client.create(Bytes::from_elems(vec![sentinel; c.table_rows * c.dim]));
    k.table_grad(&s.queries, &s.block(), &g, &dw);
    let dw = s.read(dw, c.table_rows * c.dim);
    for row in 0..c.table_rows {
        for i in 0..c.dim {
            let got = dw[row * c.dim + i];
            if !(c.first..c.first + c.rows).contains(&row) {
                assert_eq!(got, sentinel, "{what}: table gradient wrote row {row}");
                continue;
            }
            let e = row - c.first;
            let want: f64 = (0..c.queries)
                .map(|b| grads[e][b] as f64 * s.q[b * c.dim + i] as f64)
                .sum();
            let size: f64 = (0..c.queries)
                .map(|b| (grads[e][b] as f64 * s.q[b * c.dim + i] as f64).abs())
                .sum();
            assert!(
                close(got as f64, want, size, c.queries),
                "{what}: table gradient ({e}, {i}) {got} vs {want}"
            );
        }
    }
    // The query gradient over the block in two parts: the first overwrites, the second adds.
    let dq = client.create(Bytes::from_elems(vec![sentinel; c.dim * s.queries.padded]));
    let half = c.rows / 2;
    let g_parts: Vec<(usize, usize)> = vec![(0, half), (half, c.rows - half)];
    for (i, &(start, len)) in g_parts.iter().enumerate() {
        if len == 0 {
            continue;
        }
        let mut part = vec![0.0f32; len * s.queries.padded];
        for e in 0..len {
            for b in 0..c.queries {
                part[s.queries.index(len, e, b)] = grads[start + e][b];
            }
        }
        let g = client.create(Bytes::from_elems(part));
        let block = TableBlock {
            table: &s.table_handle,
            table_len: c.table_rows * c.dim,
            first: c.first + start,
            rows: len,
        };
        k.query_grad(&g, &block, &s.queries, &dq, i > 0 && half > 0);
    }
    let dq = k.read_query_grad(dq, &s.queries).expect("read");
    for b in 0..c.queries {
        for i in 0..c.dim {
            let terms =
                (0..c.rows).map(|e| grads[e][b] as f64 * s.table[(c.first + e) * c.dim + i]);
            let want: f64 = terms.clone().sum();
            let size: f64 = terms.map(f64::abs).sum();
            let got = dq[b * c.dim + i] as f64;
            assert!(
                close(got, want, size, c.rows),
                "{what}: query gradient ({b}, {i}) {got} vs {want}"
            );
        }
    }
}

/// Queries whose rows are on the device already (`queries_on_device`, as a query kernel leaves
/// them) are laid out as `Qᵀ` there exactly as the host lays out uploaded ones (padding zeros
/// included) and give the same products bit for bit, and buffers read in one round trip (an
/// empty read among them) equal those read one by one.
fn check_queries_on_device(s: &Setup, what: &str) {
    let c = s.case;
    let k = &s.kernels;
    let client = k.client();
    let on_device = k.queries_on_device(client.create(Bytes::from_elems(s.q.clone())), c.queries);
    let transposed_len = c.dim * s.queries.padded;
    assert_eq!(on_device.padded, s.queries.padded, "{what}: padded queries");
    assert_eq!(
        s.read(on_device.transposed.clone(), transposed_len),
        s.read(s.queries.transposed.clone(), transposed_len),
        "{what}: Qᵀ laid out on the device"
    );
    let mut rng = Rng::new(c.dim as u64 * 17 + c.queries as u64);
    let g = client.create(Bytes::from_elems(rng.values(
        c.rows * s.queries.padded,
        -1.0,
        1.0,
    )));
    let products = |queries: &DeviceQueries| {
        let dw = client.create(Bytes::from_elems(vec![0.0f32; c.table_rows * c.dim]));
        k.table_grad(queries, &s.block(), &g, &dw);
        let dq = k.query_grad_buffer(queries);
        k.query_grad(&g, &s.block(), queries, &dq, false);
        (dw, dq)
    };
    let (dw_uploaded, dq_uploaded) = products(&s.queries);
    let (dw, dq) = products(&on_device);
    let len = c.table_rows * c.dim;
    let nothing = client.create(Bytes::from_elems(vec![1.0f32]));
    let read = k
        .read_each(vec![
            (dw, len),
            (nothing, 0),
            (dq, k.query_grad_len(&on_device)),
        ])
        .expect("read");
    assert!(read[1].is_empty(), "{what}: a read of no values");
    assert_eq!(read[0], s.read(dw_uploaded, len), "{what}: table gradient");
    let dq_uploaded = k.read_query_grad(dq_uploaded, &s.queries).expect("read");
    assert_eq!(
        k.query_grad_rows(&read[2], &on_device),
        dq_uploaded,
        "{what}: query gradient"
    );
}

fn check_counts(s: &Setup, what: &str) {
    let c = s.case;
    let k = &s.kernels;
    let out = k.score_buffer(c.rows, &s.queries);
    let stats = k.stats_buffer(ScoreEpilogue::Scores, c.rows, &s.queries);
    k.scores(
        &s.queries,
        &s.block(),
        &out,
        &stats,
        ScoreEpilogue::Scores,
        1.0,
        0.0,
    );
    let scores = s.unpanel(&s.read(out.clone(), c.rows * s.queries.padded));
    // Each query's truth is one of its own scores (so ties occur), or a value above them all.
    let truth: Vec<f32> = (0..c.queries)
        .map(|b| match b % 3 {
            0 => scores[b % c.rows][b],
            1 => scores[(b * 7) % c.rows][b],
            _ => 1e9,
        })
        .collect();
    let mut padded = truth.clone();
    padded.resize(s.queries.padded, 0.0);
    let truth_handle = k.client().create(Bytes::from_elems(padded));
    // Counted by the score kernel itself, a different specialisation from the one that made
    // `scores`: the ties hold only if both make the same bits.
    let epilogue = ScoreEpilogue::CountBetter;
    let counts = k.stats_buffer(epilogue, c.rows, &s.queries);
    k.scores(
        &s.queries,
        &s.block(),
        &truth_handle,
        &counts,
        epilogue,
        1.0,
        0.0,
    );
    let counts = s.read(counts, k.stats_len(epilogue, c.rows, &s.queries));
    let got = combine_counts(&counts, s.queries.padded, c.queries);
    for b in 0..c.queries {
        let better = (0..c.rows).filter(|&e| scores[e][b] > truth[b]).count() as u64;
        let tied = (0..c.rows).filter(|&e| scores[e][b] == truth[b]).count() as u64;
        assert_eq!(got[b], [better, tied], "{what}: counts of query {b}");
    }
}
