//! Filtered link-prediction metrics — MRR and Hits@1/3/10 over head and tail prediction —
//! computed distributedly (see [`ShardedModel::rank`]).

use std::collections::HashMap;

use crate::agree::sum_f64;
use crate::data::{DataError, Dataset, Split, Triple};
use crate::error::ShardError;
use crate::model::{Direction, IdLists, RankQueries, ScoringFunction, ShardedModel};
use crate::train::batches::share;

/// Filtered ranking metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Metrics {
    /// Mean reciprocal rank.
    pub mrr: f64,
    /// Fraction of queries ranked first.
    #[serde(rename = "hits@1")]
    pub hits1: f64,
    /// Fraction ranked in the top 3.
    #[serde(rename = "hits@3")]
    pub hits3: f64,
    /// Fraction ranked in the top 10.
    #[serde(rename = "hits@10")]
    pub hits10: f64,
    /// Queries ranked (two per triple: its head and its tail).
    pub queries: u64,
}

/// The known answers of every (entity, relation) query over the whole data set, both ways.
pub struct Filters {
    tails: HashMap<(u32, u32), Vec<u32>>,
    heads: HashMap<(u32, u32), Vec<u32>>,
}

impl Filters {
    /// From every split of `data`. Training triples that stream from a prepared folder are read
    /// once, a block at a time, and only those that answer a valid or test query are kept.
    pub fn new(data: &Dataset) -> Result<Self, DataError> {
        let mut tails: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        let mut heads: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for &[h, r, t] in data.valid.iter().chain(&data.test) {
            tails.entry((h, r)).or_default().push(t);
            heads.entry((r, t)).or_default().push(h);
        }
        match &data.stream {
            None => {
                for &[h, r, t] in &data.train {
                    tails.entry((h, r)).or_default().push(t);
                    heads.entry((r, t)).or_default().push(h);
                }
            }
            Some(file) => {
                let mut block = Vec::new();
                for first in (0..file.len()).step_by(1 << 20) {
                    file.read(first..(first + (1 << 20)).min(file.len()), &mut block)?;
                    for &[h, r, t] in &block {
                        if let Some(list) = tails.get_mut(&(h, r)) {
                            list.push(t);
                        }
                        if let Some(list) = heads.get_mut(&(r, t)) {
                            list.push(h);
                        }
                    }
                }
            }
        }
        for list in tails.values_mut().chain(heads.values_mut()) {
            list.sort_unstable();
            list.dedup();
        }
        Ok(Self { tails, heads })
    }
}

/// One ranking query: the anchor, the relation as the model scores it, the answer, the
/// direction and the known answers to leave out.
struct Query<'a> {
    anchor: u32,
    relation: u32,
    answer: u32,
    direction: Direction,
    filter: &'a [u32],
}

/// The queries of `triples`: tail prediction `(h, r, ?)`, then head prediction — as tail
/// prediction `(t, r⁻¹, ?)` when the model has reciprocal relations, else `(?, r, t)`.
fn queries<'a>(
    triples: &[Triple],
    filters: &'a Filters,
    reciprocal: Option<u32>,
) -> Vec<Query<'a>> {
    let mut out = Vec::with_capacity(2 * triples.len());
    for &[h, r, t] in triples {
        out.push(Query {
            anchor: h,
            relation: r,
            answer: t,
            direction: Direction::Tail,
            filter: &filters.tails[&(h, r)],
        });
        let filter = &filters.heads[&(r, t)];
        out.push(match reciprocal {
            Some(relations) => Query {
                anchor: t,
                relation: r + relations,
                answer: h,
                direction: Direction::Tail,
                filter,
            },
            None => Query {
                anchor: t,
                relation: r,
                answer: h,
                direction: Direction::Head,
                filter,
            },
        });
    }
    out
}

/// Ranks the queries of `split` (those of `limit` triples at most, when given), `batch` global
/// queries at a time. A collective; every rank returns the same metrics.
pub fn evaluate<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    data: &Dataset,
    filters: &Filters,
    split: Split,
    reciprocal: bool,
    batch: usize,
) -> Result<Metrics, ShardError> {
    let triples = data.split(split);
    let relations = data.relations.len() as u32;
    let all = queries(triples, filters, reciprocal.then_some(relations));
    let (rank, world) = (model.comm().rank(), model.comm().world());
    let mut sums = [0.0f64; 4];
    // Tail and head queries go in separate calls (a call has one direction).
    for direction in [Direction::Tail, Direction::Head] {
        let of_direction: Vec<&Query> = all.iter().filter(|q| q.direction == direction).collect();
        let rounds = of_direction.len().div_ceil(batch.max(1));
        for round in 0..rounds {
            let global =
                &of_direction[round * batch..((round + 1) * batch).min(of_direction.len())];
            let mine = &global[share(global.len(), rank, world)];
            let anchors: Vec<u32> = mine.iter().map(|q| q.anchor).collect();
            let rels: Vec<u32> = mine.iter().map(|q| q.relation).collect();
            let answers: Vec<u32> = mine.iter().map(|q| q.answer).collect();
            let lists: Vec<&[u32]> = mine.iter().map(|q| q.filter).collect();
            let filter = IdLists::from_lists(&lists);
            let ranks = model.rank(&RankQueries {
                anchors: &anchors,
                relations: &rels,
                answers: &answers,
                filters: &filter,
                direction,
            })?;
            for r in ranks {
                sums[0] += 1.0 / r;
                sums[1] += (r <= 1.0) as u8 as f64;
                sums[2] += (r <= 3.0) as u8 as f64;
                sums[3] += (r <= 10.0) as u8 as f64;
            }
        }
    }
    let comm = model.comm();
    let n = all.len() as f64;
    let total = |x: f64| -> Result<f64, ShardError> { Ok(sum_f64(comm, x)? / n.max(1.0)) };
    Ok(Metrics {
        mrr: total(sums[0])?,
        hits1: total(sums[1])?,
        hits3: total(sums[2])?,
        hits10: total(sums[3])?,
        queries: all.len() as u64,
    })
}
