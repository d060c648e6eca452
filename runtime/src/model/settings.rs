//! A model's settings: dims, dtype, both tables' optimizers, partition, initialisation. What
//! `#[sharded_embedding(...)]` writes, checked at compile time; the CLI and library users can
//! change any of it at run time, checked against the same table.

use rowshard_kernels::{BiasClock, DType, HyperParams, KernelError, Optimizer, Range, TableConfig};

use crate::init::Initializer;
use crate::partition::PartitionScheme;
use crate::sharded::StateLocation;

/// The learning rate a table gets when none is given.
pub const DEFAULT_LR: f64 = 0.01;

/// One table's optimizer: which, its hyper-parameters and options, and its learning rate.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerSettings {
    /// The optimizer and its hyper-parameters.
    pub hyper: HyperParams,
    /// The learning rate.
    pub lr: f64,
    /// Adam's bias-correction clock.
    pub bias_clock: BiasClock,
    /// AdamW's decoupled weight decay.
    pub decoupled_weight_decay: bool,
    /// Storage dtype of per-element states.
    pub state_dtype: DType,
}

impl OptimizerSettings {
    /// `optimizer` with the table's defaults and [`DEFAULT_LR`].
    pub fn new(optimizer: Optimizer) -> Self {
        Self {
            hyper: HyperParams::new(optimizer),
            lr: DEFAULT_LR,
            bias_clock: BiasClock::default(),
            decoupled_weight_decay: false,
            state_dtype: DType::F32,
        }
    }

    /// The optimizer.
    pub fn optimizer(&self) -> Optimizer {
        self.hyper.optimizer()
    }

    /// Sets `name` — `lr` or one of the optimizer's hyper-parameters — checked against the table.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), KernelError> {
        if name == "lr" {
            if !Range::NON_NEGATIVE.contains(value) || !value.is_finite() {
                return Err(KernelError::OutOfRange {
                    name: "lr".into(),
                    value,
                    range: Range::NON_NEGATIVE.to_string(),
                });
            }
            self.lr = value;
            return Ok(());
        }
        self.hyper.set(name, value)
    }

    /// With learning rate `lr`.
    ///
    /// # Panics
    /// If `lr` is negative or not finite; [`OptimizerSettings::set`] returns the error instead.
    pub fn with_lr(mut self, lr: f64) -> Self {
        self.set("lr", lr).unwrap_or_else(|e| panic!("{e}"));
        self
    }

    /// With hyper-parameter `name` set to `value` (values `#[sharded_embedding]` checked at
    /// compile time).
    ///
    /// # Panics
    /// On a name or value the table refuses; [`OptimizerSettings::set`] returns the error instead.
    pub fn with(mut self, name: &str, value: f64) -> Self {
        self.set(name, value).unwrap_or_else(|e| panic!("{e}"));
        self
    }

    /// With Adam's bias-correction clock.
    pub fn with_bias_clock(mut self, clock: BiasClock) -> Self {
        self.bias_clock = clock;
        self
    }

    /// With AdamW's decoupled weight decay.
    pub fn with_decoupled_weight_decay(mut self, on: bool) -> Self {
        self.decoupled_weight_decay = on;
        self
    }

    /// With per-element states stored in `dtype`.
    pub fn with_state_dtype(mut self, dtype: DType) -> Self {
        self.state_dtype = dtype;
        self
    }

    /// The kernel configuration of a table of `dim`-wide rows in `dtype`.
    pub fn table_config(&self, dtype: DType, dim: usize, stochastic_rounding: bool) -> TableConfig {
        TableConfig::new(self.optimizer(), dtype, dim)
            .with_state_dtype(self.state_dtype)
            .with_bias_clock(self.bias_clock)
            .with_decoupled_weight_decay(self.decoupled_weight_decay)
            .with_stochastic_rounding(stochastic_rounding)
    }

    /// `(name, value)` of everything ranks must agree on, prefixed by `table`.
    pub(crate) fn describe(&self, table: &str) -> Vec<(String, String)> {
        let mut out = vec![
            (format!("{table} optimizer"), self.optimizer().to_string()),
            (format!("{table} lr"), self.lr.to_string()),
            (
                format!("{table} bias clock"),
                format!("{:?}", self.bias_clock),
            ),
            (
                format!("{table} decoupled weight decay"),
                self.decoupled_weight_decay.to_string(),
            ),
            (format!("{table} state dtype"), self.state_dtype.to_string()),
        ];
        out.extend(
            self.hyper
                .iter()
                .map(|(n, v)| (format!("{table} {n}"), v.to_string())),
        );
        out
    }
}

/// How a table's weights start; each row's values depend only on the seed and its global row,
/// so every partition starts from the same table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InitScheme {
    /// Normal with mean 0.
    Normal {
        /// Standard deviation.
        std: f64,
    },
    /// Uniform in `[-bound, bound)`.
    Uniform {
        /// Half-width.
        bound: f64,
    },
    /// Xavier (Glorot) normal over the whole table, as torch's `xavier_normal_` on an embedding
    /// weight: std `sqrt(2 / (rows + dim))`.
    XavierNormal,
    /// All zeros.
    Zeros,
}

impl InitScheme {
    /// The initialiser of a `rows × dim` table.
    pub fn initializer(&self, rows: usize, dim: usize, seed: u64) -> Initializer {
        match *self {
            InitScheme::Normal { std } => Initializer::Normal {
                std: std as f32,
                seed,
            },
            InitScheme::Uniform { bound } => Initializer::Uniform {
                bound: bound as f32,
                seed,
            },
            InitScheme::XavierNormal => Initializer::Normal {
                std: (2.0 / (rows + dim) as f64).sqrt() as f32,
                seed,
            },
            InitScheme::Zeros => Initializer::Zeros,
        }
    }
}

/// Everything about a model except its sizes: what `#[sharded_embedding(...)]` declares.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSettings {
    /// Entity row length (relation rows follow from the scoring function).
    pub dim: usize,
    /// Weight dtype of both tables.
    pub dtype: DType,
    /// The entity table's optimizer.
    pub entity: OptimizerSettings,
    /// The relation table's optimizer.
    pub relation: OptimizerSettings,
    /// How entity rows are split over ranks.
    pub partition: PartitionScheme,
    /// Where the entity table's optimizer state lives.
    pub state_location: StateLocation,
    /// Stochastic rounding of f16/bf16 weight writes.
    pub stochastic_rounding: bool,
    /// How both tables start.
    pub init: InitScheme,
}

impl ModelSettings {
    /// `dim`-wide rows of `dtype`, Adam on both tables, even partition, normal(0.1) start.
    pub fn new(dim: usize, dtype: DType) -> Self {
        Self {
            dim,
            dtype,
            entity: OptimizerSettings::new(Optimizer::Adam),
            relation: OptimizerSettings::new(Optimizer::Adam),
            partition: PartitionScheme::Even,
            state_location: StateLocation::WithShard,
            stochastic_rounding: false,
            init: InitScheme::Normal { std: 0.1 },
        }
    }
}

/// The settings a model struct declares in `#[sharded_embedding(...)]`.
pub trait ModelDefaults {
    /// The settings as written in the attribute.
    fn settings() -> ModelSettings;
}

/// A model to build: sizes, settings, seed. Every rank passes the same.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// Entities (rows of the sharded table).
    pub entities: usize,
    /// Relations (rows of the replicated table; with reciprocal relations, twice the data's).
    pub relations: usize,
    /// Everything else.
    pub settings: ModelSettings,
    /// Seeds initialisation and stochastic rounding.
    pub seed: u64,
}

impl ModelSpec {
    /// `entities` and `relations` rows with the settings `S` declares, seed 0.
    pub fn of<S: ModelDefaults>(entities: usize, relations: usize) -> Self {
        Self {
            entities,
            relations,
            settings: S::settings(),
            seed: 0,
        }
    }
}
