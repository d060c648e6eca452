//! Writing a checkpoint.

use std::path::{Path, PathBuf};

use rowshard_kernels::{LocalTable, Slot};
use safetensors::Dtype;
use safetensors::tensor::TensorView;

use super::format::{
    FileEntry, MANIFEST, Manifest, RELATIONS, RunState, file_metadata, sha256, tensor_dtype,
    tensor_name, write_atomically,
};
use super::{CheckpointError, agree};
use crate::model::{ScoringFunction, ShardedModel};

/// Writes `model` and `state` to `dir/epoch-NNNNNN` (N = `state.epochs_done`) and returns that
/// folder. Refuses a folder that already holds a checkpoint. A collective.
pub fn save<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    state: RunState,
    dir: &Path,
) -> Result<PathBuf, CheckpointError> {
    let comm = model.comm();
    let (rank, world) = (comm.rank(), comm.world());
    let target = dir.join(format!("epoch-{:06}", state.epochs_done));
    let prepared = if rank == 0 { prepare(&target) } else { Ok(()) };
    agree(comm, prepared)?;
    let run = comm.broadcast(
        0,
        if rank == 0 {
            run_id().into_bytes()
        } else {
            Vec::new()
        },
    )?;
    let run = String::from_utf8_lossy(&run).into_owned();

    let partition = model.entities().partition();
    let rows: Vec<u32> = (0..partition.local_rows(rank))
        .map(|l| partition.global(rank, l) as u32)
        .collect();
    let name = format!("entities.rank{rank}-of-{world}.safetensors");
    let entry = write_table(&target, &name, model.entities().shard(), Some(&rows), &run);
    let entry = agree(comm, entry)?;
    let entries = comm.gather(0, &serde_json::to_vec(&entry).expect("serialisable"))?;
    let written = match entries {
        Some(entries) => {
            let mut manifest = Manifest::of(model, state);
            manifest.run = run.clone();
            manifest.files = entries
                .iter()
                .map(|e| serde_json::from_slice(e).expect("written by a rank"))
                .collect();
            write_table(&target, RELATIONS, model.relations(), None, &run).and_then(|entry| {
                manifest.files.push(entry);
                let json = serde_json::to_vec_pretty(&manifest).expect("serialisable");
                write_atomically(&target.join(MANIFEST), &json)
            })
        }
        None => Ok(()),
    };
    agree(comm, written)?;
    Ok(target)
}

fn prepare(target: &Path) -> Result<(), CheckpointError> {
    if target.join(MANIFEST).exists() {
        return Err(CheckpointError::Exists(target.to_path_buf()));
    }
    std::fs::create_dir_all(target).map_err(|error| CheckpointError::Io {
        path: target.to_path_buf(),
        error,
    })
}

/// An id for this checkpoint: time and process, hashed.
fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = crate::init::SplitMix64::new(nanos ^ ((std::process::id() as u64) << 32));
    format!("{:016x}", rng.next_u64())
}

/// Writes one table (its weights and every optimizer state, and the rows' global ids when
/// given) as `folder/name`.
fn write_table(
    folder: &Path,
    name: &str,
    table: &LocalTable,
    rows: Option<&[u32]>,
    run: &str,
) -> Result<FileEntry, CheckpointError> {
    let n = table.rows();
    let mut tensors: Vec<(String, Vec<u8>, Dtype, Vec<usize>)> = Vec::new();
    if let Some(rows) = rows {
        tensors.push((
            "rows".into(),
            bytemuck::cast_slice(rows).to_vec(),
            Dtype::U32,
            vec![n],
        ));
    }
    let states = table.state_names();
    let slots = std::iter::once(Slot::Weights).chain(states.iter().map(|s| Slot::State(s)));
    for slot in slots {
        let (bytes, dtype, width) = table.read_slot(slot)?;
        let shape = if width == 1 && slot != Slot::Weights {
            vec![n]
        } else {
            vec![n, width]
        };
        tensors.push((tensor_name(slot), bytes, tensor_dtype(dtype), shape));
    }
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(name, bytes, dtype, shape)| {
            let view = TensorView::new(*dtype, shape.clone(), bytes).expect("sizes agree");
            (name.clone(), view)
        })
        .collect();
    let holds = if rows.is_some() {
        "entities"
    } else {
        "relations"
    };
    let bytes = safetensors::serialize(views, Some(file_metadata(run, holds))).map_err(|e| {
        CheckpointError::Torn {
            file: folder.join(name),
            reason: format!("could not be encoded: {e}"),
        }
    })?;
    write_atomically(&folder.join(name), &bytes)?;
    Ok(FileEntry {
        name: name.to_string(),
        bytes: bytes.len() as u64,
        sha256: sha256(&bytes),
    })
}
