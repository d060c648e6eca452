//! The `rowshard` command.

mod alloc;
mod bench;
mod cli;
mod demo;
mod export;
mod hyper;
mod progress;
mod train;

use clap::Parser;

/// The system allocator, or mimalloc with `ROWSHARD_ALLOCATOR=mimalloc`; large allocations are
/// counted for the benchmarks.
#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;

fn main() {
    if let Err(e) = cli::run(cli::Cli::parse()) {
        eprintln!("rowshard: {e}");
        std::process::exit(1);
    }
}
