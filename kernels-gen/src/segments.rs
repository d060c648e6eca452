//! Host-side bookkeeping for deterministic duplicate aggregation: the unique rows of a step, and
//! for each the inputs that hit it, in input order.

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

impl Segments {
    /// Groups `ids` by value. Sorting `(id, position)` pairs keeps each group in input order, so
    /// the sum the kernel forms is the same on every run.
    pub fn group(ids: &[u32]) -> Self {
        let mut keyed: Vec<u64> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| ((id as u64) << 32) | i as u64)
            .collect();
        keyed.sort_unstable();
        let mut seg = Segments {
            rows: Vec::new(),
            offsets: Vec::with_capacity(ids.len() + 1),
            order: Vec::with_capacity(ids.len()),
        };
        for (k, key) in keyed.iter().enumerate() {
            let id = (key >> 32) as u32;
            if seg.rows.last() != Some(&id) {
                seg.rows.push(id);
                seg.offsets.push(k as u32);
            }
            seg.order.push(*key as u32);
        }
        seg.offsets.push(keyed.len() as u32);
        seg
    }

    /// How many unique rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row is touched.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
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
}
