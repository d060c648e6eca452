//! Shared pieces of rowshard's integration tests: an independent f64 reference of every
//! optimizer, seeded data, and the kernel suite instantiated per runtime.

pub mod data;
pub mod dense_suite;
pub mod equivalence;
pub mod model_suite;
pub mod reference;
pub mod scores;
pub mod suite;
