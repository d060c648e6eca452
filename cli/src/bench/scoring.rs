//! The generated scoring kernels against hand-written plain Rust doing the same math: DistMult's
//! forward (scores) and backward (gradients of the three rows) over a batch of triples.

use std::time::Duration;

use cubecl::bytes::Bytes;
use rowshard::model::ScoreKernels;
use rowshard::models::DistMult;
use rowshard_kernels::{Backend, DType, KernelError};

use super::stats::median_time;

/// One measured way of computing the batch's scores and gradients.
#[derive(Clone, Debug)]
pub struct ScoringFigure {
    /// What ran.
    pub what: String,
    /// Median time of forward + backward.
    pub time: Duration,
}

/// DistMult forward + backward over `batch` triples of `dim`-wide rows (each triple with its
/// own head and tail row, 100 relations), `repeats` times.
pub fn distmult(
    backend: Backend,
    dim: usize,
    batch: usize,
    repeats: usize,
) -> Result<Vec<ScoringFigure>, KernelError> {
    let client = backend.client()?;
    let mut rng = rowshard::init::SplitMix64::new(9);
    let relations = 100;
    let ent: Vec<f32> = (0..2 * batch * dim).map(|_| rng.next_f32() - 0.5).collect();
    let rel: Vec<f32> = (0..relations * dim).map(|_| rng.next_f32() - 0.5).collect();
    let ri: Vec<u32> = (0..batch)
        .map(|_| (rng.next_u64() % relations as u64) as u32)
        .collect();
    let upstream: Vec<f32> = (0..batch).map(|_| rng.next_f32() - 0.5).collect();

    let kernels = ScoreKernels::<DistMult>::new(&client, dim, DType::F32, DType::F32)?;
    let ent_dev = kernels.upload_f32(ent.clone());
    let rel_dev = kernels.upload_f32(rel.clone());
    let hi: Vec<u32> = (0..batch as u32).collect();
    let ti: Vec<u32> = (batch as u32..2 * batch as u32).collect();
    let triples = kernels.upload_triples(&hi, &ri, &ti);
    let up = client.create(Bytes::from_elems(upstream.clone()));
    let kernel = median_time(2, repeats, || {
        let scores = kernels.forward(&ent_dev, &rel_dev, &triples);
        let grads = kernels.backward(&ent_dev, &rel_dev, &triples, &up);
        cubecl::future::block_on(client.sync()).expect("sync");
        drop((scores, grads));
    });

    let mut figures = vec![ScoringFigure {
        what: format!("generated kernels ({backend})"),
        time: kernel,
    }];
    for threads in [1, 2] {
        let mut scores = vec![0.0f32; batch];
        let mut grads = vec![0.0f32; 3 * batch * dim];
        let time = median_time(2, repeats, || {
            plain_rust(
                &ent,
                &rel,
                &ri,
                &upstream,
                dim,
                threads,
                &mut scores,
                &mut grads,
            )
        });
        figures.push(ScoringFigure {
            what: format!(
                "plain Rust, {threads} thread{}",
                if threads == 1 { "" } else { "s" }
            ),
            time,
        });
    }
    Ok(figures)
}

/// The same math, written by hand: a forward pass, then a backward pass, over `threads`
/// contiguous parts of the batch.
#[allow(clippy::too_many_arguments)]
fn plain_rust(
    ent: &[f32],
    rel: &[f32],
    ri: &[u32],
    upstream: &[f32],
    dim: usize,
    threads: usize,
    scores: &mut [f32],
    grads: &mut [f32],
) {
    let batch = ri.len();
    let part = batch.div_ceil(threads);
    let (dh, rest) = grads.split_at_mut(batch * dim);
    let (dr, dt) = rest.split_at_mut(batch * dim);
    std::thread::scope(|s| {
        let chunks = scores
            .chunks_mut(part)
            .zip(dh.chunks_mut(part * dim))
            .zip(dr.chunks_mut(part * dim).zip(dt.chunks_mut(part * dim)));
        for (p, ((scores, dh), (dr, dt))) in chunks.enumerate() {
            s.spawn(move || {
                let first = p * part;
                let row = |k: usize| &ent[k * dim..][..dim];
                for (i, score) in scores.iter_mut().enumerate() {
                    let k = first + i;
                    let (h, t) = (row(k), row(batch + k));
                    let r = &rel[ri[k] as usize * dim..][..dim];
                    *score = (0..dim).map(|j| h[j] * r[j] * t[j]).sum();
                }
                for i in 0..scores.len() {
                    let k = first + i;
                    let (h, t) = (row(k), row(batch + k));
                    let r = &rel[ri[k] as usize * dim..][..dim];
                    let u = upstream[k];
                    for j in 0..dim {
                        dh[i * dim + j] = u * r[j] * t[j];
                        dr[i * dim + j] = u * h[j] * t[j];
                        dt[i * dim + j] = u * h[j] * r[j];
                    }
                }
            });
        }
    });
}

/// Prints the figures with each one's speed relative to the fastest plain-Rust figure.
pub fn print(dim: usize, batch: usize, figures: &[ScoringFigure]) {
    println!(
        "\nDistMult forward + backward, {batch} triples, dim {dim} (median; rows read: 3 per \
         triple per pass, gradients written: 3 rows per triple)"
    );
    let best_plain = figures
        .iter()
        .filter(|f| f.what.starts_with("plain"))
        .map(|f| f.time)
        .min()
        .unwrap_or(Duration::MAX);
    println!(
        "{:<34} {:>9} {:>13} {:>22}",
        "", "ms", "M triples/s", "speed vs best plain"
    );
    for f in figures {
        println!(
            "{:<34} {:>9.2} {:>13.2} {:>21.2}x",
            f.what,
            f.time.as_secs_f64() * 1e3,
            batch as f64 / f.time.as_secs_f64() / 1e6,
            best_plain.as_secs_f64() / f.time.as_secs_f64()
        );
    }
}
