//! Checks of generated models written once and run per runtime: the kernels against the
//! published formulas and their finite differences, and whole training steps against the same
//! step computed on the host.

// Element loops index rows and gradients together, as the formulas do.
#![allow(clippy::needless_range_loop)]

use std::ops::Range;

use rowshard::comm::{Communicator, threads};
use rowshard::error::ShardError;
use rowshard::model::{
    HostGradient, InitScheme, ModelSettings, ModelSpec, OptimizerSettings, ScoreKernels,
    ScoringFunction, relation_dim,
};
use rowshard::partition::PartitionScheme;
use rowshard::train::batches::share;
use rowshard::{IdLists, Loss, Objective, ShardedModel, TrainBatch};
use rowshard_kernels::{Backend, DType, Optimizer};

use crate::data::Rng;
use crate::scores::{Score, finite_differences};

/// Triples per kernel check.
const TRIPLES: usize = 7;
/// Entity row length of the checks.
const DIM: usize = 16;

fn close(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol * (1.0 + want.abs()),
        "{what}: got {got}, want {want}"
    );
}

/// Checks `S`'s generated kernels on `backend` (rows stored as `dtype`) and its host functions
/// against `reference` and its finite differences.
pub fn check_model<S: ScoringFunction>(backend: Backend, dtype: DType, reference: Score) {
    let client = backend.client().unwrap();
    let rdim = relation_dim::<S>(DIM);
    let kernels = ScoreKernels::<S>::new(&client, DIM, dtype, dtype).unwrap();
    let mut rng = Rng::new(11);
    // Five entity rows and three relation rows, shared between the triples.
    // Rows exactly representable in `dtype`, so the kernels and the reference see the same values.
    let ent: Vec<f32> = rng
        .values(5 * DIM, -1.0, 1.0)
        .into_iter()
        .map(|x| dtype.round(x))
        .collect();
    let rel: Vec<f32> = rng
        .values(3 * rdim, -1.0, 1.0)
        .into_iter()
        .map(|x| dtype.round(x))
        .collect();
    let hi: Vec<u32> = (0..TRIPLES).map(|_| rng.below(5)).collect();
    let ri: Vec<u32> = (0..TRIPLES).map(|_| rng.below(3)).collect();
    let ti: Vec<u32> = (0..TRIPLES).map(|_| rng.below(5)).collect();
    let upstream: Vec<f32> = rng.values(TRIPLES, -2.0, 2.0);
    let ent_dev = kernels.upload_rows(&ent, dtype);
    let rel_dev = kernels.upload_rows(&rel, dtype);
    let triples = kernels.upload_triples(&hi, &ri, &ti);
    let scores = kernels
        .read(kernels.forward(&ent_dev, &rel_dev, &triples), TRIPLES)
        .unwrap();
    let up = client.create(cubecl::bytes::Bytes::from_elems(upstream.clone()));
    let [dh, dr, dt] = kernels.backward(&ent_dev, &rel_dev, &triples, &up);
    let dh = kernels.read(dh, TRIPLES * DIM).unwrap();
    let dr = kernels.read(dr, TRIPLES * rdim).unwrap();
    let dt = kernels.read(dt, TRIPLES * DIM).unwrap();
    let q = S::TAIL_LINEAR.is_ok().then(|| {
        kernels
            .read(
                kernels.query(&ent_dev, &rel_dev, &triples).unwrap(),
                TRIPLES * DIM,
            )
            .unwrap()
    });
    let row = |v: &[f32], i: u32, w: usize| -> Vec<f64> {
        v[i as usize * w..][..w].iter().map(|&x| x as f64).collect()
    };
    for k in 0..TRIPLES {
        let (h, r, t) = (
            row(&ent, hi[k], DIM),
            row(&rel, ri[k], rdim),
            row(&ent, ti[k], DIM),
        );
        let name = format!("{} {backend} {dtype} triple {k}", S::NAME);
        let want = reference(&h, &r, &t);
        close(&format!("{name} forward"), scores[k] as f64, want, 1e-5);
        close(
            &format!("{name} host score"),
            S::score_host(&h, &r, &t),
            want,
            1e-12,
        );
        let fd = finite_differences(reference, &h, &r, &t);
        let HostGradient {
            head,
            relation,
            tail,
            score,
        } = S::gradient_host(&h, &r, &t);
        close(&format!("{name} host gradient's score"), score, want, 1e-12);
        let u = upstream[k] as f64;
        for (which, (kernel, host, fd, w)) in [
            ("head", (&dh, &head, &fd[0], DIM)),
            ("relation", (&dr, &relation, &fd[1], rdim)),
            ("tail", (&dt, &tail, &fd[2], DIM)),
        ] {
            for i in 0..w {
                let at = format!("{name} ∂/∂{which}[{i}]");
                close(&format!("{at} host"), host[i], fd[i], 1e-6);
                close(
                    &format!("{at} kernel"),
                    kernel[k * w + i] as f64,
                    u * fd[i],
                    1e-4,
                );
            }
        }
        if let Some(q) = &q {
            let qt: f64 = (0..DIM).map(|i| q[k * DIM + i] as f64 * t[i]).sum();
            close(&format!("{name} ⟨q, t⟩"), qt, want, 1e-5);
        }
    }
}

const ENTITIES: usize = 20;
const RELATIONS: usize = 3;
const STEP_DIM: usize = 8;
const LR: f64 = 0.5;

/// Small tables trained with SGD (so a step is easy to compute on the host).
pub fn sgd_spec() -> ModelSpec {
    let mut settings = ModelSettings::new(STEP_DIM, DType::F32);
    settings.entity = OptimizerSettings::new(Optimizer::Sgd).with_lr(LR);
    settings.relation = OptimizerSettings::new(Optimizer::Sgd).with_lr(LR);
    settings.init = InitScheme::Normal { std: 0.5 };
    settings.partition = PartitionScheme::RoundRobin { block: 1 };
    ModelSpec {
        entities: ENTITIES,
        relations: RELATIONS,
        settings,
        seed: 3,
    }
}

/// Entity and relation tables after `step` on `world` ranks (from rank 0), and before it.
type Tables = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

fn run_step<S: ScoringFunction>(
    backend: Backend,
    world: usize,
    step: impl Fn(&mut ShardedModel<'_, S>, usize, usize) -> Result<(), ShardError> + Sync,
) -> Tables {
    let spec = sgd_spec();
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = backend.client()?;
        let mut model = ShardedModel::<S>::new(comm, &client, &spec)?;
        let e0 = model.entities().gather_to_root(0, 7)?;
        let r0 = model.relations().weights()?;
        step(&mut model, comm.rank(), world)?;
        let e1 = model.entities().gather_to_root(0, 7)?;
        let r1 = model.relations().weights()?;
        Ok((e0, r0, e1, r1))
    });
    let mut out = None;
    let mut relations = Vec::new();
    for r in results {
        let (e0, r0, e1, r1) = r.unwrap();
        relations.push(r1.clone());
        if let (Some(e0), Some(e1)) = (e0, e1) {
            out = Some((e0, r0, e1, r1));
        }
    }
    assert!(
        relations.windows(2).all(|w| w[0] == w[1]),
        "relation replicas differ between ranks"
    );
    out.unwrap()
}

fn row(v: &[f32], i: u32, w: usize) -> Vec<f64> {
    v[i as usize * w..][..w].iter().map(|&x| x as f64).collect()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn assert_tables(what: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 2e-5 * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

/// The global batch of scored triples used by the triples test (duplicates included).
fn triple_batch() -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<f32>) {
    let heads = vec![0, 3, 5, 0, 7, 19, 3, 11];
    let relations = vec![0, 1, 2, 0, 1, 2, 2, 0];
    let tails = vec![1, 4, 5, 9, 0, 2, 4, 18];
    let targets = vec![1.0, 0.0, 1.0, 0.0, 0.9, 0.1, 1.0, 0.0];
    (heads, relations, tails, targets)
}

/// One SGD step on scored triples over 1, 2 and 3 ranks of `backend` equals the host's step.
pub fn check_triples_step<S: ScoringFunction>(backend: Backend, reference: Score) {
    let (heads, relations, tails, targets) = triple_batch();
    let n = heads.len();
    for world in [1, 2, 3] {
        let (e0, r0, e1, r1) = run_step::<S>(backend, world, |model, rank, world| {
            let mine = share(n, rank, world);
            model
                .train_step(&TrainBatch::Triples {
                    heads: &heads[mine.clone()],
                    relations: &relations[mine.clone()],
                    tails: &tails[mine.clone()],
                    targets: &targets[mine],
                })
                .map(|_| ())
        });
        let rdim = r0.len() / RELATIONS;
        let mut e_want: Vec<f64> = e0.iter().map(|&x| x as f64).collect();
        let mut r_want: Vec<f64> = r0.iter().map(|&x| x as f64).collect();
        for k in 0..n {
            let (h, r, t) = (
                row(&e0, heads[k], STEP_DIM),
                row(&r0, relations[k], rdim),
                row(&e0, tails[k], STEP_DIM),
            );
            let g = (sigmoid(reference(&h, &r, &t)) - targets[k] as f64) / n as f64;
            let [dh, dr, dt] = finite_differences(reference, &h, &r, &t);
            for i in 0..STEP_DIM {
                e_want[heads[k] as usize * STEP_DIM + i] -= LR * g * dh[i];
                e_want[tails[k] as usize * STEP_DIM + i] -= LR * g * dt[i];
            }
            for i in 0..rdim {
                r_want[relations[k] as usize * rdim + i] -= LR * g * dr[i];
            }
        }
        let what = format!("{} triples, {world} ranks", S::NAME);
        assert_tables(&format!("{what}: entities"), &e1, &e_want);
        assert_tables(&format!("{what}: relations"), &r1, &r_want);
    }
}

/// One SGD KvsAll step over 1, 2 and 3 ranks of `backend` equals the host's step.
pub fn check_kvsall_step<S: ScoringFunction>(backend: Backend, reference: Score) {
    let heads = [0, 4, 4, 13, 19];
    let relations = [1, 0, 2, 2, 1];
    let labels = IdLists::from_lists(&[vec![2, 3], vec![5], vec![0, 19, 7], vec![], vec![19]]);
    let smoothing = 0.1f32;
    let n = heads.len();
    for world in [1, 2, 3] {
        let (e0, r0, e1, r1) = run_step::<S>(backend, world, |model, rank, world| {
            let mine = share(n, rank, world);
            let lists: Vec<&[u32]> = mine.clone().map(|i| labels.get(i)).collect();
            model.set_objective(
                Objective::new(Loss::BinaryCrossEntropy).with_smoothing(smoothing),
            )?;
            model
                .train_step(&TrainBatch::AllEntities {
                    heads: &heads[mine.clone()],
                    relations: &relations[mine],
                    labels: &IdLists::from_lists(&lists),
                })
                .map(|_| ())
        });
        let rdim = r0.len() / RELATIONS;
        let mut e_want: Vec<f64> = e0.iter().map(|&x| x as f64).collect();
        let mut r_want: Vec<f64> = r0.iter().map(|&x| x as f64).collect();
        let scale = 1.0 / (n * ENTITIES) as f64;
        for b in 0..n {
            let (h, r) = (row(&e0, heads[b], STEP_DIM), row(&r0, relations[b], rdim));
            for e in 0..ENTITIES as u32 {
                let t = row(&e0, e, STEP_DIM);
                let label = labels.get(b).contains(&e) as u8 as f64;
                let y = (1.0 - smoothing as f64) * label + smoothing as f64 / ENTITIES as f64;
                let g = (sigmoid(reference(&h, &r, &t)) - y) * scale;
                let [dh, dr, dt] = finite_differences(reference, &h, &r, &t);
                for i in 0..STEP_DIM {
                    e_want[heads[b] as usize * STEP_DIM + i] -= LR * g * dh[i];
                    e_want[e as usize * STEP_DIM + i] -= LR * g * dt[i];
                }
                for i in 0..rdim {
                    r_want[relations[b] as usize * rdim + i] -= LR * g * dr[i];
                }
            }
        }
        let what = format!("{} KvsAll, {world} ranks", S::NAME);
        assert_tables(&format!("{what}: entities"), &e1, &e_want);
        assert_tables(&format!("{what}: relations"), &r1, &r_want);
    }
}

/// The softmax cross-entropy of one score row against targets `y`: `lse(s) − Σ y·s`, in f64.
fn softmax_loss(s: &[f64], y: &[f64]) -> f64 {
    let top = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = top + s.iter().map(|x| (x - top).exp()).sum::<f64>().ln();
    lse - s.iter().zip(y).map(|(s, y)| s * y).sum::<f64>()
}

/// `∂loss/∂s` of a whole score row by central finite differences of [`softmax_loss`].
fn softmax_loss_fd(s: &[f64], y: &[f64]) -> Vec<f64> {
    let h = 1e-6;
    (0..s.len())
        .map(|e| {
            let at = |d: f64| {
                let mut p = s.to_vec();
                p[e] += d;
                softmax_loss(&p, y)
            };
            (at(h) - at(-h)) / (2.0 * h)
        })
        .collect()
}

/// `λ·Σ|x_i|³` of a row cut into `segments` (complex-like coordinates) and its gradient.
fn n3_gradient(row: &[f64], segments: usize) -> Vec<f64> {
    let part = row.len() / segments;
    let mut grad = vec![0.0; row.len()];
    for i in 0..part {
        let m = (0..segments)
            .map(|s| row[s * part + i].powi(2))
            .sum::<f64>()
            .sqrt();
        for s in 0..segments {
            grad[s * part + i] = 3.0 * m * row[s * part + i];
        }
    }
    grad
}

/// One SGD step of softmax cross-entropy against every entity (1vsAll and KvsAll label lists,
/// smoothed), over 1, 2, 3 and 7 ranks of `backend` (7: a rank without queries), equals the
/// host's step: the loss's gradient
/// by finite differences of the f64 loss over each whole score row, chained through finite
/// differences of the score. With `n3`, the N3 regulariser's gradient of the heads, distinct
/// true tails and relations too (per occurrence, over the global batch).
pub fn check_softmax_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    n3: f64,
    dropout: (f32, f32),
) {
    check_softmax_against::<S>(backend, reference, n3, dropout, None);
}

/// [`check_softmax_step`] against shared negatives ([`TrainBatch::SharedNegatives`]): with
/// `batch`, `negatives` and the batch's true tails, the softmax and its smoothing over those
/// alone; without, each query's true tails and `negatives`, a negative that is also a true tail
/// counting twice (once each), and no smoothing.
pub fn check_shared_negatives_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    n3: f64,
    negatives: &[u32],
    batch: bool,
) {
    let shared = Shared {
        lists: &[negatives],
        chunk: 0,
        batch,
    };
    check_softmax_against::<S>(backend, reference, n3, (0.0, 0.0), Some(shared));
}

/// [`check_shared_negatives_step`] with batch negatives in chunks of `chunk` queries: chunk `c`
/// scored against `lists[c]` and its own queries' true tails (PyTorch-BigGraph's chunks).
pub fn check_chunked_batch_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    n3: f64,
    lists: &[&[u32]],
    chunk: usize,
) {
    let shared = Shared {
        lists,
        chunk,
        batch: true,
    };
    check_softmax_against::<S>(backend, reference, n3, (0.0, 0.0), Some(shared));
}

/// The shared negatives of a check: a list per chunk of `chunk` queries (`0`: one chunk), with
/// or without batch negatives.
#[derive(Clone, Copy, Debug)]
struct Shared<'a> {
    lists: &'a [&'a [u32]],
    chunk: usize,
    batch: bool,
}

impl Shared<'_> {
    /// The chunk of query `b`, and the queries in it (of `n`).
    fn chunk_of(&self, b: usize, n: usize) -> (usize, Range<usize>) {
        let c = b.checked_div(self.chunk).unwrap_or(0);
        let size = if self.chunk == 0 { n } else { self.chunk };
        (c, c * size..((c + 1) * size).min(n))
    }
}

/// [`check_shared_negatives_step`] without batch negatives, through dropout's masks of the head
/// and relation rows (`dropout`: their probabilities).
pub fn check_shared_negatives_dropout_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    negatives: &[u32],
    dropout: (f32, f32),
) {
    let shared = Shared {
        lists: &[negatives],
        chunk: 0,
        batch: false,
    };
    check_softmax_against::<S>(backend, reference, 0.0, dropout, Some(shared));
}

/// Query `b`'s candidates: every entity, or its chunk's negatives and true tails (its chunk's
/// queries' with batch negatives, else its own, listed before the negatives).
fn candidates(shared: Option<Shared>, labels: &IdLists, b: usize) -> Vec<u32> {
    let Some(shared) = shared else {
        return (0..ENTITIES as u32).collect();
    };
    let (c, queries) = shared.chunk_of(b, labels.len());
    let negatives = shared.lists[c];
    let distinct = |ids: &mut Vec<u32>| {
        ids.sort_unstable();
        ids.dedup();
    };
    if shared.batch {
        let mut ids = negatives.to_vec();
        for q in queries {
            ids.extend_from_slice(labels.get(q));
        }
        distinct(&mut ids);
        return ids;
    }
    let mut own = labels.get(b).to_vec();
    distinct(&mut own);
    let mut sample = negatives.to_vec();
    distinct(&mut sample);
    own.extend(sample);
    own
}

thread_local! {
    /// Whether this thread's checks train on [`reciprocal_batch`].
    static RECIPROCAL_PAIRS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `checks` (the shared-negatives checks of this suite) on a 1vsAll batch of reciprocal
/// pairs (`reciprocal_batch`) instead of `softmax_batch`'s: what a step that merges each
/// triple's two queries computes must be the host's step too.
pub fn with_reciprocal_pairs<R>(checks: impl FnOnce() -> R) -> R {
    RECIPROCAL_PAIRS.with(|p| p.set(true));
    let out = checks();
    RECIPROCAL_PAIRS.with(|p| p.set(false));
    out
}

/// Three triples' 1vsAll queries, each followed by its reciprocal — `(h, r, t)` then
/// `(t, r', h)` — as an epoch of shared negatives orders them: a head that is the true tail of
/// two pairs, and a self-loop.
fn reciprocal_batch() -> ([u32; 6], [u32; 6], IdLists) {
    let labels = IdLists::from_lists(&[vec![4], vec![0], vec![4], vec![13], vec![19], vec![19]]);
    ([0, 4, 13, 4, 19, 19], [1, 2, 0, 2, 1, 0], labels)
}

/// The global batch of the softmax and self-adversarial steps: heads, relations and true tails
/// (with a repeat, a self-loop and a tail shared by two queries), or [`reciprocal_batch`]'s
/// inside [`with_reciprocal_pairs`].
fn softmax_batch() -> ([u32; 6], [u32; 6], IdLists) {
    if RECIPROCAL_PAIRS.with(|p| p.get()) {
        return reciprocal_batch();
    }
    let labels = IdLists::from_lists(&[
        vec![2, 3],
        vec![5],
        vec![0, 19, 7],
        vec![4],
        vec![19],
        vec![7, 7, 11],
    ]);
    ([0, 4, 4, 13, 19, 7], [1, 0, 2, 2, 1, 0], labels)
}

fn check_softmax_against<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    n3: f64,
    dropout: (f32, f32),
    negatives: Option<Shared>,
) {
    let (heads, relations, labels) = softmax_batch();
    let smoothing = match negatives {
        Some(Shared { batch: false, .. }) => 0.0,
        _ => 0.1f64,
    };
    let n = heads.len();
    let regularizer = rowshard::objective::Regularizer::N3 { weight: n3 };
    let sample = IdLists::from_lists(negatives.map_or(&[][..], |s| s.lists));
    for world in [1, 2, 3, 7] {
        let (e0, r0, e1, r1) = run_step::<S>(backend, world, |model, rank, world| {
            let mut objective =
                Objective::new(Loss::SoftmaxCrossEntropy).with_smoothing(smoothing as f32);
            if n3 > 0.0 {
                objective.regularization = rowshard::objective::Regularization {
                    entities: regularizer,
                    relations: regularizer,
                };
            }
            objective.dropout = rowshard::objective::Dropout {
                entity: dropout.0,
                relation: dropout.1,
            };
            model.set_objective(objective)?;
            let mine = share(n, rank, world);
            let lists: Vec<&[u32]> = mine.clone().map(|i| labels.get(i)).collect();
            let (heads, relations) = (&heads[mine.clone()], &relations[mine]);
            let labels = &IdLists::from_lists(&lists);
            let batch = match negatives {
                None => TrainBatch::AllEntities {
                    heads,
                    relations,
                    labels,
                },
                Some(shared) => TrainBatch::SharedNegatives {
                    heads,
                    relations,
                    labels,
                    negatives: &sample,
                    chunk: shared.chunk,
                    batch_negatives: shared.batch,
                },
            };
            model.train_step(&batch).map(|_| ())
        });
        let rdim = r0.len() / RELATIONS;
        let mut e_want: Vec<f64> = e0.iter().map(|&x| x as f64).collect();
        let mut r_want: Vec<f64> = r0.iter().map(|&x| x as f64).collect();
        let scale = 1.0 / n as f64;
        let segments = S::SEGMENTS;
        // The first step's dropout masks, as the model draws them (seed 3, step 0).
        let mask = |p, side, width| {
            rowshard::objective::dropout_mask(p, sgd_spec().seed, 0, side, 0, n, width)
        };
        let (head_mask, relation_mask) = if dropout != (0.0, 0.0) {
            (
                mask(dropout.0, rowshard::objective::DropoutSide::Head, STEP_DIM),
                mask(dropout.1, rowshard::objective::DropoutSide::Relation, rdim),
            )
        } else {
            (vec![1.0; n * STEP_DIM], vec![1.0; n * rdim])
        };
        for b in 0..n {
            let (h_row, r_row) = (row(&e0, heads[b], STEP_DIM), row(&r0, relations[b], rdim));
            // What the query is built from: the rows through the masks.
            let h: Vec<f64> = (0..STEP_DIM)
                .map(|i| h_row[i] * head_mask[b * STEP_DIM + i] as f64)
                .collect();
            let r: Vec<f64> = (0..rdim)
                .map(|i| r_row[i] * relation_mask[b * rdim + i] as f64)
                .collect();
            let mut true_tails: Vec<u32> = labels.get(b).to_vec();
            true_tails.sort_unstable();
            true_tails.dedup();
            let candidates = candidates(negatives, &labels, b);
            let count = candidates.len() as f64;
            // Without batch negatives the true tails come first, the sample after.
            let apart = matches!(negatives, Some(Shared { batch: false, .. }));
            let y: Vec<f64> = candidates
                .iter()
                .enumerate()
                .map(|(c, e)| {
                    let label = true_tails.contains(e) && (!apart || c < true_tails.len());
                    let label = label as u8 as f64;
                    (1.0 - smoothing) * label / true_tails.len() as f64 + smoothing / count
                })
                .collect();
            let s: Vec<f64> = candidates
                .iter()
                .map(|&e| reference(&h, &r, &row(&e0, e, STEP_DIM)))
                .collect();
            let ds = softmax_loss_fd(&s, &y);
            for (c, &e) in candidates.iter().enumerate() {
                let t = row(&e0, e, STEP_DIM);
                let g = ds[c] * scale;
                let [dh, dr, dt] = finite_differences(reference, &h, &r, &t);
                for i in 0..STEP_DIM {
                    let through = head_mask[b * STEP_DIM + i] as f64;
                    e_want[heads[b] as usize * STEP_DIM + i] -= LR * g * dh[i] * through;
                    e_want[e as usize * STEP_DIM + i] -= LR * g * dt[i];
                }
                for i in 0..rdim {
                    let through = relation_mask[b * rdim + i] as f64;
                    r_want[relations[b] as usize * rdim + i] -= LR * g * dr[i] * through;
                }
            }
            if n3 > 0.0 {
                // Each occurrence: the head, each distinct true tail, the relation.
                let reg = LR * n3 * scale;
                for (id, g) in std::iter::once(heads[b])
                    .chain(true_tails.iter().copied())
                    .map(|id| (id, n3_gradient(&row(&e0, id, STEP_DIM), segments)))
                {
                    for i in 0..STEP_DIM {
                        e_want[id as usize * STEP_DIM + i] -= reg * g[i];
                    }
                }
                let rel_segments = if rdim == STEP_DIM { segments } else { 1 };
                let g = n3_gradient(&r_row, rel_segments);
                for i in 0..rdim {
                    r_want[relations[b] as usize * rdim + i] -= reg * g[i];
                }
            }
        }
        let what = format!(
            "{} softmax (N3 {n3}, dropout {dropout:?}, negatives {negatives:?}), {world} ranks",
            S::NAME
        );
        assert_tables(&format!("{what}: entities"), &e1, &e_want);
        assert_tables(&format!("{what}: relations"), &r1, &r_want);
    }
}

/// One SGD step of the self-adversarial logistic loss against shared negatives (without batch
/// negatives), over 1, 2, 3 and 7 ranks of `backend` (7: a rank without queries), equals the
/// host's step: per query, the mean
/// `softplus(−s)` of its distinct true tails plus `Σ p·softplus(s)` over the distinct
/// negatives (a true tail drawn as a negative counts as one), `p = softmax(α·s)` over them held
/// constant; the mean over queries.
pub fn check_adversarial_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    negatives: &[u32],
    temperature: f32,
) {
    let (loss, query_loss) = adversarial_loss(temperature);
    check_sample_loss_step::<S>(backend, reference, &[negatives], 0, loss, query_loss);
}

/// One SGD step of the logistic loss against shared negatives (without batch negatives), over
/// 1, 2, 3 and 7 ranks, equals the host's step: per query, the mean `softplus(−s)` of its
/// distinct true tails plus the mean `softplus(s)` of the distinct negatives (PyTorch-BigGraph's
/// logistic loss); the mean over queries.
pub fn check_logistic_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    negatives: &[u32],
) {
    let (loss, query_loss) = logistic_loss();
    check_sample_loss_step::<S>(backend, reference, &[negatives], 0, loss, query_loss);
}

/// One SGD step of the margin ranking loss against shared negatives (without batch negatives),
/// over 1, 2, 3 and 7 ranks, equals the host's step: per query, the mean over its distinct true
/// tails `s₊` and the distinct negatives `s` of `max(0, γ − s₊ + s)`; the mean over queries.
pub fn check_margin_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    negatives: &[u32],
    margin: f32,
) {
    let (loss, query_loss) = margin_loss(margin);
    check_sample_loss_step::<S>(backend, reference, &[negatives], 0, loss, query_loss);
}

/// The logistic, self-adversarial and margin steps of the checks above with the global batch in
/// chunks of `chunk` queries, chunk `c` scored against `lists[c]` alone (PyTorch-BigGraph's
/// chunks), over 1, 2, 3 and 7 ranks: a rank's queries meet one chunk or several.
pub fn check_chunked_steps<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    lists: &[&[u32]],
    chunk: usize,
) {
    let (loss, query_loss) = logistic_loss();
    check_sample_loss_step::<S>(backend, reference, lists, chunk, loss, query_loss);
    let (loss, query_loss) = adversarial_loss(0.5);
    check_sample_loss_step::<S>(backend, reference, lists, chunk, loss, query_loss);
    let (loss, query_loss) = margin_loss(0.5);
    check_sample_loss_step::<S>(backend, reference, lists, chunk, loss, query_loss);
}

fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// The logistic loss and its per-query form.
fn logistic_loss() -> (Loss, impl Fn(&[f64], &[f64]) -> QueryLoss) {
    let loss = Loss::BinaryCrossEntropy;
    (loss, |_: &[f64], _: &[f64]| -> QueryLoss {
        Box::new(|pos: &[f64], neg: &[f64]| {
            pos.iter().map(|&s| softplus(-s)).sum::<f64>() / pos.len() as f64
                + neg.iter().map(|&s| softplus(s)).sum::<f64>() / neg.len() as f64
        })
    })
}

/// The self-adversarial logistic loss at `temperature` and its per-query form, the weights
/// taken from the scores it is given.
fn adversarial_loss(temperature: f32) -> (Loss, impl Fn(&[f64], &[f64]) -> QueryLoss) {
    let loss = Loss::SelfAdversarial { temperature };
    (loss, move |_: &[f64], neg: &[f64]| -> QueryLoss {
        let top = neg.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
        let z: f64 = neg
            .iter()
            .map(|s| ((s - top) * temperature as f64).exp())
            .sum();
        let p: Vec<f64> = neg
            .iter()
            .map(|s| ((s - top) * temperature as f64).exp() / z)
            .collect();
        Box::new(move |pos: &[f64], neg: &[f64]| {
            pos.iter().map(|&s| softplus(-s)).sum::<f64>() / pos.len() as f64
                + neg
                    .iter()
                    .zip(&p)
                    .map(|(&s, p)| p * softplus(s))
                    .sum::<f64>()
        })
    })
}

/// The margin ranking loss with margin `margin` and its per-query form.
fn margin_loss(margin: f32) -> (Loss, impl Fn(&[f64], &[f64]) -> QueryLoss) {
    let loss = Loss::MarginRanking { margin };
    (loss, move |_: &[f64], _: &[f64]| -> QueryLoss {
        let margin = margin as f64;
        Box::new(move |pos: &[f64], neg: &[f64]| {
            let pairs = (pos.len() * neg.len()) as f64;
            pos.iter()
                .flat_map(|&p| neg.iter().map(move |&s| (margin - p + s).max(0.0)))
                .sum::<f64>()
                / pairs
        })
    })
}

/// A query's loss over the scores of its positives and of its negatives.
type QueryLoss = Box<dyn Fn(&[f64], &[f64]) -> f64>;

/// One SGD step of `loss` against shared negatives (without batch negatives) over 1, 2, 3 and 7
/// ranks equals the host's: `query_loss(pos, neg)` gives each query's loss as a function of the
/// scores of its distinct true tails and the distinct negatives (what it holds constant taken
/// from the scores it is given); the mean over queries. Its gradient by finite differences of
/// that f64 loss, chained through finite differences of the score.
fn check_sample_loss_step<S: ScoringFunction>(
    backend: Backend,
    reference: Score,
    negatives: &[&[u32]],
    chunk: usize,
    loss: Loss,
    query_loss: impl Fn(&[f64], &[f64]) -> QueryLoss,
) {
    let (heads, relations, labels) = softmax_batch();
    let n = heads.len();
    let lists = IdLists::from_lists(negatives);
    for world in [1, 2, 3, 7] {
        let (e0, r0, e1, r1) = run_step::<S>(backend, world, |model, rank, world| {
            let mine = share(n, rank, world);
            let own: Vec<&[u32]> = mine.clone().map(|i| labels.get(i)).collect();
            model.set_objective(Objective::new(loss))?;
            model
                .train_step(&TrainBatch::SharedNegatives {
                    heads: &heads[mine.clone()],
                    relations: &relations[mine],
                    labels: &IdLists::from_lists(&own),
                    negatives: &lists,
                    chunk,
                    batch_negatives: false,
                })
                .map(|_| ())
        });
        let rdim = r0.len() / RELATIONS;
        let mut e_want: Vec<f64> = e0.iter().map(|&x| x as f64).collect();
        let mut r_want: Vec<f64> = r0.iter().map(|&x| x as f64).collect();
        for b in 0..n {
            // The query's chunk's sample, each entity once.
            let mut sample = negatives[b.checked_div(chunk).unwrap_or(0)].to_vec();
            sample.sort_unstable();
            sample.dedup();
            let (h, r) = (row(&e0, heads[b], STEP_DIM), row(&r0, relations[b], rdim));
            let mut tails = labels.get(b).to_vec();
            tails.sort_unstable();
            tails.dedup();
            let score = |e: u32| reference(&h, &r, &row(&e0, e, STEP_DIM));
            let (pos, neg): (Vec<f64>, Vec<f64>) = (
                tails.iter().map(|&e| score(e)).collect(),
                sample.iter().map(|&e| score(e)).collect(),
            );
            let loss = query_loss(&pos, &neg);
            let fd = |k: usize, of_pos: bool| {
                let at = |d: f64| {
                    let (mut a, mut c) = (pos.clone(), neg.clone());
                    if of_pos {
                        a[k] += d
                    } else {
                        c[k] += d
                    }
                    loss(&a, &c)
                };
                (at(1e-6) - at(-1e-6)) / 2e-6
            };
            let grads = tails
                .iter()
                .enumerate()
                .map(|(k, &e)| (e, fd(k, true)))
                .chain(sample.iter().enumerate().map(|(k, &e)| (e, fd(k, false))));
            for (e, ds) in grads {
                let g = ds / n as f64;
                let [dh, dr, dt] = finite_differences(reference, &h, &r, &row(&e0, e, STEP_DIM));
                for i in 0..STEP_DIM {
                    e_want[heads[b] as usize * STEP_DIM + i] -= LR * g * dh[i];
                    e_want[e as usize * STEP_DIM + i] -= LR * g * dt[i];
                }
                for i in 0..rdim {
                    r_want[relations[b] as usize * rdim + i] -= LR * g * dr[i];
                }
            }
        }
        let what = format!("{} {loss:?}, chunks of {chunk}, {world} ranks", S::NAME);
        assert_tables(&format!("{what}: entities"), &e1, &e_want);
        assert_tables(&format!("{what}: relations"), &r1, &r_want);
    }
}
