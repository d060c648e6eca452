//! What goes wrong reading a data set.

use std::path::PathBuf;

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
    /// A file that is not a triples file of this rowshard, or not of this data set.
    #[error("{file}: not a rowshard triples file of this data set: {reason}")]
    Foreign {
        /// The file.
        file: PathBuf,
        /// What gave it away.
        reason: String,
    },
    /// A triples file shorter or longer than its header says.
    #[error("{file}: truncated or damaged: its header promises {expected} bytes, it has {found}")]
    Truncated {
        /// The file.
        file: PathBuf,
        /// Bytes the header promises.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// A triple of a triples file that cannot be right.
    #[error("{file}: triple {number}: {reason}")]
    BadTriple {
        /// The file.
        file: PathBuf,
        /// The triple's 1-based number in the file.
        number: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A prepared folder asked to keep triples with unseen entities.
    #[error(
        "{0} is a prepared folder: its vocabulary is the training split's, so it can only drop \
         valid and test triples with unseen entities (--unseen drop); use the text folder"
    )]
    UnseenInPrepared(PathBuf),
    /// Reading failed.
    #[error("{file}: {error}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}
