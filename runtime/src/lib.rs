//! rowshard trains embedding models whose tables do not fit on one device: a table is split
//! row-wise across ranks, lookups are routed to the rank that owns each row, gradients are routed
//! back, and each owner updates only the rows it received with a fused CubeCL gather + optimizer
//! kernel.
//!
//! This crate is what users depend on. It re-exports the kernel layer ([`rowshard_kernels`]): the
//! optimizer table, [`LocalTable`] and the runtimes.

pub mod agree;
pub mod comm;
pub mod error;
pub mod init;
pub mod partition;
pub mod sharded;

pub use rowshard_kernels::{
    Backend, BiasClock, DType, HyperParams, KernelError, KernelSet, LocalTable, NonFinitePolicy,
    Optimizer, OptimizerSpec, TABLE, TableConfig,
};
/// The proc-macro crate; `#[sharded_embedding]` lands there.
pub use rowshard_macros as macros;

pub use comm::{CommError, Communicator};
pub use error::{InputError, ShardError};
pub use init::Initializer;
pub use partition::{Partition, PartitionScheme};
pub use rowshard_kernels as kernels;
pub use sharded::{ShardedTable, ShardedTableSpec, StateLocation};
