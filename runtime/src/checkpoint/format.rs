//! The manifest and the tensor files' layout.

use std::collections::HashMap;
use std::path::Path;

use rowshard_kernels::{DType, Slot};
use safetensors::Dtype;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::CheckpointError;
use crate::model::{OptimizerSettings, ScoringFunction, ShardedModel};

/// The format tag in every manifest and tensor file.
pub const FORMAT: &str = "rowshard-checkpoint-1";
/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";
/// The relation table's file name.
pub const RELATIONS: &str = "relations.safetensors";

/// A file of the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Its name in the checkpoint folder.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
}

/// A table's optimizer as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerEntry {
    /// The optimizer's name.
    pub name: String,
    /// Storage dtype of its per-element states.
    pub state_dtype: String,
    /// Its table step count (Adam's global clock).
    pub step: u64,
}

impl OptimizerEntry {
    /// Name and state dtype, as an incompatibility names them.
    fn describe(&self) -> String {
        format!("{} (states {})", self.name, self.state_dtype)
    }

    fn of(settings: &OptimizerSettings, step: u64) -> Self {
        Self {
            name: settings.optimizer().name().to_string(),
            state_dtype: settings.state_dtype.name().to_string(),
            step,
        }
    }
}

/// Where training stood.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// Epochs finished.
    pub epochs_done: usize,
    /// The training mode (`kvsall` or `negsample`).
    pub mode: String,
    /// The seed.
    pub seed: u64,
    /// The data set's folder.
    pub dataset: String,
    /// A digest of its vocabularies ([`Dataset::vocabulary_digest`](crate::data::Dataset), hex).
    pub vocabulary: String,
}

/// What a checkpoint holds; written last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// An id shared by the manifest and every file of this checkpoint.
    pub run: String,
    /// The model (its struct name).
    pub model: String,
    /// Entity rows.
    pub entities: usize,
    /// Relation rows.
    pub relations: usize,
    /// Entity row length.
    pub dim: usize,
    /// Relation row length.
    pub relation_dim: usize,
    /// Weight dtype.
    pub dtype: String,
    /// The entity table's optimizer.
    pub entity_optimizer: OptimizerEntry,
    /// The relation table's optimizer.
    pub relation_optimizer: OptimizerEntry,
    /// Ranks that wrote it.
    pub world: usize,
    /// Their partition.
    pub partition: String,
    /// Training state.
    pub state: RunState,
    /// Every tensor file.
    pub files: Vec<FileEntry>,
}

impl Manifest {
    /// The manifest of `model` as it stands (without files or run id).
    pub(crate) fn of<S: ScoringFunction>(model: &ShardedModel<'_, S>, state: RunState) -> Self {
        let spec = model.spec();
        let s = &spec.settings;
        Self {
            format: FORMAT.into(),
            run: String::new(),
            model: S::NAME.into(),
            entities: spec.entities,
            relations: spec.relations,
            dim: s.dim,
            relation_dim: model.relation_dim(),
            dtype: s.dtype.name().into(),
            entity_optimizer: OptimizerEntry::of(&s.entity, model.entities().step()),
            relation_optimizer: OptimizerEntry::of(&s.relation, model.relations().step()),
            world: model.comm().world(),
            partition: s.partition.name().into(),
            state,
            files: Vec::new(),
        }
    }

    /// The first field in which a checkpoint of `self` cannot load into a model described by
    /// `other`, as a sentence.
    pub(crate) fn incompatibility(&self, other: &Manifest) -> Option<String> {
        let fields: [(&str, String, String); 8] = [
            ("model", self.model.clone(), other.model.clone()),
            (
                "entities",
                self.entities.to_string(),
                other.entities.to_string(),
            ),
            (
                "relations",
                self.relations.to_string(),
                other.relations.to_string(),
            ),
            ("dim", self.dim.to_string(), other.dim.to_string()),
            ("dtype", self.dtype.clone(), other.dtype.clone()),
            (
                "entity optimizer",
                self.entity_optimizer.describe(),
                other.entity_optimizer.describe(),
            ),
            (
                "relation optimizer",
                self.relation_optimizer.describe(),
                other.relation_optimizer.describe(),
            ),
            (
                "data set",
                format!("vocabulary {}", self.state.vocabulary),
                format!("vocabulary {}", other.state.vocabulary),
            ),
        ];
        fields
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("the checkpoint's {what} is {a}, the model's is {b}"))
    }
}

/// The safetensors dtype of a storage dtype.
pub(crate) fn tensor_dtype(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
    }
}

/// The tensor name of a table buffer.
pub(crate) fn tensor_name(slot: Slot) -> String {
    match slot {
        Slot::Weights => "weights".into(),
        Slot::State(name) => format!("state.{name}"),
    }
}

/// The metadata every tensor file carries.
pub(crate) fn file_metadata(run: &str, what: &str) -> HashMap<String, String> {
    HashMap::from([
        ("format".to_string(), FORMAT.to_string()),
        ("run".to_string(), run.to_string()),
        ("holds".to_string(), what.to_string()),
    ])
}

/// SHA-256 of `bytes`, hex.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `bytes` to `path` through a temporary name in the same folder and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| CheckpointError::Io { path, error }
    };
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("checkpoint")
    ));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}
