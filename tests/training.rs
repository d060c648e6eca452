//! Training steps of sharded models against host math, and whole runs across rank counts.
//!
//! - One SGD step (scored triples, and KvsAll) over 1, 2 and 3 thread ranks against the same
//!   step computed on the host from the models' hand-written formulas and finite differences.
//! - Bad input on one rank is refused on every rank and changes nothing.
//! - One SGD step of softmax cross-entropy (with and without N3) over 1, 2 and 3 ranks against
//!   the host's step from finite differences of the f64 loss over each whole score row.
//! - UMLS: 1, 2 and 4 ranks end within 0.005 test MRR of each other (KvsAll with BCE; 1vsAll
//!   with softmax cross-entropy and N3); a run stopped, saved and resumed under another rank
//!   count ends where the uninterrupted run ends.
//! - Triples streamed from a prepared folder: one block of all of them trains the in-memory
//!   model; smaller blocks agree across 1, 2 and 4 ranks.

use rowshard::comm::{Communicator, threads};
use rowshard::data::{Dataset, Split};
use rowshard::error::{InputError, ShardError};
use rowshard::model::{ModelDefaults, ModelSpec, ScoringFunction};
use rowshard::models::{ComplEx, DistMult, RotatE, RotatESq, TransE, TransESq};
use rowshard::train::{
    Filters, Metrics, Mode, Negatives, Protocol, TrainConfig, Trainer, evaluate,
};
use rowshard::{IdLists, Loss, Objective, ShardedModel, TrainBatch};
use rowshard_kernels::Backend;
use rowshard_tests::model_suite::{
    check_adversarial_step, check_chunked_batch_step, check_chunked_steps, check_kvsall_step,
    check_logistic_step, check_margin_step, check_shared_negatives_dropout_step,
    check_shared_negatives_step, check_softmax_step, check_triples_step, sgd_spec,
    with_reciprocal_pairs,
};
use rowshard_tests::scores;

#[test]
fn a_triples_step_is_the_host_step_on_every_rank_count() {
    check_triples_step::<TransE>(Backend::Cpu, scores::transe);
    check_triples_step::<RotatE>(Backend::Cpu, scores::rotate);
    check_triples_step::<DistMult>(Backend::Cpu, scores::distmult);
}

#[test]
fn a_kvsall_step_is_the_host_step_on_every_rank_count() {
    check_kvsall_step::<DistMult>(Backend::Cpu, scores::distmult);
    check_kvsall_step::<ComplEx>(Backend::Cpu, scores::complex);
    // Squared distances: dense products of augmented rows.
    check_kvsall_step::<TransESq>(Backend::Cpu, scores::transe_sq);
    check_kvsall_step::<RotatESq>(Backend::Cpu, scores::rotate_sq);
}

#[test]
fn a_self_adversarial_shared_negatives_step_is_the_host_step_on_every_rank_count() {
    let negatives = [1, 1, 6, 10, 16, 19];
    check_adversarial_step::<RotatESq>(Backend::Cpu, scores::rotate_sq, &negatives, 1.0);
    check_adversarial_step::<TransESq>(Backend::Cpu, scores::transe_sq, &negatives, 0.5);
    check_adversarial_step::<ComplEx>(Backend::Cpu, scores::complex, &negatives, 2.0);
}

#[test]
fn a_margin_ranking_shared_negatives_step_is_the_host_step_on_every_rank_count() {
    let negatives = [1, 1, 6, 10, 16, 19];
    // Some pairs violate the margin and some do not; 0 and a margin every pair violates.
    check_margin_step::<ComplEx>(Backend::Cpu, scores::complex, &negatives, 0.05);
    check_margin_step::<DistMult>(Backend::Cpu, scores::distmult, &negatives, 0.0);
    check_margin_step::<TransESq>(Backend::Cpu, scores::transe_sq, &negatives, 1.0);
    check_margin_step::<RotatESq>(Backend::Cpu, scores::rotate_sq, &negatives, 100.0);
}

#[test]
fn a_logistic_shared_negatives_step_is_the_host_step_on_every_rank_count() {
    let negatives = [1, 1, 6, 10, 16, 19];
    check_logistic_step::<ComplEx>(Backend::Cpu, scores::complex, &negatives);
    check_logistic_step::<RotatESq>(Backend::Cpu, scores::rotate_sq, &negatives);
}

/// Chunks of the global batch (PyTorch-BigGraph's), each against its own negatives: 6 queries in
/// chunks of 2 and of 4 (the last one shorter), a list each; dense and pair by pair.
#[test]
fn a_chunked_shared_negatives_step_is_the_host_step_on_every_rank_count() {
    let lists: [&[u32]; 3] = [&[1, 1, 6], &[10, 16, 19, 2], &[0, 5, 6]];
    check_chunked_steps::<ComplEx>(Backend::Cpu, scores::complex, &lists, 2);
    check_chunked_steps::<RotatESq>(Backend::Cpu, scores::rotate_sq, &lists[..2], 4);
    check_chunked_steps::<TransE>(Backend::Cpu, scores::transe, &lists, 2);
    // Batch negatives in chunks: each chunk's queries against its list and its queries' true
    // tails (the softmax with label smoothing, and N3).
    check_chunked_batch_step::<ComplEx>(Backend::Cpu, scores::complex, 0.05, &lists, 2);
    check_chunked_batch_step::<RotatESq>(Backend::Cpu, scores::rotate_sq, 0.0, &lists[..2], 4);
}

/// Batch negatives alone (PyTorch-BigGraph's `num_uniform_negs = 0`): every query against the
/// batch's true tails, or its chunk's, and nothing drawn.
#[test]
fn a_step_against_batch_negatives_alone_is_the_host_step_on_every_rank_count() {
    check_shared_negatives_step::<ComplEx>(Backend::Cpu, scores::complex, 0.05, &[], true);
    check_shared_negatives_step::<RotatESq>(Backend::Cpu, scores::rotate_sq, 0.0, &[], true);
    check_chunked_batch_step::<ComplEx>(Backend::Cpu, scores::complex, 0.0, &[&[], &[], &[]], 2);
}

/// Scores the dense kernels cannot take (plain distances) are scored pair by pair against
/// shared negatives, with every loss, a regulariser and dropout.
#[test]
fn a_shared_negatives_step_of_a_plain_distance_is_the_host_step_on_every_rank_count() {
    let negatives = [1, 1, 6, 10, 16, 19];
    check_logistic_step::<TransE>(Backend::Cpu, scores::transe, &negatives);
    check_adversarial_step::<RotatE>(Backend::Cpu, scores::rotate, &negatives, 1.0);
    check_margin_step::<TransE>(Backend::Cpu, scores::transe, &negatives, 2.0);
    check_shared_negatives_step::<RotatE>(Backend::Cpu, scores::rotate, 0.0, &negatives, false);
    // With N3 and with dropout (their gradients through the same paths as the dense step's).
    check_shared_negatives_step::<TransE>(Backend::Cpu, scores::transe, 0.05, &negatives, false);
    check_shared_negatives_dropout_step::<RotatE>(
        Backend::Cpu,
        scores::rotate,
        &negatives,
        (0.3, 0.2),
    );
}

#[test]
fn squared_distance_steps_against_every_entity_and_shared_negatives_are_the_host_steps() {
    check_softmax_step::<TransESq>(Backend::Cpu, scores::transe_sq, 0.05, (0.0, 0.0));
    check_softmax_step::<RotatESq>(Backend::Cpu, scores::rotate_sq, 0.0, (0.0, 0.0));
    check_softmax_step::<TransESq>(Backend::Cpu, scores::transe_sq, 0.0, (0.3, 0.3));
    let negatives = [1, 1, 6, 10, 16, 19];
    for batch in [true, false] {
        check_shared_negatives_step::<TransESq>(
            Backend::Cpu,
            scores::transe_sq,
            0.05,
            &negatives,
            batch,
        );
        check_shared_negatives_step::<RotatESq>(
            Backend::Cpu,
            scores::rotate_sq,
            0.0,
            &negatives,
            batch,
        );
    }
}

#[test]
fn a_softmax_step_with_n3_and_dropout_is_the_host_step_on_every_rank_count() {
    check_softmax_step::<DistMult>(Backend::Cpu, scores::distmult, 0.0, (0.0, 0.0));
    check_softmax_step::<ComplEx>(Backend::Cpu, scores::complex, 0.0, (0.0, 0.0));
    check_softmax_step::<ComplEx>(Backend::Cpu, scores::complex, 0.05, (0.0, 0.0));
    check_softmax_step::<DistMult>(Backend::Cpu, scores::distmult, 0.02, (0.0, 0.0));
    check_softmax_step::<ComplEx>(Backend::Cpu, scores::complex, 0.05, (0.3, 0.3));
    // LibKGE's ComplEx setting: a rate per side, the relation's much higher.
    check_softmax_step::<ComplEx>(Backend::Cpu, scores::complex, 0.05, (0.05, 0.44));
}

/// A 1vsAll batch of reciprocal pairs, whose two queries of a triple the step merges (one
/// lookup of their rows, one gradient row each): every loss against shared negatives, with N3
/// and dropout, on 1, 2, 3 and 7 ranks (2 splits a pair: that rank's queries are not merged).
#[test]
fn a_step_of_merged_reciprocal_pairs_is_the_host_step_on_every_rank_count() {
    let negatives = [1, 1, 6, 10, 16, 19];
    with_reciprocal_pairs(|| {
        check_shared_negatives_step::<ComplEx>(
            Backend::Cpu,
            scores::complex,
            0.05,
            &negatives,
            false,
        );
        check_shared_negatives_step::<DistMult>(
            Backend::Cpu,
            scores::distmult,
            0.0,
            &negatives,
            false,
        );
        check_shared_negatives_dropout_step::<ComplEx>(
            Backend::Cpu,
            scores::complex,
            &negatives,
            (0.3, 0.2),
        );
        check_logistic_step::<ComplEx>(Backend::Cpu, scores::complex, &negatives);
        check_adversarial_step::<ComplEx>(Backend::Cpu, scores::complex, &negatives, 2.0);
        check_margin_step::<DistMult>(Backend::Cpu, scores::distmult, &negatives, 0.05);
        let lists: [&[u32]; 3] = [&[1, 1, 6], &[10, 16, 19, 2], &[0, 5, 6]];
        check_chunked_steps::<ComplEx>(Backend::Cpu, scores::complex, &lists, 2);
        // Squared distances score through augmented rows: their pairs are not merged.
        check_shared_negatives_step::<RotatESq>(
            Backend::Cpu,
            scores::rotate_sq,
            0.0,
            &negatives,
            false,
        );
    });
}

#[test]
fn a_shared_negatives_step_is_the_host_step_on_every_rank_count() {
    // Negatives that repeat and hit true tails; none but the true tails.
    let negatives = [1, 1, 6, 10, 16, 19];
    for batch in [true, false] {
        let complex = |n3, negatives: &[u32]| {
            check_shared_negatives_step::<ComplEx>(
                Backend::Cpu,
                scores::complex,
                n3,
                negatives,
                batch,
            )
        };
        complex(0.05, &negatives);
        complex(0.0, &[]);
        check_shared_negatives_step::<DistMult>(
            Backend::Cpu,
            scores::distmult,
            0.0,
            &negatives,
            batch,
        );
    }
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
        let refused_id = model.train_step(&TrainBatch::AllEntities {
            heads: &[bad_id],
            relations: &[0],
            labels: &IdLists::from_lists(&[[2]]),
        });
        // Margin ranking against shared negatives needs them apart from the true tails, and a
        // margin ≥ 0.
        let labels = IdLists::from_lists(&[[2]]);
        let negatives = IdLists::from_lists(&[[3, 4]]);
        let mut margin = |batch_negatives, margin| {
            model.set_objective(Objective::new(Loss::MarginRanking { margin }))?;
            model.train_step(&TrainBatch::SharedNegatives {
                heads: &[1],
                relations: &[0],
                labels: &labels,
                negatives: &negatives,
                chunk: 0,
                batch_negatives,
            })
        };
        let margins = [margin(true, 1.0), margin(false, -1.0)];
        // Two lists of negatives for one chunk (the batch of 2 queries in chunks of 4).
        let two = IdLists::from_lists(&[[3], [4]]);
        model.set_objective(Objective::new(Loss::SoftmaxCrossEntropy))?;
        let chunks = model.train_step(&TrainBatch::SharedNegatives {
            heads: &[1],
            relations: &[0],
            labels: &labels,
            negatives: &two,
            chunk: 4,
            batch_negatives: false,
        });
        assert!(
            matches!(
                chunks,
                Err(ShardError::BadInput {
                    error: InputError::NegativeChunks {
                        lists: 2,
                        chunks: 1
                    },
                    ..
                })
            ),
            "{chunks:?}"
        );
        let after = (
            model.entities().gather_to_root(0, 64)?,
            model.relations().weights()?,
        );
        Ok((refused, refused_id, margins, before == after))
    });
    for r in results {
        let (refused, refused_id, margins, unchanged) = r.unwrap();
        for (step, says) in margins
            .iter()
            .zip(["without batch negatives", "a margin of -1"])
        {
            assert!(
                matches!(step, Err(ShardError::Unsupported(m)) if m.contains(says)),
                "{step:?}"
            );
        }
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
            .train_step(&TrainBatch::AllEntities {
                heads: &[0],
                relations: &[0],
                labels: &IdLists::from_lists(&[[1]]),
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
        let mut trainer = Trainer::new(data, config.clone())?;
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
        trainer.evaluate(&model, &Filters::new(data)?, Split::Test)
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

/// `S` (ComplEx, a squared distance, …) trained 1vsAll with softmax cross-entropy and N3 on UMLS for a few epochs on `world`
/// ranks, against every entity or shared negatives: rank 0's test metrics.
fn umls_softmax_run<S: ScoringFunction + ModelDefaults>(
    data: &Dataset,
    world: usize,
    negatives: Negatives,
    stream_block: usize,
) -> Metrics {
    let n3 = rowshard::objective::Regularizer::N3 { weight: 0.01 };
    let config = TrainConfig {
        stream_block,
        mode: Mode::OneVsAll,
        negatives,
        // Label smoothing spreads over candidates every query shares (not without batch
        // negatives).
        objective: Objective::new(Loss::SoftmaxCrossEntropy)
            .with_smoothing(match negatives {
                Negatives::Shared { batch: false, .. } => 0.0,
                _ => 0.1,
            })
            .with_regularization(rowshard::objective::Regularization {
                entities: n3,
                relations: n3,
            }),
        epochs: 4,
        batch_size: 256,
        ..TrainConfig::default()
    };
    let mut spec = ModelSpec::of::<S>(data.entities.len(), Mode::OneVsAll.model_relations(data));
    spec.settings.dim = 16;
    spec.settings.init = rowshard::model::InitScheme::Normal { std: 0.1 };
    spec.seed = 5;
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<S>::new(comm, &client, &spec)?;
        let mut trainer = Trainer::new(data, config.clone())?;
        while trainer.epochs_done < config.epochs {
            trainer.epoch(&mut model, &mut rowshard::train::Silent)?;
        }
        trainer.evaluate(&model, &Filters::new(data)?, Split::Test)
    });
    results.into_iter().next().unwrap().unwrap()
}

#[test]
fn umls_1vsall_softmax_n3_on_1_2_and_4_ranks_agree() {
    let data = umls();
    // Against every entity, against 16 uniform draws (and the batch's true tails), and against
    // uniform and degree-weighted draws.
    let uniform = Negatives::uniform;
    let degree = Negatives::Shared {
        uniform: 8,
        degree: 8,
        batch: true,
        chunk: 0,
    };
    for negatives in [
        Negatives::All,
        uniform(16, false),
        uniform(16, true),
        degree,
    ] {
        let one = umls_softmax_run::<ComplEx>(&data, 1, negatives, 1 << 20);
        assert!(one.mrr > 0.3, "4 epochs learn something: {one:?}");
        for world in [2, 4] {
            let m = umls_softmax_run::<ComplEx>(&data, world, negatives, 1 << 20);
            assert!(
                (m.mrr - one.mrr).abs() <= 0.005,
                "{negatives:?}, {world} ranks: MRR {} vs {} on one rank",
                m.mrr,
                one.mrr
            );
        }
    }
}

#[test]
fn streamed_triples_train_as_in_memory_ones_and_agree_across_rank_counts() {
    let data = umls();
    let dir = std::env::temp_dir().join(format!("rowshard-streamed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    rowshard::data::prepare(&data.folder, &dir).unwrap();
    let prepared = Dataset::load(&dir).unwrap();
    assert!(prepared.train.is_empty() && prepared.stream.is_some());
    let negatives = Negatives::uniform(16, true);
    // One block of every triple: the in-memory epoch, to the bit.
    let whole = umls_softmax_run::<ComplEx>(&prepared, 2, negatives, 1 << 20);
    assert_eq!(
        whole,
        umls_softmax_run::<ComplEx>(&data, 2, negatives, 1 << 20)
    );
    // Blocks of 1,000 triples in a shuffled order: other batches, as good a model, and the
    // same on any number of ranks.
    let one = umls_softmax_run::<ComplEx>(&prepared, 1, negatives, 1000);
    assert!((one.mrr - whole.mrr).abs() < 0.05, "{one:?} vs {whole:?}");
    for world in [2, 4] {
        let m = umls_softmax_run::<ComplEx>(&prepared, world, negatives, 1000);
        assert!(
            (m.mrr - one.mrr).abs() <= 0.005,
            "{world} ranks: MRR {} vs {} on one rank",
            m.mrr,
            one.mrr
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn corruption_losses_train_umls_alike_on_1_and_2_ranks() {
    let data = umls();
    let mut spec = ModelSpec::of::<RotatE>(data.entities.len(), data.relations.len());
    spec.settings.entity.set("lr", 0.05).unwrap();
    spec.settings.relation.set("lr", 0.05).unwrap();
    let filters = Filters::new(&data).unwrap();
    let run = |world: usize, loss: Loss| -> Metrics {
        let config = TrainConfig {
            mode: Mode::NegSample { neg_ratio: 8 },
            objective: Objective::new(loss),
            epochs: 20,
            batch_size: 512,
            ..TrainConfig::default()
        };
        let results = threads::run(world, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let mut model = ShardedModel::<RotatE>::new(comm, &client, &spec)?;
            let mut trainer = Trainer::new(&data, config.clone())?;
            while trainer.epochs_done < config.epochs {
                trainer.epoch(&mut model, &mut rowshard::train::Silent)?;
            }
            trainer.evaluate(&model, &filters, Split::Test)
        });
        results.into_iter().next().unwrap().unwrap()
    };
    for loss in [
        Loss::SelfAdversarial { temperature: 1.0 },
        Loss::SoftmaxCrossEntropy,
        Loss::MarginRanking { margin: 1.0 },
    ] {
        // 20 epochs: 0.73 (self-adversarial), 0.72 (softmax), 0.64 (margin).
        let one = run(1, loss);
        assert!(one.mrr > 0.55, "{loss:?}: {one:?}");
        let two = run(2, loss);
        assert!(
            (two.mrr - one.mrr).abs() <= 0.005,
            "{loss:?}: {two:?} vs {one:?}"
        );
    }
    // Triples that do not split into groups are refused on every rank.
    let refused = threads::run(2, |comm| -> Result<(), ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<RotatE>::new(comm, &client, &spec)?;
        let n = if comm.rank() == 0 { 6 } else { 5 };
        model.set_objective(Objective::new(Loss::SoftmaxCrossEntropy))?;
        model
            .train_step(&TrainBatch::Corrupted {
                heads: &vec![0; n],
                relations: &vec![0; n],
                tails: &vec![1; n],
                per_positive: 2,
            })
            .map(|_| ())
    });
    for r in refused {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("rank 1: 5 triples do not split into groups of 3"),
            "{e}"
        );
    }
}

#[test]
fn sampled_evaluation_is_full_ranking_when_it_samples_every_entity() {
    let data = umls();
    let config = TrainConfig {
        mode: Mode::NegSample { neg_ratio: 4 },
        epochs: 20,
        batch_size: 512,
        ..TrainConfig::default()
    };
    let spec = ModelSpec::of::<TransE>(data.entities.len(), data.relations.len());
    let filters = Filters::new(&data).unwrap();
    let run = |world: usize| -> Vec<Metrics> {
        let results = threads::run(world, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let mut model = ShardedModel::<TransE>::new(comm, &client, &spec)?;
            let mut trainer = Trainer::new(&data, config.clone())?;
            while trainer.epochs_done < config.epochs {
                trainer.epoch(&mut model, &mut rowshard::train::Silent)?;
            }
            [
                Protocol::Full,
                Protocol::Sampled { candidates: 1000 },
                Protocol::Sampled { candidates: 20 },
            ]
            .into_iter()
            .map(|p| evaluate(&model, &data, &filters, Split::Test, false, 256, p))
            .collect::<Result<Vec<_>, _>>()
        });
        results.into_iter().next().unwrap().unwrap()
    };
    // Equal up to the order of the f64 sums over ranks.
    let same = |a: &Metrics, b: &Metrics| {
        let v = |m: &Metrics| [m.mrr, m.hits1, m.hits3, m.hits10];
        v(a).iter().zip(v(b)).all(|(x, y)| (x - y).abs() < 1e-12) && a.queries == b.queries
    };
    let one = run(1);
    let [full, all, few] = [one[0], one[1], one[2]];
    assert_eq!(full.sampled_candidates, None);
    assert_eq!(all.sampled_candidates, Some(135));
    assert_eq!(few.sampled_candidates, Some(20));
    assert!(full.mrr > 0.2, "{full:?}");
    assert!(same(&all, &full), "{all:?} vs {full:?}");
    assert!(few.mrr > full.mrr, "{few:?} vs {full:?}");
    let two = run(2);
    for (a, b) in two.iter().zip(&one) {
        assert!(
            same(a, b) && a.sampled_candidates == b.sampled_candidates,
            "{a:?} vs {b:?}"
        );
    }
}

#[test]
fn shared_negatives_train_the_same_bits_from_the_same_seed() {
    let data = umls();
    let config = TrainConfig {
        mode: Mode::OneVsAll,
        objective: Objective::new(Loss::SoftmaxCrossEntropy),
        negatives: Negatives::Shared {
            uniform: 24,
            degree: 8,
            batch: false,
            chunk: 0,
        },
        epochs: 2,
        batch_size: 256,
        ..TrainConfig::default()
    };
    let mut spec =
        ModelSpec::of::<ComplEx>(data.entities.len(), Mode::OneVsAll.model_relations(&data));
    spec.settings.dim = 16;
    let run = || -> Vec<u32> {
        let results = threads::run(2, |comm| -> Result<_, ShardError> {
            let client = Backend::Cpu.client()?;
            let mut model = ShardedModel::<ComplEx>::new(comm, &client, &spec)?;
            let mut trainer = Trainer::new(&data, config.clone())?;
            while trainer.epochs_done < config.epochs {
                trainer.epoch(&mut model, &mut rowshard::train::Silent)?;
            }
            model.entities().gather_to_root(0, 7)
        });
        let table = results.into_iter().next().unwrap().unwrap().unwrap();
        table.iter().map(|x| x.to_bits()).collect()
    };
    let first = run();
    assert!(first.iter().any(|&b| b != 0));
    assert!(first == run(), "two runs from the same seed differ");
}

#[test]
fn squared_distances_train_1vsall_alike_on_1_2_and_4_ranks_and_rank_as_the_forward_kernel() {
    let data = umls();
    for negatives in [Negatives::All, Negatives::uniform(16, true)] {
        let one = umls_softmax_run::<TransESq>(&data, 1, negatives, 1 << 20);
        assert!(one.mrr > 0.3, "4 epochs learn something: {one:?}");
        for world in [2, 4] {
            let m = umls_softmax_run::<TransESq>(&data, world, negatives, 1 << 20);
            assert!(
                (m.mrr - one.mrr).abs() <= 0.005,
                "{negatives:?}, {world} ranks: MRR {} vs {} on one rank",
                m.mrr,
                one.mrr
            );
        }
    }
    // Full ranking by dense products of augmented rows against ranking by the forward kernel
    // per pair (a sample of every entity): equal up to f32 rounding of near ties.
    let spec =
        ModelSpec::of::<RotatESq>(data.entities.len(), Mode::OneVsAll.model_relations(&data));
    let filters = Filters::new(&data).unwrap();
    let config = TrainConfig {
        mode: Mode::OneVsAll,
        objective: Objective::new(Loss::SoftmaxCrossEntropy),
        epochs: 4,
        batch_size: 256,
        ..TrainConfig::default()
    };
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<RotatESq>::new(comm, &client, &spec)?;
        let mut trainer = Trainer::new(&data, config.clone())?;
        while trainer.epochs_done < config.epochs {
            trainer.epoch(&mut model, &mut rowshard::train::Silent)?;
        }
        let rank = |p| evaluate(&model, &data, &filters, Split::Test, true, 256, p);
        Ok((
            rank(Protocol::Full)?,
            rank(Protocol::Sampled { candidates: 1000 })?,
        ))
    });
    let (full, per_pair) = results.into_iter().next().unwrap().unwrap();
    assert!(full.mrr > 0.3, "{full:?}");
    assert!(
        (full.mrr - per_pair.mrr).abs() < 2e-3 && (full.hits10 - per_pair.hits10).abs() < 2e-3,
        "{full:?} vs {per_pair:?}"
    );
}
