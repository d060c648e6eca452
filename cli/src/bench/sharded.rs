//! The standard workload (docs/benchmarks.md): N rows × D, a global batch of ids split over the ranks,
//! lookup + backward stand-in + fused Adam per step, on thread ranks (or MPI ranks).

use std::time::{Duration, Instant};

use rowshard_kernels::{Backend, DType, HyperParams, Optimizer, TableConfig};

use super::bandwidth::CopyBandwidth;
use rowshard::cache::CachePolicy;
use rowshard::comm::{Communicator, threads};
use rowshard::error::ShardError;
use rowshard::init::{Initializer, SplitMix64};
use rowshard::partition::PartitionScheme;
use rowshard::sharded::{Phase, RowElement, ShardedTable, ShardedTableSpec, StateLocation};

/// How a batch's ids are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IdDistribution {
    /// Uniform over the table.
    Uniform,
    /// Zipf with exponent `s` over ids `0..N` (id 0 the most frequent).
    Zipf(f64),
}

impl IdDistribution {
    /// Short name.
    pub fn name(&self) -> String {
        match self {
            IdDistribution::Uniform => "uniform".into(),
            IdDistribution::Zipf(s) => format!("zipf({s})"),
        }
    }
}

/// Draws ids.
pub struct IdSampler {
    rows: usize,
    cdf: Option<Vec<f64>>,
    rng: SplitMix64,
}

impl IdSampler {
    /// A sampler over `rows` ids.
    pub fn new(rows: usize, distribution: IdDistribution, seed: u64) -> Self {
        let cdf = match distribution {
            IdDistribution::Uniform => None,
            IdDistribution::Zipf(s) => {
                let mut acc = 0.0;
                let mut cdf: Vec<f64> = (1..=rows)
                    .map(|k| {
                        acc += (k as f64).powf(-s);
                        acc
                    })
                    .collect();
                cdf.iter_mut().for_each(|c| *c /= acc);
                Some(cdf)
            }
        };
        Self {
            rows,
            cdf,
            rng: SplitMix64::new(seed),
        }
    }

    /// `n` ids.
    pub fn sample(&mut self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| match &self.cdf {
                None => (self.rng.next_u64() % self.rows as u64) as u32,
                Some(cdf) => {
                    let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    cdf.partition_point(|&c| c < u).min(self.rows - 1) as u32
                }
            })
            .collect()
    }
}

/// One case of the workload.
#[derive(Clone, Debug)]
pub struct Case {
    /// Ranks.
    pub world: usize,
    /// Weight dtype.
    pub dtype: DType,
    /// Id distribution.
    pub ids: IdDistribution,
    /// Partition scheme.
    pub scheme: PartitionScheme,
    /// The table's cache.
    pub cache: CachePolicy,
}

/// What one case measured (rank 0's clock; counts summed over ranks).
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Median step time.
    pub step: Duration,
    /// Ids looked up per step (global batch).
    pub batch: usize,
    /// Unique rows per step, summed over requesting ranks.
    pub unique: usize,
    /// Share of the rows applied that the busiest rank applied.
    pub busiest: f64,
    /// Time per step on rank 0, by phase (`Phase::ALL` order).
    pub split: [Duration; 7],
    /// Bytes the kernels must move per step (gather + fused Adam, all ranks).
    pub kernel_bytes: f64,
    /// Peak resident memory over the timed steps, GiB (the process: all thread ranks).
    pub peak_gib: f64,
    /// What the peak may be: shards and optimizer states plus three times the batch's rows, GiB.
    pub budget_gib: f64,
    /// Resident memory before the tables were created (the runtime, libraries), GiB.
    pub base_gib: f64,
    /// Allocations of at least 64 KiB per timed step (the process).
    pub allocations: f64,
    /// Share of the looked-up unique rows the caches served (all ranks).
    pub hit_rate: f64,
    /// Rows fetched from other ranks per step (all ranks).
    pub fetched: f64,
    /// Cache lines evicted per step (all ranks).
    pub evictions: f64,
    /// Modified lines written back to host memory per step (all ranks; read-write cache).
    pub write_backs: f64,
    /// Bytes the caches kept off the wire per step (all ranks; read-only cache).
    pub not_sent: f64,
}

/// The workload's sizes.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Runtime.
    pub backend: Backend,
    /// Table rows.
    pub rows: usize,
    /// Row length.
    pub dim: usize,
    /// Global batch.
    pub batch: usize,
    /// Timed steps.
    pub steps: usize,
    /// Untimed steps before them (at least one; caches fill during these).
    pub warmup: usize,
    /// Lookups only, no updates (a frozen table).
    pub frozen: bool,
    /// An emulated link between ranks, Gbit/s each way ([`super::link`]); `None`: as they are.
    pub link_gbps: Option<f64>,
}

/// What one rank measured.
#[derive(Clone, Copy, Debug)]
pub struct RankFigures {
    /// Median step time on this rank.
    pub step: Duration,
    /// Unique ids in this rank's last batch.
    pub unique: usize,
    /// Rows this rank's shard applied over the timed steps.
    pub applied: u64,
    /// Time per step, by phase.
    pub split: [Duration; 7],
    /// Peak resident memory of this process over the timed steps, GiB.
    pub peak_gib: f64,
    /// Resident memory of this process before the table was created, GiB.
    pub base_gib: f64,
    /// Large allocations of this process per timed step.
    pub allocations: f64,
    /// Cache hits over the timed steps.
    pub hits: u64,
    /// Cache misses over the timed steps.
    pub misses: u64,
    /// Rows fetched from other ranks per timed step.
    pub fetched: f64,
    /// Cache evictions over the timed steps.
    pub evictions: u64,
    /// Cache write-backs over the timed steps.
    pub write_backs: u64,
    /// Bytes the cache kept off the wire over the timed steps.
    pub not_sent: u64,
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl RankFigures {
    fn encode(&self) -> [u64; 19] {
        let ns = |d: Duration| d.as_nanos() as u64;
        let mut w = [0u64; 19];
        w[0] = ns(self.step);
        w[1] = self.unique as u64;
        w[2] = self.applied;
        for (k, d) in self.split.iter().enumerate() {
            w[3 + k] = ns(*d);
        }
        w[10] = self.peak_gib.to_bits();
        w[11] = self.allocations.to_bits();
        w[12] = self.hits;
        w[13] = self.misses;
        w[14] = self.fetched.to_bits();
        w[15] = self.evictions;
        w[16] = self.write_backs;
        w[17] = self.not_sent;
        w[18] = self.base_gib.to_bits();
        w
    }

    fn decode(w: &[u64]) -> Self {
        let d = Duration::from_nanos;
        let mut split = [Duration::ZERO; 7];
        for (k, s) in split.iter_mut().enumerate() {
            *s = d(w[3 + k]);
        }
        Self {
            step: d(w[0]),
            unique: w[1] as usize,
            applied: w[2],
            split,
            peak_gib: f64::from_bits(w[10]),
            allocations: f64::from_bits(w[11]),
            hits: w[12],
            misses: w[13],
            fetched: f64::from_bits(w[14]),
            evictions: w[15],
            write_backs: w[16],
            not_sent: w[17],
            base_gib: f64::from_bits(w[18]),
        }
    }
}

/// One rank's part of a case.
pub fn run_rank(
    comm: &dyn Communicator,
    workload: &Workload,
    case: &Case,
) -> Result<RankFigures, ShardError> {
    let link = workload
        .link_gbps
        .map(|gbps| super::link::EmulatedLink::new(comm, gbps));
    let comm: &dyn Communicator = match &link {
        Some(link) => link,
        None => comm,
    };
    match case.dtype {
        DType::F32 => run_rank_as::<f32>(comm, workload, case),
        DType::F16 => run_rank_as::<half::f16>(comm, workload, case),
        DType::BF16 => run_rank_as::<half::bf16>(comm, workload, case),
    }
}

/// The steps with rows and gradients held as `T` (the storage dtype), in buffers reused from
/// step to step as a training loop would.
fn run_rank_as<T: RowElement>(
    comm: &dyn Communicator,
    workload: &Workload,
    case: &Case,
) -> Result<RankFigures, ShardError> {
    let client = workload.backend.client()?;
    let spec = ShardedTableSpec {
        rows: workload.rows,
        config: TableConfig::new(Optimizer::Adam, case.dtype, workload.dim),
        scheme: case.scheme.clone(),
        init: Initializer::Uniform {
            bound: 0.1,
            seed: 3,
        },
        state_location: StateLocation::WithShard,
        cache: case.cache,
        hyper: HyperParams::new(Optimizer::Adam),
    };
    // Before any rank allocates: `new` agrees on the description first.
    let base_gib = resident_gib();
    let mut table = ShardedTable::new(comm, &client, &spec)?;
    let per_rank = workload.batch / comm.world();
    let mut sampler = IdSampler::new(workload.rows, case.ids, 1000 + comm.rank() as u64);
    let warmup = workload.warmup.max(1);
    let batches: Vec<Vec<u32>> = (0..warmup + workload.steps)
        .map(|_| sampler.sample(per_rank))
        .collect();
    let unique = rowshard_kernels::Segments::group(batches.last().expect("steps")).len();
    let mut rows = vec![T::default(); per_rank * workload.dim];
    let mut grads = vec![T::default(); per_rank * workload.dim];
    let mut times = Vec::new();
    let mut allocations = 0;
    let mut stats = table.cache_stats();
    for (i, ids) in batches.iter().enumerate() {
        if i == warmup {
            table.reset_timings();
            comm.barrier()?;
            reset_peak_memory();
            allocations = crate::alloc::large_allocations();
            stats = table.cache_stats();
        }
        comm.barrier()?;
        let start = Instant::now();
        table.lookup_into(ids, &mut rows)?;
        // Backward stand-in: a gradient proportional to the looked-up rows.
        for (g, r) in grads.iter_mut().zip(&rows) {
            *g = T::from_f32(0.01 * r.to_f32() + 1e-4);
        }
        if !workload.frozen {
            table.apply_gradients_as(ids, &grads, 0.01)?;
        }
        comm.barrier()?;
        if i >= warmup {
            times.push(start.elapsed());
        }
    }
    let steps = workload.steps.max(1);
    let allocations = (crate::alloc::large_allocations() - allocations) as f64 / steps as f64;
    times.sort();
    let t = table.timings();
    let split = Phase::ALL.map(|p| t.get(p) / steps as u32);
    let end = table.cache_stats();
    Ok(RankFigures {
        step: times[times.len() / 2],
        unique,
        applied: table.rows_applied(),
        split,
        peak_gib: peak_gib(),
        base_gib,
        allocations,
        hits: end.hits - stats.hits,
        misses: end.misses - stats.misses,
        fetched: table.rows_fetched() as f64 / steps as f64,
        evictions: end.evictions - stats.evictions,
        write_backs: end.write_backs - stats.write_backs,
        not_sent: end.bytes_not_sent - stats.bytes_not_sent,
    })
}

/// Makes the kernel forget the process's peak resident memory (Linux), so `peak_gib` measures
/// from here.
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident memory since the last reset, GiB (Linux; 0 elsewhere).
pub fn peak_gib() -> f64 {
    status_gib("VmHWM:")
}

/// Runs one case on the ranks of `comm` (an MPI job, say); rank 0 gets the result.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn run_case_on(
    comm: &dyn Communicator,
    workload: &Workload,
    case: &Case,
) -> Result<Option<CaseResult>, ShardError> {
    let mine = run_rank(comm, workload, case)?;
    let all = comm.all_gather(&rowshard::comm::to_bytes(&mine.encode()))?;
    let figures: Vec<RankFigures> = all
        .iter()
        .map(|b| RankFigures::decode(&rowshard::comm::from_bytes::<u64>(b)))
        .collect();
    let mut result = summarise(workload, case, &figures);
    // Separate processes: their memory and allocations add up.
    result.peak_gib = figures.iter().map(|f| f.peak_gib).sum();
    result.base_gib = figures.iter().map(|f| f.base_gib).sum();
    result.allocations = figures.iter().map(|f| f.allocations).sum();
    Ok((comm.rank() == 0).then_some(result))
}

/// Runs one case on thread ranks.
pub fn run_case_threads(workload: &Workload, case: &Case) -> Result<CaseResult, ShardError> {
    let results = threads::run(case.world, |comm| run_rank(comm, workload, case));
    let results: Vec<_> = results.into_iter().collect::<Result<_, _>>()?;
    Ok(summarise(workload, case, &results))
}

/// Combines the ranks' figures.
pub fn summarise(workload: &Workload, case: &Case, results: &[RankFigures]) -> CaseResult {
    let unique: usize = results.iter().map(|r| r.unique).sum();
    let applied: u64 = results.iter().map(|r| r.applied).sum();
    let busiest =
        results.iter().map(|r| r.applied).max().unwrap_or(0) as f64 / applied.max(1) as f64;
    let row = (workload.dim * case.dtype.size()) as f64;
    let state = (workload.dim * 4) as f64;
    // Gather: read + write each unique row; Adam: weights, m, v read + written, gradients read.
    let kernel_bytes =
        unique as f64 * (2.0 * row + 2.0 * row + 4.0 * state) + (unique * workload.dim * 4) as f64;
    let gib = (1u64 << 30) as f64;
    let per_step = |total: u64| total as f64 / workload.steps.max(1) as f64;
    let hits: u64 = results.iter().map(|r| r.hits).sum();
    let looked_up = hits + results.iter().map(|r| r.misses).sum::<u64>();
    // Weights, Adam's m and v (f32) and its per-row step; rows and gradients of the batch three
    // times over.
    let table = workload.rows as f64 * (row + 2.0 * state + 4.0);
    let batch = workload.batch as f64 * row;
    CaseResult {
        case: case.clone(),
        step: results[0].step,
        batch: workload.batch,
        unique,
        busiest,
        split: results[0].split,
        kernel_bytes,
        peak_gib: results[0].peak_gib,
        base_gib: results[0].base_gib,
        budget_gib: (table + 3.0 * batch) / gib,
        allocations: results[0].allocations,
        hit_rate: hits as f64 / looked_up.max(1) as f64,
        fetched: results.iter().map(|r| r.fetched).sum(),
        evictions: per_step(results.iter().map(|r| r.evictions).sum()),
        write_backs: per_step(results.iter().map(|r| r.write_backs).sum()),
        not_sent: per_step(results.iter().map(|r| r.not_sent).sum()),
    }
}

/// A field of /proc/self/status in GiB (Linux; 0 elsewhere).
fn status_gib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / (1024.0 * 1024.0))
}

/// The process's resident memory, GiB (Linux; 0 elsewhere).
pub fn resident_gib() -> f64 {
    status_gib("VmRSS:")
}

/// Runs every case `rounds` times, interleaved (A, B, …, then A, B, … again), with `run` (which
/// returns `None` on ranks that do not report). One round prints rows as they come; more print
/// each case's median round at the end, then its looked-up rows/s in every round.
pub fn run_rounds(
    cases: &[Case],
    rounds: u32,
    copy: CopyBandwidth,
    mut run: impl FnMut(&Case) -> Result<Option<CaseResult>, ShardError>,
) -> Result<(), ShardError> {
    let mut results = Rounds::new(cases.len(), rounds, copy);
    for _ in 0..rounds {
        for (i, case) in cases.iter().enumerate() {
            if let Some(result) = run(case)? {
                results.add(i, result);
            }
        }
    }
    results.print_medians();
    Ok(())
}

/// Every round's result of every case.
struct Rounds {
    results: Vec<Vec<CaseResult>>,
    rounds: u32,
    copy: CopyBandwidth,
}

impl Rounds {
    /// Room for `cases` cases over `rounds` rounds.
    fn new(cases: usize, rounds: u32, copy: CopyBandwidth) -> Self {
        Self {
            results: vec![Vec::new(); cases],
            rounds,
            copy,
        }
    }

    /// Case `i`'s result of one round.
    fn add(&mut self, i: usize, result: CaseResult) {
        if self.rounds == 1 {
            print_row(&result, &self.copy);
        }
        self.results[i].push(result);
    }

    /// With more than one round: each case's median round, then the range of looked-up rows/s.
    fn print_medians(&mut self) {
        // (Only rank 0 of an MPI job holds results.)
        if self.rounds == 1 || self.results.iter().all(Vec::is_empty) {
            return;
        }
        for results in &mut self.results {
            results.sort_by_key(|r| r.step);
            if let Some(median) = results.get(results.len() / 2) {
                print_row(median, &self.copy);
            }
        }
        println!("looked-up rows/s over the rounds (M, slowest to fastest):");
        for results in &self.results {
            let Some(first) = results.first() else {
                continue;
            };
            let figures: Vec<String> = results
                .iter()
                .rev()
                .map(|r| format!("{:.3}", r.batch as f64 / r.step.as_secs_f64() / 1e6))
                .collect();
            println!("  {}: {}", case_name(&first.case), figures.join(" "));
        }
    }
}

/// A case in a few words.
fn case_name(case: &Case) -> String {
    format!(
        "{} ranks {} {} {} {}",
        case.world,
        case.dtype.name(),
        case.ids.name(),
        scheme_name(&case.scheme),
        case.cache.name()
    )
}

/// A partition scheme's short name.
fn scheme_name(scheme: &PartitionScheme) -> String {
    match scheme {
        PartitionScheme::RoundRobin { block } => format!("rr({block})"),
        other => other.name().to_string(),
    }
}

/// Prints the header of the results table.
pub fn print_header(workload: &Workload, copy: &CopyBandwidth, transport: &str, rounds: u32) {
    let rounds = if rounds > 1 {
        format!("; each case its median of {rounds} interleaved rounds")
    } else {
        String::new()
    };
    println!(
        "rowshard bench: {} rows x {} dim, global batch {} ids, {}, {} runtime, {transport} ranks, \
         {} allocator, median of {} steps{rounds}",
        workload.rows,
        workload.dim,
        workload.batch,
        if workload.frozen {
            "lookups only (frozen table)"
        } else {
            "fused Adam"
        },
        workload.backend,
        crate::alloc::name(),
        workload.steps
    );
    if let Some(gbps) = workload.link_gbps {
        println!(
            "emulated link between ranks: {gbps} Gbit/s each way per rank, {} us latency \
             (each exchange lasts at least its bytes over it; bench/link.rs)",
            super::link::LATENCY.as_micros()
        );
    }
    println!(
        "copy bandwidth (read+write): {:.1} GB/s on 1 thread, {:.1} GB/s on {} threads",
        copy.one_thread, copy.all_threads, copy.threads
    );
    println!(
        "per step on rank 0: {}; allocs = allocations of 64 KiB or more per step (process); \
         peak = resident memory over the timed steps against shards + states + 3x the batch's rows, \
         base = resident memory before the tables were created (runtime, libraries)",
        Phase::ALL.map(|p| p.name()).join(", ")
    );
    println!(
        "caches (all ranks): hits = share of the looked-up rows served by a cache, fetched = rows \
         received from other ranks per step, evicted / written = lines evicted / written back \
         per step, MB saved = bytes kept off the wire per step"
    );
    print!(
        "{:>5} {:<5} {:<9} {:<6} {:<16} {:>11} {:>10}",
        "ranks", "dtype", "ids", "part", "cache", "M lookups/s", "M uniq/s"
    );
    for p in Phase::ALL {
        print!(" {:>8}", p.name());
    }
    println!(
        " {:>7} {:>6} {:>7} {:>7} {:>6} {:>13} {:>6} {:>6} {:>9} {:>8} {:>8} {:>8}",
        "busiest",
        "GB/s",
        "of copy",
        "steps/s",
        "allocs",
        "peak / budget",
        "base",
        "hits",
        "fetched",
        "evicted",
        "written",
        "MB saved"
    );
}

/// Prints one result row.
pub fn print_row(r: &CaseResult, copy: &CopyBandwidth) {
    let s = r.step.as_secs_f64();
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
    let gbs = r.kernel_bytes / s / 1e9;
    let scheme = scheme_name(&r.case.scheme);
    print!(
        "{:>5} {:<5} {:<9} {:<6} {:<16} {:>11.3} {:>10.3}",
        r.case.world,
        r.case.dtype.name(),
        r.case.ids.name(),
        scheme,
        r.case.cache.name(),
        r.batch as f64 / s / 1e6,
        r.unique as f64 / s / 1e6,
    );
    for d in r.split {
        print!(" {:>8}", ms(d));
    }
    println!(
        " {:>6.0}% {:>6.2} {:>6.1}% {:>7.2} {:>6.1} {:>5.2}/{:<5.2}G {:>5.2}G {:>5.1}% {:>9.0} {:>8.0} {:>8.0} {:>8.2}",
        100.0 * r.busiest,
        gbs,
        100.0 * gbs / copy.all_threads,
        1.0 / s,
        r.allocations,
        r.peak_gib,
        r.budget_gib,
        r.base_gib,
        100.0 * r.hit_rate,
        r.fetched,
        r.evictions,
        r.write_backs,
        r.not_sent / 1e6
    );
}
