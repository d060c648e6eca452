//! Knowledge-graph data: the common triples format (`head<TAB>relation<TAB>tail` per line, in
//! `train.txt`, `valid.txt` and `test.txt` of a folder), read into id triples over vocabularies
//! built from the training split.
//!
//! Entities and relations are numbered in sorted order of their names (as dicee does), so the
//! numbering does not depend on line order. Valid and test triples whose entity or relation never
//! occurs in training cannot be scored by a model trained on that split: they are left out and
//! counted ([`Dataset::unseen`]), the usual choice (PyKEEN, LibKGE).

mod load;

pub use load::{Dataset, Split, Unseen};

use std::path::PathBuf;

/// A triple of ids: head entity, relation, tail entity.
pub type Triple = [u32; 3];

/// What went wrong reading a data set. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The folder does not exist or is not a folder.
    #[error(
        "data set folder {0} does not exist (expected train.txt, valid.txt and test.txt in it)"
    )]
    MissingFolder(PathBuf),
    /// A split's file is missing.
    #[error("{0} is missing: a data set folder holds train.txt, valid.txt and test.txt")]
    MissingFile(PathBuf),
    /// A line that is not `head<TAB>relation<TAB>tail`.
    #[error("{file}:{line}: {reason}")]
    Malformed {
        /// The file.
        file: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The training split has no triples.
    #[error("{0} has no triples")]
    Empty(PathBuf),
    /// Reading failed.
    #[error("{file}: {error}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}
