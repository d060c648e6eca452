//! A recipe's sections, grouped as a reader looks for them. Every key is a flag of
//! `rowshard train` of the same name: the same doc comment is the key's documentation and the
//! flag's `--help`, and the same parser reads both. A key left out (`None`) takes its default
//! when the recipe is planned, or the value of a recipe under it.

use std::path::PathBuf;

use clap::Args;
use rowshard_kernels::{Backend, DType};
use serde::Serialize;

use super::hyper::HyperArgs;
use super::values::{Count, Fraction, NonNegative, Positive, Share, parse, serialize_text};
use crate::data::UnseenPolicy;
use crate::model::InitScheme;
use crate::negatives::Negatives;
use crate::objective::{LossName, Mode, Regularizer};
use crate::partition::PartitionScheme;
use crate::train::{CommKind, LrSchedule};

/// `[data]`: what is trained on.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Data")]
pub struct DataKeys {
    /// Folder with train.txt, valid.txt and test.txt (one `head<TAB>relation<TAB>tail` per
    /// line), or a prepared folder (`rowshard prepare`) whose training triples stream from disk
    /// [default: the shipped UMLS].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<PathBuf>,
    /// Training triples per block when they stream from a prepared folder: an epoch reads the
    /// blocks in a shuffled order and shuffles within each [default: 1048576].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_block: Option<Count>,
    /// The fraction of the training triples trained on, in (0, 1]: a sample drawn from the seed
    /// (a search's early rungs train on such subsets) [default: 1].
    #[arg(long, value_parser = parse::<Share>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_fraction: Option<Share>,
}

/// `[model]`: the model and its tables.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Model")]
pub struct ModelKeys {
    /// The model: a registered name (distmult, complex, transe, transe-l2, transe-sq, rotate,
    /// rotate-sq, qmult, and a crate's own) [default: distmult].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Entity row length [default: the model's].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dim: Option<Count>,
    /// Weight dtype: f32, f16 or bf16 [default: the model's].
    #[arg(long, value_parser = parse::<DType>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub dtype: Option<DType>,
    /// Initialisation: normal:STD, uniform:BOUND, xavier or zeros [default: the model's].
    #[arg(long, value_parser = parse::<InitScheme>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub init: Option<InitScheme>,
    /// Entity partition over the ranks: even or round-robin [default: the model's].
    #[arg(long, value_parser = parse::<PartitionScheme>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub partition: Option<PartitionScheme>,
}

/// `[objective]`: which queries, and the loss over their scores.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Objective")]
pub struct ObjectiveKeys {
    /// Training mode: kvsall (every (head, relation) against every entity, with all its true
    /// tails), 1vsall (every triple and its reciprocal against every entity), negsample (each
    /// triple and --neg-ratio corruptions of its head or tail) [default: kvsall for scores linear
    /// in the tail, else negsample].
    #[arg(long, value_parser = parse::<Mode>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<Mode>,
    /// Loss: bce (binary cross-entropy on every score; over a sample, the logistic loss), ce
    /// (softmax cross-entropy), self-adversarial (the logistic loss with the negatives weighted
    /// by a softmax of their scores, --adversarial-temperature), margin (margin ranking of each
    /// true tail against its negatives, --margin) [default: ce for 1vsall, else bce].
    #[arg(long, value_parser = parse::<LossName>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub loss: Option<LossName>,
    /// Label smoothing ε in [0, 1) [default: 0].
    #[arg(long, value_parser = parse::<Fraction>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_smoothing: Option<Fraction>,
    /// The temperature α > 0 of --loss self-adversarial: the negatives are weighed by
    /// softmax(α · score) [default: 1].
    #[arg(long, value_parser = parse::<Positive>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adversarial_temperature: Option<Positive>,
    /// The margin γ ≥ 0 of --loss margin [default: 1].
    #[arg(long, value_parser = parse::<NonNegative>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub margin: Option<NonNegative>,
}

/// `[negatives]`: what a query is scored against besides its true tails.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Negatives")]
pub struct NegativeKeys {
    /// What kvsall and 1vsall score each query against: all (every entity), or shared
    /// negatives drawn per step — uniform:N (N distinct uniform entities), degree:N (N drawn by
    /// degree), batch (the chunk's true tails), comma-separated: uniform:N,degree:M,batch
    /// [default: all].
    #[arg(long, value_parser = parse::<Negatives>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub negatives: Option<Negatives>,
    /// Shared negatives: queries of the global batch per chunk, each chunk scored against its
    /// own draw of --negatives (and with `batch`, its own queries' true tails):
    /// PyTorch-BigGraph's chunks [default: the whole batch is one chunk].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<Count>,
    /// Corruptions per true triple (negsample) [default: 4].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neg_ratio: Option<Count>,
}

/// `[optimizer]`: both tables' optimizer and learning rates.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Optimizer")]
pub struct OptimizerKeys {
    /// Optimizer of both tables: any row of the optimizer table (sgd, adam, adagrad,
    /// rowwise_adagrad, rmsprop) [default: the model's].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<String>,
    /// Learning rate of both tables [default: the model's].
    #[arg(long, value_parser = parse::<NonNegative>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lr: Option<NonNegative>,
    /// Learning rate of the relation table alone, over --lr (PyTorch-BigGraph's relation_lr;
    /// 0 keeps the relations as initialised).
    #[arg(long, value_parser = parse::<NonNegative>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relation_lr: Option<NonNegative>,
    /// Learning-rate schedule over the epochs: constant, cosine, or exp:GAMMA (per epoch)
    /// [default: constant].
    #[arg(long, value_parser = parse::<LrSchedule>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub lr_schedule: Option<LrSchedule>,
    /// Hyper-parameters by name, from the optimizer table.
    #[command(flatten)]
    #[serde(flatten)]
    pub hyper: HyperArgs,
}

/// `[regularization]`: regularisers of the rows a step uses, and dropout.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Regularisation")]
pub struct RegularizationKeys {
    /// Regulariser of both tables' rows a step uses (kvsall, 1vsall): none, n3:WEIGHT,
    /// l2:WEIGHT or l2:WEIGHT,weighted [default: none].
    #[arg(long, value_parser = parse::<Regularizer>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub reg: Option<Regularizer>,
    /// Regulariser of the entity rows (overrides --reg).
    #[arg(long, value_parser = parse::<Regularizer>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub entity_reg: Option<Regularizer>,
    /// Regulariser of the relation rows (overrides --reg).
    #[arg(long, value_parser = parse::<Regularizer>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub relation_reg: Option<Regularizer>,
    /// Dropout probability of the head and relation rows a query is built from (kvsall,
    /// 1vsall), in [0, 1) [default: 0].
    #[arg(long, value_parser = parse::<Fraction>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropout: Option<Fraction>,
    /// Dropout probability of the head rows alone (overrides --dropout), in [0, 1).
    #[arg(long, value_parser = parse::<Fraction>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity_dropout: Option<Fraction>,
    /// Dropout probability of the relation rows alone (overrides --dropout), in [0, 1).
    #[arg(long, value_parser = parse::<Fraction>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relation_dropout: Option<Fraction>,
}

/// `[training]`: how long, in batches of what size.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Training")]
pub struct TrainingKeys {
    /// Epochs (at most, with --patience) [default: 256].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<Count>,
    /// Global batch: queries (kvsall, 1vsall) or true triples (negsample) per step, over all
    /// ranks [default: 1024].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<Count>,
}

/// `[evaluation]`: evaluation on valid during training, and stopping early.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Evaluation and stopping")]
pub struct EvaluationKeys {
    /// Evaluate on valid every this many epochs (0: only at the end). With evaluations, the
    /// final metrics are the best evaluated model's [default: 0].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_every: Option<usize>,
    /// Rank each valid and test answer against N entities drawn uniformly (per ranking call)
    /// instead of every entity: for graphs where full ranking is too slow. Reported as sampled
    /// MRR, which is higher than (and not comparable with) the filtered MRR of full ranking.
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_sample: Option<Count>,
    /// Valid and test triples with an entity or relation unseen in training: drop (left out,
    /// as PyKEEN does) or count (ranked as LibKGE and the N3 paper's code rank them: against
    /// every entity, the unseen one's row untrained) [default: drop].
    #[arg(long, value_parser = parse::<UnseenPolicy>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub unseen: Option<UnseenPolicy>,
    /// Stop after this many evaluations without a gain in valid MRR of more than --min-delta
    /// (0: never stop early; needs --eval-every) [default: 0].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
    /// The smallest gain in valid MRR that counts for --patience [default: 0].
    #[arg(long, value_parser = parse::<NonNegative>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delta: Option<NonNegative>,
    /// Evaluate the final model on test (a search's trials do not) [default: true].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<bool>,
}

/// `[run]`: where and how the ranks run, the seed, checkpoints and records.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Run")]
pub struct RunKeys {
    /// Ranks: thread ranks of this process (under MPI, the job's size counts) [default: 2; 1
    /// for 1vsAll against one shared sample on at most 2 cores, which trains faster on one].
    #[arg(long, value_parser = parse::<Count>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Count>,
    /// How ranks are started: auto (MPI when started by mpirun, else threads), threads, mpi
    /// [default: auto].
    #[arg(long, value_parser = parse::<CommKind>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub comm: Option<CommKind>,
    /// CubeCL runtime: cpu, wgpu or cuda [default: cpu].
    #[arg(long, value_parser = parse::<Backend>)]
    #[serde(
        serialize_with = "serialize_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub runtime: Option<Backend>,
    /// Seed of initialisation, batch order and negatives [default: 1].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Write a checkpoint here at every evaluation and at the end.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Resume from this checkpoint (a checkpoint folder, or a --checkpoint-dir: its latest).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<PathBuf>,
    /// Write the metrics as JSON here: every evaluation (epoch, seconds of training, valid
    /// metrics), the best epoch, and the final valid and test metrics.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_json: Option<PathBuf>,
    /// Draw progress bars [default: when stderr is a terminal].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<bool>,
}
