//! The read-write cache (WholeMemory's `device_cached_host_embedding`, dicee's
//! `adam_device="cpu"`): a shard whose weights and optimizer states live in host memory, with its
//! hot rows and their states in cache lines on the device. The fused kernels update lines in
//! place and mark them modified; a modified line is written back to host memory when it is
//! evicted, and by [`WriteBackCache::write_back_all`].
//!
//! A step's rows are made resident in rounds: each round pins the lines it uses, so a batch with
//! more rows than one set has ways is served in several rounds, never by evicting a row the
//! round still needs.

use rowshard_kernels::{DType, LocalTable, Slot, TableConfig, slot_layout};

use super::CacheStats;
use super::directory::Directory;
use crate::error::ShardError;

/// One buffer of the shard (weights, or one optimizer state) in host memory.
#[derive(Debug)]
struct HostSlot {
    slot: Slot<'static>,
    dtype: DType,
    row_bytes: usize,
    bytes: Vec<u8>,
}

impl HostSlot {
    fn row(&self, row: u32) -> &[u8] {
        &self.bytes[row as usize * self.row_bytes..][..self.row_bytes]
    }

    fn row_mut(&mut self, row: u32) -> &mut [u8] {
        &mut self.bytes[row as usize * self.row_bytes..][..self.row_bytes]
    }
}

/// `n` zero bytes, written: `vec![0; n]` maps the shared zero page, and every first write to
/// one of its pages then faults in the middle of a step.
#[allow(clippy::slow_vector_initialization)]
fn written_zeros(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    v.resize(n, 0);
    v
}

/// The rows of one round: `positions` index the caller's unique rows, `lines` are their lines.
#[derive(Debug, Default)]
pub struct Round {
    /// Indices into the rows passed to [`WriteBackCache::next_round`].
    pub positions: Vec<usize>,
    /// The line holding each of those rows, on the device table.
    pub lines: Vec<u32>,
}

/// A shard in host memory behind a device table of cache lines.
#[derive(Debug)]
pub struct WriteBackCache {
    directory: Directory,
    store: Vec<HostSlot>,
    stats: CacheStats,
    /// Lines the current round uses (indexed by line; cleared after each round).
    pinned: Vec<bool>,
    /// Rows gathered through the cache, before they go to the caller (kept between steps).
    pub(crate) gathered: Vec<u8>,
    fail_next_write_back: bool,
}

impl WriteBackCache {
    /// A host store of `rows` rows with initial weights `init` (`rows × dim`) and zeroed states,
    /// cached in `round(ratio × rows)` lines (rounded up to whole sets): see
    /// [`WriteBackCache::lines`].
    pub fn new(
        config: &TableConfig,
        rows: usize,
        ratio: f64,
        init: &[f32],
    ) -> Result<Self, ShardError> {
        let store: Vec<HostSlot> = slot_layout(config)
            .into_iter()
            .map(|(slot, dtype, width)| HostSlot {
                slot,
                dtype,
                row_bytes: width * dtype.size(),
                bytes: match slot {
                    Slot::Weights => dtype.encode(init),
                    Slot::State(_) => written_zeros(rows * width * dtype.size()),
                },
            })
            .collect();
        if let Some(s) = store.iter().find(|s| !s.row_bytes.is_multiple_of(4)) {
            return Err(ShardError::InvalidCache(format!(
                "the read-write cache moves rows as 32-bit words, and {:?} rows are {} bytes \
                 (use an even dim with 16-bit dtypes)",
                s.slot, s.row_bytes
            )));
        }
        let directory = Directory::new(rows, ratio);
        Ok(Self {
            pinned: vec![false; directory.capacity()],
            directory,
            store,
            stats: CacheStats::default(),
            gathered: Vec::new(),
            fail_next_write_back: false,
        })
    }

    /// Lines: the rows of the device table the caller creates for the cache.
    pub fn lines(&self) -> usize {
        self.directory.capacity()
    }

    /// What the cache did so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Makes resident as many of the rows `rows[p]`, `p` in `pending`, as fit at once (the first
    /// always does), removes them from `pending` and returns them with their lines; `None` once
    /// `pending` is empty. `rows` must not repeat a row. Writes back the modified lines it
    /// evicts first, then loads the missing rows into `lines`. A failure leaves the table as it
    /// was: the host store and the valid lines hold the same rows as before.
    pub fn next_round(
        &mut self,
        lines: &LocalTable,
        rows: &[u32],
        pending: &mut Vec<usize>,
    ) -> Result<Option<Round>, ShardError> {
        if pending.is_empty() {
            return Ok(None);
        }
        let mut round = Round::default();
        let mut deferred = Vec::new();
        // (row, line, what the line held) of every line this round fills.
        let mut loads = Vec::new();
        let mut write_backs = Vec::new();
        let mut stats = self.stats;
        for &p in pending.iter() {
            let row = rows[p];
            let slot = match self.directory.find(row) {
                Some(slot) => {
                    self.directory.touch(slot);
                    stats.hits += 1;
                    slot
                }
                None => match self.directory.insert_avoiding(row, &self.pinned) {
                    Some((slot, evicted)) => {
                        if let Some(evicted) = evicted {
                            stats.evictions += 1;
                            if evicted.modified {
                                write_backs.push((evicted.key, slot as u32));
                            }
                        }
                        stats.misses += 1;
                        loads.push((row, slot as u32, evicted));
                        slot
                    }
                    None => {
                        deferred.push(p);
                        continue;
                    }
                },
            };
            self.pinned[slot] = true;
            round.positions.push(p);
            round.lines.push(slot as u32);
        }
        for &line in &round.lines {
            self.pinned[line as usize] = false;
        }
        if let Err(e) = self.write_back(lines, &write_backs) {
            // Nothing was copied: put the evicted lines back (their data never left).
            for &(row, line, evicted) in loads.iter().rev() {
                self.directory.restore(line as usize, row, evicted);
            }
            return Err(e);
        }
        stats.write_backs += write_backs.len() as u64;
        let load_lines: Vec<u32> = loads.iter().map(|&(_, line, _)| line).collect();
        for slot in &self.store {
            let mut bytes = lines.uploads().take(loads.len() * slot.row_bytes);
            for &(row, _, _) in &loads {
                bytes.extend_from_slice(slot.row(row));
            }
            let written = lines.write_rows(slot.slot, &load_lines, &bytes);
            lines.uploads().give(bytes);
            if let Err(e) = written {
                // The evicted lines are written back; the lines being loaded hold nothing valid.
                for &(row, _, _) in &loads {
                    self.directory.invalidate(row);
                }
                return Err(e.into());
            }
        }
        self.stats = stats;
        *pending = deferred;
        Ok(Some(round))
    }

    /// Marks `lines` modified (the fused kernel just updated them).
    pub fn mark_modified(&mut self, lines: &[u32]) {
        for &line in lines {
            self.directory.mark_modified(line as usize);
        }
    }

    /// Copies the lines `(row, line)` from the device into the host store. All lines are read
    /// before the store changes, so a failure changes nothing.
    fn write_back(&mut self, lines: &LocalTable, which: &[(u32, u32)]) -> Result<(), ShardError> {
        if which.is_empty() {
            return Ok(());
        }
        let failed = |e: String| {
            ShardError::WriteBack(format!(
                "writing back {} modified lines failed: {e}; the table is unchanged",
                which.len()
            ))
        };
        if std::mem::take(&mut self.fail_next_write_back) {
            return Err(failed("injected failure".into()));
        }
        let line_ids: Vec<u32> = which.iter().map(|&(_, line)| line).collect();
        let read = self
            .store
            .iter()
            .map(|s| lines.read_rows(s.slot, &line_ids))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed(e.to_string()))?;
        for (slot, bytes) in self.store.iter_mut().zip(read) {
            for (k, &(row, _)) in which.iter().enumerate() {
                let n = slot.row_bytes;
                slot.row_mut(row).copy_from_slice(&bytes[k * n..][..n]);
            }
        }
        Ok(())
    }

    /// Writes every modified line back to host memory; the lines stay valid (and clean).
    pub fn write_back_all(&mut self, lines: &LocalTable) -> Result<(), ShardError> {
        let modified: Vec<(u32, u32)> = self
            .directory
            .modified_lines()
            .into_iter()
            .map(|(slot, row)| (row, slot as u32))
            .collect();
        self.write_back(lines, &modified)?;
        for &(_, line) in &modified {
            self.directory.mark_clean(line as usize);
        }
        self.stats.write_backs += modified.len() as u64;
        Ok(())
    }

    /// Writes every modified line back, then invalidates every line.
    pub fn drop_all(&mut self, lines: &LocalTable) -> Result<(), ShardError> {
        self.write_back_all(lines)?;
        self.directory.clear();
        Ok(())
    }

    /// The host copy of buffer `slot` (up to date after [`WriteBackCache::write_back_all`]) and
    /// its dtype; `None` for a state the optimizer does not have.
    pub fn host_slot(&self, slot: Slot) -> Option<(&[u8], DType)> {
        self.store
            .iter()
            .find(|s| s.slot == slot)
            .map(|s| (s.bytes.as_slice(), s.dtype))
    }

    /// Makes the next write-back fail (for tests of the failure path).
    pub fn fail_next_write_back(&mut self) {
        self.fail_next_write_back = true;
    }
}
