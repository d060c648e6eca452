//! [`run`]: a whole run of a [`Plan`] — its ranks started (threads of this process, or the
//! processes of an MPI job), the model built on each (its kernels compiled), and [`fit`] run on
//! every rank; rank 0's report returned.

use std::time::Duration;

use super::fit::fit;
use super::plan::{CommKind, Plan};
use super::progress::{Progress, Silent};
use super::report::{FitError, FitReport};
use crate::comm::{CommError, Communicator, threads};
use crate::data::Dataset;
use crate::error::ShardError;
use crate::model::{ScoringFunction, ShardedModel};

/// What rank 0 knows when its model is built: what a reporter prints first.
pub struct Start<'a> {
    /// The model's scoring function.
    pub model: &'static str,
    /// The data set.
    pub data: &'a Dataset,
    /// The plan.
    pub plan: &'a Plan,
    /// Ranks.
    pub world: usize,
    /// How long compiling the model's kernels took.
    pub jit: Duration,
}

/// What makes rank 0's [`Progress`] once its model is built: it may borrow what the run
/// borrows (the data set and the plan).
pub type Reporter = dyn for<'a> Fn(&Start<'a>) -> Box<dyn Progress + 'a> + Sync;

/// One rank's part of a run.
type RankRun<'a> = dyn Fn(&dyn Communicator) -> Result<Option<FitReport>, FitError> + 'a;

/// A rank's failure, as text every rank can carry (a collective's error included).
#[derive(Debug)]
struct RankError(String);

impl std::fmt::Display for RankError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<CommError> for RankError {
    fn from(e: CommError) -> Self {
        RankError(e.to_string())
    }
}

/// Runs `plan` for model `S` on `data`: starts the ranks, builds the model on each and fits it.
/// Rank 0 reports to the [`Progress`] that `reporter` makes once its model is built; the others
/// to none. Returns rank 0's report (this process's rank's, under MPI; `None` on the others).
pub fn run<S: ScoringFunction>(
    data: &Dataset,
    plan: &Plan,
    reporter: &Reporter,
) -> Result<Option<FitReport>, FitError> {
    let rank = |comm: &dyn Communicator| -> Result<Option<FitReport>, FitError> {
        let client = plan.run.runtime.client().map_err(ShardError::from)?;
        let mut model = ShardedModel::<S>::new(comm, &client, &plan.spec)?;
        let mut progress: Box<dyn Progress + '_> = if comm.rank() == 0 {
            reporter(&Start {
                model: S::NAME,
                data,
                plan,
                world: comm.world(),
                jit: model.jit_time(),
            })
        } else {
            Box::new(Silent)
        };
        let report = fit(&mut model, data, plan, progress.as_mut())?;
        Ok((comm.rank() == 0).then_some(report))
    };
    match plan.run.comm.resolved() {
        CommKind::Mpi => run_mpi(&rank),
        _ => {
            let results = threads::run(plan.run.ranks.max(1), |comm| {
                rank(comm).map_err(|e| RankError(e.to_string()))
            });
            let mut report = None;
            for result in results {
                match result {
                    Ok(Some(r)) => report = Some(r),
                    Ok(None) => {}
                    Err(RankError(e)) => return Err(FitError::Other(e)),
                }
            }
            Ok(report)
        }
    }
}

#[cfg(feature = "mpi")]
fn run_mpi(rank: &RankRun) -> Result<Option<FitReport>, FitError> {
    let comm = crate::comm::mpi::MpiComm::init().map_err(crate::error::ShardError::from)?;
    rank(&comm)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &RankRun) -> Result<Option<FitReport>, FitError> {
    Err(FitError::Other(
        "this rowshard was built without MPI; rebuild with `--features mpi`".into(),
    ))
}
