//! The models rowshard ships, each written with `#[sharded_embedding]` and `#[scoring]` in a few
//! lines — the same way a user writes their own. Their defaults follow dicee's KvsAll runs on
//! UMLS (dim 32, Adam lr 0.1, weights starting N(0, 1)); change any of it through
//! [`ModelSettings`](crate::model::ModelSettings) or the CLI.

mod complex;
mod distmult;
mod qmult;
mod rotate;
mod transe;

pub use complex::{ComplEx, ComplExModel};
pub use distmult::{DistMult, DistMultModel};
pub use qmult::{QMult, QMultModel};
pub use rotate::{RotatE, RotatEModel, RotatESq, RotatESqModel};
pub use transe::{TransE, TransEL2, TransEL2Model, TransEModel, TransESq, TransESqModel};

use crate::model::{ModelDefaults, ScoringFunction};

/// Something to do with a model type chosen by name at run time.
pub trait ModelVisitor {
    /// What the visit returns.
    type Output;

    /// Called with the model type.
    fn visit<S: ScoringFunction + ModelDefaults>(self) -> Self::Output;
}

/// The shipped models' names, as the CLI takes them.
pub const NAMES: &[&str] = &[
    "distmult",
    "complex",
    "transe",
    "transe-l2",
    "transe-sq",
    "rotate",
    "rotate-sq",
    "qmult",
];

/// Calls `visitor` with the shipped model called `name` — a CLI name or the struct's name, in
/// any case — or returns `None` for an unknown name.
pub fn visit<V: ModelVisitor>(name: &str, visitor: V) -> Option<V::Output> {
    Some(match name.to_ascii_lowercase().replace('-', "").as_str() {
        "distmult" => visitor.visit::<DistMult>(),
        "complex" => visitor.visit::<ComplEx>(),
        "transe" => visitor.visit::<TransE>(),
        "transel2" => visitor.visit::<TransEL2>(),
        "transesq" => visitor.visit::<TransESq>(),
        "rotate" => visitor.visit::<RotatE>(),
        "rotatesq" => visitor.visit::<RotatESq>(),
        "qmult" => visitor.visit::<QMult>(),
        _ => return None,
    })
}
