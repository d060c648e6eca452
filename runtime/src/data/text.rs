//! The text form of a data set: `train.txt`, `valid.txt` and `test.txt`, one
//! `head<TAB>relation<TAB>tail` triple per line.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::dataset::{Dataset, Split, Unseen, UnseenPolicy};
use super::error::DataError;
use super::triple::Triple;

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

/// Reads `folder/{train,valid,test}.txt`: the vocabularies in sorted order — of the training
/// split, valid and test triples with an entity or relation training never saw left out
/// ([`UnseenPolicy::Drop`]), or of every split, every triple kept ([`UnseenPolicy::Count`]); the
/// triples with an unseen entity or relation are counted either way.
pub(super) fn load(folder: &Path, unseen: UnseenPolicy) -> Result<Dataset, DataError> {
    let train = read_split(folder, Split::Train)?;
    let valid = read_split(folder, Split::Valid)?;
    let test = read_split(folder, Split::Test)?;
    if train.is_empty() {
        return Err(DataError::Empty(folder.join(Split::Train.file_name())));
    }
    let names = |splits: &[&[Named]]| {
        let (mut entities, mut relations) = (BTreeSet::new(), BTreeSet::new());
        for (h, r, t) in splits.iter().flat_map(|split| split.iter()) {
            entities.extend([h.clone(), t.clone()]);
            relations.insert(r.clone());
        }
        (entities, relations)
    };
    let (seen_entities, seen_relations) = names(&[&train]);
    let (entity_set, relation_set) = match unseen {
        UnseenPolicy::Drop => (seen_entities.clone(), seen_relations.clone()),
        UnseenPolicy::Count => names(&[&train, &valid, &test]),
    };
    let seen = |(h, r, t): &Named| {
        seen_entities.contains(h) && seen_entities.contains(t) && seen_relations.contains(r)
    };
    let count_unseen = |split: &[Named]| split.iter().filter(|t| !seen(t)).count();
    let unseen_counts = Unseen {
        valid: count_unseen(&valid),
        test: count_unseen(&test),
    };
    let entities: BTreeMap<&str, u32> = entity_set
        .iter()
        .enumerate()
        .map(|(i, e)| (e.as_str(), i as u32))
        .collect();
    let relations: BTreeMap<&str, u32> = relation_set
        .iter()
        .enumerate()
        .map(|(i, r)| (r.as_str(), i as u32))
        .collect();
    let ids = |(h, r, t): &Named| -> Option<Triple> {
        Some([
            *entities.get(h.as_str())?,
            *relations.get(r.as_str())?,
            *entities.get(t.as_str())?,
        ])
    };
    let known = |split: &[Named]| -> Vec<Triple> { split.iter().filter_map(ids).collect() };
    Ok(Dataset {
        folder: folder.to_path_buf(),
        stream: None,
        train: known(&train),
        valid: known(&valid),
        test: known(&test),
        unseen: unseen_counts,
        unseen_policy: unseen,
        entities: entity_set.into_iter().collect(),
        relations: relation_set.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
        // Kept: every split's names get ids; the unseen triples are ranked like the others.
        let d = Dataset::load_with(&dir, UnseenPolicy::Count).unwrap();
        assert_eq!(d.entities, ["a", "b", "c", "z"]);
        assert_eq!(d.relations, ["r1", "r2", "r9"]);
        assert_eq!(d.train, vec![[1, 1, 0], [0, 0, 2]]);
        assert_eq!(d.valid, vec![[0, 1, 1], [3, 0, 0]]);
        assert_eq!(d.test, vec![[2, 2, 0]]);
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
