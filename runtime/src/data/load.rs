//! [`Dataset::load`]: a data set folder in either form.

use std::path::Path;

use super::dataset::{Dataset, UnseenPolicy};
use super::error::DataError;
use super::{prepared, text};

impl Dataset {
    /// Reads `folder/{train,valid,test}.txt` — or, from a prepared folder (one with
    /// `train.bin`, see [`prepare`](super::prepare)), the vocabularies and valid and test, the
    /// training triples left on disk to stream.
    pub fn load(folder: impl AsRef<Path>) -> Result<Self, DataError> {
        Self::load_with(folder, UnseenPolicy::Drop)
    }

    /// [`Dataset::load`], with valid and test triples whose entity or relation training never
    /// saw dropped or kept (`unseen`); a prepared folder keeps its training vocabulary, so it
    /// only drops them.
    pub fn load_with(folder: impl AsRef<Path>, unseen: UnseenPolicy) -> Result<Self, DataError> {
        let folder = folder.as_ref();
        if !folder.is_dir() {
            return Err(DataError::MissingFolder(folder.to_path_buf()));
        }
        if prepared::is_prepared(folder) {
            if unseen == UnseenPolicy::Count {
                return Err(DataError::UnseenInPrepared(folder.to_path_buf()));
            }
            return prepared::load(folder);
        }
        text::load(folder, unseen)
    }
}
