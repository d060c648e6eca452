//! The models rowshard ships, each written with `#[sharded_embedding]` and `#[scoring]` in a few
//! lines — the same way a user writes their own, and registered for the command line the same
//! way (`rowshard_cli::Registry::shipped`). Their defaults follow dicee's KvsAll runs on
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
