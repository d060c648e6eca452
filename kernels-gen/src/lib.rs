//! rowshard's kernel layer: the one table of optimizers ([`TABLE`]), the CubeCL kernels
//! specialised from it (row gather and fused gather-gradient-apply), the kernel set compiled
//! when a table is created, and the generated kernel source for snapshot tests.

pub mod config;
pub mod docs;
pub mod dtype;
pub mod error;
pub mod hyper;
pub mod kernel_set;
pub mod kernels;
pub mod local_table;
pub mod runtime;
pub mod segments;
pub mod shape;
pub mod source;
pub mod table;

pub use config::TableConfig;
pub use dtype::DType;
pub use error::KernelError;
pub use hyper::HyperParams;
pub use kernel_set::KernelSet;
pub use local_table::{LocalTable, NonFinitePolicy};
pub use runtime::Backend;
pub use segments::Segments;
pub use table::{
    BiasClock, HyperParameter, Optimizer, OptimizerSpec, ParamSlot, Range, StateShape, StateSlot,
    TABLE,
};

#[doc(hidden)]
pub mod __private {
    pub use half;
}
