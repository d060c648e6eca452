//! Value parsers shared by the subcommands' flags (clap `value_parser`s): each returns the
//! message clap prints after "invalid value '…' for '--flag'".

use rowshard::partition::PartitionScheme;
use rowshard_kernels::{Backend, DType};

/// `f32`, `f16` or `bf16`.
pub fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_name(s)
        .ok_or_else(|| format!("unknown dtype `{s}`; expected one of: f32, f16, bf16"))
}

/// `cpu`, `wgpu` or `cuda`.
pub fn parse_backend(s: &str) -> Result<Backend, String> {
    Backend::from_name(s)
        .ok_or_else(|| format!("unknown runtime `{s}`; expected one of: cpu, wgpu, cuda"))
}

/// `even` or `round-robin`.
pub fn parse_partition(s: &str) -> Result<PartitionScheme, String> {
    match s {
        "even" => Ok(PartitionScheme::Even),
        "round-robin" => Ok(PartitionScheme::RoundRobin { block: 1 }),
        _ => Err(format!(
            "unknown partition `{s}`; expected even or round-robin"
        )),
    }
}
