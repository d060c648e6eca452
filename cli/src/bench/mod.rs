//! Benchmarks printed by `rowshard bench`: medians and ratios, never asserted in tests.

pub mod bandwidth;
pub mod dense;
pub mod kernels;
pub mod link;
pub mod scoring;
pub mod sharded;
pub mod stats;
pub mod training;
