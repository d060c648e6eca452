//! Filtered ranking, distributed: every rank scores the queries against its own shard, counts
//! the entities that score better than (or as well as) the true answer after filtering, and the
//! counts are summed. No rank ever holds the scores of the whole table.
//!
//! Ties count half: the rank is `1 + better + tied / 2`, the mean of the optimistic and the
//! pessimistic rank. A non-finite true score ranks last.

use rowshard_kernels::dense_set::TableBlock;
use rowshard_kernels::kernels::dense::DenseMode;

use super::id_lists::IdLists;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use crate::agree::{agree_on_input, all_values};
use crate::comm::{from_bytes, to_bytes};
use crate::error::{InputError, ShardError};

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
    /// Scores every query against this rank's shard at once: keep the global number of queries
    /// per call such that `queries × shard rows` floats fit in memory.
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
        let mut answers = Vec::with_capacity(total);
        for part in self.comm.all_gather(&to_bytes(q.answers))? {
            answers.extend(from_bytes::<u32>(&part));
        }
        let mut filters = IdLists::new();
        for part in self.comm.all_gather(&to_bytes(&q.filters.encode()))? {
            filters.extend_encoded(&from_bytes::<u32>(&part));
        }
        // scores[e * total + b]: query b against local row e.
        let scores = if q.direction == Direction::Tail && self.dense.is_some() {
            self.dense_scores(q, total)?
        } else {
            self.triple_scores(q, total)?
        };

        let partition = self.entities.partition();
        let local = partition.local_rows(rank);
        let mut truth = vec![0.0f32; total];
        for (b, &answer) in answers.iter().enumerate() {
            let (owner, l) = partition.locate(answer);
            if owner == rank {
                truth[b] = scores[l as usize * total + b];
            }
        }
        self.comm.all_reduce_sum(&mut truth)?;
        let mut tally = vec![0u64; 2 * total];
        let mut skip = Vec::new();
        for b in 0..total {
            skip.clear();
            for &id in filters.get(b).iter().chain(std::iter::once(&answers[b])) {
                let (owner, l) = partition.locate(id);
                if owner == rank {
                    skip.push(l as usize);
                }
            }
            skip.sort_unstable();
            let t = truth[b];
            let (mut better, mut tied) = (0u64, 0u64);
            for e in 0..local {
                if skip.binary_search(&e).is_ok() {
                    continue;
                }
                let s = scores[e * total + b];
                if !t.is_finite() || s > t {
                    better += 1;
                } else if s == t {
                    tied += 1;
                }
            }
            tally[b] = better;
            tally[total + b] = tied;
        }
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

    /// Scores by the query kernel and a dense product with the shard (tail prediction with a
    /// score linear in the tail).
    fn dense_scores(&self, q: &RankQueries, total: usize) -> Result<Vec<f32>, ShardError> {
        let n = q.anchors.len();
        let dim = self.spec.settings.dim;
        let dense = self.dense.as_ref().expect("checked");
        let rows = self.entities.lookup(q.anchors)?;
        let ent = self.kernels.upload_f32(rows);
        let positions: Vec<u32> = (0..n as u32).collect();
        let triples = self
            .kernels
            .upload_triples(&positions, q.relations, &positions);
        let mine = self.kernels.read(
            self.kernels.query(&ent, &self.relation_rows(), &triples)?,
            n * dim,
        )?;
        let mut all = Vec::with_capacity(total * dim);
        for part in self.comm.all_gather(&to_bytes(&mine))? {
            all.extend(from_bytes::<f32>(&part));
        }
        let local = self.entities.partition().local_rows(self.comm.rank());
        let client = self.kernels.client();
        let queries = client.create(cubecl::bytes::Bytes::from_elems(all));
        let out = client.empty((local * total).max(1) * 4);
        let losses = dense.loss_buffer(local.max(1));
        let block = TableBlock {
            table: &self.entities.shard().buffers().weights,
            table_len: local * dim,
            first: 0,
            rows: local,
        };
        dense.scores(
            &queries,
            total,
            &block,
            &out,
            &losses,
            1.0,
            DenseMode::Scores,
        );
        Ok(self.kernels.read(out, local * total)?)
    }

    /// Scores by the forward kernel over every (query, local entity) triple: any scoring
    /// function, either direction.
    fn triple_scores(&self, q: &RankQueries, total: usize) -> Result<Vec<f32>, ShardError> {
        let dim = self.spec.settings.dim;
        let rank = self.comm.rank();
        let mine = self.entities.lookup(q.anchors)?;
        let mut rows = Vec::with_capacity(total * dim);
        for part in self.comm.all_gather(&to_bytes(&mine))? {
            rows.extend(from_bytes::<f32>(&part));
        }
        let mut relations = Vec::with_capacity(total);
        for part in self.comm.all_gather(&to_bytes(q.relations))? {
            relations.extend(from_bytes::<u32>(&part));
        }
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
