//! The one table of optimizers. Every other list — the [`Optimizer`] enum and its `ALL`, the
//! kernel specialisations, hyper-parameter validation, the generated docs, the snapshot list and
//! the test instantiations — is derived from [`TABLE`].

use crate::DType;

/// A named slot in the kernel's `f32` parameter block that a hyper-parameter is written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamSlot {
    /// L2 weight decay (`g += wd * w`), or decoupled decay (AdamW).
    WeightDecay = 1,
    /// Adam's first-moment decay.
    Beta1 = 2,
    /// Adam's second-moment decay.
    Beta2 = 3,
    /// The denominator's epsilon.
    Eps = 4,
    /// RMSProp's smoothing constant.
    Alpha = 5,
}

/// A hyper-parameter: its name, default and valid range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HyperParameter {
    /// Name used by `set_parameter`, the CLI and the macro.
    pub name: &'static str,
    /// Where the kernel reads it.
    pub slot: ParamSlot,
    /// Default (WholeGraph's, where it has one).
    pub default: f64,
    /// The valid range.
    pub range: Range,
    /// One line for the docs.
    pub doc: &'static str,
}

/// A closed or half-open interval of valid values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Lower bound.
    pub min: f64,
    /// Whether `min` itself is valid.
    pub min_inclusive: bool,
    /// Upper bound (may be infinite).
    pub max: f64,
    /// Whether `max` itself is valid.
    pub max_inclusive: bool,
}

impl Range {
    /// `[0, ∞)`.
    pub const NON_NEGATIVE: Range = Range {
        min: 0.0,
        min_inclusive: true,
        max: f64::INFINITY,
        max_inclusive: false,
    };
    /// `(0, ∞)`.
    pub const POSITIVE: Range = Range {
        min: 0.0,
        min_inclusive: false,
        max: f64::INFINITY,
        max_inclusive: false,
    };
    /// `[0, 1)`.
    pub const UNIT_OPEN: Range = Range {
        min: 0.0,
        min_inclusive: true,
        max: 1.0,
        max_inclusive: false,
    };

    /// Whether `x` lies in the range (NaN never does).
    pub fn contains(&self, x: f64) -> bool {
        let above = if self.min_inclusive {
            x >= self.min
        } else {
            x > self.min
        };
        let below = if self.max_inclusive {
            x <= self.max
        } else {
            x < self.max
        };
        above && below
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = if self.min_inclusive { '[' } else { '(' };
        let close = if self.max_inclusive { ']' } else { ')' };
        let max = if self.max.is_infinite() {
            "inf".to_string()
        } else {
            self.max.to_string()
        };
        write!(f, "{open}{}, {max}{close}", self.min)
    }
}

/// How much optimizer state a slot keeps per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateShape {
    /// One value per weight element (`rows × dim`).
    PerElement,
    /// One `f32` per row.
    PerRow,
}

/// One named optimizer-state slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSlot {
    /// Name used by `optimizer_state(name)` and checkpoints.
    pub name: &'static str,
    /// Per element or per row.
    pub shape: StateShape,
    /// One line for the docs.
    pub doc: &'static str,
}

/// Which clock drives Adam's bias correction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BiasClock {
    /// A row's `t` advances only when it gets a gradient (WholeGraph).
    #[default]
    PerRow,
    /// `t` is the table's step count (torch `SparseAdam`, dicee).
    Global,
}

/// Everything rowshard knows about one optimizer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimizerSpec {
    /// The enum variant this row declares.
    pub optimizer: Optimizer,
    /// Lower-case name used by the CLI, the macro and `Optimizer::from_name`.
    pub name: &'static str,
    /// Human-readable name.
    pub title: &'static str,
    /// The update rule, one statement per entry (`g` gradient row, `w` weight row).
    pub rule: &'static [&'static str],
    /// Hyper-parameters besides the learning rate, which is passed per step.
    pub hyper_parameters: &'static [HyperParameter],
    /// Optimizer-state slots, in kernel order.
    pub states: &'static [StateSlot],
    /// Weight dtypes it is specialised for.
    pub weight_dtypes: &'static [DType],
    /// Dtypes its per-element states may be stored in.
    pub state_dtypes: &'static [DType],
    /// Whether it offers the per-row and global bias-correction clocks.
    pub bias_clocks: bool,
    /// Whether it offers decoupled weight decay (AdamW).
    pub decoupled_weight_decay: bool,
}

impl OptimizerSpec {
    /// The hyper-parameter called `name`.
    pub fn hyper_parameter(&self, name: &str) -> Option<&'static HyperParameter> {
        self.hyper_parameters.iter().find(|h| h.name == name)
    }

    /// The per-element state slots, in kernel order.
    pub fn element_states(&self) -> impl Iterator<Item = &'static StateSlot> + use<> {
        self.states
            .iter()
            .filter(|s| s.shape == StateShape::PerElement)
    }

    /// The per-row state slot, if any.
    pub fn row_state(&self) -> Option<&'static StateSlot> {
        self.states.iter().find(|s| s.shape == StateShape::PerRow)
    }
}

/// Declares the optimizer enum and [`TABLE`] together, so neither can list an optimizer the other
/// lacks.
macro_rules! optimizer_table {
    ($( $(#[$doc:meta])* $variant:ident { $($field:ident : $value:expr),+ $(,)? } )+) => {
        /// An optimizer rowshard has fused kernels for. Its row in [`TABLE`] says everything else.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Optimizer { $( $(#[$doc])* $variant ),+ }

        impl Optimizer {
            /// Every optimizer, in table order.
            pub const ALL: &'static [Optimizer] = &[$(Optimizer::$variant),+];
        }

        /// The optimizer table, in the order of [`Optimizer::ALL`].
        pub static TABLE: &[OptimizerSpec] = &[$(
            OptimizerSpec { optimizer: Optimizer::$variant, $($field: $value),+ }
        ),+];
    };
}

const fn hp(
    name: &'static str,
    slot: ParamSlot,
    default: f64,
    range: Range,
    doc: &'static str,
) -> HyperParameter {
    HyperParameter {
        name,
        slot,
        default,
        range,
        doc,
    }
}

const WEIGHT_DECAY: HyperParameter = hp(
    "weight_decay",
    ParamSlot::WeightDecay,
    0.0,
    Range::NON_NEGATIVE,
    "L2 penalty added to the gradient (`g += wd*w`)",
);
const EPS: HyperParameter = hp(
    "eps",
    ParamSlot::Eps,
    1e-8,
    Range::POSITIVE,
    "added to the denominator",
);
const ALL_DTYPES: &[DType] = &DType::ALL;
const F32_ONLY: &[DType] = &[DType::F32];

optimizer_table! {
    /// Stochastic gradient descent.
    Sgd {
        name: "sgd",
        title: "SGD",
        rule: &["g += wd*w", "w -= lr*g"],
        hyper_parameters: &[WEIGHT_DECAY],
        states: &[],
        weight_dtypes: ALL_DTYPES,
        state_dtypes: F32_ONLY,
        bias_clocks: false,
        decoupled_weight_decay: false,
    }
    /// Lazy Adam: rows without a gradient keep their moments.
    Adam {
        name: "adam",
        title: "Adam (lazy)",
        rule: &[
            "g += wd*w   (AdamW instead: w -= lr*wd*w)",
            "m = b1*m + (1-b1)*g",
            "v = b2*v + (1-b2)*g^2",
            "t = step (per row, or global)",
            "w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)",
        ],
        hyper_parameters: &[
            hp("beta1", ParamSlot::Beta1, 0.9, Range::UNIT_OPEN, "first-moment decay"),
            hp("beta2", ParamSlot::Beta2, 0.999, Range::UNIT_OPEN, "second-moment decay"),
            EPS,
            WEIGHT_DECAY,
        ],
        states: &[
            StateSlot { name: "m", shape: StateShape::PerElement, doc: "first moment" },
            StateSlot { name: "v", shape: StateShape::PerElement, doc: "second moment" },
            StateSlot { name: "step", shape: StateShape::PerRow, doc: "updates this row has received (exact to 2^24)" },
        ],
        weight_dtypes: ALL_DTYPES,
        state_dtypes: &[DType::F32, DType::BF16],
        bias_clocks: true,
        decoupled_weight_decay: true,
    }
    /// Element-wise AdaGrad.
    AdaGrad {
        name: "adagrad",
        title: "AdaGrad",
        rule: &["g += wd*w", "s += g^2", "w -= lr*g/(sqrt(s)+eps)"],
        hyper_parameters: &[EPS, WEIGHT_DECAY],
        states: &[StateSlot { name: "sum", shape: StateShape::PerElement, doc: "sum of squared gradients" }],
        weight_dtypes: ALL_DTYPES,
        state_dtypes: F32_ONLY,
        bias_clocks: false,
        decoupled_weight_decay: false,
    }
    /// Row-wise AdaGrad: one accumulator per row (FBGEMM, PyTorch-BigGraph).
    RowWiseAdaGrad {
        name: "rowwise_adagrad",
        title: "Row-wise AdaGrad",
        rule: &["g += wd*w", "s += mean(g^2)", "w -= lr*g/(sqrt(s)+eps)"],
        hyper_parameters: &[EPS, WEIGHT_DECAY],
        states: &[StateSlot { name: "sum", shape: StateShape::PerRow, doc: "sum of the rows' mean squared gradients" }],
        weight_dtypes: ALL_DTYPES,
        state_dtypes: F32_ONLY,
        bias_clocks: false,
        decoupled_weight_decay: false,
    }
    /// RMSProp.
    RmsProp {
        name: "rmsprop",
        title: "RMSProp",
        rule: &["g += wd*w", "v = a*v + (1-a)*g^2", "w -= lr*g/(sqrt(v)+eps)"],
        hyper_parameters: &[
            hp("alpha", ParamSlot::Alpha, 0.99, Range::UNIT_OPEN, "smoothing constant"),
            EPS,
            WEIGHT_DECAY,
        ],
        states: &[StateSlot { name: "v", shape: StateShape::PerElement, doc: "running mean of squared gradients" }],
        weight_dtypes: ALL_DTYPES,
        state_dtypes: F32_ONLY,
        bias_clocks: false,
        decoupled_weight_decay: false,
    }
}

impl Optimizer {
    /// This optimizer's row of [`TABLE`].
    pub fn spec(self) -> &'static OptimizerSpec {
        &TABLE[self as usize]
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses [`Optimizer::name`].
    pub fn from_name(name: &str) -> Option<Optimizer> {
        TABLE.iter().find(|s| s.name == name).map(|s| s.optimizer)
    }

    /// The valid names, for "expected one of" messages.
    pub fn names() -> Vec<&'static str> {
        TABLE.iter().map(|s| s.name).collect()
    }
}

impl std::fmt::Display for Optimizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_the_enum_order() {
        for (i, &opt) in Optimizer::ALL.iter().enumerate() {
            assert_eq!(TABLE[i].optimizer, opt);
            assert_eq!(Optimizer::from_name(opt.name()), Some(opt));
        }
    }

    #[test]
    fn kernel_buffers_fit_every_row() {
        for spec in TABLE {
            assert!(
                spec.element_states().count() <= 2,
                "{}: the kernel has two per-element state buffers",
                spec.name
            );
            assert!(
                spec.states
                    .iter()
                    .filter(|s| s.shape == StateShape::PerRow)
                    .count()
                    <= 1,
                "{}",
                spec.name
            );
            assert!(spec.state_dtypes.contains(&DType::F32), "{}", spec.name);
            for h in spec.hyper_parameters {
                assert!(
                    h.range.contains(h.default),
                    "{}.{} default out of range",
                    spec.name,
                    h.name
                );
            }
        }
    }
}
