//! Exporting a trained model: the whole entity and relation tables, gathered on rank 0 in
//! bounded chunks, as one safetensors file (`f32`), with the vocabularies as text.

use std::path::Path;

use safetensors::Dtype;
use safetensors::tensor::TensorView;

use super::format::write_atomically;
use super::{CheckpointError, agree};
use crate::data::Dataset;
use crate::model::{ScoringFunction, ShardedModel};

/// Rows per rank per message when gathering the entity table.
const CHUNK_ROWS: usize = 1 << 14;

/// Writes `out/embeddings.safetensors` (tensors `entities` and `relations`, `f32`, one row per
/// id), `out/entities.txt` and `out/relations.txt` (one name per line, in id order; reciprocal
/// relations are named `NAME_inverse`). A collective; rank 0 writes.
pub fn export<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    data: &Dataset,
    out: &Path,
) -> Result<(), CheckpointError> {
    let entities = model.entities().gather_to_root(0, CHUNK_ROWS)?;
    let Some(entities) = entities else {
        return agree(model.comm(), Ok(()));
    };
    let written = (|| {
        std::fs::create_dir_all(out).map_err(|error| CheckpointError::Io {
            path: out.to_path_buf(),
            error,
        })?;
        let relations = model.relations().weights()?;
        let (n, dim) = (model.spec().entities, model.spec().settings.dim);
        let (r, rdim) = (model.spec().relations, model.relation_dim());
        let ebytes: &[u8] = bytemuck::cast_slice(&entities);
        let rbytes: &[u8] = bytemuck::cast_slice(&relations);
        let views = vec![
            (
                "entities",
                TensorView::new(Dtype::F32, vec![n, dim], ebytes).expect("sizes"),
            ),
            (
                "relations",
                TensorView::new(Dtype::F32, vec![r, rdim], rbytes).expect("sizes"),
            ),
        ];
        let file = out.join("embeddings.safetensors");
        let bytes = safetensors::serialize(views, None).map_err(|e| CheckpointError::Torn {
            file: file.clone(),
            reason: format!("could not be encoded: {e}"),
        })?;
        write_atomically(&file, &bytes)?;
        let mut names = data.relations.clone();
        if r == 2 * data.relations.len() {
            names.extend(data.relations.iter().map(|n| format!("{n}_inverse")));
        }
        write_atomically(
            &out.join("entities.txt"),
            (data.entities.join("\n") + "\n").as_bytes(),
        )?;
        write_atomically(
            &out.join("relations.txt"),
            (names.join("\n") + "\n").as_bytes(),
        )
    })();
    agree(model.comm(), written)
}
