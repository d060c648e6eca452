//! rowshard's one table: every optimizer once (name, hyper-parameters with defaults and ranges,
//! state slots, dtypes, options), the dtypes, what each runtime can store, and what is derived
//! from them without a device — configuration checks, hyper-parameter blocks, the generated docs.
//!
//! It has no CubeCL dependency on purpose: `rowshard-macros` reads it at compile time to check
//! `#[sharded_embedding]`'s arguments, and the kernel layer specialises its kernels from it.

pub mod config;
pub mod docs;
pub mod dtype;
pub mod error;
pub mod hyper;
pub mod optimizer;
pub mod runtime;

pub use config::TableConfig;
pub use dtype::DType;
pub use error::KernelError;
pub use hyper::HyperParams;
pub use optimizer::{
    BiasClock, HyperParameter, Optimizer, OptimizerSpec, ParamSlot, Range, StateShape, StateSlot,
    TABLE,
};
pub use runtime::{RUNTIMES, RuntimeSpec};
