//! rowshard trains embedding models whose tables do not fit on one device: a table is split
//! row-wise across ranks, lookups are routed to the rank that owns each row, gradients are routed
//! back, and each owner updates only the rows it received with a fused CubeCL gather + optimizer
//! kernel.
//!
//! This crate is what users depend on. Write a model as a struct with
//! [`#[sharded_embedding(...)]`](sharded_embedding) (its table settings, checked against the one
//! optimizer table at compile time) and an `impl` block with [`#[scoring]`](scoring) holding its
//! scoring function in the scoring DSL (`docs/dsl.md`); the macros generate the kernels of the
//! score and its gradient and the glue to a [`ShardedModel`]. [`models`] ships DistMult, ComplEx,
//! TransE, RotatE and QMult written that way.
//!
//! It re-exports the kernel layer ([`rowshard_kernels`]): the optimizer table, [`LocalTable`] and
//! the runtimes.

// The macros' output names `::rowshard::…`, which must resolve inside this crate too (the
// shipped models).
extern crate self as rowshard;

pub mod agree;
pub mod cache;
pub mod checkpoint;
pub mod comm;
pub mod data;
pub mod error;
pub mod id_lists;
pub mod init;
pub mod model;
pub mod models;
pub mod negatives;
pub mod objective;
pub mod partition;
pub mod recipe;
pub mod sharded;
pub mod step;
pub mod train;

pub use rowshard_kernels::{
    Backend, BiasClock, DType, HyperParams, KernelError, KernelSet, LocalTable, NonFinitePolicy,
    Optimizer, OptimizerSpec, TABLE, TableConfig,
};
/// The attribute macros: a model's settings, and its scoring function (see the crate docs).
pub use rowshard_macros::{scoring, sharded_embedding};

pub use comm::{CommError, Communicator};
pub use error::{InputError, ShardError};
pub use id_lists::IdLists;
pub use init::Initializer;
pub use model::{
    InitScheme, ModelDefaults, ModelSettings, ModelSpec, OptimizerSettings, ScoringFunction,
    ShardedModel,
};
pub use objective::{Loss, Objective};
pub use partition::{Partition, PartitionScheme};
pub use rowshard_kernels as kernels;
pub use sharded::{Phase, RowElement, ShardedTable, ShardedTableSpec, StateLocation};
pub use step::{StepReport, TrainBatch};

/// What the macros' output reaches the runtime through; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use std::sync::Arc;

    pub use cubecl;
    pub use cubecl::prelude::KernelDefinition;
    pub use rowshard_kernels::{BiasClock, DType, KernelError, Optimizer, with_dtype};

    pub use crate::model::{
        DefineContext, HostGradient, InitScheme, ModelDefaults, ModelSettings, OptimizerSettings,
        ScoreKernel, ScoreLaunch, ScoringFunction, ShardedModel,
    };
    pub use crate::partition::PartitionScheme;
    pub use crate::sharded::StateLocation;
    pub use crate::{define_scoring, launch_scoring};

    /// Helpers of the generated code.
    pub mod dsl {
        /// Called by the generated kernels.
        pub mod cube {
            pub use rowshard_kernels::kernels::dsl::*;
        }
        /// Called by the generated host functions.
        pub mod host {
            pub use crate::model::host::*;
        }
    }
}
