//! The shared negatives of one step, as the step scores them: a list of sampled entities per
//! chunk of the global batch ([`SharedSample`]), and what one rank's queries meet of them
//! ([`SampleChunk`]).

use std::ops::Range;

use crate::id_lists::IdLists;

/// The shared negatives of a step (see
/// [`TrainBatch::SharedNegatives`](crate::step::TrainBatch::SharedNegatives)).
#[derive(Clone, Copy, Debug)]
pub struct SharedSample<'a> {
    /// The sampled entities (global ids), a list per chunk of the global batch.
    pub lists: &'a IdLists,
    /// Queries per chunk (`0`: the whole batch).
    pub chunk: usize,
    /// Whether each chunk's true tails are its queries' candidates too.
    pub batch: bool,
}

/// One chunk of a rank's queries and the sample they are scored against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleChunk {
    /// The rank's queries in it (positions in the rank's batch).
    pub queries: Range<usize>,
    /// Its sample: global ids, each once, ascending.
    pub sample: Vec<u32>,
}

impl SharedSample<'_> {
    /// The chunks of a global batch of `total` queries, as ranges of its positions.
    pub fn chunks(&self, total: usize) -> Vec<Range<usize>> {
        let size = if self.chunk == 0 { total } else { self.chunk };
        (0..total.div_ceil(size.max(1)))
            .map(|c| c * size..((c + 1) * size).min(total))
            .collect()
    }

    /// The chunks that the queries `offset..offset + n` of a global batch of `total` meet, each
    /// with its sample: its list and — with batch negatives — the true tails of its queries
    /// (`labels_all`: every rank's lists, in rank order).
    pub fn rank_chunks(
        &self,
        labels_all: &IdLists,
        offset: usize,
        n: usize,
        total: usize,
    ) -> Vec<SampleChunk> {
        let mine = offset..offset + n;
        self.chunks(total)
            .iter()
            .enumerate()
            .filter_map(|(c, range)| {
                let start = range.start.max(mine.start);
                let end = range.end.min(mine.end);
                (start < end).then(|| {
                    let mut sample = self.lists.get(c).to_vec();
                    if self.batch {
                        for b in range.clone() {
                            sample.extend_from_slice(labels_all.get(b));
                        }
                    }
                    sample.sort_unstable();
                    sample.dedup();
                    SampleChunk {
                        queries: start - offset..end - offset,
                        sample,
                    }
                })
            })
            .collect()
    }
}

/// How many ids and a hash of them: what ranks compare to agree on a list.
pub fn describe_ids(ids: &[u32]) -> String {
    let hash = ids.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &id| {
        (h ^ id as u64).wrapping_mul(0x100_0000_01b3)
    });
    format!("{} ids, hash {hash:016x}", ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranks_queries_meet_the_chunks_they_lie_in_with_their_samples() {
        let lists = IdLists::from_lists(&[vec![9, 3], vec![5], vec![7]]);
        let labels = IdLists::from_lists(&[[1], [2], [3], [4], [5]]);
        let sample = SharedSample {
            lists: &lists,
            chunk: 2,
            batch: true,
        };
        assert_eq!(sample.chunks(5), vec![0..2, 2..4, 4..5]);
        // Queries 1..4 of the global batch: the end of chunk 0 and all of chunk 1.
        let chunks = sample.rank_chunks(&labels, 1, 3, 5);
        assert_eq!(
            chunks,
            vec![
                SampleChunk {
                    queries: 0..1,
                    sample: vec![1, 2, 3, 9]
                },
                SampleChunk {
                    queries: 1..3,
                    sample: vec![3, 4, 5]
                },
            ]
        );
    }
}
