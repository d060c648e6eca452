//! The `rowshard` command.

mod alloc;
mod bench;
mod cli;
mod demo;
mod export;
mod hyper;
mod parse;
mod prepare;
mod progress;
mod synth;
mod train;

use clap::{CommandFactory, Parser};

/// The system allocator, or mimalloc with `ROWSHARD_ALLOCATOR=mimalloc`; large allocations are
/// counted for the benchmarks.
#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;

fn main() {
    let parsed = cli::Cli::parse();
    let parsed = match with_recipe(parsed) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("rowshard: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = cli::run(parsed) {
        eprintln!("rowshard: {e}");
        std::process::exit(1);
    }
}

/// `rowshard train --config FILE …`: the command line again, with the recipe's flags before the
/// user's (so the user's override them).
fn with_recipe(parsed: cli::Cli) -> Result<cli::Cli, String> {
    let cli::Command::Train(args) = &parsed.command else {
        return Ok(parsed);
    };
    let Some(path) = &args.config else {
        return Ok(parsed);
    };
    let command = cli::Cli::command();
    let recipe = train::recipe::recipe_args(path, &command)?;
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let at = argv
        .iter()
        .position(|a| a == "train")
        .map_or(argv.len(), |p| p + 1);
    argv.splice(at..at, recipe);
    Ok(cli::Cli::try_parse_from(argv).unwrap_or_else(|e| e.exit()))
}
