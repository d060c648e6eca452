//! Filtered link-prediction metrics — MRR and Hits@1/3/10 over head and tail prediction —
//! computed distributedly (see [`ShardedModel::rank`]).

use std::collections::HashMap;

use crate::agree::sum_f64;
use crate::data::{DataError, Dataset, Split, Triple};
use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{Direction, RankQueries, ScoringFunction, ShardedModel};
use crate::negatives::shared_negatives;
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
    /// `None`: ranked against every entity (the filtered protocol). `Some(n)`: against `n`
    /// sampled entities ([`Protocol::Sampled`]) — not comparable with full ranking.
    #[serde(default)]
    pub sampled_candidates: Option<u64>,
}

impl Metrics {
    /// The protocol in words: `filtered`, or `filtered, against N sampled entities`.
    pub fn protocol(&self) -> String {
        match self.sampled_candidates {
            None => "filtered".into(),
            Some(n) => format!("filtered, against {n} sampled entities"),
        }
    }
}

/// What each query's true answer is ranked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// Every entity, the other known answers left out (the filtered protocol of the
    /// literature).
    #[default]
    Full,
    /// `candidates` distinct entities drawn uniformly for each ranking call (shared by its
    /// queries, fixed by the split and the call), the known answers among them left out, the
    /// true answer added: for graphs where full ranking is too slow. Its MRR is higher than the
    /// full ranking's and is reported as sampled.
    Sampled {
        /// Entities drawn per call.
        candidates: usize,
    },
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
            Some(_) => data.each_train_block(|block| {
                for &[h, r, t] in block {
                    if let Some(list) = tails.get_mut(&(h, r)) {
                        list.push(t);
                    }
                    if let Some(list) = heads.get_mut(&(r, t)) {
                        list.push(h);
                    }
                }
            })?,
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

/// Bytes a rank may spend on one ranking call's scores where they are not counted on the device
/// (`ShardedModel::counts_on_device`): such a call scores every query against the whole shard,
/// 16 bytes a pair with the index lists of scoring that is not a dense product.
const RANKING_BYTES: usize = 512 << 20;

/// Global queries per ranking call: `batch`, or fewer where a shard of `shard_rows` rows would
/// need more than [`RANKING_BYTES`] for them (at least 16).
fn queries_per_call(batch: usize, shard_rows: usize) -> usize {
    batch
        .min((RANKING_BYTES / (16 * shard_rows.max(1))).max(16))
        .max(1)
}

/// Ranks the queries of `split` by `protocol`, `batch` global queries at a time (fewer where
/// a call's scores would not fit). A collective; every rank returns the same metrics.
pub fn evaluate<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    data: &Dataset,
    filters: &Filters,
    split: Split,
    reciprocal: bool,
    batch: usize,
    protocol: Protocol,
) -> Result<Metrics, ShardError> {
    let triples = data.split(split);
    let relations = data.relations.len() as u32;
    let all = queries(triples, filters, reciprocal.then_some(relations));
    let (rank, world) = (model.comm().rank(), model.comm().world());
    let per_call = |direction: Direction| match protocol {
        // Counted on the device: no block of scores to bound.
        Protocol::Full if model.counts_on_device(direction) => batch.max(1),
        Protocol::Full => {
            let partition = model.entities().partition();
            let largest = (0..world)
                .map(|r| partition.local_rows(r))
                .max()
                .unwrap_or(0);
            queries_per_call(batch, largest)
        }
        // At most 65,536 scored triples per rank and call.
        Protocol::Sampled { candidates } => batch.min((world << 16) / (candidates + 1)).max(1),
    };
    let split_key = match split {
        Split::Train => 0,
        Split::Valid => 1,
        Split::Test => 2,
    };
    let mut sums = [0.0f64; 4];
    // Tail and head queries go in separate calls (a call has one direction).
    for direction in [Direction::Tail, Direction::Head] {
        let of_direction: Vec<&Query> = all.iter().filter(|q| q.direction == direction).collect();
        let batch = per_call(direction);
        let rounds = of_direction.len().div_ceil(batch);
        for round in 0..rounds {
            let global =
                &of_direction[round * batch..((round + 1) * batch).min(of_direction.len())];
            let mine = &global[share(global.len(), rank, world)];
            let anchors: Vec<u32> = mine.iter().map(|q| q.anchor).collect();
            let rels: Vec<u32> = mine.iter().map(|q| q.relation).collect();
            let answers: Vec<u32> = mine.iter().map(|q| q.answer).collect();
            let ranks = match protocol {
                Protocol::Full => {
                    let lists: Vec<&[u32]> = mine.iter().map(|q| q.filter).collect();
                    let filter = IdLists::from_lists(&lists);
                    model.rank(&RankQueries {
                        anchors: &anchors,
                        relations: &rels,
                        answers: &answers,
                        filters: &filter,
                        direction,
                    })?
                }
                Protocol::Sampled { candidates } => {
                    let entities = data.entities.len() as u32;
                    let call = 2 * round + (direction == Direction::Head) as usize;
                    let sample =
                        shared_negatives(entities, candidates, 0x6576_616c, split_key, call);
                    sampled_ranks(model, mine, &sample)?
                }
            };
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
        sampled_candidates: match protocol {
            Protocol::Full => None,
            Protocol::Sampled { candidates } => Some(candidates.min(data.entities.len()) as u64),
        },
    })
}

/// The ranks of this rank's queries `mine` against `sample` (the same on every rank): each
/// query's answer and the sample scored by the forward kernel, the known answers in the sample
/// left out; ties count half, a non-finite true score ranks last. A collective.
fn sampled_ranks<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    mine: &[&Query],
    sample: &[u32],
) -> Result<Vec<f64>, ShardError> {
    let per_query = sample.len() + 1;
    let (mut heads, mut rels, mut tails) = (Vec::new(), Vec::new(), Vec::new());
    for q in mine {
        for candidate in std::iter::once(q.answer).chain(sample.iter().copied()) {
            let (h, t) = match q.direction {
                Direction::Tail => (q.anchor, candidate),
                Direction::Head => (candidate, q.anchor),
            };
            heads.push(h);
            rels.push(q.relation);
            tails.push(t);
        }
    }
    let scores = model.score(&heads, &rels, &tails)?;
    Ok(mine
        .iter()
        .zip(scores.chunks(per_query))
        .map(|(q, scores)| {
            let truth = scores[0];
            let counted = sample
                .iter()
                .zip(&scores[1..])
                .filter(|(c, _)| **c != q.answer && q.filter.binary_search(c).is_err());
            let (mut better, mut tied, mut all) = (0u64, 0u64, 0u64);
            for (_, &s) in counted {
                all += 1;
                if s > truth {
                    better += 1;
                } else if s == truth {
                    tied += 1;
                }
            }
            if truth.is_finite() {
                1.0 + better as f64 + tied as f64 / 2.0
            } else {
                1.0 + all as f64
            }
        })
        .collect())
}
