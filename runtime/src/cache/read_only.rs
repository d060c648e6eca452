//! The read-only cache: copies of rows other ranks own, kept on the requesting rank in the
//! storage dtype, so hits need no exchange.

use super::{CacheStats, Directory};

/// A rank's copies of remote rows, by global id.
#[derive(Clone, Debug)]
pub struct RowCache {
    directory: Directory,
    rows: Vec<u8>,
    row_bytes: usize,
    stats: CacheStats,
    /// Rows missed once lately, a bit per hash bucket: once a set is full, a row is cached on
    /// its second miss, so rows looked up once do not push out hot ones (TinyLFU's doorkeeper).
    /// Cleared after one mark per eight bits.
    doorkeeper: Vec<u64>,
    marks: usize,
}

impl RowCache {
    /// A cache of the fraction `ratio` of a `table_rows`-row table whose rows are `row_bytes`
    /// long. Its memory is written here, so lines fill without page faults.
    pub fn new(table_rows: usize, ratio: f64, row_bytes: usize) -> Self {
        let directory = Directory::new(table_rows, ratio);
        // `resize` writes the bytes; `vec![0; n]` would only map zeroed pages, which then fault
        // one by one during the first steps.
        #[allow(clippy::slow_vector_initialization)]
        let mut rows = Vec::new();
        rows.resize(directory.capacity() * row_bytes, 0u8);
        // Eight bits per line (at least 64 Ki bits), cleared after a mark per line.
        let doorkeeper = vec![0; (8 * directory.capacity()).max(1 << 16).div_ceil(64)];
        Self {
            directory,
            rows,
            row_bytes,
            stats: CacheStats::default(),
            doorkeeper,
            marks: 0,
        }
    }

    /// The slot of global row `id`, counting a hit (or a miss).
    pub fn get(&mut self, id: u32) -> Option<usize> {
        match self.directory.find(id) {
            Some(slot) => {
                self.directory.touch(slot);
                self.stats.hits += 1;
                self.stats.bytes_not_sent += (4 + self.row_bytes) as u64;
                Some(slot)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// The row in `slot`, as stored.
    pub fn row(&self, slot: usize) -> &[u8] {
        &self.rows[slot * self.row_bytes..(slot + 1) * self.row_bytes]
    }

    /// Keeps a copy of global row `id` (not cached), replacing the set's least frequently used
    /// line if the set is full and `id` was missed lately (else only remembers the miss).
    pub fn put(&mut self, id: u32, row: &[u8]) {
        if !self.directory.has_room(id) && !self.seen_before(id) {
            return;
        }
        let (slot, evicted) = self.directory.insert(id);
        if evicted.is_some() {
            self.stats.evictions += 1;
        }
        self.rows[slot * self.row_bytes..(slot + 1) * self.row_bytes].copy_from_slice(row);
    }

    /// Whether `id` was missed lately; marks it if not.
    fn seen_before(&mut self, id: u32) -> bool {
        let bits = self.doorkeeper.len() as u64 * 64;
        let bit = (((id as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32) * bits) >> 32;
        let (word, mask) = ((bit / 64) as usize, 1u64 << (bit % 64));
        if self.doorkeeper[word] & mask != 0 {
            return true;
        }
        self.doorkeeper[word] |= mask;
        self.marks += 1;
        if self.marks >= self.doorkeeper.len() * 8 {
            self.doorkeeper.fill(0);
            self.marks = 0;
        }
        false
    }

    /// Drops the copies of rows that changed.
    pub fn invalidate(&mut self, ids: impl IntoIterator<Item = u32>) {
        for id in ids {
            if self.directory.invalidate(id).is_some() {
                self.stats.invalidations += 1;
            }
        }
    }

    /// Drops every copy (after the table was written directly, as by a checkpoint load).
    pub fn clear(&mut self) {
        self.directory.clear();
        self.doorkeeper.fill(0);
        self.marks = 0;
    }

    /// What the cache did so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Lines.
    pub fn capacity(&self) -> usize {
        self.directory.capacity()
    }
}
