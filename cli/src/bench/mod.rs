//! Benchmarks printed by `rowshard bench` and `rowshard bench-kernels`: medians and ratios, never
//! asserted in tests.

pub mod bandwidth;
pub mod dense;
pub mod kernels;
pub mod link;
pub mod results;
pub mod scoring;
pub mod sharded;
pub mod stats;
pub mod training;

use clap::Args;
use rowshard::cache::CachePolicy;
use rowshard::partition::PartitionScheme;
use rowshard::recipe::values::{Count, parse};
use rowshard::train::CommKind;
use rowshard_kernels::{Backend, DType};

use crate::registry::Registry;
use kernels::KernelBench;

/// The groups of kernels `rowshard bench-kernels` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelPart {
    /// Gather and fused Adam at the standard table sizes.
    Table,
    /// DistMult's generated forward and backward kernels.
    Scoring,
    /// The dense products and losses of KvsAll, 1vsAll and ranking.
    Dense,
}

/// The standard workload's sizes, dtypes and runtime (docs/benchmarks.md), shared by both benchmarks.
#[derive(Args, Debug)]
pub struct WorkloadArgs {
    /// CubeCL runtime: cpu, wgpu or cuda.
    #[arg(long = "runtime", default_value = "cpu", value_parser = parse::<Backend>)]
    backend: Backend,
    /// Table rows.
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Row length.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Ids per step (for `bench`, the global batch, split evenly over the ranks).
    #[arg(long, default_value_t = 65_536)]
    batch: usize,
    /// Weight dtypes, comma-separated.
    #[arg(long, default_value = "f32,bf16", value_delimiter = ',', value_parser = parse::<DType>)]
    dtypes: Vec<DType>,
}

/// Which benchmark `rowshard bench` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// The standard sharded-table workload (docs/benchmarks.md).
    Table,
    /// Training throughput: UMLS and a synthetic graph of `--synthetic-entities` entities.
    Training,
    /// Shared negatives (1vsAll against 256 or 1,024 sampled entities, with and without batch
    /// negatives) against 16 independent negatives per triple: the synthetic graph, ComplEx
    /// dim 128, row-wise AdaGrad.
    Negatives,
}

/// Arguments of `rowshard bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value_t = Suite::Table)]
    suite: Suite,
    /// PyTorch-BigGraph's edges per second on the same graph, from its own timing line
    /// (`benches/peers/negatives.sh` measures it just before): the negatives suite's table gives
    /// each case's triples/s over it.
    #[arg(long)]
    pbg_edges_per_s: Option<f64>,
    /// Only these cases of the negatives suite, by their mode column, comma-separated (e.g.
    /// `negsample(16),1vsall+shared(256)`) [default: every case].
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Entities of the synthetic graph (training suite).
    #[arg(long, default_value_t = 1_000_000)]
    synthetic_entities: usize,
    /// Training triples of the synthetic graph (training suite).
    #[arg(long, default_value_t = 2_000_000)]
    synthetic_triples: usize,
    /// Sizes, dtypes and runtime.
    #[command(flatten)]
    workload: WorkloadArgs,
    /// How ranks are started: threads of this process, or the processes of an MPI job (start
    /// with `mpirun -np N`; needs the `mpi` feature); auto: MPI when started by mpirun.
    #[arg(long, default_value = "auto", value_parser = parse::<CommKind>)]
    comm: CommKind,
    /// The model the training suite measures (a registered name; default: its DistMult and
    /// ComplEx cases).
    #[arg(long)]
    model: Option<String>,
    /// Timed steps per case.
    #[arg(long, default_value_t = 7)]
    steps: usize,
    /// Untimed steps before the timed ones (caches fill during these).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Rounds over all the cases, interleaved (case A, B, …, then A, B, … again); each case is
    /// reported from its median round, with the range over rounds. On a shared, noisy machine
    /// this is what makes two cases comparable.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Ranks: thread ranks of this process, a count or several to compare, comma-separated
    /// (under MPI, the job's size counts).
    #[arg(long, default_value = "1,2,4", value_delimiter = ',', value_parser = parse::<Count>)]
    ranks: Vec<Count>,
    /// Id distributions: uniform, zipf (exponent 1.0).
    #[arg(long, default_value = "uniform,zipf", value_delimiter = ',', value_parser = parse_ids)]
    ids: Vec<sharded::IdDistribution>,
    /// Partition schemes: even, round-robin (blocks of one row).
    #[arg(long, default_value = "even,round-robin", value_delimiter = ',', value_parser = parse::<PartitionScheme>)]
    partitions: Vec<PartitionScheme>,
    /// Caches, comma-separated: `none`, `read-only:R` (R a ratio such as 1/8 or 0.125).
    #[arg(long, default_value = "none", value_delimiter = ',', value_parser = parse_cache)]
    cache: Vec<CachePolicy>,
    /// Lookups only, no updates (inference, or a frozen table): what a read-only cache is for.
    #[arg(long)]
    frozen: bool,
    /// Record the suite's table in this results file (benches/results.json), replacing the
    /// table of the same id; docs/benchmarks.md is generated from it.
    #[arg(long)]
    record: Option<std::path::PathBuf>,
    /// Emulate a network link of this many Gbit/s (each way, per rank) between the ranks: each
    /// exchange lasts at least its bytes over it. Shows what a cache is worth between hosts.
    #[arg(long, value_parser = parse_positive)]
    link_gbps: Option<f64>,
}

fn parse_ids(s: &str) -> Result<sharded::IdDistribution, String> {
    match s {
        "uniform" => Ok(sharded::IdDistribution::Uniform),
        "zipf" => Ok(sharded::IdDistribution::Zipf(1.0)),
        _ => Err(format!(
            "unknown id distribution `{s}`; expected uniform or zipf"
        )),
    }
}

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

fn parse_cache(s: &str) -> Result<CachePolicy, String> {
    let ratio = |r: &str| -> Result<f64, String> {
        let value = match r.split_once('/') {
            Some((a, b)) => a
                .trim()
                .parse::<f64>()
                .ok()
                .zip(b.trim().parse::<f64>().ok())
                .map(|(a, b)| a / b),
            None => r.trim().parse::<f64>().ok(),
        };
        value.ok_or_else(|| format!("cache ratio `{r}` is not a number or a fraction such as 1/8"))
    };
    let policy = match s.split_once(':') {
        None if s == "none" => CachePolicy::None,
        Some(("read-only", r)) => CachePolicy::ReadOnly { ratio: ratio(r)? },
        Some(("read-write", r)) => CachePolicy::ReadWrite { ratio: ratio(r)? },
        _ => {
            return Err(format!(
                "unknown cache `{s}`; expected none, read-only:RATIO or read-write:RATIO"
            ));
        }
    };
    policy.validate().map_err(|e| e.to_string())?;
    Ok(policy)
}

/// Arguments of `rowshard bench-kernels`.
#[derive(Args, Debug)]
pub struct KernelArgs {
    /// Sizes, dtypes and runtime.
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Timed repeats per figure.
    #[arg(long, default_value_t = 7)]
    repeats: usize,
    /// Which kernels, comma-separated: table (gather, fused Adam), scoring (generated
    /// kernels), dense (products and losses).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "table,scoring,dense"
    )]
    parts: Vec<KernelPart>,
    /// Record the dense products' table in this results file (benches/results.json).
    #[arg(long)]
    record: Option<std::path::PathBuf>,
}

/// Runs `rowshard bench-kernels`.
pub fn run_kernels(args: KernelArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (w, repeats, parts) = (&args.workload, args.repeats, &args.parts);
    if parts.contains(&KernelPart::Table) {
        let bench = KernelBench {
            backend: w.backend,
            rows: w.rows,
            dim: w.dim,
            batch: w.batch,
            dtypes: w.dtypes.clone(),
            repeats,
        };
        let figures = bench.run()?;
        let copy = bandwidth::measure(256 << 20);
        crate::bench::kernels::print(&bench, &figures, &copy);
    }
    if parts.contains(&KernelPart::Scoring) {
        let scoring = crate::bench::scoring::distmult(w.backend, w.dim, w.batch, repeats)?;
        crate::bench::scoring::print(w.dim, w.batch, &scoring);
    }
    if !parts.contains(&KernelPart::Dense) {
        return Ok(());
    }
    let dense =
        crate::bench::dense::run(w.backend, &crate::bench::dense::SHAPES, &w.dtypes, repeats)?;
    show(
        &dense::table(w.backend, repeats, &dense),
        args.record.as_deref(),
    )?;
    Ok(())
}

/// Prints `table`, and records it in the results file `record` when given.
fn show(
    table: &results::Table,
    record: Option<&std::path::Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    table.print();
    if let Some(path) = record {
        table.record(path)?;
        eprintln!("  recorded as `{}` in {}", table.id, path.display());
    }
    Ok(())
}

/// Runs a training case `case` on `data`, for its model of `registry`.
fn run_case(
    registry: &Registry,
    backend: Backend,
    data: &rowshard::data::Dataset,
    case: &training::TrainCase,
) -> Result<training::TrainFigure, Box<dyn std::error::Error>> {
    Ok((registry.find(&case.model)?.bench)(backend, data, case)?)
}

fn cases(args: &BenchArgs, worlds: &[usize]) -> Vec<sharded::Case> {
    let mut cases = Vec::new();
    for &world in worlds {
        for &dtype in &args.workload.dtypes {
            for &ids in &args.ids {
                for scheme in &args.partitions {
                    for &cache in &args.cache {
                        cases.push(sharded::Case {
                            world,
                            dtype,
                            ids,
                            scheme: scheme.clone(),
                            cache,
                        });
                    }
                }
            }
        }
    }
    cases
}

/// Runs `rowshard bench`, with the models of `registry` (the training suites).
pub fn run(args: BenchArgs, registry: &Registry) -> Result<(), Box<dyn std::error::Error>> {
    if args.suite == Suite::Negatives {
        return bench_negatives(&args, registry);
    }
    if args.suite == Suite::Training {
        return bench_training(&args, registry);
    }
    let w = &args.workload;
    let workload = sharded::Workload {
        backend: w.backend,
        rows: w.rows,
        dim: w.dim,
        batch: w.batch,
        steps: args.steps,
        warmup: args.warmup,
        frozen: args.frozen,
        link_gbps: args.link_gbps,
    };
    match args.comm.resolved() {
        CommKind::Threads | CommKind::Auto => {
            let copy = bandwidth::measure(256 << 20);
            sharded::print_header(&workload, &copy, "thread", args.rounds);
            let ranks: Vec<usize> = args.ranks.iter().map(|r| r.0 as usize).collect();
            sharded::run_rounds(&cases(&args, &ranks), args.rounds, copy, |case| {
                sharded::run_case_threads(&workload, case).map(Some)
            })?;
        }
        #[cfg(feature = "mpi")]
        CommKind::Mpi => {
            use rowshard::comm::Communicator;
            let comm = rowshard::comm::mpi::MpiComm::init()?;
            // Rank 0 measures the copy bandwidth alone, so the ranks do not share the bus.
            comm.barrier()?;
            let copy = if comm.rank() == 0 {
                bandwidth::measure(256 << 20)
            } else {
                bandwidth::CopyBandwidth {
                    one_thread: 0.0,
                    all_threads: 0.0,
                    threads: 0,
                }
            };
            comm.barrier()?;
            if comm.rank() == 0 {
                sharded::print_header(&workload, &copy, "MPI", args.rounds);
            }
            sharded::run_rounds(&cases(&args, &[comm.world()]), args.rounds, copy, |case| {
                sharded::run_case_on(&comm, &workload, case)
            })?;
        }
        #[cfg(not(feature = "mpi"))]
        CommKind::Mpi => {
            return Err(
                "this rowshard was built without MPI; rebuild with `--features mpi`".into(),
            );
        }
    }
    Ok(())
}

fn bench_negatives(
    args: &BenchArgs,
    registry: &Registry,
) -> Result<(), Box<dyn std::error::Error>> {
    use crate::bench::training::{TrainCase, synthetic};
    use rowshard::train::{Mode, Negatives};
    let big = synthetic(args.synthetic_entities, 100, args.synthetic_triples, 7);
    let label = format!("synthetic {}M", args.synthetic_entities as f64 / 1e6);
    let uniform = Negatives::uniform;
    let mut cases = Vec::new();
    for ranks in args.ranks.iter().map(|r| r.0 as usize) {
        let case = |mode, negatives, batch| TrainCase {
            data: label.clone(),
            mode,
            negatives,
            model: "complex".into(),
            optimizer: Some(rowshard_kernels::Optimizer::RowWiseAdaGrad),
            dim: 128,
            batch,
            ranks,
            steps: args.steps,
        };
        cases.extend([
            case(Mode::NegSample { neg_ratio: 16 }, Negatives::All, 1024),
            // 2,048 queries: 1,024 triples, each against the sample for its tail and its head.
            case(Mode::OneVsAll, uniform(256, false), 2048),
            case(Mode::OneVsAll, uniform(1024, false), 2048),
            // PyTorch-BigGraph's chunks: 256 negatives drawn for each 256 queries.
            case(Mode::OneVsAll, uniform(256, false).in_chunks(256), 2048),
            case(Mode::OneVsAll, uniform(256, false), 8192),
            case(Mode::OneVsAll, uniform(256, true), 2048),
            // PyTorch-BigGraph's batch negatives: each chunk's own true tails, with a uniform
            // draw and alone (`num_uniform_negs = 0`).
            case(Mode::OneVsAll, uniform(256, true).in_chunks(256), 2048),
            case(Mode::OneVsAll, uniform(0, true).in_chunks(256), 2048),
        ]);
    }
    if !args.only.is_empty() {
        cases.retain(|c| args.only.contains(&training::mode_name(c)));
        if cases.is_empty() {
            return Err(
                format!("--only {} names no case of the suite", args.only.join(",")).into(),
            );
        }
    }
    // Rounds over every case, interleaved, so that a slow spell of the machine hits a shared
    // case and the independent one it is compared with alike.
    let mut rounds = Vec::new();
    for round in 1..=args.rounds {
        let mut figures = Vec::with_capacity(cases.len());
        for case in &cases {
            figures.push(run_case(registry, args.workload.backend, &big, case)?);
            eprintln!(
                "  round {round}: measured {:?} on {} ranks",
                case.mode, case.ranks
            );
        }
        rounds.push(figures);
    }
    // The same products alone, for each shape a case scores (its global batch against its
    // sample), measured after the steps in the same run.
    let mut rates: Vec<((usize, usize), f64)> = Vec::new();
    let mut products = Vec::with_capacity(cases.len());
    for case in &cases {
        let rows = match (training::product_flops(case), case.negatives) {
            (Some(_), Negatives::Shared { uniform, .. }) => uniform,
            _ => {
                products.push(None);
                continue;
            }
        };
        let key = (case.batch, rows);
        let rate = match rates.iter().find(|(k, _)| *k == key) {
            Some(&(_, rate)) => rate,
            None => {
                let shape = dense::DenseShape {
                    label: "a step's products",
                    queries: case.batch,
                    rows,
                    dim: case.dim,
                };
                let figures = dense::run(args.workload.backend, &[shape], &[DType::F32], 5)?;
                let rate = figures
                    .iter()
                    .find(|f| f.what == dense::SOFTMAX_STEP)
                    .map_or(f64::NAN, |f| f.gflops());
                eprintln!("  measured the products of {} × {rows} alone", case.batch);
                rates.push((key, rate));
                rate
            }
        };
        products.push(Some(rate));
    }
    let table = training::table_with_products(
        "negatives-bench",
        "Shared negatives (1 M entities)",
        args.workload.backend,
        &rounds,
        &products,
    );
    let table = match args.pbg_edges_per_s {
        Some(pbg) => training::beside_pbg(table, &rounds, pbg),
        None => table,
    };
    show(&table, args.record.as_deref())?;
    let split = training::split_table(
        "negatives-split",
        "Shared negatives (1 M entities)",
        &rounds,
    );
    show(&split, args.record.as_deref())
}

fn bench_training(args: &BenchArgs, registry: &Registry) -> Result<(), Box<dyn std::error::Error>> {
    use crate::bench::training::{TrainCase, synthetic};
    use rowshard::train::{Mode, Negatives};
    let umls =
        rowshard::data::Dataset::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/umls"))?;
    let big = synthetic(args.synthetic_entities, 100, args.synthetic_triples, 7);
    let label = format!("synthetic {}M", args.synthetic_entities as f64 / 1e6);
    let steps = args.steps;
    let model = args.model.clone().unwrap_or_else(|| "distmult".into());
    let ranks: Vec<usize> = args.ranks.iter().map(|r| r.0 as usize).collect();
    let mut figures = Vec::new();
    let mut cases: Vec<(&rowshard::data::Dataset, TrainCase)> = Vec::new();
    for &ranks in &ranks {
        for mode in [Mode::KvsAll, Mode::NegSample { neg_ratio: 4 }] {
            cases.push((
                &umls,
                TrainCase {
                    data: "UMLS".into(),
                    mode,
                    negatives: Negatives::All,
                    model: model.clone(),
                    optimizer: None,
                    dim: 32,
                    batch: 1024,
                    ranks,
                    steps: steps * 3,
                },
            ));
        }
    }
    for &ranks in &ranks {
        cases.push((
            &big,
            TrainCase {
                data: label.clone(),
                mode: Mode::NegSample { neg_ratio: 4 },
                negatives: Negatives::All,
                model: model.clone(),
                optimizer: None,
                dim: 128,
                batch: 1024,
                ranks,
                steps,
            },
        ));
        cases.push((
            &big,
            TrainCase {
                data: label.clone(),
                mode: Mode::KvsAll,
                negatives: Negatives::All,
                model: model.clone(),
                optimizer: None,
                dim: 128,
                batch: 128,
                ranks,
                steps: steps.min(3),
            },
        ));
    }
    for (data, case) in &cases {
        match run_case(registry, args.workload.backend, data, case) {
            Ok(figure) => figures.push(figure),
            // A model whose score the dense kernels cannot take has no KvsAll figures.
            Err(e) if case.mode == Mode::KvsAll => {
                eprintln!("  skipped {} {:?}: {e}", case.data, case.mode);
                continue;
            }
            Err(e) => return Err(e),
        }
        eprintln!(
            "  measured {} {:?} on {} ranks",
            case.data, case.mode, case.ranks
        );
    }
    let table = training::table(
        "training-suite",
        "Training throughput",
        args.workload.backend,
        &[figures],
    );
    show(&table, args.record.as_deref())
}
