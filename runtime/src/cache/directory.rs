//! The set-associative directory of an embedding cache: 32 ways per set, one set for every
//! `round(32 / ratio)` rows, a frequency counter per line (least frequently used is replaced;
//! counters are bounded: when one saturates, the set's counters halve), and a valid and a
//! modified bit per line.
//!
//! Unlike WholeMemory, whose sets cover consecutive rows, a row's set is a hash of its id: the
//! hot rows of a skewed workload are often numbered together (ids sorted by frequency, as
//! vocabularies often are) and would otherwise crowd into one set's 32 ways.
//!
//! Everything is deterministic: the same sequence of calls leaves the same lines in the same
//! slots.

/// Ways per set.
pub const WAYS: usize = 32;

const EMPTY: u32 = u32::MAX;

/// A line replaced by an insertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// The row it held.
    pub key: u32,
    /// Whether it was modified (and must be written back).
    pub modified: bool,
}

/// Which slot holds which row.
#[derive(Clone, Debug)]
pub struct Directory {
    rows_per_set: usize,
    sets: usize,
    tags: Vec<u32>,
    counts: Vec<u8>,
    modified: Vec<bool>,
}

impl Directory {
    /// A directory over `rows` rows caching the fraction `ratio` of them (the caller has checked
    /// `ratio` lies in `[1/512, 1]`).
    pub fn new(rows: usize, ratio: f64) -> Self {
        let rows_per_set = Self::rows_per_set_for(ratio);
        let sets = Self::capacity_for(rows, ratio) / WAYS;
        Self {
            rows_per_set,
            sets,
            tags: vec![EMPTY; sets * WAYS],
            counts: vec![0; sets * WAYS],
            modified: vec![false; sets * WAYS],
        }
    }

    fn rows_per_set_for(ratio: f64) -> usize {
        ((WAYS as f64 / ratio).round() as usize).max(WAYS)
    }

    /// The lines a directory over `rows` rows at `ratio` has, without building it.
    pub fn capacity_for(rows: usize, ratio: f64) -> usize {
        rows.div_ceil(Self::rows_per_set_for(ratio)).max(1) * WAYS
    }

    /// Lines (the cache's capacity in rows).
    pub fn capacity(&self) -> usize {
        self.tags.len()
    }

    /// Rows per set (the table's rows over the sets).
    pub fn rows_per_set(&self) -> usize {
        self.rows_per_set
    }

    /// The set `key` maps to: a multiplicative (Fibonacci) hash of the id, scaled to the sets.
    pub fn set_of(&self, key: u32) -> usize {
        let hash = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        ((hash * self.sets as u64) >> 32) as usize
    }

    fn ways(&self, set: usize) -> std::ops::Range<usize> {
        set * WAYS..(set + 1) * WAYS
    }

    /// The slot holding `key`, if any (without counting an access).
    pub fn find(&self, key: u32) -> Option<usize> {
        let base = self.set_of(key) * WAYS;
        first(base, equal_ways(&self.tags[base..base + WAYS], key))
    }

    /// Whether `key`'s set has an empty way.
    pub fn has_room(&self, key: u32) -> bool {
        let base = self.set_of(key) * WAYS;
        equal_ways(&self.tags[base..base + WAYS], EMPTY) != 0
    }

    /// Counts an access to `slot`.
    pub fn touch(&mut self, slot: usize) {
        if self.counts[slot] == u8::MAX {
            for s in self.ways(slot / WAYS) {
                self.counts[s] /= 2;
            }
        }
        self.counts[slot] += 1;
    }

    /// Puts `key` (not present) in its set: in an empty way, else in place of the least
    /// frequently used line (the lowest way among equals). Returns the slot and what it held.
    pub fn insert(&mut self, key: u32) -> (usize, Option<Evicted>) {
        let base = self.set_of(key) * WAYS;
        let slot =
            first(base, equal_ways(&self.tags[base..base + WAYS], EMPTY)).unwrap_or_else(|| {
                let counts = &self.counts[base..base + WAYS];
                let least = counts.iter().copied().min().expect("32 ways");
                first(base, equal_ways(counts, least)).expect("a least used way")
            });
        (slot, self.place(key, slot))
    }

    /// [`Directory::insert`], except that ways marked in `pinned` (indexed by slot) are never
    /// replaced; `None` (and nothing changed) when every way of `key`'s set is pinned.
    pub fn insert_avoiding(
        &mut self,
        key: u32,
        pinned: &[bool],
    ) -> Option<(usize, Option<Evicted>)> {
        let free = self.ways(self.set_of(key)).filter(|&s| !pinned[s]);
        let slot = free
            .clone()
            .find(|&s| self.tags[s] == EMPTY)
            .or_else(|| free.min_by_key(|&s| self.counts[s]))?;
        Some((slot, self.place(key, slot)))
    }

    /// Undoes an insertion of `key` into `slot` that replaced `evicted` (or nothing).
    pub fn restore(&mut self, slot: usize, key: u32, evicted: Option<Evicted>) {
        debug_assert_eq!(self.tags[slot], key);
        match evicted {
            Some(e) => {
                self.tags[slot] = e.key;
                self.modified[slot] = e.modified;
            }
            None => {
                self.tags[slot] = EMPTY;
                self.counts[slot] = 0;
                self.modified[slot] = false;
            }
        }
    }

    /// Puts `key` in `slot`, returning what the slot held.
    fn place(&mut self, key: u32, slot: usize) -> Option<Evicted> {
        let evicted = (self.tags[slot] != EMPTY).then(|| Evicted {
            key: self.tags[slot],
            modified: self.modified[slot],
        });
        self.tags[slot] = key;
        self.counts[slot] = 1;
        self.modified[slot] = false;
        evicted
    }

    /// Marks `slot`'s line modified.
    pub fn mark_modified(&mut self, slot: usize) {
        self.modified[slot] = true;
    }

    /// Whether `slot`'s line is modified.
    pub fn is_modified(&self, slot: usize) -> bool {
        self.modified[slot]
    }

    /// Clears `slot`'s modified bit (after a write-back).
    pub fn mark_clean(&mut self, slot: usize) {
        self.modified[slot] = false;
    }

    /// Drops `key`'s line, if present; returns its slot and whether it was modified.
    pub fn invalidate(&mut self, key: u32) -> Option<(usize, bool)> {
        let slot = self.find(key)?;
        let modified = self.modified[slot];
        self.tags[slot] = EMPTY;
        self.counts[slot] = 0;
        self.modified[slot] = false;
        Some((slot, modified))
    }

    /// Drops every line.
    pub fn clear(&mut self) {
        self.tags.fill(EMPTY);
        self.counts.fill(0);
        self.modified.fill(false);
    }

    /// `(slot, key)` of every modified line, in slot order.
    pub fn modified_lines(&self) -> Vec<(usize, u32)> {
        (0..self.tags.len())
            .filter(|&s| self.modified[s])
            .map(|s| (s, self.tags[s]))
            .collect()
    }
}

/// A mask with bit `w` set where `ways[w] == value`: a loop without an early exit, which the
/// compiler turns into a few vector compares.
fn equal_ways<T: Copy + PartialEq>(ways: &[T], value: T) -> u32 {
    let mut mask = 0u32;
    for (w, &v) in ways.iter().enumerate() {
        mask |= u32::from(v == value) << w;
    }
    mask
}

/// The slot of the lowest way in `mask`, in the set starting at `base`.
fn first(base: usize, mask: u32) -> Option<usize> {
    (mask != 0).then(|| base + mask.trailing_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_follows_the_ratio() {
        let d = Directory::new(1000, 1.0);
        assert_eq!((d.rows_per_set(), d.capacity()), (32, 32 * 32));
        let d = Directory::new(1000, 1.0 / 8.0);
        assert_eq!((d.rows_per_set(), d.capacity()), (256, 4 * 32));
        let d = Directory::new(100_000, 1.0 / 512.0);
        assert_eq!(d.rows_per_set(), 16_384);
    }

    /// The first `n` keys that share key 0's set.
    fn same_set(d: &Directory, n: usize) -> Vec<u32> {
        (0..)
            .filter(|&k| d.set_of(k) == d.set_of(0))
            .take(n)
            .collect()
    }

    #[test]
    fn least_frequently_used_is_replaced_deterministically() {
        let mut d = Directory::new(10_000, 1.0 / 64.0); // 2048 rows per set
        let all = same_set(&d, WAYS + 2);
        let (keys, newcomers) = all.split_at(WAYS);
        let base = d.set_of(0) * WAYS;
        for (way, &k) in keys.iter().enumerate() {
            let (slot, evicted) = d.insert(k);
            assert_eq!((slot, evicted), (base + way, None));
        }
        // Every line but way 5 is used again; way 5 is the least frequently used.
        for (way, &k) in keys.iter().enumerate() {
            if way != 5 {
                let s = d.find(k).unwrap();
                d.touch(s);
            }
        }
        d.mark_modified(base + 5);
        let (slot, evicted) = d.insert(newcomers[0]);
        assert_eq!(slot, base + 5);
        assert_eq!(
            evicted,
            Some(Evicted {
                key: keys[5],
                modified: true
            })
        );
        assert_eq!(d.find(keys[5]), None);
        assert_eq!(d.find(newcomers[0]), Some(base + 5));
        // Counters are bounded: 300 touches of one line halve the set's counters.
        let s = d.find(keys[7]).unwrap();
        for _ in 0..300 {
            d.touch(s);
        }
        assert!(d.counts.iter().all(|&c| c < u8::MAX));
        assert_eq!(d.invalidate(newcomers[0]), Some((base + 5, false)));
        assert_eq!(
            d.insert(newcomers[1]).0,
            base + 5,
            "the emptied way is used first"
        );
    }

    #[test]
    fn pinned_ways_are_never_replaced() {
        let mut d = Directory::new(10_000, 1.0 / 64.0);
        let keys = same_set(&d, WAYS + 1);
        let mut pinned = vec![false; d.capacity()];
        for &k in &keys[..WAYS] {
            let (slot, evicted) = d.insert_avoiding(k, &pinned).unwrap();
            assert_eq!(evicted, None);
            pinned[slot] = true;
        }
        let before = d.clone();
        assert_eq!(
            d.insert_avoiding(keys[WAYS], &pinned),
            None,
            "a full pinned set"
        );
        assert_eq!(d.tags, before.tags, "nothing changed");
        // Unpin one way: it is the one replaced, whatever the counters say.
        let way = d.find(keys[3]).unwrap();
        for _ in 0..5 {
            d.touch(way);
        }
        pinned[way] = false;
        let (slot, evicted) = d.insert_avoiding(keys[WAYS], &pinned).unwrap();
        assert_eq!((slot, evicted.map(|e| e.key)), (way, Some(keys[3])));
    }

    #[test]
    fn consecutive_hot_ids_spread_over_the_sets() {
        // 1M rows at 1/8: 3907 sets. The 10,000 lowest ids (a skewed workload's hot rows, as a
        // frequency-sorted vocabulary numbers them) all fit: no set overflows.
        let mut d = Directory::new(1_000_000, 1.0 / 8.0);
        let evictions = (0..10_000).filter(|&k| d.insert(k).1.is_some()).count();
        assert_eq!(evictions, 0);
        assert!((0..10_000).all(|k| d.find(k).is_some()));
    }
}
