//! The `rowshard` command: the library's command line with the shipped models.

/// The system allocator, or mimalloc with `ROWSHARD_ALLOCATOR=mimalloc`; large allocations are
/// counted for the benchmarks.
#[global_allocator]
static ALLOCATOR: rowshard_cli::alloc::Allocator = rowshard_cli::alloc::Allocator;

fn main() {
    rowshard_cli::main(Ok(rowshard_cli::Registry::shipped()))
}
