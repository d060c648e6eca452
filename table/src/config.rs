//! What a table is specialised for: optimizer, dtypes, dim and the optimizer's options.

use crate::{BiasClock, DType, KernelError, Optimizer};

/// The compile-time choices of one table. [`TableConfig::validate`] checks them against the
/// optimizer's row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TableConfig {
    /// The optimizer.
    pub optimizer: Optimizer,
    /// Storage type of the weights.
    pub weight_dtype: DType,
    /// Storage type of per-element optimizer states.
    pub state_dtype: DType,
    /// Row length.
    pub dim: usize,
    /// Adam's bias-correction clock.
    pub bias_clock: BiasClock,
    /// Adam: decoupled weight decay (AdamW).
    pub decoupled_weight_decay: bool,
    /// Round f16/bf16 weight writes stochastically (FBGEMM) instead of to nearest.
    pub stochastic_rounding: bool,
}

impl TableConfig {
    /// `optimizer` over `dim`-wide rows of `weight_dtype`, f32 states, other options at their
    /// defaults.
    pub fn new(optimizer: Optimizer, weight_dtype: DType, dim: usize) -> Self {
        Self {
            optimizer,
            weight_dtype,
            state_dtype: DType::F32,
            dim,
            bias_clock: BiasClock::default(),
            decoupled_weight_decay: false,
            stochastic_rounding: false,
        }
    }

    /// Sets the state dtype.
    pub fn with_state_dtype(mut self, dtype: DType) -> Self {
        self.state_dtype = dtype;
        self
    }

    /// Sets Adam's bias-correction clock.
    pub fn with_bias_clock(mut self, clock: BiasClock) -> Self {
        self.bias_clock = clock;
        self
    }

    /// Turns on AdamW's decoupled weight decay.
    pub fn with_decoupled_weight_decay(mut self, on: bool) -> Self {
        self.decoupled_weight_decay = on;
        self
    }

    /// Turns on stochastic rounding of weight writes.
    pub fn with_stochastic_rounding(mut self, on: bool) -> Self {
        self.stochastic_rounding = on;
        self
    }

    /// Checks every choice against the optimizer's table row.
    pub fn validate(&self) -> Result<(), KernelError> {
        let spec = self.optimizer.spec();
        let unsupported = |what: String, supported: String| KernelError::UnsupportedOption {
            optimizer: self.optimizer,
            what,
            supported,
        };
        let names = |d: &[DType]| d.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ");
        if self.dim == 0 {
            return Err(KernelError::InvalidShape("dim must be at least 1".into()));
        }
        if !spec.weight_dtypes.contains(&self.weight_dtype) {
            return Err(unsupported(
                format!("{} weights", self.weight_dtype),
                format!("weights in {}", names(spec.weight_dtypes)),
            ));
        }
        if !spec.state_dtypes.contains(&self.state_dtype) {
            return Err(unsupported(
                format!("{} states", self.state_dtype),
                format!("states in {}", names(spec.state_dtypes)),
            ));
        }
        if self.bias_clock != BiasClock::default() && !spec.bias_clocks {
            return Err(unsupported(
                "a bias-correction clock".into(),
                "no bias correction".into(),
            ));
        }
        if self.decoupled_weight_decay && !spec.decoupled_weight_decay {
            return Err(unsupported(
                "decoupled weight decay".into(),
                "L2 weight decay only".into(),
            ));
        }
        if self.stochastic_rounding && self.weight_dtype == DType::F32 {
            return Err(unsupported(
                "stochastic rounding of f32 weights".into(),
                "it for f16 and bf16".into(),
            ));
        }
        Ok(())
    }
}
