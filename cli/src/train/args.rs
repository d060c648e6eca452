//! The arguments of `rowshard train`, each parsed and range-checked where it is read (on the
//! command line and in recipes alike).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use rowshard::model::{InitScheme, Regularizer};
use rowshard::partition::PartitionScheme;
use rowshard::train::{LrSchedule, Negatives};
use rowshard_kernels::{Backend, DType};

use crate::hyper::HyperArgs;
use crate::parse::{parse_backend, parse_dtype, parse_partition};

/// Training modes on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Every (head, relation) against every entity, with all its true tails; reciprocal
    /// relations.
    Kvsall,
    /// Every triple and its reciprocal against every entity, with its one true tail.
    #[value(name = "1vsall")]
    OneVsAll,
    /// Each triple and `--neg-ratio` corruptions of its head or tail.
    Negsample,
}

/// Losses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LossArg {
    /// Binary cross-entropy on every score (negsample with --adversarial-temperature: on the
    /// true triple, and on its corruptions weighted by a softmax of their scores).
    Bce,
    /// Softmax cross-entropy over all entities, the candidates, or a true triple and its
    /// corruptions.
    Ce,
    /// Margin ranking of each true triple against its corruptions (negsample; --margin).
    Margin,
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
    /// The model: distmult, complex, transe, transe-l2, transe-sq, rotate, rotate-sq, qmult.
    #[arg(long, default_value = "distmult")]
    pub model: String,
    /// Entity row length (default: the model's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub dim: Option<u32>,
    /// Weight dtype: f32, f16 or bf16 (default: the model's).
    #[arg(long, value_parser = parse_dtype)]
    pub dtype: Option<DType>,
    /// Optimizer of both tables: any row of the optimizer table (default: the model's).
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Learning rate of both tables (default: the model's).
    #[arg(long, value_parser = parse_non_negative)]
    pub lr: Option<f64>,
    /// Learning rate of the relation table alone, over --lr (PyTorch-BigGraph's relation_lr;
    /// 0 keeps the relations as initialised).
    #[arg(long, value_parser = parse_non_negative)]
    pub relation_lr: Option<f64>,
    /// Hyper-parameters by name, from the optimizer table.
    #[command(flatten)]
    pub hyper: HyperArgs,
    /// Epochs (at most, with --patience).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub epochs: u32,
    /// Global batch: queries (kvsall, 1vsall) or true triples (negsample) per step, over all
    /// ranks.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,
    /// Training mode (default: kvsall for scores linear in the tail, else negsample).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Loss (default: bce for kvsall and negsample, ce for 1vsall); margin for negsample, or
    /// kvsall and 1vsall with shared negatives without batch negatives.
    #[arg(long, value_enum)]
    pub loss: Option<LossArg>,
    /// What kvsall and 1vsall score each query against: all (every entity), or shared
    /// negatives drawn per step — uniform:N (N distinct uniform entities), degree:N (N drawn by
    /// degree), batch (the batch's true tails), comma-separated: uniform:N,degree:M,batch.
    #[arg(long, default_value = "all", value_parser = parse_negatives)]
    pub negatives: Negatives,
    /// Shared negatives: queries of the global batch per chunk, each chunk scored against its
    /// own draw of --negatives (and with `batch`, its own queries' true tails):
    /// PyTorch-BigGraph's chunks; default: the whole batch is one chunk.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub chunk: Option<u32>,
    /// Corruptions per true triple (negsample).
    #[arg(long, default_value_t = 4)]
    pub neg_ratio: usize,
    /// Self-adversarial negative sampling (Sun et al., 2019) with this temperature α > 0:
    /// negsample's bce weighs each true triple's corruptions by softmax(α · score).
    #[arg(long, value_parser = parse_positive)]
    pub adversarial_temperature: Option<f64>,
    /// The margin γ ≥ 0 of --loss margin.
    #[arg(long, default_value_t = 1.0, value_parser = parse_non_negative)]
    pub margin: f64,
    /// Training triples per block when they stream from a prepared folder (`rowshard
    /// prepare`): an epoch reads the blocks in a shuffled order and shuffles within each.
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub stream_block: u32,
    /// Label smoothing ε in [0, 1).
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub label_smoothing: f32,
    /// Regulariser of both tables' rows a step uses (kvsall, 1vsall): none, n3:WEIGHT,
    /// l2:WEIGHT or l2:WEIGHT,weighted.
    #[arg(long, value_parser = parse_regularizer)]
    pub reg: Option<Regularizer>,
    /// Regulariser of the entity rows (overrides --reg).
    #[arg(long, value_parser = parse_regularizer)]
    pub entity_reg: Option<Regularizer>,
    /// Regulariser of the relation rows (overrides --reg).
    #[arg(long, value_parser = parse_regularizer)]
    pub relation_reg: Option<Regularizer>,
    /// Dropout probability of the head and relation rows a query is built from (kvsall,
    /// 1vsall), in [0, 1).
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub dropout: f32,
    /// Dropout probability of the head rows alone (overrides --dropout), in [0, 1).
    #[arg(long, value_parser = parse_fraction)]
    pub entity_dropout: Option<f32>,
    /// Dropout probability of the relation rows alone (overrides --dropout), in [0, 1).
    #[arg(long, value_parser = parse_fraction)]
    pub relation_dropout: Option<f32>,
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
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub ranks: u32,
    /// How ranks are started.
    #[arg(long, value_enum, default_value_t = CommArg::Auto)]
    pub comm: CommArg,
    /// CubeCL runtime: cpu, wgpu or cuda.
    #[arg(long, default_value = "cpu", value_parser = parse_backend)]
    pub runtime: Backend,
    /// Seed of initialisation, batch order and negatives.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Evaluate on valid every this many epochs (0: only at the end). With evaluations, the
    /// final metrics are the best evaluated model's.
    #[arg(long, default_value_t = 0)]
    pub eval_every: usize,
    /// Rank each valid and test answer against N entities drawn uniformly (per ranking call)
    /// instead of every entity: for graphs where full ranking is too slow. Reported as sampled
    /// MRR, which is higher than (and not comparable with) the filtered MRR of full ranking.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub eval_sample: Option<u32>,
    /// Stop after this many evaluations without a gain in valid MRR of more than --min-delta
    /// (0: never stop early; needs --eval-every).
    #[arg(long, default_value_t = 0)]
    pub patience: usize,
    /// The smallest gain in valid MRR that counts for --patience.
    #[arg(long, default_value_t = 0.0, value_parser = parse_non_negative)]
    pub min_delta: f64,
    /// Write a checkpoint here at every evaluation and at the end.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Resume from this checkpoint (a checkpoint folder, or a --checkpoint-dir: its latest).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Write the metrics as JSON here: every evaluation (epoch, seconds of training, valid
    /// metrics), the best epoch, and the final valid and test metrics.
    #[arg(long)]
    pub metrics_json: Option<PathBuf>,
    /// Read flags from this recipe (a TOML file of `flag = value`; see recipes/); flags on the
    /// command line override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Draw progress bars (default: when stderr is a terminal).
    #[arg(long)]
    pub progress: Option<bool>,
}

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite number > 0")),
    }
}

fn parse_non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite number ≥ 0")),
    }
}

/// A number in `[0, 1)`: label smoothing, dropout.
fn parse_fraction(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not in [0, 1)")),
    }
}

fn parse_regularizer(s: &str) -> Result<Regularizer, String> {
    let bad = || {
        format!(
            "unknown regulariser `{s}`; expected none, n3:WEIGHT, l2:WEIGHT or l2:WEIGHT,weighted \
             (WEIGHT ≥ 0)"
        )
    };
    let weight = |w: &str| parse_non_negative(w).map_err(|_| bad());
    match s.split_once(':') {
        None if s == "none" => Ok(Regularizer::None),
        Some(("n3", w)) => Ok(Regularizer::N3 { weight: weight(w)? }),
        Some(("l2", rest)) => match rest.split_once(',') {
            None => Ok(Regularizer::L2 {
                weight: weight(rest)?,
                weighted: false,
            }),
            Some((w, "weighted")) => Ok(Regularizer::L2 {
                weight: weight(w)?,
                weighted: true,
            }),
            Some(_) => Err(bad()),
        },
        _ => Err(bad()),
    }
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

fn parse_negatives(s: &str) -> Result<Negatives, String> {
    if s == "all" {
        return Ok(Negatives::All);
    }
    let (mut uniform, mut degree, mut batch) = (0, 0, false);
    for part in s.split(',') {
        let count = |n: &str| match n.parse::<usize>() {
            Ok(count) if count > 0 => Ok(count),
            _ => Err(format!(
                "`{n}` in `{s}`: a positive number of negatives is needed"
            )),
        };
        match part.split_once(':') {
            Some(("uniform", n)) => uniform = count(n)?,
            Some(("degree", n)) => degree = count(n)?,
            None if part == "batch" => batch = true,
            Some(("batch", n)) => {
                return Err(format!(
                    "`{part}` in `{s}`: batch negatives are the true tails of the queries of a \
                     chunk; write batch and set the queries per chunk with --chunk {n} \
                     (PyTorch-BigGraph's num_batch_negs)"
                ));
            }
            _ => {
                return Err(format!(
                    "unknown negatives `{s}`; expected all, or uniform:N, degree:N and batch \
                     separated by commas (uniform:N,degree:M,batch)"
                ));
            }
        }
    }
    Ok(Negatives::Shared {
        uniform,
        degree,
        batch,
    })
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
