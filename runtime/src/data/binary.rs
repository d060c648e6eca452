//! The binary form of a split (`*.bin` in a prepared folder): a fixed header, then `u32` triples,
//! little-endian. Read in blocks with positioned reads, so that a split larger than memory
//! streams through a buffer of bounded size.
//!
//! Layout: bytes 0–7 the magic `RSHTRIPL`; then `u32` version (1), `u32` entities, `u32`
//! relations, `u32` reserved (0), `u64` triples, `u64` vocabulary digest
//! ([`vocabulary_digest`](super::vocabulary_digest)); from byte 40, `triples × (head, relation,
//! tail)`. Not memory-mapped: the mapped pages of a file count toward the process's resident
//! memory, and a training run promises a bound on that.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::DataError;
use super::triple::Triple;

/// The first eight bytes of every triples file.
pub const MAGIC: [u8; 8] = *b"RSHTRIPL";
/// The format version this rowshard reads and writes.
pub const VERSION: u32 = 1;
/// Bytes before the first triple.
pub const HEADER_BYTES: u64 = 40;
/// Bytes per triple.
const TRIPLE_BYTES: u64 = 12;
/// Triples per read when a whole file is scanned.
const SCAN_BLOCK: usize = 1 << 20;

/// What a triples file says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Entities of the vocabulary the ids refer to.
    pub entities: u32,
    /// Relations of that vocabulary.
    pub relations: u32,
    /// Triples in the file.
    pub count: u64,
    /// The vocabulary's digest.
    pub vocabulary: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_BYTES as usize] {
        let mut b = [0u8; HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.entities.to_le_bytes());
        b[16..20].copy_from_slice(&self.relations.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.vocabulary.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER_BYTES as usize], file: &Path) -> Result<Self, DataError> {
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let foreign = |reason: String| DataError::Foreign {
            file: file.to_path_buf(),
            reason,
        };
        if b[0..8] != MAGIC {
            return Err(foreign(
                "it does not start with RSHTRIPL (write one with `rowshard prepare`)".into(),
            ));
        }
        if u32_at(8) != VERSION {
            return Err(foreign(format!(
                "format version {}, this rowshard reads version {VERSION}",
                u32_at(8)
            )));
        }
        Ok(Header {
            entities: u32_at(12),
            relations: u32_at(16),
            count: u64_at(24),
            vocabulary: u64_at(32),
        })
    }
}

/// A triples file, checked at opening against its own header (magic, version, length); its
/// triples are read on demand.
#[derive(Clone, Debug)]
pub struct TripleFile {
    path: PathBuf,
    file: Arc<File>,
    header: Header,
}

impl PartialEq for TripleFile {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.header == other.header
    }
}

impl TripleFile {
    /// Opens `path`; refuses a file that is not a triples file or is shorter or longer than its
    /// header says.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DataError> {
        let path = path.as_ref().to_path_buf();
        let io = |error| DataError::Io {
            file: path.clone(),
            error,
        };
        if !path.is_file() {
            return Err(DataError::MissingFile(path));
        }
        let file = File::open(&path).map_err(io)?;
        let found = file.metadata().map_err(io)?.len();
        let mut head = [0u8; HEADER_BYTES as usize];
        if found < HEADER_BYTES {
            // Short files are foreign unless they are the start of a header.
            let mut some = vec![0u8; found as usize];
            file.read_exact_at(&mut some, 0).map_err(io)?;
            if !MAGIC.starts_with(&some[..some.len().min(8)]) || some.is_empty() {
                return Err(DataError::Foreign {
                    file: path,
                    reason: format!("{found} bytes, shorter than a header"),
                });
            }
            return Err(DataError::Truncated {
                file: path,
                expected: HEADER_BYTES,
                found,
            });
        }
        file.read_exact_at(&mut head, 0).map_err(io)?;
        let header = Header::decode(&head, &path)?;
        let expected = header
            .count
            .checked_mul(TRIPLE_BYTES)
            .and_then(|b| b.checked_add(HEADER_BYTES))
            .unwrap_or(u64::MAX);
        if found != expected {
            return Err(DataError::Truncated {
                file: path,
                expected,
                found,
            });
        }
        Ok(Self {
            path,
            file: Arc::new(file),
            header,
        })
    }

    /// Its header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Triples in it.
    pub fn len(&self) -> usize {
        self.header.count as usize
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.header.count == 0
    }

    /// Reads the triples at positions `range` into `out` (replacing its contents); refuses ids
    /// outside the header's vocabulary, naming the triple.
    pub fn read(&self, range: Range<usize>, out: &mut Vec<Triple>) -> Result<(), DataError> {
        assert!(
            range.start <= range.end && range.end <= self.len(),
            "{range:?} out of range"
        );
        out.clear();
        out.resize(range.len(), [0; 3]);
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out.as_mut_slice());
        self.file
            .read_exact_at(bytes, HEADER_BYTES + range.start as u64 * TRIPLE_BYTES)
            .map_err(|error| DataError::Io {
                file: self.path.clone(),
                error,
            })?;
        let (entities, relations) = (self.header.entities, self.header.relations);
        for (i, t) in out.iter_mut().enumerate() {
            *t = t.map(u32::from_le);
            if t[0] >= entities || t[2] >= entities || t[1] >= relations {
                return Err(DataError::BadTriple {
                    file: self.path.clone(),
                    number: (range.start + i) as u64 + 1,
                    reason: format!(
                        "({}, {}, {}) is outside the vocabulary of {entities} entities and \
                         {relations} relations",
                        t[0], t[1], t[2]
                    ),
                });
            }
        }
        Ok(())
    }

    /// Calls `f` with every triple, a block at a time (ids checked as by [`TripleFile::read`]).
    pub fn each_block(&self, mut f: impl FnMut(&[Triple])) -> Result<(), DataError> {
        let mut buf = Vec::new();
        for first in (0..self.len()).step_by(SCAN_BLOCK) {
            self.read(first..(first + SCAN_BLOCK).min(self.len()), &mut buf)?;
            f(&buf);
        }
        Ok(())
    }

    /// Reads every triple once, a block at a time, to check their ids.
    pub fn check(&self) -> Result<(), DataError> {
        self.each_block(|_| ())
    }

    /// Reads all its triples.
    pub fn read_all(&self) -> Result<Vec<Triple>, DataError> {
        let mut out = Vec::new();
        self.read(0..self.len(), &mut out)?;
        Ok(out)
    }
}

/// Writes a triples file: the header first with no count, the triples through a buffer, the
/// count at [`TripleWriter::finish`]; into a temporary file renamed into place at the end, so
/// that a failed or abandoned write leaves no file that looks whole.
pub struct TripleWriter {
    path: PathBuf,
    tmp: PathBuf,
    header: Header,
    out: BufWriter<File>,
}

impl TripleWriter {
    /// Starts `path` for ids of `entities` entities and `relations` relations of vocabulary
    /// digest `vocabulary`.
    pub fn create(
        path: &Path,
        entities: u32,
        relations: u32,
        vocabulary: u64,
    ) -> Result<Self, DataError> {
        let tmp = path.with_extension("bin.tmp");
        let header = Header {
            entities,
            relations,
            count: 0,
            vocabulary,
        };
        let file = File::create(&tmp).map_err(|error| DataError::Io {
            file: tmp.clone(),
            error,
        })?;
        let mut w = Self {
            path: path.to_path_buf(),
            tmp,
            header,
            out: BufWriter::with_capacity(1 << 20, file),
        };
        let bytes = w.header.encode();
        w.out.write_all(&bytes).map_err(|e| w.io(e))?;
        Ok(w)
    }

    fn io(&self, error: std::io::Error) -> DataError {
        DataError::Io {
            file: self.tmp.clone(),
            error,
        }
    }

    /// Appends a triple.
    pub fn push(&mut self, triple: Triple) -> Result<(), DataError> {
        let mut bytes = [0u8; TRIPLE_BYTES as usize];
        for (k, id) in triple.into_iter().enumerate() {
            bytes[4 * k..4 * k + 4].copy_from_slice(&id.to_le_bytes());
        }
        self.out.write_all(&bytes).map_err(|e| self.io(e))?;
        self.header.count += 1;
        Ok(())
    }

    /// Writes the count, syncs, and moves the file into place; returns the count.
    pub fn finish(mut self) -> Result<u64, DataError> {
        let bytes = self.header.encode();
        self.out
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.out.write_all(&bytes))
            .and_then(|_| self.out.flush())
            .and_then(|_| self.out.get_ref().sync_all())
            .map_err(|e| self.io(e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|error| DataError::Io {
            file: self.path.clone(),
            error,
        })?;
        Ok(self.header.count)
    }
}

/// Writes `triples` to `path` ([`TripleWriter`]); returns the count.
pub fn write_triples(
    path: &Path,
    entities: u32,
    relations: u32,
    vocabulary: u64,
    triples: impl IntoIterator<Item = Triple>,
) -> Result<u64, DataError> {
    let mut w = TripleWriter::create(path, entities, relations, vocabulary)?;
    for t in triples {
        w.push(t)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rowshard-bin-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn round_trips_and_reads_blocks() {
        let dir = temp("round");
        let path = dir.join("train.bin");
        let triples: Vec<Triple> = (0..1000).map(|i| [i % 7, i % 3, (i * 5) % 7]).collect();
        assert_eq!(
            write_triples(&path, 7, 3, 42, triples.clone()).unwrap(),
            1000
        );
        let f = TripleFile::open(&path).unwrap();
        assert_eq!(
            f.header(),
            Header {
                entities: 7,
                relations: 3,
                count: 1000,
                vocabulary: 42
            }
        );
        assert_eq!(f.read_all().unwrap(), triples);
        let mut block = Vec::new();
        f.read(990..1000, &mut block).unwrap();
        assert_eq!(block, triples[990..]);
        f.check().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_truncated_foreign_and_out_of_range_files() {
        let dir = temp("bad");
        let path = dir.join("train.bin");
        write_triples(&path, 4, 2, 1, [[0, 1, 3], [3, 0, 2]]).unwrap();
        let whole = std::fs::read(&path).unwrap();

        std::fs::write(&path, &whole[..whole.len() - 5]).unwrap();
        let e = TripleFile::open(&path).unwrap_err().to_string();
        assert!(e.contains("train.bin") && e.contains("truncated"), "{e}");
        std::fs::write(&path, &whole[..20]).unwrap();
        let e = TripleFile::open(&path).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");

        std::fs::write(
            &path,
            b"head\trel\ttail\nmore text that is long enough ...\n",
        )
        .unwrap();
        let e = TripleFile::open(&path).unwrap_err().to_string();
        assert!(e.contains("train.bin: not a rowshard triples file"), "{e}");
        let mut newer = whole.clone();
        newer[8] = 9;
        std::fs::write(&path, &newer).unwrap();
        let e = TripleFile::open(&path).unwrap_err().to_string();
        assert!(e.contains("format version 9"), "{e}");

        let mut bad = whole.clone();
        bad[HEADER_BYTES as usize + 12 + 8] = 4; // the second triple's tail: entity 4 of 4
        std::fs::write(&path, &bad).unwrap();
        let f = TripleFile::open(&path).unwrap();
        let e = f.check().unwrap_err().to_string();
        assert!(
            e.contains("train.bin: triple 2: (3, 0, 4) is outside the vocabulary"),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
