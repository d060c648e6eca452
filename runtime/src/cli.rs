//! The `rowshard` command line.

use clap::{Parser, Subcommand};

use rowshard_kernels::{Backend, DType};

use crate::bench::{bandwidth, kernels::KernelBench, sharded};
use crate::partition::PartitionScheme;

/// rowshard: row-wise sharded embedding tables with fused CubeCL optimizer kernels.
#[derive(Parser, Debug)]
#[command(name = "rowshard", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// One fused Adam step on a local table: what it did and how long the JIT took.
    Demo {
        /// Runtime: cpu, wgpu or cuda.
        #[arg(long, default_value = "cpu", value_parser = parse_backend)]
        backend: Backend,
    },
    /// Benchmarks.
    Bench {
        /// Which benchmark.
        #[command(subcommand)]
        which: BenchCommand,
    },
}

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The standard sharded workload: lookup + fused Adam across 1, 2 and 4 ranks.
    Sharded {
        /// Runtime: cpu, wgpu or cuda.
        #[arg(long, default_value = "cpu", value_parser = parse_backend)]
        backend: Backend,
        /// Table rows.
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        /// Row length.
        #[arg(long, default_value_t = 128)]
        dim: usize,
        /// Global batch of ids per step, split evenly over the ranks.
        #[arg(long, default_value_t = 65_536)]
        batch: usize,
        /// Timed steps per case (after one warm-up step).
        #[arg(long, default_value_t = 5)]
        steps: usize,
        /// Rank counts (thread ranks), comma-separated.
        #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
        ranks: Vec<usize>,
        /// Weight dtypes, comma-separated.
        #[arg(long, default_value = "f32,bf16", value_delimiter = ',', value_parser = parse_dtype)]
        dtypes: Vec<DType>,
        /// Id distributions: uniform, zipf (exponent 1.0).
        #[arg(long, default_value = "uniform,zipf", value_delimiter = ',')]
        ids: Vec<String>,
        /// Partition schemes: even, round-robin (blocks of one row).
        #[arg(long, default_value = "even,round-robin", value_delimiter = ',')]
        partitions: Vec<String>,
    },
    /// Gather and fused Adam kernels on one device, against the copy bandwidth.
    Kernels {
        /// Runtime: cpu, wgpu or cuda.
        #[arg(long, default_value = "cpu", value_parser = parse_backend)]
        backend: Backend,
        /// Table rows.
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        /// Row length.
        #[arg(long, default_value_t = 128)]
        dim: usize,
        /// Ids per step.
        #[arg(long, default_value_t = 65_536)]
        batch: usize,
        /// Weight dtypes, comma-separated.
        #[arg(long, default_value = "f32,bf16", value_delimiter = ',', value_parser = parse_dtype)]
        dtypes: Vec<DType>,
        /// Timed repeats per figure.
        #[arg(long, default_value_t = 7)]
        repeats: usize,
    },
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    Backend::from_name(s)
        .ok_or_else(|| format!("unknown runtime `{s}`; expected one of: cpu, wgpu, cuda"))
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

fn parse_partition(s: &str) -> Result<PartitionScheme, String> {
    match s {
        "even" => Ok(PartitionScheme::Even),
        "round-robin" => Ok(PartitionScheme::RoundRobin { block: 1 }),
        _ => Err(format!(
            "unknown partition `{s}`; expected even or round-robin"
        )),
    }
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_name(s)
        .ok_or_else(|| format!("unknown dtype `{s}`; expected one of: f32, f16, bf16"))
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Demo { backend } => crate::demo::run(backend)?,
        Command::Bench { which } => match which {
            BenchCommand::Sharded {
                backend,
                rows,
                dim,
                batch,
                steps,
                ranks,
                dtypes,
                ids,
                partitions,
            } => {
                let workload = sharded::Workload {
                    backend,
                    rows,
                    dim,
                    batch,
                    steps,
                };
                let ids = ids
                    .iter()
                    .map(|s| parse_ids(s))
                    .collect::<Result<Vec<_>, _>>()?;
                let partitions = partitions
                    .iter()
                    .map(|s| parse_partition(s))
                    .collect::<Result<Vec<_>, _>>()?;
                let copy = bandwidth::measure(256 << 20);
                sharded::print_header(&workload, &copy, "thread");
                for &world in &ranks {
                    for &dtype in &dtypes {
                        for &dist in &ids {
                            for scheme in &partitions {
                                let case = sharded::Case {
                                    world,
                                    dtype,
                                    ids: dist,
                                    scheme: scheme.clone(),
                                };
                                let result = sharded::run_case_threads(&workload, &case)?;
                                sharded::print_row(&result, &copy);
                            }
                        }
                    }
                }
            }
            BenchCommand::Kernels {
                backend,
                rows,
                dim,
                batch,
                dtypes,
                repeats,
            } => {
                let bench = KernelBench {
                    backend,
                    rows,
                    dim,
                    batch,
                    dtypes,
                    repeats,
                };
                let figures = bench.run()?;
                let copy = bandwidth::measure(256 << 20);
                crate::bench::kernels::print(&bench, &figures, &copy);
            }
        },
    }
    Ok(())
}
