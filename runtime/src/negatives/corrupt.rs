//! Negative sampling's corruptions: each true triple with its head or tail replaced by a uniform
//! entity, drawn from a counter-based generator keyed by (seed, epoch, triple, draw), so a
//! triple's corruptions do not depend on the number of ranks or on its batch.

use crate::data::Triple;
use crate::init::SplitMix64;

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
    fn corruptions_are_fixed_by_the_seed() {
        let c = corrupt([1, 2, 3], 50, 9, 1, 4, 0);
        assert_eq!(c, corrupt([1, 2, 3], 50, 9, 1, 4, 0));
        assert!((c[0] == 1) ^ (c[2] == 3) || c == [1, 2, 3]);
        assert_eq!(c[1], 2);
    }
}
