//! The `rowshard` command line.

use clap::{Parser, Subcommand};

use rowshard_kernels::{Backend, DType};

use crate::bench::{bandwidth, kernels::KernelBench};

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

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_name(s)
        .ok_or_else(|| format!("unknown dtype `{s}`; expected one of: f32, f16, bf16"))
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Demo { backend } => crate::demo::run(backend)?,
        Command::Bench { which } => match which {
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
