//! Training steps of sharded models against host math, and whole runs across rank counts.
//!
//! - One SGD step (scored triples, and KvsAll) over 1, 2 and 3 thread ranks against the same
//!   step computed on the host from the models' hand-written formulas and finite differences.
//! - Bad input on one rank is refused on every rank and changes nothing.
//! - UMLS: 1, 2 and 4 ranks end within 0.005 test MRR of each other; a run stopped, saved and
//!   resumed under another rank count ends where the uninterrupted run ends.

use rowshard::comm::{Communicator, threads};
use rowshard::data::{Dataset, Split};
use rowshard::error::{InputError, ShardError};
use rowshard::model::{InitScheme, ModelSettings, ModelSpec, OptimizerSettings, ScoringFunction};
use rowshard::models::{ComplEx, DistMult, RotatE, TransE};
use rowshard::partition::PartitionScheme;
use rowshard::train::{Filters, Metrics, Mode, TrainConfig, Trainer, batches::share};
use rowshard::{IdLists, ShardedModel, TrainBatch};
use rowshard_kernels::{Backend, DType, Optimizer};
use rowshard_tests::scores::{self, Score, finite_differences};

const ENTITIES: usize = 20;
const RELATIONS: usize = 3;
const DIM: usize = 8;
const LR: f64 = 0.5;

fn sgd_spec() -> ModelSpec {
    let mut settings = ModelSettings::new(DIM, DType::F32);
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
    world: usize,
    step: impl Fn(&mut ShardedModel<'_, S>, usize, usize) -> Result<(), ShardError> + Sync,
) -> Tables {
    let spec = sgd_spec();
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
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

fn check_triples_step<S: ScoringFunction>(reference: Score) {
    let (heads, relations, tails, targets) = triple_batch();
    let n = heads.len();
    for world in [1, 2, 3] {
        let (e0, r0, e1, r1) = run_step::<S>(world, |model, rank, world| {
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
                row(&e0, heads[k], DIM),
                row(&r0, relations[k], rdim),
                row(&e0, tails[k], DIM),
            );
            let g = (sigmoid(reference(&h, &r, &t)) - targets[k] as f64) / n as f64;
            let [dh, dr, dt] = finite_differences(reference, &h, &r, &t);
            for i in 0..DIM {
                e_want[heads[k] as usize * DIM + i] -= LR * g * dh[i];
                e_want[tails[k] as usize * DIM + i] -= LR * g * dt[i];
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

fn check_kvsall_step<S: ScoringFunction>(reference: Score) {
    let heads = [0, 4, 4, 13, 19];
    let relations = [1, 0, 2, 2, 1];
    let labels = IdLists::from_lists(&[vec![2, 3], vec![5], vec![0, 19, 7], vec![], vec![19]]);
    let smoothing = 0.1f32;
    let n = heads.len();
    for world in [1, 2, 3] {
        let (e0, r0, e1, r1) = run_step::<S>(world, |model, rank, world| {
            let mine = share(n, rank, world);
            let lists: Vec<&[u32]> = mine.clone().map(|i| labels.get(i)).collect();
            model
                .train_step(&TrainBatch::KvsAll {
                    heads: &heads[mine.clone()],
                    relations: &relations[mine],
                    labels: &IdLists::from_lists(&lists),
                    smoothing,
                })
                .map(|_| ())
        });
        let rdim = r0.len() / RELATIONS;
        let mut e_want: Vec<f64> = e0.iter().map(|&x| x as f64).collect();
        let mut r_want: Vec<f64> = r0.iter().map(|&x| x as f64).collect();
        let scale = 1.0 / (n * ENTITIES) as f64;
        for b in 0..n {
            let (h, r) = (row(&e0, heads[b], DIM), row(&r0, relations[b], rdim));
            for e in 0..ENTITIES as u32 {
                let t = row(&e0, e, DIM);
                let label = labels.get(b).contains(&e) as u8 as f64;
                let y = (1.0 - smoothing as f64) * label + smoothing as f64 / ENTITIES as f64;
                let g = (sigmoid(reference(&h, &r, &t)) - y) * scale;
                let [dh, dr, dt] = finite_differences(reference, &h, &r, &t);
                for i in 0..DIM {
                    e_want[heads[b] as usize * DIM + i] -= LR * g * dh[i];
                    e_want[e as usize * DIM + i] -= LR * g * dt[i];
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

#[test]
fn a_triples_step_is_the_host_step_on_every_rank_count() {
    check_triples_step::<TransE>(scores::transe);
    check_triples_step::<RotatE>(scores::rotate);
    check_triples_step::<DistMult>(scores::distmult);
}

#[test]
fn a_kvsall_step_is_the_host_step_on_every_rank_count() {
    check_kvsall_step::<DistMult>(scores::distmult);
    check_kvsall_step::<ComplEx>(scores::complex);
}

#[test]
fn bad_input_on_one_rank_is_refused_everywhere_and_changes_nothing() {
    let spec = sgd_spec();
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<DistMult>::new(comm, &client, &spec)?;
        let before = (
            model.entities().gather_to_root(0, 64)?,
            model.relations().weights()?,
        );
        let bad_relation = if comm.rank() == 1 { 7 } else { 0 };
        let refused = model.train_step(&TrainBatch::Triples {
            heads: &[1],
            relations: &[bad_relation],
            tails: &[2],
            targets: &[1.0],
        });
        let bad_id = if comm.rank() == 0 { 99 } else { 1 };
        let refused_id = model.train_step(&TrainBatch::KvsAll {
            heads: &[bad_id],
            relations: &[0],
            labels: &IdLists::from_lists(&[[2]]),
            smoothing: 0.0,
        });
        let after = (
            model.entities().gather_to_root(0, 64)?,
            model.relations().weights()?,
        );
        Ok((refused, refused_id, before == after))
    });
    for r in results {
        let (refused, refused_id, unchanged) = r.unwrap();
        assert!(
            matches!(
                refused,
                Err(ShardError::BadInput {
                    rank: 1,
                    error: InputError::RelationOutOfRange { id: 7, rows: 3 }
                })
            ),
            "{refused:?}"
        );
        assert!(
            matches!(
                refused_id,
                Err(ShardError::BadInput {
                    rank: 0,
                    error: InputError::IdOutOfRange { id: 99, .. }
                })
            ),
            "{refused_id:?}"
        );
        assert!(unchanged, "a refused step changed the tables");
    }
    let transe = threads::run(1, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<TransE>::new(comm, &client, &sgd_spec())?;
        model
            .train_step(&TrainBatch::KvsAll {
                heads: &[0],
                relations: &[0],
                labels: &IdLists::from_lists(&[[1]]),
                smoothing: 0.0,
            })
            .map(|_| ())
    });
    let e = transe[0].as_ref().unwrap_err().to_string();
    assert!(e.contains("not linear in the tail"), "{e}");
}

fn umls() -> Dataset {
    Dataset::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/umls")).unwrap()
}

/// Trains DistMult (KvsAll) on UMLS for `epochs` on `world` ranks — resuming from `resume` and
/// saving to `save` when given — and returns rank 0's test metrics.
fn umls_run(
    data: &Dataset,
    world: usize,
    epochs: usize,
    resume: Option<&std::path::Path>,
    save: Option<&std::path::Path>,
) -> Metrics {
    let config = TrainConfig {
        epochs,
        batch_size: 512,
        ..TrainConfig::default()
    };
    let mut spec =
        ModelSpec::of::<DistMult>(data.entities.len(), Mode::KvsAll.model_relations(data));
    spec.settings.dim = 16;
    spec.seed = 5;
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<DistMult>::new(comm, &client, &spec)?;
        let mut trainer = Trainer::new(data, config.clone());
        if let Some(path) = resume {
            let m = rowshard::checkpoint::load(&mut model, path, data.vocabulary_digest())
                .map_err(|e| ShardError::Unsupported(e.to_string()))?;
            trainer.epochs_done = m.state.epochs_done;
        }
        while trainer.epochs_done < epochs {
            trainer.epoch(&mut model, &mut rowshard::train::Silent)?;
        }
        if let Some(dir) = save {
            let state = rowshard::checkpoint::RunState {
                epochs_done: trainer.epochs_done,
                mode: "kvsall".into(),
                vocabulary: format!("{:016x}", data.vocabulary_digest()),
                ..Default::default()
            };
            rowshard::checkpoint::save(&model, state, dir)
                .map_err(|e| ShardError::Unsupported(e.to_string()))?;
        }
        trainer.evaluate(&model, &Filters::new(data), Split::Test)
    });
    results.into_iter().next().unwrap().unwrap()
}

#[test]
fn umls_on_1_2_and_4_ranks_and_resumed_under_other_rank_counts_agree() {
    let data = umls();
    let one = umls_run(&data, 1, 12, None, None);
    let two = umls_run(&data, 2, 12, None, None);
    let four = umls_run(&data, 4, 12, None, None);
    assert!(
        one.mrr > 0.1,
        "12 epochs learn something (random ranking: about 0.04): {one:?}"
    );
    for (w, m) in [(2, two), (4, four)] {
        assert!(
            (m.mrr - one.mrr).abs() <= 0.005,
            "{w} ranks: MRR {} vs {} on one rank",
            m.mrr,
            one.mrr
        );
    }
    let dir = std::env::temp_dir().join(format!("rowshard-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    umls_run(&data, 2, 6, None, Some(&dir));
    let resumed_on_3 = umls_run(&data, 3, 12, Some(&dir), None);
    let resumed_on_1 = umls_run(&data, 1, 12, Some(&dir.join("epoch-000006")), None);
    for m in [resumed_on_3, resumed_on_1] {
        assert!(
            (m.mrr - one.mrr).abs() <= 0.005,
            "resumed: MRR {} vs {} uninterrupted",
            m.mrr,
            one.mrr
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}
