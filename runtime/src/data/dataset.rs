//! A knowledge graph in memory: its vocabularies and its splits as id triples (training triples
//! possibly left on disk to stream, see [`prepared`](super::prepared)).

use std::ops::Range;
use std::path::PathBuf;

use super::binary::TripleFile;
use super::error::DataError;
use super::triple::Triple;

/// The three splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// Training triples.
    Train,
    /// Validation triples.
    Valid,
    /// Test triples.
    Test,
}

impl Split {
    /// The split's file name.
    pub fn file_name(self) -> &'static str {
        match self {
            Split::Train => "train.txt",
            Split::Valid => "valid.txt",
            Split::Test => "test.txt",
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Valid => "valid",
            Split::Test => "test",
        }
    }
}

/// Valid or test triples with an entity or relation training never saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Unseen {
    /// In `valid.txt`.
    pub valid: usize,
    /// In `test.txt`.
    pub test: usize,
}

/// A knowledge graph with its vocabularies and splits.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Where it was read from.
    pub folder: PathBuf,
    /// Entity names, by id (sorted).
    pub entities: Vec<String>,
    /// Relation names, by id (sorted).
    pub relations: Vec<String>,
    /// Training triples, in file order (none when they stream from [`Dataset::stream`]).
    pub train: Vec<Triple>,
    /// A prepared folder's training triples, read a block at a time ([`Dataset::read_train`]).
    pub stream: Option<TripleFile>,
    /// Validation triples over known entities and relations.
    pub valid: Vec<Triple>,
    /// Test triples over known entities and relations.
    pub test: Vec<Triple>,
    /// Valid and test triples with an entity or relation unseen in training: left out, or
    /// kept ([`Dataset::unseen_policy`]).
    pub unseen: Unseen,
    /// What was done with them.
    pub unseen_policy: UnseenPolicy,
}

/// A digest of a data set's vocabularies (entity names, then relation names), to tell
/// checkpoints and prepared files of another data set apart (64-bit FNV-1a).
pub fn vocabulary_digest<E: AsRef<str>, R: AsRef<str>>(
    entities: impl IntoIterator<Item = E>,
    relations: impl IntoIterator<Item = R>,
) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut add = |name: &str| {
        for b in name.bytes().chain([0]) {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    };
    entities.into_iter().for_each(|e| add(e.as_ref()));
    add("");
    relations.into_iter().for_each(|r| add(r.as_ref()));
    h
}

impl Dataset {
    /// The triples of `split`.
    pub fn split(&self, split: Split) -> &[Triple] {
        match split {
            Split::Train => &self.train,
            Split::Valid => &self.valid,
            Split::Test => &self.test,
        }
    }

    /// A digest of the vocabularies, to tell checkpoints of another data set apart
    /// ([`vocabulary_digest`]).
    pub fn vocabulary_digest(&self) -> u64 {
        vocabulary_digest(&self.entities, &self.relations)
    }

    /// Training triples: in memory, or in the prepared folder's `train.bin`.
    pub fn train_len(&self) -> usize {
        match &self.stream {
            Some(file) => file.len(),
            None => self.train.len(),
        }
    }

    /// Calls `f` with the training triples: all at once from memory, or a block at a time from
    /// `train.bin`.
    pub fn each_train_block(&self, mut f: impl FnMut(&[Triple])) -> Result<(), DataError> {
        match &self.stream {
            Some(file) => file.each_block(f),
            None => {
                f(&self.train);
                Ok(())
            }
        }
    }

    /// The training triples at positions `range`, into `out` (replacing its contents): copied
    /// from memory, or read from `train.bin`.
    pub fn read_train(&self, range: Range<usize>, out: &mut Vec<Triple>) -> Result<(), DataError> {
        match &self.stream {
            Some(file) => file.read(range, out),
            None => {
                out.clear();
                out.extend_from_slice(&self.train[range]);
                Ok(())
            }
        }
    }
}

/// What evaluation does with valid and test triples whose entity or relation never occurs in
/// training.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnseenPolicy {
    /// Leave them out and count them (PyKEEN's choice; [`Dataset::unseen`]).
    #[default]
    Drop,
    /// Keep them: every entity and relation of every split gets a row, the unseen ones never
    /// trained, and such a triple is ranked like any other (LibKGE's and the N3 paper's code's
    /// protocol, which published figures on graphs such as WN18RR count).
    Count,
}

impl UnseenPolicy {
    /// As written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            UnseenPolicy::Drop => "drop",
            UnseenPolicy::Count => "count",
        }
    }
}
