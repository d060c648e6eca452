//! The `rowshard` command with TransH registered beside the shipped models: every subcommand —
//! `train --config recipes/transe.toml --model transh`, `export`, `bench --suite training
//! --model transh` — takes it by name.

fn main() {
    rowshard_cli::main(rowshard_cli::models![transh::TransH]);
}
