//! The CubeCL kernels: row gather, row copy between buffers, the fused gather-gradient-apply per optimizer, the dense
//! products of KvsAll scoring, and the helpers `#[scoring]`'s generated kernels call.
//!
//! `#[cube]` generates an undocumented module and struct per function; the functions themselves
//! carry the docs. Kernel bodies are CubeCL's DSL, where index loops are the idiom: the
//! slice-method lints do not apply.

#![allow(clippy::needless_range_loop, clippy::manual_memcpy)]

#[allow(missing_docs)]
pub mod apply;
#[allow(missing_docs)]
pub mod copy;
#[allow(missing_docs)]
pub mod dense;
#[allow(missing_docs)]
pub mod dsl;
#[allow(missing_docs)]
pub mod gather;
#[allow(missing_docs)]
pub mod rounding;
#[allow(missing_docs)]
pub mod update;
