//! Host-side bookkeeping for deterministic duplicate aggregation: the unique rows of a step, and
//! for each the inputs that hit it, in input order.

use crate::KernelError;
use crate::headroom::reserve_for;

/// The rows one step touches, grouped: unique row `u` is `rows[u]`, and its gradients are the
/// inputs `order[offsets[u]..offsets[u + 1]]`, in increasing input position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segments {
    /// Unique rows, ascending.
    pub rows: Vec<u32>,
    /// `rows.len() + 1` offsets into `order`.
    pub offsets: Vec<u32>,
    /// Input positions grouped by row.
    pub order: Vec<u32>,
}

/// Bits per radix digit.
const DIGIT: u32 = 8;
const BUCKETS: usize = 1 << DIGIT;

impl Segments {
    /// Groups `ids` by value.
    pub fn group(ids: &[u32]) -> Self {
        let mut segments = Segments::default();
        segments.regroup(ids, &mut Vec::new());
        segments
    }

    /// Groups `ids` by value into `self`, reusing its buffers and `scratch` (a steady state of
    /// calls allocates nothing).
    ///
    /// A stable least-significant-digit radix sort of the input positions by id, skipping the
    /// digits every id shares: each group keeps its inputs in input order, so the sum the kernel
    /// forms is the same on every run — the same grouping a comparison sort of `(id, position)`
    /// pairs gives, in linear time.
    pub fn regroup(&mut self, ids: &[u32], scratch: &mut Vec<u64>) {
        let n = ids.len();
        scratch.clear();
        reserve_for(scratch, 2 * n);
        scratch.resize(2 * n, 0);
        let (mut src, mut dst) = scratch.split_at_mut(n);
        for (i, (key, &id)) in src.iter_mut().zip(ids).enumerate() {
            *key = ((id as u64) << 32) | i as u64;
        }
        let digits = 32 / DIGIT;
        let mut counts = [[0u32; BUCKETS]; 4];
        for &id in ids {
            for (d, c) in counts.iter_mut().enumerate() {
                c[(id >> (d as u32 * DIGIT)) as usize & (BUCKETS - 1)] += 1;
            }
        }
        for (d, count) in counts.iter().enumerate().take(digits as usize) {
            if count.iter().any(|&c| c as usize == n) {
                continue; // every id has the same digit here
            }
            let mut start = [0u32; BUCKETS];
            let mut at = 0;
            for (s, &c) in start.iter_mut().zip(count) {
                *s = at;
                at += c;
            }
            let shift = 32 + d as u32 * DIGIT;
            for &key in src.iter() {
                let bucket = (key >> shift) as usize & (BUCKETS - 1);
                dst[start[bucket] as usize] = key;
                start[bucket] += 1;
            }
            std::mem::swap(&mut src, &mut dst);
        }
        self.rows.clear();
        self.offsets.clear();
        self.order.clear();
        reserve_for(&mut self.rows, n);
        reserve_for(&mut self.offsets, n + 1);
        reserve_for(&mut self.order, n);
        for (k, &key) in src.iter().enumerate() {
            let id = (key >> 32) as u32;
            if self.rows.last() != Some(&id) {
                self.rows.push(id);
                self.offsets.push(k as u32);
            }
            self.order.push(key as u32);
        }
        self.offsets.push(n as u32);
    }

    /// Checks that the segments can be walked over `inputs` gradient rows: `offsets` holds
    /// `rows.len() + 1` entries rising from 0 to `order.len()`, and every input position is below
    /// `inputs`. (Segments built by [`Segments::group`] always are; these are public fields.)
    pub fn check(&self, inputs: usize) -> Result<(), KernelError> {
        let offsets_ok = self.offsets.len() == self.rows.len() + 1
            && self.offsets.first() == Some(&0)
            && self.offsets.last() == Some(&(self.order.len() as u32))
            && self.offsets.windows(2).all(|w| w[0] <= w[1]);
        if !offsets_ok {
            return Err(KernelError::ShapeMismatch {
                what: "segment offsets (rows + 1, rising from 0 to the inputs)",
                expected: self.rows.len() + 1,
                got: self.offsets.len(),
            });
        }
        match self.order.iter().max() {
            Some(&last) if last as usize >= inputs => Err(KernelError::ShapeMismatch {
                what: "gradient rows",
                expected: last as usize + 1,
                got: inputs,
            }),
            _ => Ok(()),
        }
    }

    /// How many unique rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row is touched.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The input positions of unique row `u`.
    pub fn inputs(&self, u: usize) -> &[u32] {
        &self.order[self.offsets[u] as usize..self.offsets[u + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_in_input_order() {
        let s = Segments::group(&[5, 2, 5, 9, 2, 5]);
        assert_eq!(s.rows, vec![2, 5, 9]);
        assert_eq!(s.offsets, vec![0, 2, 5, 6]);
        assert_eq!(s.order, vec![1, 4, 0, 2, 5, 3]);
        assert!(Segments::group(&[]).is_empty());
    }

    #[test]
    fn check_accepts_grouped_segments_and_refuses_broken_ones() {
        let s = Segments::group(&[5, 2, 5, 9, 2, 5]);
        assert_eq!(s.check(6), Ok(()));
        assert!(matches!(
            s.check(5),
            Err(KernelError::ShapeMismatch {
                expected: 6,
                got: 5,
                ..
            })
        ));
        for broken in [
            Segments {
                offsets: vec![0, 2, 5],
                ..s.clone()
            },
            Segments {
                offsets: vec![0, 5, 2, 6],
                ..s.clone()
            },
            Segments {
                offsets: vec![1, 2, 5, 6],
                ..s.clone()
            },
            Segments {
                offsets: vec![0, 2, 5, 7],
                ..s.clone()
            },
        ] {
            assert!(broken.check(6).is_err(), "{broken:?}");
        }
    }

    /// The radix grouping equals a comparison sort of (id, position) on every kind of input.
    #[test]
    fn radix_grouping_equals_sorting_pairs() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut segments = Segments::default();
        let mut scratch = Vec::new();
        for (n, range) in [
            (0, 1),
            (1, 1),
            (50, 3),
            (1000, 70_000),
            (5000, u32::MAX as u64),
        ] {
            let ids: Vec<u32> = (0..n).map(|_| (next() % range) as u32).collect();
            segments.regroup(&ids, &mut scratch);
            let mut pairs: Vec<(u32, u32)> = ids
                .iter()
                .enumerate()
                .map(|(i, &id)| (id, i as u32))
                .collect();
            pairs.sort_unstable();
            let order: Vec<u32> = pairs.iter().map(|p| p.1).collect();
            let mut rows: Vec<u32> = pairs.iter().map(|p| p.0).collect();
            rows.dedup();
            assert_eq!(segments.order, order, "n = {n}");
            assert_eq!(segments.rows, rows, "n = {n}");
            assert_eq!(*segments.offsets.last().unwrap() as usize, n);
        }
    }
}
