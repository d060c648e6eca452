//! The `rowshard` command.

use clap::Parser;

fn main() {
    if let Err(e) = rowshard::cli::run(rowshard::cli::Cli::parse()) {
        eprintln!("rowshard: {e}");
        std::process::exit(1);
    }
}
