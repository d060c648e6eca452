//! rowshard's kernel layer: the CubeCL kernels specialised from the one table of optimizers
//! ([`TABLE`], which lives in `rowshard-table` and is re-exported here) — row gather and copy,
//! fused gather-gradient-apply, and the dense products that score queries against many rows
//! with their losses fused (KvsAll, 1vsAll, shared negatives, ranking) —, the kernel sets
//! compiled when a table or a model is created, and the generated kernel source for snapshot
//! tests.

pub mod dense_set;
pub mod element;
pub mod headroom;
pub mod kernel_set;
pub mod kernels;
pub mod local_table;
pub mod runtime;
pub mod segments;
pub mod shape;
pub mod source;
pub mod upload;
pub mod wait;

pub use dense_set::DenseKernels;
pub use headroom::reserve_for;
pub use kernel_set::KernelSet;
pub use local_table::{LocalTable, NonFinitePolicy, Slot, slot_layout};
pub use rowshard_table::{
    BiasClock, DType, HyperParameter, HyperParams, KernelError, Optimizer, OptimizerSpec,
    ParamSlot, RUNTIMES, Range, RuntimeSpec, StateShape, StateSlot, TABLE, TableConfig, config,
    docs, dtype, error, hyper, optimizer as table,
};
pub use runtime::Backend;
pub use segments::Segments;
pub use upload::UploadPool;

#[doc(hidden)]
pub mod __private {
    pub use half;
}
