//! Filtered ranking: per query, how many rows of a block score better than (or tie with) its true
//! entity, counted by the score kernel's [`ScoreEpilogue::CountBetter`] epilogue.

#[cfg(doc)]
use crate::kernels::dense::ScoreEpilogue;

/// Per query, `(better, tied)` summed over the row groups of a [`ScoreEpilogue::CountBetter`]
/// launch (its `stats` as read back).
pub fn combine_counts(counts: &[f32], padded: usize, queries: usize) -> Vec<[u64; 2]> {
    let groups = counts.len() / (2 * padded);
    (0..queries)
        .map(|b| {
            let mut out = [0u64; 2];
            for g in 0..groups {
                out[0] += counts[2 * g * padded + b] as u64;
                out[1] += counts[(2 * g + 1) * padded + b] as u64;
            }
            out
        })
        .collect()
}
