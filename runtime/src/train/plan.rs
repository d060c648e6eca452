//! A run decided before it starts: the model, the training configuration, evaluation and
//! stopping, checkpoints, and where the ranks run — what [`fit`](super::fit) and
//! [`run`](super::run) take.

use std::path::PathBuf;

use rowshard_kernels::Backend;

use super::config::TrainConfig;
use crate::model::ModelSpec;
use crate::negatives::Negatives;
use crate::objective::Mode;

/// Everything a run is, decided before it starts: what [`fit`](super::fit) and [`run`](super::run) take.
/// A recipe is planned into one for a model and a data set
/// ([`Recipe::plan`](crate::recipe::Recipe::plan)).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The model to build.
    pub spec: ModelSpec,
    /// How to train it.
    pub config: TrainConfig,
    /// When to evaluate and when to stop.
    pub stopping: Stopping,
    /// Where checkpoints go and come from.
    pub checkpoints: Checkpoints,
    /// Whether to evaluate the final model on test (a search's trials do not).
    pub test: bool,
    /// Where the ranks run.
    pub run: RunSettings,
}

/// Evaluation on valid during training, and early stopping.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stopping {
    /// Evaluate every this many epochs (0: only at the end). With evaluations, the final model
    /// is the best evaluated one.
    pub eval_every: usize,
    /// Stop after this many evaluations without a gain in valid MRR of more than `min_delta`
    /// (0: never).
    pub patience: usize,
    /// The smallest gain in valid MRR that counts for `patience`.
    pub min_delta: f64,
}

/// Checkpoints of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checkpoints {
    /// Write one here at every evaluation and at the end.
    pub dir: Option<PathBuf>,
    /// Start from this one (a checkpoint folder, or a checkpoint directory: its latest).
    pub resume: Option<PathBuf>,
}

/// How the ranks of a run are started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommKind {
    /// MPI when started by `mpirun` (and built with the `mpi` feature), threads otherwise.
    #[default]
    Auto,
    /// Threads of this process.
    Threads,
    /// The processes of the MPI job.
    Mpi,
}

impl CommKind {
    /// As written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CommKind::Auto => "auto",
            CommKind::Threads => "threads",
            CommKind::Mpi => "mpi",
        }
    }

    /// The kind `Auto` stands for in this process: MPI when `mpirun` started it.
    pub fn resolved(self) -> CommKind {
        match self {
            CommKind::Auto if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() => CommKind::Mpi,
            CommKind::Auto => CommKind::Threads,
            other => other,
        }
    }
}

/// Where a run's ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSettings {
    /// Thread ranks (under MPI, the job's size counts).
    pub ranks: usize,
    /// How they are started.
    pub comm: CommKind,
    /// The CubeCL runtime.
    pub runtime: Backend,
    /// Why `ranks` is what it is, where the run did not say and the default is not the usual
    /// one ([`RunSettings::default_ranks`]): what the start line says.
    pub ranks_note: Option<&'static str>,
}

impl Default for RunSettings {
    /// Two thread ranks (or the MPI job's) on the `cpu` runtime.
    fn default() -> Self {
        Self {
            ranks: 2,
            comm: CommKind::Auto,
            runtime: Backend::Cpu,
            ranks_note: None,
        }
    }
}

impl RunSettings {
    /// Thread ranks for a run that does not say: two, or one where one rank with the runtime's
    /// worker pool trains faster — a 1vsAll score linear in the tail (`tail_linear`: its
    /// reciprocal pairs merge) against one shared sample without batch negatives, on the `cpu`
    /// runtime with at most two cores. There each rank scores its own queries against the whole
    /// sample, so a second rank runs the same products in smaller launches with twice the waits
    /// on the runtime (docs/benchmarks.md); augmented scores (squared distances), chunks, batch
    /// negatives and every-entity scoring train faster on two. Returns the ranks and, for one,
    /// why.
    pub fn default_ranks(
        mode: Mode,
        negatives: Negatives,
        tail_linear: bool,
        runtime: Backend,
        cores: usize,
    ) -> (usize, Option<&'static str>) {
        let one_sample = matches!(
            negatives,
            Negatives::Shared {
                chunk: 0,
                batch: false,
                ..
            }
        );
        if mode == Mode::OneVsAll
            && one_sample
            && tail_linear
            && runtime == Backend::Cpu
            && cores <= 2
        {
            let why = "one rank: 1vsAll against one shared sample trains faster on one of at \
                       most 2 cores";
            return (1, Some(why));
        }
        (2, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rank_by_default_only_for_1vsall_pairs_against_one_sample_on_two_cores() {
        let ranks = |mode, negatives, linear, runtime, cores| {
            RunSettings::default_ranks(mode, negatives, linear, runtime, cores).0
        };
        let sample = Negatives::uniform(256, false);
        let cpu = Backend::Cpu;
        assert_eq!(ranks(Mode::OneVsAll, sample, true, cpu, 2), 1);
        assert_eq!(ranks(Mode::OneVsAll, sample, true, cpu, 1), 1);
        // More cores, an augmented score, chunks, batch negatives, every entity, KvsAll, another
        // runtime: two.
        assert_eq!(ranks(Mode::OneVsAll, sample, true, cpu, 4), 2);
        assert_eq!(ranks(Mode::OneVsAll, sample, false, cpu, 2), 2);
        assert_eq!(
            ranks(Mode::OneVsAll, sample.in_chunks(256), true, cpu, 2),
            2
        );
        let batch = Negatives::uniform(256, true);
        assert_eq!(ranks(Mode::OneVsAll, batch, true, cpu, 2), 2);
        assert_eq!(ranks(Mode::OneVsAll, Negatives::All, true, cpu, 2), 2);
        assert_eq!(ranks(Mode::KvsAll, sample, true, cpu, 2), 2);
        assert_eq!(ranks(Mode::OneVsAll, sample, true, Backend::Wgpu, 2), 2);
        assert!(
            RunSettings::default_ranks(Mode::OneVsAll, sample, true, cpu, 2)
                .1
                .is_some()
        );
    }
}
