//! The element types a table's weights and optimizer states can be stored in.

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
            // bf16 is the top half of an f32: a shift, which the compiler vectorises (half's
            // slice conversion was 2x slower here).
            DType::BF16 => match bytemuck::try_cast_slice::<u8, u16>(bytes) {
                Ok(values) => out.extend(values.iter().map(|&b| f32::from_bits((b as u32) << 16))),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast slice decoding matches element-wise decoding through `half`, for every bf16 and
    /// f16 bit pattern, from aligned and unaligned bytes.
    #[test]
    fn decode_into_matches_decode_for_every_code() {
        for dtype in [DType::F16, DType::BF16] {
            let codes: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
            let mut shifted = vec![0u8];
            shifted.extend_from_slice(&codes);
            for bytes in [&codes[..], &shifted[1..]] {
                let mut fast = vec![1.5];
                dtype.decode_into(bytes, &mut fast);
                let slow = dtype.decode(bytes);
                assert_eq!(fast[0], 1.5, "kept what was there");
                let same = fast[1..]
                    .iter()
                    .zip(&slow)
                    .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
                assert!(same && fast.len() == slow.len() + 1, "{dtype}");
            }
        }
        let values = [0.0f32, -1.5, 3.25e-7, f32::INFINITY];
        let mut out = Vec::new();
        DType::F32.decode_into(&DType::F32.encode(&values), &mut out);
        assert_eq!(out, values);
    }
}
