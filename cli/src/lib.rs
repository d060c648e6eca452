//! The `rowshard` command as a library: every subcommand — `train`, `search`, `export`,
//! `bench`, `bench-kernels`, `prepare`, `synth`, `demo` — for the models of a [`Registry`], so a crate of
//! your own gets the whole command for its models with one call in its `main`:
//!
//! ```ignore
//! fn main() {
//!     rowshard_cli::main(rowshard_cli::models![TransH]);
//! }
//! ```
//!
//! Its binary then trains `--model transh` with any recipe (`train --config
//! recipes/transe.toml --model transh`), exports its checkpoints and benchmarks it, beside the
//! shipped models. The `rowshard` binary is this call with the shipped models alone.

pub mod alloc;
pub mod bench;
pub mod cli;
mod demo;
pub mod export;
mod prepare;
mod progress;
mod registry;
pub mod search;
mod synth;
pub mod train;

pub use registry::{Entry, Registry, RegistryError};

use clap::Parser;

/// Runs the command line of this process with the models of `registry`, and exits: 0 on
/// success, 1 with a one-line error (`rowshard: …`) on stderr otherwise — a registry that could
/// not be built included, before anything runs.
pub fn main(registry: Result<Registry, RegistryError>) -> ! {
    let code = match registry {
        Err(e) => {
            eprintln!("rowshard: {e}");
            1
        }
        Ok(registry) => match run(std::env::args_os(), &registry) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("rowshard: {e}");
                1
            }
        },
    };
    std::process::exit(code)
}

/// Runs the command line `args` (its first item the program's name) with the models of
/// `registry`. Help, a version request and arguments the parser refuses exit the process as
/// clap does.
pub fn run<I, T>(args: I, registry: &Registry) -> Result<(), Box<dyn std::error::Error>>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let parsed = cli::Cli::try_parse_from(args).unwrap_or_else(|e| e.exit());
    cli::run(parsed, registry)
}
