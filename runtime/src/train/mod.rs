//! Training and evaluating a sharded model on a knowledge graph.
//!
//! - [`fit`]: the one epoch loop — evaluation, the best model kept and restored, early
//!   stopping, checkpoints, resuming — of a [`Plan`]; [`run`] starts the ranks and fits on each.
//! - [`Trainer`]: one epoch of KvsAll, 1vsAll or negative-sampling steps, under the
//!   learning-rate schedule ([`TrainConfig`]).
//! - [`evaluate`]: filtered MRR and Hits@k, ranked distributedly.
//!
//! Every function here is a collective: each rank runs it with the same data set and plan.

pub mod batches;
mod best;
mod config;
pub mod eval;
mod fit;
mod plan;
mod progress;
mod report;
mod run;
mod trainer;

pub use config::{LrSchedule, TrainConfig};
pub use eval::{Filters, Metrics, Protocol, evaluate};
pub use fit::{fit, stream_buffer_bytes};
pub use plan::{Checkpoints, CommKind, Plan, RunSettings, Stopping};
pub use progress::{Event, Progress, Silent};
pub use report::{EpochReport, Evaluation, FitError, FitReport, TrainFigures};
pub use run::{Reporter, Start, run};
pub use trainer::Trainer;

pub use crate::negatives::Negatives;
pub use crate::objective::Mode;
