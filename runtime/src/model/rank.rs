//! Filtered ranking, distributed: every rank scores the queries against its own shard, counts
//! the entities that score better than (or as well as) the true answer after filtering, and the
//! counts are summed. No rank ever holds the scores of the whole table.
//!
//! Ties count half: the rank is `1 + better + tied / 2`, the mean of the optimistic and the
//! pessimistic rank. A non-finite true score ranks last.

use rowshard_kernels::dense_set::{TableBlock, combine_counts};
use rowshard_kernels::kernels::dense::ScoreEpilogue;

use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use crate::agree::{agree_on_input, all_values};
use crate::comm::{all_gather_values, from_bytes, to_bytes};
use crate::error::{InputError, ShardError};
use crate::id_lists::IdLists;

/// Bytes of scores a rank holds at once for the rows a ranking call leaves out of its counts.
const SKIPPED_SCORE_BYTES: usize = 256 << 20;

/// Which side of the triple is predicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `(anchor, relation, ?)`.
    Tail,
    /// `(?, relation, anchor)`.
    Head,
}

/// One rank's ranking queries.
#[derive(Clone, Copy, Debug)]
pub struct RankQueries<'a> {
    /// The known entity of each query.
    pub anchors: &'a [u32],
    /// The relation of each query.
    pub relations: &'a [u32],
    /// The true answer of each query.
    pub answers: &'a [u32],
    /// The other known answers of each query, left out of its ranking (filtered setting).
    pub filters: &'a IdLists,
    /// Which side the answers are on.
    pub direction: Direction,
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// The filtered rank of each of this rank's queries among all entities. A collective.
    ///
    /// Scores every query against this rank's shard at once. Where the dense kernels count them
    /// ([`ShardedModel::counts_on_device`]) no score is stored; otherwise keep the global number
    /// of queries per call such that `queries × shard rows` floats fit in memory.
    pub fn rank(&self, q: &RankQueries) -> Result<Vec<f64>, ShardError> {
        let n = q.anchors.len();
        let entities = self.spec.entities as u64;
        let out_of_range = q
            .anchors
            .iter()
            .chain(q.answers)
            .chain(q.filters.all_ids())
            .find(|&&id| id as u64 >= entities)
            .map(|&id| InputError::IdOutOfRange {
                id: id as u64,
                rows: entities,
            });
        let verdict = [q.relations.len(), q.answers.len(), q.filters.len()]
            .into_iter()
            .find(|&l| l != n)
            .map(|got| InputError::BatchLength {
                expected: n as u64,
                got: got as u64,
            })
            .or(out_of_range)
            .or_else(|| self.check_relations(q.relations));
        agree_on_input(self.comm, verdict)?;
        let counts = all_values(self.comm, n as u64)?;
        let total = counts.iter().sum::<u64>() as usize;
        if total == 0 {
            return Ok(Vec::new());
        }
        let rank = self.comm.rank();
        let offset = counts[..rank].iter().sum::<u64>() as usize;
        let answers = all_gather_values(self.comm, q.answers.to_vec())?;
        let mut filters = IdLists::new();
        for part in self.comm.all_gather(&to_bytes(&q.filters.encode()))? {
            filters.extend_encoded(&from_bytes::<u32>(&part));
        }
        let partition = self.entities.partition();
        // The entities to leave out of each query's count: its filter and its answer.
        let skip: Vec<Vec<u32>> = answers
            .iter()
            .enumerate()
            .map(|(b, answer)| {
                let mut mine: Vec<u32> = filters
                    .get(b)
                    .iter()
                    .chain(std::iter::once(answer))
                    .filter_map(|&id| {
                        let (owner, l) = partition.locate(id);
                        (owner == rank).then_some(l)
                    })
                    .collect();
                mine.sort_unstable();
                mine.dedup();
                mine
            })
            .collect();
        let tally = if self.counts_on_device(q.direction) {
            self.dense_tally(q, total, &answers, &skip)?
        } else {
            let scores = self.triple_scores(q, total)?;
            self.host_tally(&scores, total, &answers, &skip)?
        };
        let mut sums = vec![0u64; 2 * total];
        for part in self.comm.all_gather(&to_bytes(&tally))? {
            for (s, v) in sums.iter_mut().zip(from_bytes::<u64>(&part)) {
                *s += v;
            }
        }
        Ok((offset..offset + n)
            .map(|b| 1.0 + sums[b] as f64 + sums[total + b] as f64 / 2.0)
            .collect())
    }

    /// Whether [`ShardedModel::rank`] counts queries of `direction` where the dense product
    /// makes their scores: then a call's memory does not grow with its queries times the
    /// shard's rows, and a call may take many queries.
    pub fn counts_on_device(&self, direction: Direction) -> bool {
        direction == Direction::Tail && self.dense.is_some()
    }

    /// The score of each query's answer, from the rank that holds it (`score(l, b)` reads this
    /// rank's scores), on every rank.
    fn truth(
        &self,
        answers: &[u32],
        score: impl Fn(usize, usize) -> f32,
    ) -> Result<Vec<f32>, ShardError> {
        let rank = self.comm.rank();
        let partition = self.entities.partition();
        let mut truth = vec![0.0f32; answers.len()];
        for (b, &answer) in answers.iter().enumerate() {
            let (owner, l) = partition.locate(answer);
            if owner == rank {
                truth[b] = score(l as usize, b);
            }
        }
        self.comm.all_reduce_sum(&mut truth)?;
        Ok(truth)
    }

    /// `(better…, tied…)` counts of this rank's shard: entities scoring above, and level with,
    /// each query's true answer, leaving out `skip` (local rows). Everything counts as better
    /// than a non-finite true score.
    fn adjust_tally(
        tally: &mut [u64],
        local: usize,
        truth: &[f32],
        skip: &[Vec<u32>],
        score: impl Fn(usize, usize) -> f32,
    ) {
        let total = truth.len();
        for b in 0..total {
            let t = truth[b];
            if !t.is_finite() {
                tally[b] = (local - skip[b].len()) as u64;
                tally[total + b] = 0;
                continue;
            }
            for &l in &skip[b] {
                let s = score(l as usize, b);
                if s > t {
                    tally[b] -= 1;
                } else if s == t {
                    tally[total + b] -= 1;
                }
            }
        }
    }

    /// The tally of tail queries by the dense kernels (`dense_inputs.rs`): the shard's scores
    /// are counted where the product makes them and never stored. The rows a query leaves out
    /// of its count (its answer and its filtered entities) are scored apart, by the same kernel
    /// and so to the same bits; the true scores come from them.
    fn dense_tally(
        &self,
        q: &RankQueries,
        total: usize,
        answers: &[u32],
        skip: &[Vec<u32>],
    ) -> Result<Vec<u64>, ShardError> {
        let width = self.dense_width();
        let dense = self.dense_kernels()?;
        let rows = self.entities.lookup(q.anchors)?;
        let mine = self
            .dense_queries(&rows, &self.relation_rows(), q.relations, false)?
            .rows
            .into_values()?;
        let all = all_gather_values(self.comm, mine)?;
        let local = self.entities.partition().local_rows(self.comm.rank());
        let queries = dense.upload_queries(&all, total);
        // Each query's skipped rows' scores, in `skip[b]`'s order, scored against every query
        // a bounded part of their union at a time.
        let mut picked: Vec<u32> = skip.iter().flatten().copied().collect();
        picked.sort_unstable();
        picked.dedup();
        let mut skipped: Vec<Vec<f32>> = skip.iter().map(|s| vec![0.0; s.len()]).collect();
        let part_rows = (SKIPPED_SCORE_BYTES / (4 * queries.padded)).max(1);
        for part in picked.chunks(part_rows) {
            let table = self.dense_rows(Some(part))?.table;
            let block = TableBlock {
                table: &table,
                table_len: part.len() * width,
                first: 0,
                rows: part.len(),
            };
            let out = dense.score_buffer(part.len(), &queries);
            let stats = dense.stats_buffer(ScoreEpilogue::Scores, part.len(), &queries);
            dense.scores(
                &queries,
                &block,
                &out,
                &stats,
                ScoreEpilogue::Scores,
                1.0,
                0.0,
            );
            let scores = dense.read(out, part.len() * queries.padded)?;
            for (b, rows) in skip.iter().enumerate() {
                for (j, l) in rows.iter().enumerate() {
                    if let Ok(i) = part.binary_search(l) {
                        skipped[b][j] = scores[queries.index(part.len(), i, b)];
                    }
                }
            }
        }
        let score = |l: usize, b: usize| {
            let j = skip[b]
                .binary_search(&(l as u32))
                .expect("scored rows are skipped rows");
            skipped[b][j]
        };
        let truth = self.truth(answers, score)?;
        let mut tally = vec![0u64; 2 * total];
        if local > 0 {
            let mut truth_padded = truth.clone();
            truth_padded.resize(queries.padded, 0.0);
            let truth_handle = dense
                .client()
                .create(cubecl::bytes::Bytes::from_elems(truth_padded));
            let table = self.dense_rows(None)?.table;
            let block = TableBlock {
                table: &table,
                table_len: local * width,
                first: 0,
                rows: local,
            };
            let epilogue = ScoreEpilogue::CountBetter;
            let counts = dense.stats_buffer(epilogue, local, &queries);
            dense.scores(&queries, &block, &truth_handle, &counts, epilogue, 1.0, 0.0);
            let counts = dense.read(counts, dense.stats_len(epilogue, local, &queries))?;
            for (b, [better, tied]) in combine_counts(&counts, queries.padded, total)
                .into_iter()
                .enumerate()
            {
                tally[b] = better;
                tally[total + b] = tied;
            }
        }
        Self::adjust_tally(&mut tally, local, &truth, skip, score);
        Ok(tally)
    }

    /// The tally of scores computed any other way (`scores[e * total + b]`), counted on the host.
    fn host_tally(
        &self,
        scores: &[f32],
        total: usize,
        answers: &[u32],
        skip: &[Vec<u32>],
    ) -> Result<Vec<u64>, ShardError> {
        let local = self.entities.partition().local_rows(self.comm.rank());
        let score = |l: usize, b: usize| scores[l * total + b];
        let truth = self.truth(answers, score)?;
        let mut tally = vec![0u64; 2 * total];
        for b in 0..total {
            let t = truth[b];
            for e in 0..local {
                let s = scores[e * total + b];
                if s > t {
                    tally[b] += 1;
                } else if s == t {
                    tally[total + b] += 1;
                }
            }
        }
        Self::adjust_tally(&mut tally, local, &truth, skip, score);
        Ok(tally)
    }

    /// Scores by the forward kernel over every (query, local entity) triple: any scoring
    /// function, either direction.
    fn triple_scores(&self, q: &RankQueries, total: usize) -> Result<Vec<f32>, ShardError> {
        let rank = self.comm.rank();
        let mine = self.entities.lookup(q.anchors)?;
        let mut rows = all_gather_values(self.comm, mine)?;
        let relations = all_gather_values(self.comm, q.relations.to_vec())?;
        let local = self.entities.partition().local_rows(rank);
        let shard_rows: Vec<u32> = (0..local as u32).collect();
        rows.extend(self.entities.shard().gather(&shard_rows)?);
        let (mut hi, mut ri, mut ti) = (Vec::new(), Vec::new(), Vec::new());
        for e in 0..local as u32 {
            for (b, &r) in relations.iter().enumerate() {
                let (anchor, candidate) = (b as u32, total as u32 + e);
                let (h, t) = match q.direction {
                    Direction::Tail => (anchor, candidate),
                    Direction::Head => (candidate, anchor),
                };
                hi.push(h);
                ri.push(r);
                ti.push(t);
            }
        }
        let ent = self.kernels.upload_f32(rows);
        let triples = self.kernels.upload_triples(&hi, &ri, &ti);
        let scores = self.kernels.forward(&ent, &self.relation_rows(), &triples);
        Ok(self.kernels.read(scores, local * total)?)
    }
}
