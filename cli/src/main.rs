//! The `rowshard` command.

mod bench;
mod cli;
mod demo;
mod export;
mod hyper;
mod progress;
mod train;

use clap::Parser;

/// mimalloc keeps freed large buffers mapped: the per-step buffers of a sharded step are tens of
/// MiB, and glibc's allocator returns such buffers to the OS on free, so every step paid the page
/// faults of touching them again.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    if let Err(e) = cli::run(cli::Cli::parse()) {
        eprintln!("rowshard: {e}");
        std::process::exit(1);
    }
}
