//! The CubeCL kernels: row gather and the fused gather-gradient-apply per optimizer.
//!
//! `#[cube]` generates an undocumented module and struct per function; the functions themselves
//! carry the docs.

#[allow(missing_docs)]
pub mod apply;
#[allow(missing_docs)]
pub mod gather;
#[allow(missing_docs)]
pub mod rounding;
#[allow(missing_docs)]
pub mod update;
