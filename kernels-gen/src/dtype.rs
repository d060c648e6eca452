//! The element types a table's weights and optimizer states can be stored in.

use cubecl::prelude::*;
use half::{bf16, f16};

/// Storage type of a table's weights or optimizer states. All math runs in `f32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary16.
    F16,
    /// bfloat16: the exponent range of `f32` with 8 bits of mantissa.
    BF16,
}

impl DType {
    /// Every dtype, in the order the docs and snapshots list them.
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// The lower-case name used in CLI arguments, macro arguments, snapshots and docs.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }

    /// Parses [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// How many low mantissa bits of an `f32` this type drops; stochastic rounding randomises them.
    pub const fn dropped_mantissa_bits(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 13,
            DType::BF16 => 16,
        }
    }

    /// The CubeCL element type.
    pub fn elem_type(self) -> ElemType {
        match self {
            DType::F32 => <f32 as Scalar>::elem_type_native(),
            DType::F16 => <f16 as Scalar>::elem_type_native(),
            DType::BF16 => <bf16 as Scalar>::elem_type_native(),
        }
    }

    /// Encodes `f32` values into this type's little-endian bytes (round to nearest even).
    pub fn encode(self, values: &[f32]) -> Vec<u8> {
        match self {
            DType::F32 => bytemuck::cast_slice(values).to_vec(),
            DType::F16 => {
                let v: Vec<f16> = values.iter().map(|&x| f16::from_f32(x)).collect();
                bytemuck::cast_slice(&v).to_vec()
            }
            DType::BF16 => {
                let v: Vec<bf16> = values.iter().map(|&x| bf16::from_f32(x)).collect();
                bytemuck::cast_slice(&v).to_vec()
            }
        }
    }

    /// Decodes this type's little-endian bytes into `f32` (exact).
    pub fn decode(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            DType::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            DType::F16 => bytes
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            DType::BF16 => bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }

    /// Decodes this type's little-endian bytes onto the end of `out` (exact); the hot path of
    /// every lookup, so it converts whole slices where the bytes are aligned.
    pub fn decode_into(self, bytes: &[u8], out: &mut Vec<f32>) {
        use half::slice::HalfFloatSliceExt;
        let start = out.len();
        let n = bytes.len() / self.size();
        match self {
            DType::F32 => match bytemuck::try_cast_slice::<u8, f32>(bytes) {
                Ok(values) => out.extend_from_slice(values),
                Err(_) => out.extend(self.decode(bytes)),
            },
            DType::F16 => match bytemuck::try_cast_slice::<u8, f16>(bytes) {
                Ok(values) => {
                    out.resize(start + n, 0.0);
                    values.convert_to_f32_slice(&mut out[start..]);
                }
                Err(_) => out.extend(self.decode(bytes)),
            },
            DType::BF16 => match bytemuck::try_cast_slice::<u8, bf16>(bytes) {
                Ok(values) => {
                    out.resize(start + n, 0.0);
                    values.convert_to_f32_slice(&mut out[start..]);
                }
                Err(_) => out.extend(self.decode(bytes)),
            },
        }
    }

    /// Rounds an `f32` to the nearest value of this type (round to nearest even).
    pub fn round(self, x: f32) -> f32 {
        match self {
            DType::F32 => x,
            DType::F16 => f16::from_f32(x).to_f32(),
            DType::BF16 => bf16::from_f32(x).to_f32(),
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs `$body` with the type alias `$t` bound to the Rust type of `$dtype`.
///
/// This is the one place a runtime [`DType`] becomes a compile-time type parameter.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::DType::F16 => {
                type $t = $crate::__private::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $t = $crate::__private::half::bf16;
                $body
            }
        }
    };
}
