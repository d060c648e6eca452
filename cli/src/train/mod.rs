//! `rowshard train`: trains a shipped model on a triples folder, sharded over thread ranks (or the
//! processes of an MPI job), evaluates it with filtered metrics, keeps the best model, and
//! checkpoints it. Flags come from the command line and from recipes (`--config FILE`).

mod args;
mod best;
mod plan;
mod rank;
pub mod recipe;

use std::path::{Path, PathBuf};

use rowshard::comm::threads;
use rowshard::data::Dataset;
use rowshard::model::{ModelDefaults, ScoringFunction};
use rowshard::models;
use rowshard::train::Metrics;

use args::CommArg;
pub use args::TrainArgs;
use plan::Plan;
use rank::run_rank;

/// Where the data set is: as given, or — for the default — the copy shipped beside the sources.
fn dataset_folder(given: &Path) -> PathBuf {
    if given.exists() || given != Path::new("datasets/umls") {
        return given.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/umls")
}

/// What a finished run reports (from rank 0); `--metrics-json` writes it.
#[derive(Debug, serde::Serialize)]
pub struct Outcome {
    /// Filtered metrics on the validation split, of the model reported (the best evaluated one
    /// when there were evaluations).
    pub valid: Metrics,
    /// Filtered metrics on the test split, of the same model.
    pub test: Metrics,
    /// The epoch after which the reported model was taken, when there were evaluations.
    pub best_epoch: Option<usize>,
    /// Epochs trained (counting those before a resume).
    pub epochs: usize,
    /// Seconds spent in training epochs in this run (evaluations and checkpoints left out).
    pub train_seconds: f64,
    /// Whether `--patience` ended the run.
    pub stopped_early: bool,
    /// Every evaluation on valid during training.
    pub evaluations: Vec<Evaluation>,
    /// What training cost.
    pub train: TrainFigures,
}

/// What the training epochs of a run cost, over all ranks.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TrainFigures {
    /// Seconds spent in training epochs (evaluations and checkpoints left out).
    pub seconds: f64,
    /// Training examples (queries, or true triples) per second.
    pub examples_per_s: f64,
    /// Entity rows read per example, over all ranks: the ids looked up (heads, tails,
    /// corruptions) and the shared negatives gathered; a whole shard scored against every
    /// entity counts nothing.
    pub rows_looked_up_per_example: f64,
    /// The largest peak resident memory of the ranks' processes, in bytes (thread ranks share
    /// one).
    pub peak_rss_bytes: u64,
    /// The tables' weights and optimizer states, over all ranks, in bytes.
    pub tables_bytes: u64,
    /// The buffers of streamed triples (a block per rank: the triples and their examples), over
    /// all ranks, in bytes; 0 when the triples are in memory.
    pub stream_buffer_bytes: u64,
}

/// One evaluation on valid during training.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Evaluation {
    /// After this epoch.
    pub epoch: usize,
    /// Seconds of training so far in this run.
    pub train_seconds: f64,
    /// Filtered metrics on valid.
    pub valid: Metrics,
}

/// Runs `rowshard train`.
pub fn run(args: TrainArgs) -> Result<(), Box<dyn std::error::Error>> {
    let folder = dataset_folder(&args.dataset);
    let data = Dataset::load(&folder)?;
    let outcome = models::visit(
        &args.model,
        Visit {
            args: &args,
            data: &data,
        },
    )
    .ok_or_else(|| {
        format!(
            "unknown model `{}`; expected one of: {}",
            args.model,
            models::NAMES.join(", ")
        )
    })??;
    if let (Some(outcome), Some(path)) = (outcome, &args.metrics_json) {
        write_metrics(path, &outcome)?;
    }
    Ok(())
}

fn write_metrics(path: &Path, outcome: &Outcome) -> Result<(), Box<dyn std::error::Error>> {
    let json = serde_json::to_string_pretty(outcome)?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

struct Visit<'a> {
    args: &'a TrainArgs,
    data: &'a Dataset,
}

type RunResult = Result<Option<Outcome>, Box<dyn std::error::Error>>;

impl models::ModelVisitor for Visit<'_> {
    type Output = RunResult;

    fn visit<S: ScoringFunction + ModelDefaults>(self) -> RunResult {
        let plan = Plan::new::<S>(self.args, self.data)?;
        let comm = match self.args.comm {
            CommArg::Auto if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() => CommArg::Mpi,
            CommArg::Auto => CommArg::Threads,
            other => other,
        };
        match comm {
            CommArg::Mpi => run_mpi::<S>(&plan),
            _ => {
                let results = threads::run(self.args.ranks as usize, |comm| {
                    run_rank::<S>(comm, &plan).map_err(RankError)
                });
                let mut outcome = None;
                for r in results {
                    match r {
                        Ok(Some(o)) => outcome = Some(o),
                        Ok(None) => {}
                        Err(RankError(e)) => return Err(e.into()),
                    }
                }
                Ok(outcome)
            }
        }
    }
}

/// A rank's error, displayable and convertible from collectives' errors (for `threads::run`).
#[derive(Debug)]
struct RankError(String);

impl std::fmt::Display for RankError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<rowshard::CommError> for RankError {
    fn from(e: rowshard::CommError) -> Self {
        RankError(e.to_string())
    }
}

#[cfg(feature = "mpi")]
fn run_mpi<S: ScoringFunction>(plan: &Plan) -> RunResult {
    let comm = rowshard::comm::mpi::MpiComm::init()?;
    run_rank::<S>(&comm, plan).map_err(Into::into)
}

#[cfg(not(feature = "mpi"))]
#[allow(clippy::extra_unused_type_parameters)] // the signature of the MPI build's
fn run_mpi<S: ScoringFunction>(_: &Plan) -> RunResult {
    Err("this rowshard was built without MPI; rebuild with `--features mpi`".into())
}
