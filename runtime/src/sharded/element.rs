//! The element types rows and gradients cross the API in: `f32`, or a table's storage dtype.

use half::{bf16, f16};
use rowshard_kernels::DType;

/// A row element the caller may hold: `f32` (always), or `f16`/`bf16` when the table stores
/// them.
pub trait RowElement: bytemuck::Pod + Default + Send + Sync + 'static {
    /// The dtype it is.
    const DTYPE: DType;

    /// Widened to `f32` (exact).
    fn to_f32(self) -> f32;

    /// Rounded from `f32` to nearest (even).
    fn from_f32(x: f32) -> Self;
}

impl RowElement for f32 {
    const DTYPE: DType = DType::F32;

    fn to_f32(self) -> f32 {
        self
    }

    fn from_f32(x: f32) -> Self {
        x
    }
}

impl RowElement for f16 {
    const DTYPE: DType = DType::F16;

    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }

    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl RowElement for bf16 {
    const DTYPE: DType = DType::BF16;

    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }

    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// Writes one row stored as `dtype` (little-endian `src`) into `dst`, whose element type is
/// `dtype` itself (a copy) or `f32` (exact widening).
pub(crate) fn write_row<T: RowElement>(dtype: DType, src: &[u8], dst: &mut [T]) {
    if T::DTYPE == dtype {
        bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(src);
        return;
    }
    let dst: &mut [f32] = bytemuck::cast_slice_mut(dst);
    match dtype {
        // bf16 is the top half of an f32: a shift, which the compiler vectorises.
        DType::BF16 => {
            for (d, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
            }
        }
        DType::F16 => {
            for (d, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        DType::F32 => unreachable!("handled by the copy"),
    }
}
