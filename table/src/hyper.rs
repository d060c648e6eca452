//! Hyper-parameter values for one optimizer, validated against its table row.

use crate::{KernelError, Optimizer, Range};

/// Index of the per-step learning rate in the kernel's parameter block. Slots 1..=5 are the
/// table's [`ParamSlot`](crate::ParamSlot)s.
pub const PARAM_LR: usize = 0;
/// Adam's global-clock bias correction `1 - b1^t`.
pub const PARAM_BIAS1: usize = 6;
/// Adam's global-clock bias correction `1 - b2^t`.
pub const PARAM_BIAS2: usize = 7;
/// `1 / dim`, for row-wise means.
pub const PARAM_INV_DIM: usize = 8;
/// Length of the parameter block.
pub const PARAM_LEN: usize = 9;

/// The hyper-parameters of one optimizer, starting at the table's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct HyperParams {
    optimizer: Optimizer,
    values: Vec<f64>,
}

impl HyperParams {
    /// The table's defaults for `optimizer`.
    pub fn new(optimizer: Optimizer) -> Self {
        let values = optimizer
            .spec()
            .hyper_parameters
            .iter()
            .map(|h| h.default)
            .collect();
        Self { optimizer, values }
    }

    /// The optimizer these belong to.
    pub fn optimizer(&self) -> Optimizer {
        self.optimizer
    }

    /// Sets `name` (WholeMemory's `set_parameter`). Unknown names and out-of-range values are
    /// refused and change nothing.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), KernelError> {
        let spec = self.optimizer.spec();
        let Some(i) = spec.hyper_parameters.iter().position(|h| h.name == name) else {
            return Err(KernelError::UnknownHyperParameter {
                optimizer: self.optimizer,
                name: name.to_string(),
                expected: spec
                    .hyper_parameters
                    .iter()
                    .map(|h| h.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let range = spec.hyper_parameters[i].range;
        if !range.contains(value) {
            return Err(KernelError::OutOfRange {
                name: name.to_string(),
                value,
                range: range.to_string(),
            });
        }
        self.values[i] = value;
        Ok(())
    }

    /// The value of `name`, if the optimizer has it.
    pub fn get(&self, name: &str) -> Option<f64> {
        let i = self
            .optimizer
            .spec()
            .hyper_parameters
            .iter()
            .position(|h| h.name == name)?;
        Some(self.values[i])
    }

    /// `(name, value)` pairs in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.optimizer
            .spec()
            .hyper_parameters
            .iter()
            .zip(&self.values)
            .map(|(h, &v)| (h.name, v))
    }

    /// The kernel's parameter block for one step. `step` is the table's step count starting at
    /// 1 (Adam's global clock); `dim` the row length.
    pub fn kernel_block(
        &self,
        lr: f32,
        step: u64,
        dim: usize,
    ) -> Result<[f32; PARAM_LEN], KernelError> {
        if !Range::NON_NEGATIVE.contains(lr as f64) {
            return Err(KernelError::OutOfRange {
                name: "lr".into(),
                value: lr as f64,
                range: Range::NON_NEGATIVE.to_string(),
            });
        }
        let mut block = [0.0f32; PARAM_LEN];
        block[PARAM_LR] = lr;
        for (h, &v) in self
            .optimizer
            .spec()
            .hyper_parameters
            .iter()
            .zip(&self.values)
        {
            block[h.slot as usize] = v as f32;
        }
        let t = step.min(i32::MAX as u64) as i32;
        let beta = |name| self.get(name).unwrap_or(0.0);
        block[PARAM_BIAS1] = (1.0 - beta("beta1").powi(t)) as f32;
        block[PARAM_BIAS2] = (1.0 - beta("beta2").powi(t)) as f32;
        block[PARAM_INV_DIM] = 1.0 / dim as f32;
        Ok(block)
    }
}
