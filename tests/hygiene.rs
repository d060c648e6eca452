//! The macros' output compiles in a module that shadows the prelude's names (as the
//! proc-macro-workshop's hygiene test does), with every kind of argument, and the model it
//! generates trains: the generated code reaches everything through absolute paths.

mod shadowing {
    #![allow(dead_code)]

    struct Option;
    struct Some;
    struct None;
    struct Result;
    struct Ok;
    struct Err;
    struct Vec;
    struct Box;
    struct String;
    struct Default;
    struct Into;
    struct Iterator;

    use rowshard::{scoring, sharded_embedding};

    /// A model whose relation rows are half as long as its entity rows.
    #[sharded_embedding(
        dim = 8,
        dtype = f16,
        optimizer = rmsprop(alpha = 0.9, lr = 0.05),
        relation_optimizer = sgd(lr = 0.1),
        partition = round_robin(block = 2),
        init = uniform(bound = 0.3),
        stochastic_rounding,
        runtime = [cpu, wgpu],
    )]
    pub struct Shadowed;

    #[scoring(kvsall, relation_dim = dim / 2)]
    impl Shadowed {
        fn score(h: Row, r: Row, t: Row) -> Scalar {
            let (a, b) = halves(h);
            let (c, d) = halves(t);
            dot(a * r, c) - mean(b * sigmoid(r) * d) / 2.0
        }

        /// Other items of the block stay as they are.
        pub fn describe() -> &'static str {
            "shadowed"
        }
    }
}

use rowshard::comm::threads;
use rowshard::error::ShardError;
use rowshard::model::{ModelDefaults, ModelSpec, ScoringFunction};
use rowshard::{IdLists, TrainBatch};
use rowshard_kernels::{Backend, DType, Optimizer};
use shadowing::{Shadowed, ShadowedModel};

#[test]
fn the_output_compiles_under_shadowed_names_and_its_model_trains() {
    assert_eq!(Shadowed::describe(), "shadowed");
    let settings = Shadowed::settings();
    assert_eq!((settings.dim, settings.dtype), (8, DType::F16));
    assert_eq!(settings.entity.optimizer(), Optimizer::RmsProp);
    assert_eq!(settings.entity.hyper.get("alpha"), Some(0.9));
    assert_eq!(settings.relation.optimizer(), Optimizer::Sgd);
    assert!(settings.stochastic_rounding);
    assert_eq!(Shadowed::RELATION_WIDTH, (1, 2));
    let spec = ModelSpec::of::<Shadowed>(12, 3);
    let results = threads::run(2, |comm| -> std::result::Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model: ShadowedModel = ShadowedModel::new(comm, &client, &spec)?;
        let kvsall = model.train_step(&TrainBatch::AllEntities {
            heads: &[1, 5],
            relations: &[0, 2],
            labels: &IdLists::from_lists(&[vec![3], vec![4, 7]]),
        })?;
        let triples = model.train_step(&TrainBatch::Triples {
            heads: &[0, 11],
            relations: &[1, 1],
            tails: &[2, 2],
            targets: &[1.0, 0.0],
        })?;
        let scores = model.score(&[3], &[2], &[4])?;
        Ok((kvsall.loss, triples.loss, scores))
    });
    for r in results {
        let (kvsall, triples, scores) = r.unwrap();
        assert!(kvsall.is_finite() && triples.is_finite() && scores[0].is_finite());
    }
}
