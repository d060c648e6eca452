//! Training throughput: steady-state steps of a sharded model on a knowledge graph — the shipped
//! UMLS, and a synthetic graph of a million entities — over thread ranks. Reported as training
//! triples per second (KvsAll: the true triples its queries' labels cover; 1vsAll: half its
//! queries, a triple's tail and head; negative sampling: the true triples, each with its
//! corruptions) and as positives per second: the true (query, answer) scores a step trains,
//! each against its negatives — a 1vsAll triple is two (its tail query and its reciprocal head
//! query, each against the whole sample), a KvsAll label or a negative-sampling triple one. The
//! negatives suite sets shared negatives (1vsAll against a sample) beside independent ones,
//! ComplEx with row-wise AdaGrad.

use std::time::{Duration, Instant};

use rowshard::comm::{Communicator, threads};
use rowshard::data::Dataset;
use rowshard::error::ShardError;
use rowshard::init::SplitMix64;
use rowshard::model::{ModelDefaults, ModelSpec, ScoringFunction};
use rowshard::negatives::{NegativeBatch, SharedSampler};
use rowshard::objective::{Loss, Objective};
use rowshard::step::StepPhase;
use rowshard::train::batches::{QuerySet, batches, epoch_order, share, shuffled};
use rowshard::train::{Mode, Negatives};
use rowshard::{IdLists, ShardedModel, TrainBatch};
use rowshard_kernels::{Backend, Optimizer};

use super::results::Table;

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct TrainCase {
    /// Data set label.
    pub data: String,
    /// KvsAll, 1vsAll or negative sampling.
    pub mode: Mode,
    /// What KvsAll and 1vsAll score against (shared negatives with their chunks).
    pub negatives: Negatives,
    /// The model: a registered name.
    pub model: String,
    /// Both tables' optimizer (learning rate 0.1), when not the model's own.
    pub optimizer: Option<Optimizer>,
    /// Entity row length.
    pub dim: usize,
    /// Global batch (queries or true triples).
    pub batch: usize,
    /// Thread ranks.
    pub ranks: usize,
    /// Timed steps (after one warm-up step).
    pub steps: usize,
}

/// What a case measured.
#[derive(Clone, Debug)]
pub struct TrainFigure {
    /// The case.
    pub case: TrainCase,
    /// Median step time.
    pub step: Duration,
    /// Mean true triples per step.
    pub triples_per_step: f64,
    /// Mean positives per step: true (query, answer) scores, each against its negatives.
    pub positives_per_step: f64,
    /// Resident memory at the end, GiB.
    pub rss_gib: f64,
    /// Rank 0's mean milliseconds per timed step in each phase ([`StepPhase::ALL`] order).
    pub split_ms: Vec<f64>,
}

/// A random graph of `entities` entities and `relations` relations with `triples` training
/// triples; every entity occurs (the first heads are a permutation), as
/// `benches/peers/make_synthetic_kg.py` makes for dicee.
pub fn synthetic(entities: usize, relations: usize, triples: usize, seed: u64) -> Dataset {
    let mut rng = SplitMix64::new(seed);
    let order = shuffled(entities, seed, 0);
    let train = (0..triples)
        .map(|i| {
            let head = if i < entities {
                order[i]
            } else {
                (rng.next_u64() % entities as u64) as u32
            };
            let relation = (rng.next_u64() % relations as u64) as u32;
            let tail = (rng.next_u64() % entities as u64) as u32;
            [head, relation, tail]
        })
        .collect();
    Dataset {
        folder: "synthetic".into(),
        entities: (0..entities).map(|i| format!("e{i}")).collect(),
        relations: (0..relations).map(|r| format!("r{r}")).collect(),
        train,
        stream: None,
        valid: Vec::new(),
        test: Vec::new(),
        unseen: Default::default(),
        unseen_policy: Default::default(),
    }
}

/// Measures a case for one model type: what the registry runs for it.
pub type BenchFn = fn(Backend, &Dataset, &TrainCase) -> Result<TrainFigure, ShardError>;

/// Runs `case` on `data` for model `S`.
pub fn run_model<S: ScoringFunction + ModelDefaults>(
    backend: Backend,
    data: &Dataset,
    case: &TrainCase,
) -> Result<TrainFigure, ShardError> {
    let mut spec = ModelSpec::of::<S>(data.entities.len(), case.mode.model_relations(data));
    spec.settings.dim = case.dim;
    if let Some(optimizer) = case.optimizer {
        let optimizer = rowshard::model::OptimizerSettings::new(optimizer);
        spec.settings.entity = optimizer.clone().with_lr(0.1);
        spec.settings.relation = optimizer.with_lr(0.1);
    }
    let relations = data.relations.len() as u32;
    let sampler = SharedSampler::new(data, case.negatives, 1).map_err(ShardError::Data)?;
    let loss = match case.mode {
        Mode::OneVsAll => Loss::SoftmaxCrossEntropy,
        _ => Loss::BinaryCrossEntropy,
    };
    let kvsall = match case.mode {
        Mode::KvsAll => Some(QuerySet::kvsall(&data.train, relations)),
        Mode::OneVsAll => Some(QuerySet::one_vs_all(&data.train, relations)),
        Mode::NegSample { .. } => None,
    };
    let examples = kvsall.as_ref().map_or(data.train.len(), |s| s.len());
    let order = epoch_order(case.mode, case.negatives, examples, 1, 0);
    let global: Vec<_> = batches(order.len(), case.batch)
        .take(case.steps + 1)
        .collect();
    let results = threads::run(case.ranks, |comm| -> Result<_, ShardError> {
        let client = backend.client()?;
        let mut model = ShardedModel::<S>::new(comm, &client, &spec)?;
        model.set_objective(Objective::new(loss))?;
        let (rank, world) = (comm.rank(), comm.world());
        let mut times = Vec::new();
        let (mut triples, mut positives) = (0usize, 0usize);
        for (step, range) in global.iter().cycle().take(case.steps + 1).enumerate() {
            let batch = &order[range.clone()];
            let global_len = batch.len();
            let mine = &batch[share(batch.len(), rank, world)];
            let start = Instant::now();
            match (&kvsall, case.mode) {
                (Some(set), _) => {
                    let heads: Vec<u32> = mine.iter().map(|&i| set.heads[i as usize]).collect();
                    let rels: Vec<u32> = mine.iter().map(|&i| set.relations[i as usize]).collect();
                    let lists: Vec<&[u32]> =
                        mine.iter().map(|&i| set.labels.get(i as usize)).collect();
                    if step > 0 {
                        let labels = batch
                            .iter()
                            .map(|&i| set.labels.get(i as usize).len())
                            .sum::<usize>();
                        triples += match case.mode {
                            Mode::OneVsAll => batch.len() / 2,
                            _ => labels,
                        };
                        positives += labels;
                    }
                    let labels = IdLists::from_lists(&lists);
                    match (&sampler, case.negatives) {
                        (Some(sampler), Negatives::Shared { batch, chunk, .. }) => {
                            let negatives = sampler.draw(global_len, 0, step);
                            model.train_step(&TrainBatch::SharedNegatives {
                                heads: &heads,
                                relations: &rels,
                                labels: &labels,
                                negatives: &negatives,
                                chunk,
                                batch_negatives: batch,
                            })?
                        }
                        _ => model.train_step(&TrainBatch::AllEntities {
                            heads: &heads,
                            relations: &rels,
                            labels: &labels,
                        })?,
                    };
                }
                (None, Mode::NegSample { neg_ratio }) => {
                    let entities = data.entities.len() as u32;
                    let b =
                        NegativeBatch::new(&data.train, 0, mine, entities, neg_ratio, 0.0, 1, 0);
                    if step > 0 {
                        triples += batch.len();
                        positives += batch.len();
                    }
                    model.train_step(&TrainBatch::Triples {
                        heads: &b.heads,
                        relations: &b.relations,
                        tails: &b.tails,
                        targets: &b.targets,
                    })?;
                }
                (None, _) => unreachable!("KvsAll and 1vsAll build their query sets"),
            }
            if step > 0 {
                times.push(start.elapsed());
            } else {
                model.reset_timings();
            }
        }
        let timings = model.step_timings();
        let split: Vec<f64> = StepPhase::ALL
            .iter()
            .map(|&p| timings.get(p).as_secs_f64() * 1e3 / timings.steps().max(1) as f64)
            .collect();
        times.sort();
        let per_step = |n: usize| n as f64 / case.steps as f64;
        Ok((
            times[times.len() / 2],
            per_step(triples),
            per_step(positives),
            split,
        ))
    });
    let (step, triples_per_step, positives_per_step, split_ms) =
        results.into_iter().next().expect("rank 0")?;
    Ok(TrainFigure {
        case: case.clone(),
        step,
        triples_per_step,
        positives_per_step,
        rss_gib: super::sharded::resident_gib(),
        split_ms,
    })
}

/// FLOPs of a step's dense products where `c` scores every query against one shared sample
/// without batch negatives: the scores, `∂Q` and `∂W`, `2 · dim` each per (query, sampled
/// entity) pair. `None` for any other case.
pub fn product_flops(c: &TrainCase) -> Option<f64> {
    match c.negatives {
        Negatives::Shared {
            uniform,
            batch: false,
            chunk: 0,
            ..
        } => Some(3.0 * 2.0 * (c.dim * c.batch * uniform) as f64),
        _ => None,
    }
}

/// The figures of one or more interleaved rounds as a table (see [`table`]), with each case's
/// effective GFLOP/s ([`product_flops`] over its step time) beside `products`: the rate of the
/// same products alone (one launch chain over the global batch, measured in the same run), per
/// case; their ratio is the roofline ratio.
pub fn table_with_products(
    id: &str,
    section: &str,
    backend: Backend,
    rounds: &[Vec<TrainFigure>],
    products: &[Option<f64>],
) -> Table {
    let mut t = table(id, section, backend, rounds);
    t.columns
        .extend(["step GFLOP/s", "products GFLOP/s", "roofline ratio"].map(String::from));
    t.note.push_str(
        " Step GFLOP/s: the step's dense products (scores, ∂Q, ∂W: 2·dim flops per query and \
         sampled entity each) over its median time; products GFLOP/s: the same products alone \
         (`bench-kernels`' 1vsAll step for the global batch's shape), measured in the same run; \
         the roofline ratio is the first over the second.",
    );
    for (i, (row, rate)) in t.rows.iter_mut().zip(products).enumerate() {
        let f = median_figure(rounds, i);
        match (product_flops(&f.case), rate) {
            (Some(flops), Some(rate)) => {
                let step = flops / f.step.as_secs_f64() / 1e9;
                row.extend([
                    format!("{step:.1}"),
                    format!("{rate:.1}"),
                    format!("{:.2}", step / rate),
                ]);
            }
            _ => row.extend(["–", "–", "–"].map(String::from)),
        }
    }
    t
}

/// The figures of one or more interleaved rounds over the same cases as a table: each case
/// from its median round (by triples/s). Beside each case against shared negatives, its
/// triples/s and its positives/s over those of the case with independent negatives on the same
/// data and ranks in the same round, when there is one (the negatives suite's `negsample(16)`):
/// the median over the rounds, and their range. `id` and `section` place it in the results.
pub fn table(id: &str, section: &str, backend: Backend, rounds: &[Vec<TrainFigure>]) -> Table {
    let first = rounds.first().map_or(&[][..], |r| &r[..]);
    let model = match first.first() {
        Some(f) => match f.case.optimizer {
            Some(optimizer) => format!("{}, {optimizer}", f.case.model),
            None => format!("{}, its own optimizer", f.case.model),
        },
        None => String::new(),
    };
    let mut table = Table::measured(
        id,
        section,
        &format!(
            "Training throughput: {model}, {backend} runtime, thread ranks (median step after one \
             warm-up step; {} round{}, each case from its median round)",
            rounds.len(),
            if rounds.len() == 1 { "" } else { "s" }
        ),
        &[
            "data",
            "mode",
            "dim",
            "batch",
            "ranks",
            "step ms",
            "triples/s",
            "positives/s",
            "RSS GiB",
            "triples/s vs negsample",
            "positives/s vs negsample",
        ],
    );
    table.note = "A triple is a true triple trained (1vsAll: its tail query and its reciprocal \
                  head query; KvsAll: a label); a positive, a true (query, answer) score trained \
                  against its negatives. The ratios are to the case with independent negatives \
                  of the same data and ranks, in the same round."
        .into();
    let rate = |f: &TrainFigure| f.triples_per_step / f.step.as_secs_f64();
    let positive_rate = |f: &TrainFigure| f.positives_per_step / f.step.as_secs_f64();
    for (i, first_figure) in first.iter().enumerate() {
        let c = &first_figure.case;
        let f = median_figure(rounds, i);
        let independent = first.iter().position(|g| {
            matches!(g.case.mode, Mode::NegSample { .. })
                && g.case.data == c.data
                && g.case.ranks == c.ranks
        });
        let ratio = |rate: &dyn Fn(&TrainFigure) -> f64| match (c.negatives, independent) {
            (Negatives::Shared { .. }, Some(j)) => {
                let mut ratios: Vec<f64> =
                    rounds.iter().map(|r| rate(&r[i]) / rate(&r[j])).collect();
                ratios.sort_by(f64::total_cmp);
                let median = ratios[ratios.len() / 2];
                match ratios.len() {
                    1 => format!("{median:.2}×"),
                    _ => format!(
                        "{median:.2}× ({:.2}–{:.2})",
                        ratios[0],
                        ratios[ratios.len() - 1]
                    ),
                }
            }
            _ => "–".to_string(),
        };
        table.rows.push(vec![
            c.data.clone(),
            mode_name(c),
            c.dim.to_string(),
            c.batch.to_string(),
            c.ranks.to_string(),
            format!("{:.2}", f.step.as_secs_f64() * 1e3),
            format!("{:.0}", rate(f)),
            format!("{:.0}", positive_rate(f)),
            format!("{:.2}", f.rss_gib),
            ratio(&rate),
            ratio(&positive_rate),
        ]);
    }
    table
}

/// `table` (of `rounds`) with each case's triples/s over PyTorch-BigGraph's `pbg` edges/s on the
/// same graph (its own timing line, measured in the same session), and PyTorch-BigGraph as a peer.
pub fn beside_pbg(mut table: Table, rounds: &[Vec<TrainFigure>], pbg: f64) -> Table {
    table.columns.push("vs PyTorch-BigGraph".into());
    for (i, row) in table.rows.iter_mut().enumerate() {
        let f = median_figure(rounds, i);
        let rate = f.triples_per_step / f.step.as_secs_f64();
        row.push(format!("{:.2}×", rate / pbg));
    }
    table.peers.push(super::results::Peer {
        name: "PyTorch-BigGraph 1.0.0, 2 Hogwild workers, 256 uniform negatives per chunk of \
               1,000 edges, ComplEx dim 128, row-wise AdaGrad, softmax loss"
            .into(),
        figure: format!(
            "{:.1} k edges/s (its own timing line of one epoch)",
            pbg / 1e3
        ),
        command: "bash benches/peers/negatives.sh".into(),
    });
    table
}

/// Case `i`'s figure from its median round, by triples/s.
fn median_figure(rounds: &[Vec<TrainFigure>], i: usize) -> &TrainFigure {
    let rate = |f: &TrainFigure| f.triples_per_step / f.step.as_secs_f64();
    let mut each: Vec<&TrainFigure> = rounds.iter().map(|r| &r[i]).collect();
    each.sort_by(|a, b| rate(a).total_cmp(&rate(b)));
    each[each.len() / 2]
}

/// The mode column of a case: `negsample(16)`, `1vsall+shared(256+batch per 256)`, `kvsall`.
pub fn mode_name(c: &TrainCase) -> String {
    match (c.mode, c.negatives) {
        (Mode::NegSample { neg_ratio }, _) => format!("negsample({neg_ratio})"),
        (
            other,
            Negatives::Shared {
                uniform,
                batch,
                chunk,
                ..
            },
        ) => {
            let drawn = match (uniform, batch) {
                (0, true) => "batch".to_string(),
                (n, true) => format!("{n}+batch"),
                (n, false) => n.to_string(),
            };
            let chunk = match chunk {
                0 => String::new(),
                chunk => format!(" per {chunk}"),
            };
            format!("{}+shared({drawn}{chunk})", other.name())
        }
        (other, Negatives::All) => other.name().to_string(),
    }
}

/// Where rank 0's steps spent their time, by phase (mean milliseconds per step), for each case
/// of the median round of `rounds`.
pub fn split_table(id: &str, section: &str, rounds: &[Vec<TrainFigure>]) -> Table {
    let mut columns = vec!["mode", "batch", "ranks", "step ms"];
    columns.extend(StepPhase::ALL.iter().map(|p| p.name()));
    let mut table = Table::measured(
        id,
        section,
        "Where a step's time goes: rank 0's mean milliseconds per step in each phase (a phase \
         ends when its results are on the host, so waits on the runtime's workers count where \
         they end)",
        &columns,
    );
    let Some(middle) = rounds.get(rounds.len() / 2) else {
        return table;
    };
    // Negative sampling's steps are not split into phases.
    for f in middle.iter().filter(|f| {
        f.split_ms[..StepPhase::ALL.len() - 1]
            .iter()
            .any(|&ms| ms > 0.0)
    }) {
        let c = &f.case;
        let mut row = vec![
            mode_name(c),
            c.batch.to_string(),
            c.ranks.to_string(),
            format!("{:.2}", f.split_ms.iter().sum::<f64>()),
        ];
        row.extend(f.split_ms.iter().map(|ms| format!("{ms:.2}")));
        table.rows.push(row);
    }
    table
}
