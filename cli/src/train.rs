//! `rowshard train`: trains a shipped model on a triples folder, sharded over thread ranks (or the
//! processes of an MPI job), evaluates it with filtered metrics, and checkpoints it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use rowshard::checkpoint::{self, RunState};
use rowshard::comm::{Communicator, threads};
use rowshard::data::{Dataset, Split};
use rowshard::error::ShardError;
use rowshard::model::{InitScheme, ModelDefaults, ModelSpec, OptimizerSettings, ScoringFunction};
use rowshard::partition::PartitionScheme;
use rowshard::train::{EpochReport, Filters, LrSchedule, Metrics, Mode, TrainConfig, Trainer};
use rowshard::{ShardedModel, models};
use rowshard_kernels::{Backend, DType, Optimizer};

use crate::hyper::HyperArgs;
use crate::progress::Bars;

/// Training modes on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Every (head, relation) against every entity, with reciprocal relations.
    Kvsall,
    /// Each triple and `--neg-ratio` corruptions of its head or tail.
    Negsample,
}

/// How ranks are started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CommArg {
    /// MPI when started by mpirun (and built with `--features mpi`), threads otherwise.
    Auto,
    /// `--ranks` threads of this process.
    Threads,
    /// The processes of the MPI job (`mpirun -np N rowshard train …`).
    Mpi,
}

/// Arguments of `rowshard train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Folder with train.txt, valid.txt and test.txt: one triple per line, head, relation and
    /// tail separated by tabs.
    #[arg(long, default_value = "datasets/umls")]
    pub dataset: PathBuf,
    /// The model: distmult, complex, transe, transe-l2, rotate, qmult.
    #[arg(long, default_value = "distmult")]
    pub model: String,
    /// Entity row length (default: the model's).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Weight dtype: f32, f16 or bf16 (default: the model's).
    #[arg(long, value_parser = parse_dtype)]
    pub dtype: Option<DType>,
    /// Optimizer of both tables: any row of the optimizer table (default: the model's).
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Learning rate of both tables (default: the model's).
    #[arg(long)]
    pub lr: Option<f64>,
    /// Hyper-parameters by name, from the optimizer table.
    #[command(flatten)]
    pub hyper: HyperArgs,
    /// Epochs.
    #[arg(long, default_value_t = 256)]
    pub epochs: usize,
    /// Global batch: KvsAll queries or true triples per step, over all ranks.
    #[arg(long, default_value_t = 1024)]
    pub batch_size: usize,
    /// Training mode (default: kvsall for scores linear in the tail, else negsample).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Corruptions per true triple (negsample).
    #[arg(long, default_value_t = 4)]
    pub neg_ratio: usize,
    /// Label smoothing ε.
    #[arg(long, default_value_t = 0.0)]
    pub label_smoothing: f32,
    /// Learning-rate schedule: constant, cosine, or exp:GAMMA (per epoch).
    #[arg(long, default_value = "constant", value_parser = parse_schedule)]
    pub lr_schedule: LrSchedule,
    /// Initialisation: normal:STD, uniform:BOUND, xavier or zeros (default: the model's).
    #[arg(long, value_parser = parse_init)]
    pub init: Option<InitScheme>,
    /// Entity partition: even or round-robin.
    #[arg(long, value_parser = parse_partition)]
    pub partition: Option<PartitionScheme>,
    /// Thread ranks (ignored under MPI, where the job's size counts).
    #[arg(long, default_value_t = 2)]
    pub ranks: usize,
    /// How ranks are started.
    #[arg(long, value_enum, default_value_t = CommArg::Auto)]
    pub comm: CommArg,
    /// CubeCL runtime: cpu, wgpu or cuda.
    #[arg(long, default_value = "cpu", value_parser = parse_backend)]
    pub runtime: Backend,
    /// Seed of initialisation, batch order and negatives.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Evaluate on valid every this many epochs (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub eval_every: usize,
    /// Write a checkpoint here at every evaluation and at the end.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Resume from this checkpoint (a checkpoint folder, or a --checkpoint-dir: its latest).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Write the final metrics as JSON here.
    #[arg(long)]
    pub metrics_json: Option<PathBuf>,
    /// Draw progress bars (default: when stderr is a terminal).
    #[arg(long)]
    pub progress: Option<bool>,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_name(s)
        .ok_or_else(|| format!("unknown dtype `{s}`; expected one of: f32, f16, bf16"))
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    Backend::from_name(s)
        .ok_or_else(|| format!("unknown runtime `{s}`; expected one of: cpu, wgpu, cuda"))
}

fn parse_schedule(s: &str) -> Result<LrSchedule, String> {
    match s {
        "constant" => Ok(LrSchedule::Constant),
        "cosine" => Ok(LrSchedule::Cosine),
        _ => match s.strip_prefix("exp:").map(str::parse::<f64>) {
            Some(Ok(gamma)) if gamma > 0.0 && gamma <= 1.0 => Ok(LrSchedule::Exponential { gamma }),
            _ => Err(format!(
                "unknown schedule `{s}`; expected constant, cosine or exp:GAMMA with 0 < GAMMA ≤ 1"
            )),
        },
    }
}

fn parse_init(s: &str) -> Result<InitScheme, String> {
    let number = |x: &str| x.parse::<f64>().ok().filter(|v| *v > 0.0 && v.is_finite());
    let bad = || {
        format!("unknown initialisation `{s}`; expected normal:STD, uniform:BOUND, xavier or zeros")
    };
    match s.split_once(':') {
        Some(("normal", x)) => number(x)
            .map(|std| InitScheme::Normal { std })
            .ok_or_else(bad),
        Some(("uniform", x)) => number(x)
            .map(|bound| InitScheme::Uniform { bound })
            .ok_or_else(bad),
        None if s == "xavier" => Ok(InitScheme::XavierNormal),
        None if s == "zeros" => Ok(InitScheme::Zeros),
        _ => Err(bad()),
    }
}

fn parse_partition(s: &str) -> Result<PartitionScheme, String> {
    match s {
        "even" => Ok(PartitionScheme::Even),
        "round-robin" => Ok(PartitionScheme::RoundRobin { block: 1 }),
        _ => Err(format!(
            "unknown partition `{s}`; expected even or round-robin"
        )),
    }
}

/// Where the data set is: as given, or — for the default — the copy shipped beside the sources.
fn dataset_folder(given: &Path) -> PathBuf {
    if given.exists() || given != Path::new("datasets/umls") {
        return given.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/umls")
}

/// What a finished run reports (from rank 0).
#[derive(Debug, serde::Serialize)]
pub struct Outcome {
    /// Filtered metrics on the validation split.
    pub valid: Metrics,
    /// Filtered metrics on the test split.
    pub test: Metrics,
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
                let results = threads::run(self.args.ranks.max(1), |comm| {
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
fn run_mpi<S: ScoringFunction>(_: &Plan) -> RunResult {
    Err("this rowshard was built without MPI; rebuild with `--features mpi`".into())
}

/// Everything a rank needs, decided once from the arguments.
struct Plan<'a> {
    args: &'a TrainArgs,
    data: &'a Dataset,
    spec: ModelSpec,
    config: TrainConfig,
}

impl<'a> Plan<'a> {
    fn new<S: ScoringFunction + ModelDefaults>(
        args: &'a TrainArgs,
        data: &'a Dataset,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let name = args.model.to_ascii_lowercase();
        let mode = match args.mode {
            Some(ModeArg::Kvsall) => {
                if let Err(why) = S::TAIL_LINEAR {
                    return Err(format!(
                        "{name} cannot train with KvsAll: its score is not linear in the tail \
                         ({why}); use --mode negsample"
                    )
                    .into());
                }
                Mode::KvsAll
            }
            Some(ModeArg::Negsample) => Mode::NegSample {
                neg_ratio: args.neg_ratio,
            },
            None if S::TAIL_LINEAR.is_ok() => Mode::KvsAll,
            None => Mode::NegSample {
                neg_ratio: args.neg_ratio,
            },
        };
        let mut settings = S::settings();
        if let Some(dim) = args.dim {
            rowshard::model::check_dim::<S>(dim)?;
            settings.dim = dim;
        }
        if let Some(dtype) = args.dtype {
            settings.dtype = dtype;
        }
        if let Some(opt) = &args.optimizer {
            let optimizer = Optimizer::from_name(opt).ok_or_else(|| {
                format!(
                    "unknown optimizer `{opt}`; expected one of: {}",
                    Optimizer::names().join(", ")
                )
            })?;
            let lr = settings.entity.lr;
            settings.entity = OptimizerSettings::new(optimizer).with_lr(lr);
            settings.relation = OptimizerSettings::new(optimizer).with_lr(settings.relation.lr);
        }
        if let Some(lr) = args.lr {
            settings.entity.set("lr", lr)?;
            settings.relation.set("lr", lr)?;
        }
        for &(name, value) in &args.hyper.0 {
            settings.entity.set(name, value)?;
            settings.relation.set(name, value)?;
        }
        if let Some(init) = args.init {
            settings.init = init;
        }
        if let Some(p) = &args.partition {
            settings.partition = p.clone();
        }
        if args.batch_size == 0 || args.epochs == 0 {
            return Err("--batch-size and --epochs must be at least 1".into());
        }
        Ok(Plan {
            args,
            data,
            spec: ModelSpec {
                entities: data.entities.len(),
                relations: mode.model_relations(data),
                settings,
                seed: args.seed,
            },
            config: TrainConfig {
                mode,
                epochs: args.epochs,
                batch_size: args.batch_size,
                seed: args.seed,
                label_smoothing: args.label_smoothing,
                schedule: args.lr_schedule,
                eval_batch: 512,
            },
        })
    }
}

fn run_rank<S: ScoringFunction>(
    comm: &dyn Communicator,
    plan: &Plan,
) -> Result<Option<Outcome>, String> {
    let leader = comm.rank() == 0;
    let say = |line: String| {
        if leader {
            eprintln!("{line}");
        }
    };
    let fail = |e: ShardError| e.to_string();
    let client = plan.args.runtime.client().map_err(|e| e.to_string())?;
    let data = plan.data;
    let start = Instant::now();
    let mut model = ShardedModel::<S>::new(comm, &client, &plan.spec).map_err(fail)?;
    let s = &plan.spec.settings;
    say(format!(
        "rowshard train: {} on {} ({} entities, {} relations; {} / {} / {} triples{}), {} ranks, \
         {} {}, dim {}, {} lr {}, {:?}",
        S::NAME,
        data.folder.display(),
        data.entities.len(),
        data.relations.len(),
        data.train.len(),
        data.valid.len(),
        data.test.len(),
        unseen_note(data),
        comm.world(),
        plan.args.runtime,
        s.dtype,
        s.dim,
        s.entity.optimizer(),
        s.entity.lr,
        plan.config.mode,
    ));
    say(format!(
        "  kernels compiled (JIT) in {:.0} ms",
        model.jit_time().as_secs_f64() * 1e3
    ));
    let mut trainer = Trainer::new(data, plan.config.clone());
    if let Some(path) = &plan.args.resume {
        let manifest = checkpoint::load(&mut model, path, data.vocabulary_digest())
            .map_err(|e| e.to_string())?;
        if manifest.state.mode != mode_name(plan.config.mode) {
            return Err(format!(
                "{}: the checkpoint was trained with {}, not {}; resume with the same --mode",
                path.display(),
                manifest.state.mode,
                mode_name(plan.config.mode)
            ));
        }
        trainer.epochs_done = manifest.state.epochs_done;
        say(format!(
            "  resumed from {} after epoch {} (written by {} ranks)",
            path.display(),
            manifest.state.epochs_done,
            manifest.world
        ));
    }
    let filters = Filters::new(data);
    let save = |model: &ShardedModel<S>, epochs_done: usize| -> Result<(), String> {
        let Some(dir) = &plan.args.checkpoint_dir else {
            return Ok(());
        };
        let state = RunState {
            epochs_done,
            mode: mode_name(plan.config.mode).into(),
            seed: plan.config.seed,
            dataset: data.folder.display().to_string(),
            vocabulary: format!("{:016x}", data.vocabulary_digest()),
        };
        let folder = checkpoint::save(model, state, dir).map_err(|e| e.to_string())?;
        say(format!("  checkpoint written to {}", folder.display()));
        Ok(())
    };
    let mut bars = Bars::new(
        leader
            && plan
                .args
                .progress
                .unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr())),
        plan.config.epochs,
        trainer.steps_per_epoch(),
    );
    let log_every = (plan.config.epochs / 16).max(1);
    let first_epoch = trainer.epochs_done;
    let train_start = Instant::now();
    while trainer.epochs_done < plan.config.epochs {
        let report: EpochReport = trainer.epoch(&mut model, &mut bars).map_err(fail)?;
        let e = report.epoch;
        let evaluate_now = plan.args.eval_every > 0 && e.is_multiple_of(plan.args.eval_every);
        if evaluate_now {
            let m = trainer
                .evaluate(&model, &filters, Split::Valid)
                .map_err(fail)?;
            if leader {
                bars.println(format!(
                    "  epoch {e}: loss {:.5}, valid MRR {:.4} H@1 {:.4} H@10 {:.4}",
                    report.loss, m.mrr, m.hits1, m.hits10
                ));
            }
            if e < plan.config.epochs {
                save(&model, e)?;
            }
        } else if !bars.visible() && (e.is_multiple_of(log_every) || e == plan.config.epochs) {
            say(format!(
                "  epoch {e}/{}: loss {:.5} ({:.1} s)",
                plan.config.epochs,
                report.loss,
                train_start.elapsed().as_secs_f64()
            ));
        }
    }
    bars.finish();
    let train_seconds = train_start.elapsed().as_secs_f64();
    if trainer.epochs_done > first_epoch {
        save(&model, trainer.epochs_done)?;
    }
    let valid = trainer
        .evaluate(&model, &filters, Split::Valid)
        .map_err(fail)?;
    let test = trainer
        .evaluate(&model, &filters, Split::Test)
        .map_err(fail)?;
    let epochs = plan.config.epochs - first_epoch;
    let examples = trainer.examples_per_epoch() as f64 * epochs as f64;
    let unit = match plan.config.mode {
        Mode::KvsAll => "KvsAll queries",
        Mode::NegSample { .. } => "true triples",
    };
    say(format!(
        "  trained {epochs} epochs in {train_seconds:.1} s ({:.0} {unit}/s); total {:.1} s",
        examples / train_seconds.max(1e-9),
        start.elapsed().as_secs_f64()
    ));
    for (name, m) in [("valid", valid), ("test", test)] {
        say(format!(
            "  {name:5}  MRR {:.4}  H@1 {:.4}  H@3 {:.4}  H@10 {:.4}  ({} queries, filtered)",
            m.mrr, m.hits1, m.hits3, m.hits10, m.queries
        ));
    }
    Ok(leader.then_some(Outcome { valid, test }))
}

/// The mode's name in checkpoints.
fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::KvsAll => "kvsall",
        Mode::NegSample { .. } => "negsample",
    }
}

fn unseen_note(data: &Dataset) -> String {
    let u = data.unseen;
    if u.valid + u.test == 0 {
        String::new()
    } else {
        format!(
            "; left out {} valid and {} test triples with entities or relations unseen in training",
            u.valid, u.test
        )
    }
}
