//! Reading a triples folder into a [`Dataset`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::binary::TripleFile;
use super::{DataError, Triple};

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

/// Valid or test triples left out because training never saw one of their entities or
/// relations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Valid and test triples left out.
    pub unseen: Unseen,
}

type Named = (String, String, String);

/// Calls `f` with the fields of every triple line of `file` (tabs between head, relation and
/// tail; blank lines skipped), one line at a time: a split is never held as text. Lines are
/// split as bytes, so a line that is not UTF-8 is reported with its number.
pub(super) fn each_line(
    file: &Path,
    mut f: impl FnMut([&str; 3]) -> Result<(), DataError>,
) -> Result<(), DataError> {
    if !file.is_file() {
        return Err(DataError::MissingFile(file.to_path_buf()));
    }
    let io = |error| DataError::Io {
        file: file.to_path_buf(),
        error,
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(file).map_err(io)?);
    let mut buf = Vec::new();
    for i in 0.. {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        let malformed = |reason: String| DataError::Malformed {
            file: file.to_path_buf(),
            line: i + 1,
            reason,
        };
        let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = std::str::from_utf8(bytes).map_err(|e| {
            malformed(format!(
                "not UTF-8 text (invalid byte at column {})",
                e.valid_up_to() + 1
            ))
        })?;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != 3 {
            return Err(malformed(format!(
                "expected head<TAB>relation<TAB>tail, found {} tab-separated field{}",
                fields.len(),
                if fields.len() == 1 { "" } else { "s" }
            )));
        }
        if let Some(k) = fields.iter().position(|f| f.trim().is_empty()) {
            let which = ["head", "relation", "tail"][k];
            return Err(malformed(format!("the {which} is empty")));
        }
        f([fields[0].trim(), fields[1].trim(), fields[2].trim()])?;
    }
    Ok(())
}

fn read_split(folder: &Path, split: Split) -> Result<Vec<Named>, DataError> {
    let mut out = Vec::new();
    each_line(&folder.join(split.file_name()), |[h, r, t]| {
        out.push((h.to_string(), r.to_string(), t.to_string()));
        Ok(())
    })?;
    Ok(out)
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
    /// Reads `folder/{train,valid,test}.txt` — or, from a prepared folder (one with
    /// `train.bin`, see [`prepare`](super::prepare)), the vocabularies and valid and test, the
    /// training triples left on disk to stream.
    pub fn load(folder: impl AsRef<Path>) -> Result<Self, DataError> {
        let folder = folder.as_ref();
        if !folder.is_dir() {
            return Err(DataError::MissingFolder(folder.to_path_buf()));
        }
        if super::prepared::is_prepared(folder) {
            return super::prepared::load(folder);
        }
        let train = read_split(folder, Split::Train)?;
        let valid = read_split(folder, Split::Valid)?;
        let test = read_split(folder, Split::Test)?;
        if train.is_empty() {
            return Err(DataError::Empty(folder.join(Split::Train.file_name())));
        }
        let entity_set: BTreeSet<&str> = train
            .iter()
            .flat_map(|(h, _, t)| [h.as_str(), t.as_str()])
            .collect();
        let relation_set: BTreeSet<&str> = train.iter().map(|(_, r, _)| r.as_str()).collect();
        let entities: BTreeMap<&str, u32> = entity_set
            .iter()
            .enumerate()
            .map(|(i, &e)| (e, i as u32))
            .collect();
        let relations: BTreeMap<&str, u32> = relation_set
            .iter()
            .enumerate()
            .map(|(i, &r)| (r, i as u32))
            .collect();
        let ids = |(h, r, t): &Named| -> Option<Triple> {
            Some([
                *entities.get(h.as_str())?,
                *relations.get(r.as_str())?,
                *entities.get(t.as_str())?,
            ])
        };
        let known = |split: &[Named]| -> (Vec<Triple>, usize) {
            let kept: Vec<Triple> = split.iter().filter_map(ids).collect();
            let dropped = split.len() - kept.len();
            (kept, dropped)
        };
        let (valid_ids, valid_unseen) = known(&valid);
        let (test_ids, test_unseen) = known(&test);
        Ok(Dataset {
            folder: folder.to_path_buf(),
            stream: None,
            train: train
                .iter()
                .map(|t| ids(t).expect("built from train"))
                .collect(),
            valid: valid_ids,
            test: test_ids,
            unseen: Unseen {
                valid: valid_unseen,
                test: test_unseen,
            },
            entities: entity_set.into_iter().map(String::from).collect(),
            relations: relation_set.into_iter().map(String::from).collect(),
        })
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "rowshard-data-{}-{}",
            std::process::id(),
            files.len() * 31 + files.iter().map(|f| f.1.len()).sum::<usize>()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn reads_sorted_vocabularies_and_leaves_out_unseen() {
        let dir = folder(&[
            ("train.txt", "b\tr2\ta\na\tr1\tc\n"),
            ("valid.txt", "a\tr2\tb\nz\tr1\ta\n"),
            ("test.txt", "c\tr9\ta\n\n"),
        ]);
        let d = Dataset::load(&dir).unwrap();
        assert_eq!(d.entities, ["a", "b", "c"]);
        assert_eq!(d.relations, ["r1", "r2"]);
        assert_eq!(d.train, vec![[1, 1, 0], [0, 0, 2]]);
        assert_eq!(d.valid, vec![[0, 1, 1]]);
        assert!(d.test.is_empty());
        assert_eq!(d.unseen, Unseen { valid: 1, test: 1 });
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn malformed_lines_name_the_file_and_line() {
        let dir = folder(&[
            ("train.txt", "a\tr\tb\na r b\n"),
            ("valid.txt", ""),
            ("test.txt", ""),
        ]);
        let e = Dataset::load(&dir).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "train.txt:2: expected head<TAB>relation<TAB>tail, found 1 tab-separated field"
            ),
            "{e}"
        );
        std::fs::write(dir.join("train.txt"), "a\t\tb\n").unwrap();
        let e = Dataset::load(&dir).unwrap_err().to_string();
        assert!(e.ends_with("train.txt:1: the relation is empty"), "{e}");
        std::fs::write(dir.join("train.txt"), b"a\tr\tb\nc\tr\t\xffd\n").unwrap();
        let e = Dataset::load(&dir).unwrap_err().to_string();
        assert!(
            e.ends_with("train.txt:2: not UTF-8 text (invalid byte at column 5)"),
            "{e}"
        );
        std::fs::write(dir.join("train.txt"), "a\tr\tb\n").unwrap();
        std::fs::remove_file(dir.join("test.txt")).unwrap();
        let e = Dataset::load(&dir).unwrap_err().to_string();
        assert!(e.contains("test.txt is missing"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = Dataset::load(&dir).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}
