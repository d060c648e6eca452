//! Reading a checkpoint back into a model, re-sharding by global row id.

use std::path::{Path, PathBuf};

use rowshard_kernels::{LocalTable, Slot};
use safetensors::SafeTensors;

use super::format::{
    FORMAT, FileEntry, MANIFEST, Manifest, RELATIONS, RunState, sha256, tensor_dtype, tensor_name,
};
use super::{CheckpointError, agree};
use crate::model::{ScoringFunction, ShardedModel};
use crate::partition::Partition;

/// The checkpoint `path` names: the folder itself when it holds a manifest, else its latest
/// `epoch-*` folder that does.
pub fn resolve(path: &Path) -> Result<PathBuf, CheckpointError> {
    if path.join(MANIFEST).is_file() {
        return Ok(path.to_path_buf());
    }
    let entries =
        std::fs::read_dir(path).map_err(|_| CheckpointError::Missing(path.to_path_buf()))?;
    let mut candidates: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("epoch-"))
                && p.join(MANIFEST).is_file()
        })
        .collect();
    candidates.sort();
    candidates
        .pop()
        .ok_or_else(|| CheckpointError::Missing(path.to_path_buf()))
}

/// Reads the checkpoint at `path` (see [`resolve`]) into `model`, whose data set's vocabulary
/// digest is `vocabulary_digest`; returns its manifest. Nothing of the model changes unless
/// every file checks out on every rank. A collective.
pub fn load<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    path: &Path,
    vocabulary_digest: u64,
) -> Result<Manifest, CheckpointError> {
    let comm = model.comm();
    let checked = read_and_check(model, path, vocabulary_digest);
    let (manifest, folder) = agree(comm, checked)?;
    let (rank, partition) = (comm.rank(), model.entities().partition().clone());
    // Read and place everything first; write into the tables only when every rank could.
    let read = entity_buffers(
        model.entities().shard(),
        &manifest,
        &folder,
        rank,
        &partition,
    )
    .and_then(|e| Ok((e, relation_buffers(model.relations(), &manifest, &folder)?)));
    let (entities, relations) = agree(comm, read)?;
    let shard = model.entities_mut().shard_mut();
    for (name, bytes) in &entities {
        shard.write_slot(slot_of(name), bytes)?;
    }
    shard.set_step(manifest.entity_optimizer.step);
    let table = model.relations_mut();
    for (name, bytes) in &relations {
        table.write_slot(slot_of(name), bytes)?;
    }
    table.set_step(manifest.relation_optimizer.step);
    model.entities().clear_cache();
    Ok(manifest)
}

/// A table's restored buffers: (tensor name, bytes).
type Buffers = Vec<(String, Vec<u8>)>;

/// The manifest of the checkpoint `path` names (see [`resolve`]), and its folder.
pub fn read_manifest(path: &Path) -> Result<(Manifest, PathBuf), CheckpointError> {
    let folder = resolve(path)?;
    let manifest_path = folder.join(MANIFEST);
    let text = std::fs::read(&manifest_path).map_err(|error| CheckpointError::Io {
        path: manifest_path.clone(),
        error,
    })?;
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| CheckpointError::Torn {
        file: manifest_path.clone(),
        reason: format!("is not a readable manifest ({e})"),
    })?;
    if manifest.format != FORMAT {
        return Err(CheckpointError::Mismatch {
            file: manifest_path,
            reason: format!("format `{}`, expected `{FORMAT}`", manifest.format),
        });
    }
    Ok((manifest, folder))
}

fn read_and_check<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    path: &Path,
    vocabulary_digest: u64,
) -> Result<(Manifest, PathBuf), CheckpointError> {
    let (manifest, folder) = read_manifest(path)?;
    let manifest_path = folder.join(MANIFEST);
    let expected = Manifest::of(
        model,
        RunState {
            vocabulary: format!("{vocabulary_digest:016x}"),
            ..Default::default()
        },
    );
    if let Some(reason) = manifest.incompatibility(&expected) {
        return Err(CheckpointError::Mismatch {
            file: manifest_path,
            reason,
        });
    }
    let entities = manifest
        .files
        .iter()
        .filter(|f| f.name.starts_with("entities."))
        .count();
    if entities != manifest.world || !manifest.files.iter().any(|f| f.name == RELATIONS) {
        return Err(CheckpointError::Torn {
            file: manifest_path,
            reason: format!(
                "lists {entities} entity shards for {} ranks, or no relation table",
                manifest.world
            ),
        });
    }
    for entry in &manifest.files {
        check_file(&folder, entry, &manifest.run)?;
    }
    Ok((manifest, folder))
}

/// Checks one file against its manifest entry: present, of its size, of this checkpoint's run,
/// and of its hash.
fn check_file(folder: &Path, entry: &FileEntry, run: &str) -> Result<Vec<u8>, CheckpointError> {
    let file = folder.join(&entry.name);
    let torn = |reason: String| CheckpointError::Torn {
        file: file.clone(),
        reason,
    };
    let bytes = std::fs::read(&file).map_err(|e| torn(format!("cannot be read ({e})")))?;
    if bytes.len() as u64 != entry.bytes {
        return Err(torn(format!(
            "is {} bytes, the manifest lists {} (truncated or replaced)",
            bytes.len(),
            entry.bytes
        )));
    }
    let (_, metadata) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| torn(format!("is not a safetensors file ({e})")))?;
    let file_run = metadata
        .metadata()
        .as_ref()
        .and_then(|m| m.get("run").cloned())
        .unwrap_or_default();
    if file_run != run {
        return Err(CheckpointError::Mismatch {
            file,
            reason: format!(
                "belongs to another checkpoint (run {file_run}; the manifest is of run {run})"
            ),
        });
    }
    if sha256(&bytes) != entry.sha256 {
        return Err(torn(
            "does not match its SHA-256 in the manifest (corrupted)".into(),
        ));
    }
    Ok(bytes)
}

/// The slots a table has: weights, then its optimizer's states.
fn slots(table: &LocalTable) -> Vec<String> {
    std::iter::once(tensor_name(Slot::Weights))
        .chain(
            table
                .state_names()
                .iter()
                .map(|s| tensor_name(Slot::State(s))),
        )
        .collect()
}

fn slot_of(name: &str) -> Slot<'_> {
    match name.strip_prefix("state.") {
        Some(state) => Slot::State(state),
        None => Slot::Weights,
    }
}

/// This rank's rows taken out of every entity shard file, by global id.
fn entity_buffers(
    shard: &LocalTable,
    manifest: &Manifest,
    folder: &Path,
    rank: usize,
    partition: &Partition,
) -> Result<Buffers, CheckpointError> {
    let local = shard.rows();
    let names = slots(shard);
    // Per slot: the restored bytes and the bytes per row.
    let mut out: Vec<(Vec<u8>, usize)> = Vec::new();
    for name in &names {
        let (bytes, dtype, width) = shard.read_slot(slot_of(name))?;
        let row_bytes = width * dtype.size();
        out.push((vec![0u8; bytes.len()], row_bytes));
    }
    let mut placed = vec![false; local];
    for entry in manifest
        .files
        .iter()
        .filter(|f| f.name.starts_with("entities."))
    {
        let file = folder.join(&entry.name);
        let bytes = check_file(folder, entry, &manifest.run)?;
        let tensors = SafeTensors::deserialize(&bytes).map_err(|e| CheckpointError::Torn {
            file: file.clone(),
            reason: format!("is not a safetensors file ({e})"),
        })?;
        let rows: Vec<u32> = bytemuck::pod_collect_to_vec(tensor(&tensors, "rows", &file)?.data());
        for (k, (name, (buffer, row_bytes))) in names.iter().zip(out.iter_mut()).enumerate() {
            let view = tensor(&tensors, name, &file)?;
            let (_, dtype, _) = shard.read_slot(slot_of(name)).map(|(_, d, w)| ((), d, w))?;
            if view.dtype() != tensor_dtype(dtype) || view.data().len() != rows.len() * *row_bytes {
                return Err(CheckpointError::Mismatch {
                    file,
                    reason: format!("tensor `{name}` has another dtype or shape than the model's"),
                });
            }
            for (i, &global) in rows.iter().enumerate() {
                let (owner, l) = partition.locate(global);
                if owner != rank {
                    continue;
                }
                let l = l as usize;
                buffer[l * *row_bytes..][..*row_bytes]
                    .copy_from_slice(&view.data()[i * *row_bytes..][..*row_bytes]);
                if k == 0 {
                    placed[l] = true;
                }
            }
        }
    }
    if let Some(l) = placed.iter().position(|p| !p) {
        return Err(CheckpointError::Torn {
            file: folder.join(MANIFEST),
            reason: format!(
                "no shard holds row {} (this rank's local row {l})",
                partition.global(rank, l)
            ),
        });
    }
    Ok(names
        .into_iter()
        .zip(out.into_iter().map(|(b, _)| b))
        .collect())
}

/// The relation table's buffers, checked against the model's.
fn relation_buffers(
    table: &LocalTable,
    manifest: &Manifest,
    folder: &Path,
) -> Result<Buffers, CheckpointError> {
    let entry = manifest
        .files
        .iter()
        .find(|f| f.name == RELATIONS)
        .expect("checked");
    let file = folder.join(RELATIONS);
    let bytes = check_file(folder, entry, &manifest.run)?;
    let tensors = SafeTensors::deserialize(&bytes).map_err(|e| CheckpointError::Torn {
        file: file.clone(),
        reason: format!("is not a safetensors file ({e})"),
    })?;
    let mut out = Vec::new();
    for name in slots(table) {
        let view = tensor(&tensors, &name, &file)?;
        let (current, dtype, _) = table.read_slot(slot_of(&name))?;
        if view.dtype() != tensor_dtype(dtype) || view.data().len() != current.len() {
            return Err(CheckpointError::Mismatch {
                file,
                reason: format!("tensor `{name}` has another dtype or shape than the model's"),
            });
        }
        out.push((name, view.data().to_vec()));
    }
    Ok(out)
}

fn tensor<'a>(
    tensors: &'a SafeTensors<'a>,
    name: &str,
    file: &Path,
) -> Result<safetensors::tensor::TensorView<'a>, CheckpointError> {
    tensors.tensor(name).map_err(|_| CheckpointError::Torn {
        file: file.to_path_buf(),
        reason: format!("has no tensor `{name}`"),
    })
}
