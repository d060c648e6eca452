//! What a training epoch is made of: queries with their labels (KvsAll, 1vsAll) or true triples
//! (negative sampling, their corruptions drawn by [`negatives`](crate::negatives)); shuffled per
//! epoch from the seed, and split between ranks.
//!
//! Every rank derives the same global batches from the seed, then takes its own slice: the data
//! a step trains on does not depend on the number of ranks.

use crate::data::Triple;
use crate::id_lists::IdLists;
use crate::init::SplitMix64;
use crate::negatives::Negatives;
use crate::objective::Mode;

/// The queries of an epoch that scores against every entity, with their true tails. Each
/// training triple `(h, r, t)` comes with its reciprocal `(t, r⁻¹, h)`, `r⁻¹ = r + relations`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuerySet {
    /// The queries' heads.
    pub heads: Vec<u32>,
    /// The queries' relations.
    pub relations: Vec<u32>,
    /// The true tails of each query.
    pub labels: IdLists,
}

impl QuerySet {
    /// KvsAll: each distinct `(head, relation)` of `triples` and their reciprocals, with all its
    /// true tails (`relations` relations before doubling).
    pub fn kvsall(triples: &[Triple], relations: u32) -> Self {
        let mut pairs: Vec<(u32, u32, u32)> = triples
            .iter()
            .flat_map(|&[h, r, t]| [(h, r, t), (t, r + relations, h)])
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut set = QuerySet {
            heads: Vec::new(),
            relations: Vec::new(),
            labels: IdLists::new(),
        };
        let mut tails = Vec::new();
        for (i, &(h, r, t)) in pairs.iter().enumerate() {
            tails.push(t);
            let last = pairs
                .get(i + 1)
                .is_none_or(|&(h2, r2, _)| (h2, r2) != (h, r));
            if last {
                set.heads.push(h);
                set.relations.push(r);
                set.labels.push(&tails);
                tails.clear();
            }
        }
        set
    }

    /// 1vsAll: every triple of `triples` and its reciprocal, each a query with its one true
    /// tail (`relations` relations before doubling), in file order: `(h, r)` then `(t, r⁻¹)`.
    pub fn one_vs_all(triples: &[Triple], relations: u32) -> Self {
        let mut set = QuerySet {
            heads: Vec::with_capacity(2 * triples.len()),
            relations: Vec::with_capacity(2 * triples.len()),
            labels: IdLists::new(),
        };
        for &[h, r, t] in triples {
            for (head, relation, tail) in [(h, r, t), (t, r + relations, h)] {
                set.heads.push(head);
                set.relations.push(relation);
                set.labels.push(&[tail]);
            }
        }
        set
    }

    /// How many queries.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }
}

/// The order of an epoch's (or a streamed block's) `n` examples for `mode`: shuffled from the
/// seed and the epoch; with shared negatives in 1vsAll, each triple's two queries side by side
/// ([`shuffled_pairs`]) — their heads and true tails are the same two entities, looked up and
/// updated once (as PyTorch-BigGraph scores an edge's head and tail corruptions together).
pub fn epoch_order(
    mode: Mode,
    negatives: Negatives,
    n: usize,
    seed: u64,
    epoch: usize,
) -> Vec<u32> {
    match (mode, negatives) {
        (Mode::OneVsAll, Negatives::Shared { .. }) => shuffled_pairs(n, seed, epoch),
        _ => shuffled(n, seed, epoch),
    }
}

/// A permutation of `0..n` that keeps `2k` and `2k + 1` side by side, the pairs in [`shuffled`]
/// order (an odd `n`'s last index last): a 1vsAll query set's two queries of each triple
/// ([`QuerySet::one_vs_all`]) land in the same batch (for an even batch size).
pub fn shuffled_pairs(n: usize, seed: u64, epoch: usize) -> Vec<u32> {
    let mut order: Vec<u32> = shuffled(n / 2, seed, epoch)
        .into_iter()
        .flat_map(|k| [2 * k, 2 * k + 1])
        .collect();
    if !n.is_multiple_of(2) {
        order.push(n as u32 - 1);
    }
    order
}

/// A permutation of `0..n` for `epoch`, the same on every rank (Fisher–Yates over SplitMix64).
pub fn shuffled(n: usize, seed: u64, epoch: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = SplitMix64::new(seed ^ (epoch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// Rank `rank`'s share of a global batch of `len` items, as a range of positions in it.
pub fn share(len: usize, rank: usize, world: usize) -> std::ops::Range<usize> {
    (rank * len / world)..((rank + 1) * len / world)
}

/// Global batches of `batch` items over `n` items: the ranges of the epoch's order.
pub fn batches(n: usize, batch: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let batch = batch.max(1);
    (0..n.div_ceil(batch)).map(move |b| b * batch..((b + 1) * batch).min(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kvsall_queries_group_tails_with_reciprocals() {
        let set = QuerySet::kvsall(&[[0, 0, 1], [0, 0, 2], [2, 1, 0]], 2);
        let queries: Vec<(u32, u32, Vec<u32>)> = (0..set.len())
            .map(|i| (set.heads[i], set.relations[i], set.labels.get(i).to_vec()))
            .collect();
        assert_eq!(
            queries,
            vec![
                (0, 0, vec![1, 2]),
                (0, 3, vec![2]),
                (1, 2, vec![0]),
                (2, 1, vec![0]),
                (2, 2, vec![0]),
            ]
        );
    }

    #[test]
    fn one_vs_all_queries_are_every_triple_and_its_reciprocal() {
        let set = QuerySet::one_vs_all(&[[0, 0, 1], [0, 0, 1], [2, 1, 0]], 2);
        let queries: Vec<(u32, u32, Vec<u32>)> = (0..set.len())
            .map(|i| (set.heads[i], set.relations[i], set.labels.get(i).to_vec()))
            .collect();
        assert_eq!(
            queries,
            vec![
                (0, 0, vec![1]),
                (1, 2, vec![0]),
                (0, 0, vec![1]),
                (1, 2, vec![0]),
                (2, 1, vec![0]),
                (0, 3, vec![2]),
            ]
        );
    }

    #[test]
    fn paired_shuffles_keep_each_triples_two_queries_together() {
        let order = shuffled_pairs(200, 7, 3);
        assert_eq!(order, shuffled_pairs(200, 7, 3));
        for pair in order.chunks(2) {
            assert!(pair[0] % 2 == 0 && pair[1] == pair[0] + 1, "{pair:?}");
        }
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200).collect::<Vec<u32>>());
        let firsts: Vec<u32> = order.iter().step_by(2).map(|&q| q / 2).collect();
        assert_eq!(firsts, shuffled(100, 7, 3), "the pairs in shuffled order");
        let odd = shuffled_pairs(7, 7, 3);
        assert_eq!(
            (odd.len(), odd[6]),
            (7, 6),
            "an odd count's last index last"
        );
    }

    #[test]
    fn shuffles_and_shares_are_fixed_by_the_seed() {
        let a = shuffled(100, 7, 3);
        assert_eq!(a, shuffled(100, 7, 3));
        assert_ne!(a, shuffled(100, 7, 4));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<u32>>());
        let parts: Vec<_> = (0..3).map(|r| share(10, r, 3)).collect();
        assert_eq!(parts, vec![0..3, 3..6, 6..10]);
        assert_eq!(batches(5, 2).collect::<Vec<_>>(), vec![0..2, 2..4, 4..5]);
    }
}
