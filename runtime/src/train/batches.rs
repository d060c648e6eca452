//! What a training epoch is made of: queries with their labels (KvsAll, 1vsAll), or triples
//! with sampled negatives; shuffled per epoch from the seed, and split between ranks.
//!
//! Every rank derives the same global batches from the seed, then takes its own slice, and
//! negatives are drawn from a counter-based generator keyed by (seed, epoch, triple, draw): the
//! data a step trains on does not depend on the number of ranks.

use crate::data::{DataError, Dataset, Triple};
use crate::init::SplitMix64;
use crate::model::IdLists;

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

/// The `draw`-th corruption of training triple `index` (its position in the file) in `epoch`:
/// the head or the tail, with probability ½ each, replaced by a uniform entity.
pub fn corrupt(
    triple: Triple,
    entities: u32,
    seed: u64,
    epoch: usize,
    index: usize,
    draw: usize,
) -> Triple {
    let key = seed
        ^ (epoch as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)
        ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (draw as u64).wrapping_mul(0x94d0_49bb_1331_11eb);
    let bits = SplitMix64::new(key).next_u64();
    let entity = ((bits >> 1) % entities as u64) as u32;
    let [h, r, t] = triple;
    if bits & 1 == 0 {
        [entity, r, t]
    } else {
        [h, r, entity]
    }
}

/// Mixes a chunk's index into the key of its draws.
const CHUNK_KEY: u64 = 0xbf58_476d_1ce4_e5b9;

/// The shared negatives of step `step` of `epoch`: `count` distinct entities drawn uniformly
/// (all of them when there are fewer), ascending; the same on every rank and for any number of
/// ranks. Distinct, so a step's work does not vary with the draw.
pub fn shared_negatives(
    entities: u32,
    count: usize,
    seed: u64,
    epoch: usize,
    step: usize,
) -> Vec<u32> {
    chunk_negatives(entities, count, seed, epoch, step, 0)
}

/// [`shared_negatives`] of chunk `chunk` of a step's batch: each chunk draws its own (chunk 0
/// draws the step's).
pub fn chunk_negatives(
    entities: u32,
    count: usize,
    seed: u64,
    epoch: usize,
    step: usize,
    chunk: usize,
) -> Vec<u32> {
    let key = seed
        ^ 0x6e65_6761_7469_7665
        ^ (epoch as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)
        ^ (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (chunk as u64).wrapping_mul(CHUNK_KEY);
    let mut rng = SplitMix64::new(key);
    let count = count.min(entities as usize);
    let mut ids = std::collections::BTreeSet::new();
    while ids.len() < count {
        ids.insert((rng.next_u64() % entities.max(1) as u64) as u32);
    }
    ids.into_iter().collect()
}

/// Draws entities in proportion to their degree (their count as head or tail in the training
/// triples): the frequency-weighted negatives of word2vec and PyTorch-BigGraph, which make a
/// model tell the true answer from the entities it sees most.
#[derive(Clone, Debug, PartialEq)]
pub struct DegreeSampler {
    /// Cumulative degrees: entity `e` owns draws in `[cumulative[e − 1], cumulative[e])`.
    cumulative: Vec<u64>,
}

impl DegreeSampler {
    /// The degrees of `data`'s entities, from one pass over its training triples (a block at a
    /// time when they stream).
    pub fn new(data: &Dataset) -> Result<Self, DataError> {
        let mut degree = vec![0u64; data.entities.len()];
        data.each_train_block(|block| {
            for &[h, _, t] in block {
                degree[h as usize] += 1;
                degree[t as usize] += 1;
            }
        })?;
        Ok(Self::from_degrees(&degree))
    }

    /// From each entity's degree.
    pub fn from_degrees(degrees: &[u64]) -> Self {
        let mut total = 0;
        let cumulative = degrees
            .iter()
            .map(|&d| {
                total += d;
                total
            })
            .collect();
        Self { cumulative }
    }

    /// Adds `count` draws (keyed by seed, epoch and step) to the ascending distinct ids
    /// `negatives`, keeping them ascending and distinct.
    pub fn extend(
        &self,
        negatives: &mut Vec<u32>,
        count: usize,
        seed: u64,
        epoch: usize,
        step: usize,
        chunk: usize,
    ) {
        let total = self.cumulative.last().copied().unwrap_or(0);
        if total == 0 || count == 0 {
            return;
        }
        let key = seed
            ^ 0x6465_6772_6565
            ^ (epoch as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)
            ^ (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (chunk as u64).wrapping_mul(CHUNK_KEY);
        let mut rng = SplitMix64::new(key);
        negatives.extend((0..count).map(|_| {
            let draw = rng.next_u64() % total;
            self.cumulative.partition_point(|&c| c <= draw) as u32
        }));
        negatives.sort_unstable();
        negatives.dedup();
    }
}

/// The triples of a negative-sampling step: each true triple followed by `neg_ratio`
/// corruptions, with their targets (`1 − ε` and `ε`).
pub struct NegativeBatch {
    /// Heads.
    pub heads: Vec<u32>,
    /// Relations.
    pub relations: Vec<u32>,
    /// Tails.
    pub tails: Vec<u32>,
    /// Targets.
    pub targets: Vec<f32>,
}

impl NegativeBatch {
    /// The batch of `triples[i]` for each `i` of `indices` in `epoch`, `triples` being the
    /// training split's from position `first` on (the corruptions are keyed by the position in
    /// the split), over `entities` entities.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        triples: &[Triple],
        first: usize,
        indices: &[u32],
        entities: u32,
        neg_ratio: usize,
        smoothing: f32,
        seed: u64,
        epoch: usize,
    ) -> Self {
        let n = indices.len() * (1 + neg_ratio);
        let mut b = NegativeBatch {
            heads: Vec::with_capacity(n),
            relations: Vec::with_capacity(n),
            tails: Vec::with_capacity(n),
            targets: Vec::with_capacity(n),
        };
        let mut push = |[h, r, t]: Triple, y: f32| {
            b.heads.push(h);
            b.relations.push(r);
            b.tails.push(t);
            b.targets.push(y);
        };
        for &i in indices {
            let triple = triples[i as usize];
            push(triple, 1.0 - smoothing);
            for draw in 0..neg_ratio {
                push(
                    corrupt(triple, entities, seed, epoch, first + i as usize, draw),
                    smoothing,
                );
            }
        }
        b
    }
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
    fn shuffles_shares_and_corruptions_are_fixed_by_the_seed() {
        let a = shuffled(100, 7, 3);
        assert_eq!(a, shuffled(100, 7, 3));
        assert_ne!(a, shuffled(100, 7, 4));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<u32>>());
        let parts: Vec<_> = (0..3).map(|r| share(10, r, 3)).collect();
        assert_eq!(parts, vec![0..3, 3..6, 6..10]);
        assert_eq!(batches(5, 2).collect::<Vec<_>>(), vec![0..2, 2..4, 4..5]);
        let n = shared_negatives(1000, 64, 9, 1, 2);
        assert_eq!(n, shared_negatives(1000, 64, 9, 1, 2));
        assert_ne!(n, shared_negatives(1000, 64, 9, 1, 3));
        assert!(n.windows(2).all(|w| w[0] < w[1]) && n.len() > 50 && n[n.len() - 1] < 1000);
        let degrees = DegreeSampler::from_degrees(&[0, 5, 0, 1000, 1]);
        let mut drawn = vec![2];
        degrees.extend(&mut drawn, 64, 9, 1, 2, 0);
        assert!(
            drawn.contains(&2) && drawn.contains(&3) && !drawn.contains(&0),
            "{drawn:?}"
        );
        assert!(drawn.windows(2).all(|w| w[0] < w[1]), "{drawn:?}");
        let c = corrupt([1, 2, 3], 50, 9, 1, 4, 0);
        assert_eq!(c, corrupt([1, 2, 3], 50, 9, 1, 4, 0));
        assert!((c[0] == 1) ^ (c[2] == 3) || c == [1, 2, 3]);
        assert_eq!(c[1], 2);
    }
}
