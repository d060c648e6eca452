//! A 1vsAll batch's two queries of each triple, merged: `(h, r, ?)` with true tail `t` and its
//! reciprocal `(t, r⁻¹, ?)` with true tail `h` read the same two rows — the head of one is the
//! true tail of the other. Where a rank's queries come in such pairs (the epoch keeps them side
//! by side, `train::batches::shuffled_pairs`), a step against shared negatives looks each row up
//! once, as a head, scores each query's true tail from its partner's head row, and adds the true
//! tail's gradient to that head row's before the rows are routed to their owners: half the rows
//! looked up and half the gradient rows summed and sent, the same arithmetic up to the order of
//! floating-point sums (LibKGE's 1vsAll batches and PyTorch-BigGraph's edges do the same).

use crate::id_lists::IdLists;

/// Whether queries `2k` and `2k + 1` are each other's reciprocal for every `k`: each has one
/// true tail, the head of the other (`n` even). Then the true tail of query `b` is the head
/// of query `b ^ 1`.
pub(super) fn reciprocal_pairs(heads: &[u32], labels: &IdLists) -> bool {
    heads.len().is_multiple_of(2)
        && labels.len() == heads.len()
        && heads
            .chunks_exact(2)
            .enumerate()
            .all(|(k, pair)| labels.get(2 * k) == [pair[1]] && labels.get(2 * k + 1) == [pair[0]])
}

/// The partner of query `b`: the query whose head is `b`'s true tail.
pub(super) fn partner(b: usize) -> usize {
    b ^ 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_recognised_only_when_each_is_the_others_reciprocal() {
        let heads = [3, 7, 5, 5];
        let labels = IdLists::from_lists(&[&[7][..], &[3], &[5], &[5]]);
        assert!(reciprocal_pairs(&heads, &labels));
        // A second true tail, a wrong partner, an odd count: not pairs.
        let two = IdLists::from_lists(&[&[7, 1][..], &[3], &[5], &[5]]);
        assert!(!reciprocal_pairs(&heads, &two));
        let wrong = IdLists::from_lists(&[&[7][..], &[4], &[5], &[5]]);
        assert!(!reciprocal_pairs(&heads, &wrong));
        let odd = IdLists::from_lists(&[&[7][..], &[3], &[5]]);
        assert!(!reciprocal_pairs(&heads[..3], &odd));
        assert_eq!((partner(4), partner(5)), (5, 4));
    }
}
