//! Checkpoints: a round trip restores weights, states and step counts bit for bit under other
//! rank counts and partitions; torn, foreign and mismatched checkpoints are refused naming the
//! file, and leave the model as it was; a checkpoint is never written over.

use std::path::{Path, PathBuf};

use rowshard::checkpoint::{self, CheckpointError, RunState};
use rowshard::comm::threads;
use rowshard::error::ShardError;
use rowshard::model::{ModelSpec, ScoringFunction};
use rowshard::models::{ComplEx, DistMult};
use rowshard::partition::PartitionScheme;
use rowshard::{IdLists, ShardedModel, TrainBatch};
use rowshard_kernels::{Backend, DType};

const ENTITIES: usize = 37;
const VOCABULARY: u64 = 0xfeed;

fn spec(dim: usize, dtype: DType, scheme: PartitionScheme) -> ModelSpec {
    let mut spec = ModelSpec::of::<DistMult>(ENTITIES, 4);
    spec.settings.dim = dim;
    spec.settings.dtype = dtype;
    spec.settings.partition = scheme;
    spec
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rowshard-ck-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Everything a checkpoint holds, as rank 0 sees it: the entity table and its Adam states,
/// the relation table, and both step counts.
type Snapshot = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, u64, u64);

fn snapshot<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
) -> Result<Option<Snapshot>, ShardError> {
    let e = model.entities().gather_to_root(0, 5)?;
    let m = model.entities().gather_state_to_root("m", 0, 5)?;
    let step = model.entities().gather_state_to_root("step", 0, 5)?;
    Ok(e.zip(m).zip(step).map(|((e, m), step)| {
        (
            e,
            m,
            step,
            model.relations().weights().unwrap(),
            model.entities().step(),
            model.relations().step(),
        )
    }))
}

/// Trains two KvsAll steps on `world` ranks, saves to `dir` (when given) and returns the
/// snapshot.
fn trained(world: usize, spec: &ModelSpec, dir: Option<&Path>) -> Snapshot {
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<DistMult>::new(comm, &client, spec)?;
        for step in 0..2u32 {
            let mine: Vec<u32> = (0..5)
                .map(|i| (i * 7 + step + comm_rank(comm)) % 37)
                .collect();
            let labels =
                IdLists::from_lists(&mine.iter().map(|&h| vec![(h + 1) % 37]).collect::<Vec<_>>());
            model.train_step(&TrainBatch::AllEntities {
                heads: &mine,
                relations: &[0, 1, 2, 3, 1],
                labels: &labels,
            })?;
        }
        if let Some(dir) = dir {
            checkpoint::save(&model, state(2), dir)
                .map_err(|e| ShardError::Unsupported(e.to_string()))?;
        }
        snapshot(&model)
    });
    results.into_iter().find_map(|r| r.unwrap()).unwrap()
}

fn comm_rank(comm: &dyn rowshard::Communicator) -> u32 {
    comm.rank() as u32
}

fn state(epochs_done: usize) -> RunState {
    RunState {
        epochs_done,
        mode: "kvsall".into(),
        vocabulary: format!("{VOCABULARY:016x}"),
        ..Default::default()
    }
}

/// Loads `path` into a fresh model on `world` ranks: the snapshot after loading, and the first
/// rank's error (the model's snapshot before loading must equal the one after, on refusal).
fn loaded<S: ScoringFunction>(
    world: usize,
    spec: &ModelSpec,
    path: &Path,
) -> Result<Snapshot, String> {
    let results = threads::run(world, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<S>::new(comm, &client, spec)?;
        let before = snapshot(&model)?;
        let result = checkpoint::load(&mut model, path, VOCABULARY);
        let after = snapshot(&model)?;
        Ok(match result {
            Ok(_) => Ok(after),
            Err(e) => {
                assert_eq!(before, after, "a refused load changed the model");
                Err(e.to_string())
            }
        })
    });
    let mut out = None;
    for r in results {
        match r.unwrap() {
            Ok(Some(s)) => out = Some(Ok(s)),
            Ok(None) => {}
            Err(e) => return Err(e),
        }
    }
    out.unwrap()
}

#[test]
fn a_checkpoint_restores_everything_under_other_rank_counts_and_partitions() {
    for dtype in [DType::F32, DType::BF16] {
        let dir = temp(&format!("roundtrip-{dtype}"));
        let even = spec(8, dtype, PartitionScheme::Even);
        let saved = trained(2, &even, Some(&dir));
        for (world, scheme) in [
            (1, PartitionScheme::Even),
            (3, PartitionScheme::RoundRobin { block: 2 }),
            (2, PartitionScheme::Explicit(vec![30, 7])),
        ] {
            let s = spec(8, dtype, scheme.clone());
            let restored = loaded::<DistMult>(world, &s, &dir).unwrap();
            assert!(
                restored == saved,
                "{dtype}, {world} ranks, {scheme:?}: not bit for bit"
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn torn_foreign_and_mismatched_checkpoints_are_refused_naming_the_file() {
    let even = spec(8, DType::F32, PartitionScheme::Even);
    let a = temp("a");
    let b = temp("b");
    trained(2, &even, Some(&a));
    trained(2, &even, Some(&b));
    let (a, b) = (a.join("epoch-000002"), b.join("epoch-000002"));

    // One shard file truncated.
    let shard = b.join("entities.rank1-of-2.safetensors");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() - 100]).unwrap();
    let e = loaded::<DistMult>(2, &even, &b).unwrap_err();
    assert!(
        e.contains("entities.rank1-of-2.safetensors") && e.contains("truncated"),
        "{e}"
    );
    std::fs::write(&shard, &bytes).unwrap();
    assert!(loaded::<DistMult>(2, &even, &b).is_ok());

    // A byte flipped inside a tensor.
    let relations = b.join("relations.safetensors");
    let mut flipped = std::fs::read(&relations).unwrap();
    let last = flipped.len() - 3;
    flipped[last] ^= 0x40;
    std::fs::write(&relations, &flipped).unwrap();
    let e = loaded::<DistMult>(1, &even, &b).unwrap_err();
    assert!(
        e.contains("relations.safetensors") && e.contains("SHA-256"),
        "{e}"
    );

    // The manifest of another checkpoint (same shapes, other run).
    std::fs::copy(a.join("manifest.json"), b.join("manifest.json")).unwrap();
    std::fs::write(
        &relations,
        std::fs::read(a.join("relations.safetensors")).unwrap(),
    )
    .unwrap();
    let e = loaded::<DistMult>(2, &even, &b).unwrap_err();
    assert!(
        e.contains("entities.rank0-of-2.safetensors") && e.contains("another checkpoint"),
        "{e}"
    );

    // Another model, another dim, another data set.
    let e = loaded::<ComplEx>(
        2,
        &{
            let mut s = ModelSpec::of::<ComplEx>(ENTITIES, 4);
            s.settings.dim = 8;
            s
        },
        &a,
    )
    .unwrap_err();
    assert!(
        e.contains("manifest.json") && e.contains("model is DistMult, the model's is ComplEx"),
        "{e}"
    );
    let e = loaded::<DistMult>(2, &spec(16, DType::F32, PartitionScheme::Even), &a).unwrap_err();
    assert!(e.contains("dim is 8, the model's is 16"), "{e}");
    let other_data = threads::run(1, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let mut model = ShardedModel::<DistMult>::new(comm, &client, &even)?;
        Ok(checkpoint::load(&mut model, &a, VOCABULARY + 1).map(|_| ()))
    });
    let e = other_data[0]
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap_err()
        .to_string();
    assert!(e.contains("data set"), "{e}");

    // A checkpoint folder is never written over.
    let before = std::fs::read(a.join("entities.rank0-of-2.safetensors")).unwrap();
    let again = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = Backend::Cpu.client()?;
        let model = ShardedModel::<DistMult>::new(comm, &client, &even)?;
        Ok(checkpoint::save(&model, state(2), a.parent().unwrap()).map(|_| ()))
    });
    for r in again {
        let e = r.unwrap().unwrap_err();
        assert!(
            matches!(
                &e,
                CheckpointError::Exists(_) | CheckpointError::OnRank { .. }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("already holds a checkpoint"), "{e}");
    }
    assert_eq!(
        before,
        std::fs::read(a.join("entities.rank0-of-2.safetensors")).unwrap()
    );
    let e = loaded::<DistMult>(1, &even, &temp("nothing")).unwrap_err();
    assert!(e.contains("no checkpoint here"), "{e}");
    std::fs::remove_dir_all(a.parent().unwrap()).unwrap();
    std::fs::remove_dir_all(b.parent().unwrap()).unwrap();
}
