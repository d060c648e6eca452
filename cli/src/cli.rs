//! The `rowshard` command line.

use clap::{Parser, Subcommand};
use rowshard::recipe::values::parse;
use rowshard_kernels::Backend;

use crate::bench::{BenchArgs, KernelArgs};
use crate::registry::Registry;

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
    /// Train a model on a knowledge graph, sharded over ranks; evaluate it (filtered MRR,
    /// Hits@k); checkpoint it. With no arguments: DistMult on the shipped UMLS, 2 ranks, CPU.
    #[command(args_override_self = true)]
    Train(Box<crate::train::TrainArgs>),
    /// Search a space of recipe keys for a model's best settings on a data set within a budget:
    /// quasi-random trials, then successive halving over rungs of more epochs; the search folder
    /// is a resumable record.
    Search(Box<crate::search::SearchArgs>),
    /// Write a checkpoint's full entity and relation tables (f32) and vocabularies.
    Export(crate::export::ExportArgs),
    /// Write the prepared (binary) form of a triples folder: `rowshard train --dataset` on it
    /// streams the training triples from disk instead of holding them in memory.
    Prepare(crate::prepare::PrepareArgs),
    /// Draw a synthetic knowledge graph of any size from a planted model with skewed degrees,
    /// as a prepared folder.
    Synth(crate::synth::SynthArgs),
    /// A table sharded over two thread ranks, trained a few steps with routed lookups and fused
    /// Adam, checked against one rank; how long the JIT took.
    Demo {
        /// CubeCL runtime: cpu, wgpu or cuda.
        #[arg(long, default_value = "cpu", value_parser = parse::<Backend>)]
        runtime: Backend,
    },
    /// The standard sharded workload: lookup + fused Adam on 1, 2 and 4 ranks.
    Bench(BenchArgs),
    /// The kernels alone on one device: gather and fused Adam against the copy bandwidth;
    /// DistMult's generated forward + backward against plain Rust; the dense products and their
    /// losses at FB15k-237 and UMLS shapes, in GFLOP/s.
    BenchKernels(KernelArgs),
}

/// Runs a parsed command line with the models of `registry`.
pub fn run(cli: Cli, registry: &Registry) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Train(args) => crate::train::run(*args, registry)?,
        Command::Search(args) => crate::search::run(*args, registry)?,
        Command::Export(args) => crate::export::run(args, &|name| Ok(registry.find(name)?.export))?,
        Command::Prepare(args) => crate::prepare::run(args)?,
        Command::Synth(args) => crate::synth::run(args)?,
        Command::Demo { runtime } => crate::demo::run(runtime)?,
        Command::Bench(args) => crate::bench::run(args, registry)?,
        Command::BenchKernels(args) => crate::bench::run_kernels(args)?,
    }
    Ok(())
}
