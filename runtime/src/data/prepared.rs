//! Prepared folders: a data set in the form that training streams. `entities.txt` and
//! `relations.txt` hold the vocabularies, one name per line in sorted order (line n names id
//! n − 1, the numbering [`Dataset::load`] gives the text form), and `train.bin`, `valid.bin` and
//! `test.bin` the splits ([`binary`](super::binary)). Valid and test are read into memory; the
//! training triples stay on disk and are read a block at a time.
//!
//! [`prepare`] writes one from a triples folder in two passes over `train.txt` (names, then
//! ids), never holding a split as text: a graph whose text does not fit in memory can be
//! prepared as long as its vocabularies do.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use super::binary::{TripleFile, TripleWriter};
use super::dataset::{Dataset, Split, Unseen, UnseenPolicy, vocabulary_digest};
use super::error::DataError;
use super::text::each_line;

/// The entity vocabulary's file.
pub const ENTITIES: &str = "entities.txt";
/// The relation vocabulary's file.
pub const RELATIONS: &str = "relations.txt";

/// The binary file of `split`.
pub fn bin_name(split: Split) -> &'static str {
    match split {
        Split::Train => "train.bin",
        Split::Valid => "valid.bin",
        Split::Test => "test.bin",
    }
}

/// Whether `folder` is a prepared folder (it has `train.bin`).
pub fn is_prepared(folder: &Path) -> bool {
    folder.join(bin_name(Split::Train)).is_file()
}

/// Reads a prepared folder: the vocabularies, valid and test; every file checked against the
/// vocabularies (counts and digest) and every id against the vocabulary's size, training
/// triples included (one pass), before anything is trained.
pub fn load(folder: &Path) -> Result<Dataset, DataError> {
    let entities = read_names(&folder.join(ENTITIES))?;
    let relations = read_names(&folder.join(RELATIONS))?;
    let digest = vocabulary_digest(&entities, &relations);
    let open = |split: Split| -> Result<TripleFile, DataError> {
        let file = TripleFile::open(folder.join(bin_name(split)))?;
        let h = file.header();
        if h.entities as usize != entities.len()
            || h.relations as usize != relations.len()
            || h.vocabulary != digest
        {
            return Err(DataError::Foreign {
                file: file.path().to_path_buf(),
                reason: format!(
                    "written for {} entities and {} relations (vocabulary {:016x}); {ENTITIES} \
                     and {RELATIONS} beside it list {} and {} (vocabulary {digest:016x})",
                    h.entities,
                    h.relations,
                    h.vocabulary,
                    entities.len(),
                    relations.len()
                ),
            });
        }
        file.check()?;
        Ok(file)
    };
    let train = open(Split::Train)?;
    if train.is_empty() {
        return Err(DataError::Empty(train.path().to_path_buf()));
    }
    let valid = open(Split::Valid)?.read_all()?;
    let test = open(Split::Test)?.read_all()?;
    Ok(Dataset {
        folder: folder.to_path_buf(),
        entities,
        relations,
        train: Vec::new(),
        stream: Some(train),
        valid,
        test,
        unseen: Unseen::default(),
        unseen_policy: UnseenPolicy::Drop,
    })
}

/// Reads a vocabulary file: one name per line, sorted and distinct, none empty or with a tab.
fn read_names(path: &Path) -> Result<Vec<String>, DataError> {
    if !path.is_file() {
        return Err(DataError::MissingFile(path.to_path_buf()));
    }
    let io = |error| DataError::Io {
        file: path.to_path_buf(),
        error,
    };
    let reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut names: Vec<String> = Vec::new();
    for (i, line) in reader.split(b'\n').enumerate() {
        let malformed = |reason: String| DataError::Malformed {
            file: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        let line = String::from_utf8(line.map_err(io)?)
            .map_err(|e| malformed(format!("not UTF-8 text ({e})")))?;
        let name = line.strip_suffix('\r').unwrap_or(&line);
        if name.trim().is_empty() || name.contains('\t') || name.trim() != name {
            return Err(malformed(format!(
                "`{name}` is not a name (empty, a tab, or spaces around it)"
            )));
        }
        if let Some(last) = names.last()
            && last.as_str() >= name
        {
            return Err(malformed(format!(
                "names are sorted and distinct (the numbering is their order), and `{name}` \
                 comes after `{last}`"
            )));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// Writes a vocabulary file: `names`, one per line (sorted and distinct, as the reader checks).
pub fn write_names<N: AsRef<str>>(
    path: &Path,
    names: impl IntoIterator<Item = N>,
) -> Result<(), DataError> {
    let io = |error| DataError::Io {
        file: path.to_path_buf(),
        error,
    };
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
    for name in names {
        w.write_all(name.as_ref().as_bytes()).map_err(io)?;
        w.write_all(b"\n").map_err(io)?;
    }
    w.flush().map_err(io)
}

/// What [`prepare`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// Entities in the vocabulary.
    pub entities: usize,
    /// Relations in the vocabulary.
    pub relations: usize,
    /// Training triples.
    pub train: u64,
    /// Validation triples kept.
    pub valid: u64,
    /// Test triples kept.
    pub test: u64,
    /// Valid and test triples left out for entities or relations unseen in training.
    pub unseen: Unseen,
}

/// Writes the prepared form of the triples folder `source` into `out` (created if needed):
/// the same vocabularies, numbering and splits as [`Dataset::load`] of `source`, valid and
/// test triples with an entity or relation unseen in training left out and counted.
pub fn prepare(source: &Path, out: &Path) -> Result<Prepared, DataError> {
    if !source.is_dir() {
        return Err(DataError::MissingFolder(source.to_path_buf()));
    }
    let train_txt = source.join(Split::Train.file_name());
    let (mut entity_set, mut relation_set) = (BTreeSet::<String>::new(), BTreeSet::<String>::new());
    each_line(&train_txt, |[h, r, t]| {
        for e in [h, t] {
            if !entity_set.contains(e) {
                entity_set.insert(e.to_string());
            }
        }
        if !relation_set.contains(r) {
            relation_set.insert(r.to_string());
        }
        Ok(())
    })?;
    if entity_set.is_empty() {
        return Err(DataError::Empty(train_txt));
    }
    for split in [Split::Valid, Split::Test] {
        let file = source.join(split.file_name());
        if !file.is_file() {
            return Err(DataError::MissingFile(file));
        }
    }
    let entities: Vec<String> = entity_set.into_iter().collect();
    let relations: Vec<String> = relation_set.into_iter().collect();
    let entity_ids: HashMap<&str, u32> = entities
        .iter()
        .enumerate()
        .map(|(i, e)| (e.as_str(), i as u32))
        .collect();
    let relation_ids: HashMap<&str, u32> = relations
        .iter()
        .enumerate()
        .map(|(i, r)| (r.as_str(), i as u32))
        .collect();
    std::fs::create_dir_all(out).map_err(|error| DataError::Io {
        file: out.to_path_buf(),
        error,
    })?;
    write_names(&out.join(ENTITIES), &entities)?;
    write_names(&out.join(RELATIONS), &relations)?;
    let digest = vocabulary_digest(&entities, &relations);
    let mut counts = [0u64; 3];
    let mut unseen = [0usize; 3];
    for (k, split) in [Split::Train, Split::Valid, Split::Test]
        .into_iter()
        .enumerate()
    {
        let mut w = TripleWriter::create(
            &out.join(bin_name(split)),
            entities.len() as u32,
            relations.len() as u32,
            digest,
        )?;
        each_line(&source.join(split.file_name()), |[h, r, t]| {
            match (entity_ids.get(h), relation_ids.get(r), entity_ids.get(t)) {
                (Some(&h), Some(&r), Some(&t)) => w.push([h, r, t]),
                _ => {
                    unseen[k] += 1;
                    Ok(())
                }
            }
        })?;
        counts[k] = w.finish()?;
    }
    Ok(Prepared {
        entities: entities.len(),
        relations: relations.len(),
        train: counts[0],
        valid: counts[1],
        test: counts[2],
        unseen: Unseen {
            valid: unseen[1],
            test: unseen[2],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rowshard-prep-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_prepared_folder_loads_as_the_text_one_does() {
        let src = temp("src");
        std::fs::write(src.join("train.txt"), "b\tr2\ta\na\tr1\tc\nc\tr1\tb\n").unwrap();
        std::fs::write(src.join("valid.txt"), "a\tr2\tb\nz\tr1\ta\n").unwrap();
        std::fs::write(src.join("test.txt"), "c\tr9\ta\nb\tr1\tc\n").unwrap();
        let out = src.join("prepared");
        let p = prepare(&src, &out).unwrap();
        assert_eq!(
            (p.entities, p.relations, p.train, p.valid, p.test),
            (3, 2, 3, 1, 1)
        );
        assert_eq!(p.unseen, Unseen { valid: 1, test: 1 });
        let text = Dataset::load(&src).unwrap();
        let bin = Dataset::load(&out).unwrap();
        assert_eq!(bin.entities, text.entities);
        assert_eq!(bin.relations, text.relations);
        assert_eq!((&bin.valid, &bin.test), (&text.valid, &text.test));
        assert_eq!(bin.vocabulary_digest(), text.vocabulary_digest());
        assert!(bin.train.is_empty());
        assert_eq!(bin.train_len(), 3);
        let mut block = Vec::new();
        bin.read_train(0..3, &mut block).unwrap();
        assert_eq!(block, text.train);

        // Files of another vocabulary, and vocabularies out of order, are refused by name.
        std::fs::write(out.join(ENTITIES), "a\nb\nd\n").unwrap();
        let e = Dataset::load(&out).unwrap_err().to_string();
        assert!(
            e.contains("train.bin: not a rowshard triples file of this data set"),
            "{e}"
        );
        std::fs::write(out.join(ENTITIES), "a\nc\nb\n").unwrap();
        let e = Dataset::load(&out).unwrap_err().to_string();
        assert!(
            e.contains("entities.txt:3: names are sorted and distinct"),
            "{e}"
        );
        std::fs::remove_dir_all(src).unwrap();
    }
}
