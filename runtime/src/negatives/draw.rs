//! Drawing shared negatives: per step and per chunk of the global batch, distinct entities drawn
//! uniformly and entities drawn by degree, from counter-based generators keyed by (seed, epoch,
//! step, chunk) — the same lists on every rank and for any number of ranks.

use crate::data::{DataError, Dataset};
use crate::id_lists::IdLists;
use crate::init::SplitMix64;

use super::Negatives;

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

/// Draws each step's shared negatives: a list per chunk of the global batch.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedSampler {
    /// Entities to draw from.
    entities: u32,
    /// Distinct entities drawn uniformly per chunk.
    uniform: usize,
    /// Entities drawn by degree per chunk, and the degrees.
    degree: Option<(usize, DegreeSampler)>,
    /// Queries of the global batch per chunk (`0`: one chunk).
    chunk: usize,
    /// Seeds the draws.
    seed: u64,
}

impl SharedSampler {
    /// The sampler of `negatives` over `data`'s entities (reading its training triples once
    /// for the degrees, when drawn by degree); `None` for [`Negatives::All`].
    pub fn new(data: &Dataset, negatives: Negatives, seed: u64) -> Result<Option<Self>, DataError> {
        let Negatives::Shared {
            uniform,
            degree,
            chunk,
            ..
        } = negatives
        else {
            return Ok(None);
        };
        let degree = match degree {
            0 => None,
            n => Some((n, DegreeSampler::new(data)?)),
        };
        Ok(Some(Self {
            entities: data.entities.len() as u32,
            uniform,
            degree,
            chunk,
            seed,
        }))
    }

    /// The lists of step `step` of `epoch` for a global batch of `global` queries: one per chunk,
    /// each ascending and distinct.
    pub fn draw(&self, global: usize, epoch: usize, step: usize) -> IdLists {
        let chunks = if self.chunk == 0 {
            1
        } else {
            global.div_ceil(self.chunk)
        };
        let mut lists = IdLists::new();
        for k in 0..chunks {
            let mut drawn = chunk_negatives(self.entities, self.uniform, self.seed, epoch, step, k);
            if let Some((count, degrees)) = &self.degree {
                degrees.extend(&mut drawn, *count, self.seed, epoch, step, k);
            }
            lists.push(&drawn);
        }
        lists
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_fixed_by_the_seed_distinct_and_ascending() {
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
    }
}
