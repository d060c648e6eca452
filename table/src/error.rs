//! The errors the kernel layer returns.

use crate::{DType, Optimizer};

/// What went wrong creating or running kernels. Every variant says what to change.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum KernelError {
    /// The runtime cannot store or convert this dtype.
    #[error("the {runtime} runtime cannot use {dtype} ({missing}); pick one of: {supported}")]
    UnsupportedDType {
        /// The dtype asked for.
        dtype: DType,
        /// The runtime's name.
        runtime: String,
        /// The missing capability.
        missing: String,
        /// Dtypes this runtime does support.
        supported: String,
    },
    /// The optimizer's table row does not offer this dtype or option.
    #[error("{optimizer} does not support {what}; it supports {supported}")]
    UnsupportedOption {
        /// The optimizer.
        optimizer: Optimizer,
        /// What was asked for.
        what: String,
        /// What is offered.
        supported: String,
    },
    /// A hyper-parameter name the optimizer does not have.
    #[error("{optimizer} has no hyper-parameter `{name}`; expected one of: {expected}")]
    UnknownHyperParameter {
        /// The optimizer.
        optimizer: Optimizer,
        /// The name given.
        name: String,
        /// The valid names.
        expected: String,
    },
    /// A hyper-parameter or learning rate outside its valid range.
    #[error("{name} = {value} is outside its valid range {range}")]
    OutOfRange {
        /// The parameter's name.
        name: String,
        /// The value given.
        value: f64,
        /// The valid range, printed.
        range: String,
    },
    /// A row index outside the table.
    #[error("row {row} is outside the table's {rows} rows")]
    RowOutOfRange {
        /// The offending row.
        row: u64,
        /// The table's row count.
        rows: u64,
    },
    /// A buffer with the wrong length.
    #[error("{what}: expected {expected} values, got {got}")]
    ShapeMismatch {
        /// Which input.
        what: &'static str,
        /// The length it must have.
        expected: usize,
        /// The length it had.
        got: usize,
    },
    /// A gradient value that is NaN or infinite.
    #[error("gradient for row {row} (input position {position}) is not finite: {value}")]
    NonFiniteGradient {
        /// The row the gradient was for.
        row: u64,
        /// Its position in the step's inputs.
        position: usize,
        /// The value.
        value: f32,
    },
    /// An invalid table shape.
    #[error("invalid table shape: {0}")]
    InvalidShape(String),
    /// No optimizer-state slot of that name.
    #[error("{optimizer} has no state `{name}`; expected one of: {expected}")]
    UnknownState {
        /// The optimizer.
        optimizer: Optimizer,
        /// The name given.
        name: String,
        /// The valid names.
        expected: String,
    },
    /// The device could not be opened.
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// The runtime failed to compile or run a kernel.
    #[error("kernel runtime error: {0}")]
    Runtime(String),
}
