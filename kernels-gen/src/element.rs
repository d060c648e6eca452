//! Where a [`DType`] meets CubeCL: its element type, and the one place a runtime dtype becomes a
//! compile-time type parameter ([`with_dtype!`](crate::with_dtype)).

use cubecl::prelude::*;
use half::{bf16, f16};

use crate::{DType, KernelError};

/// The CubeCL element type of `dtype`.
pub fn elem_type(dtype: DType) -> ElemType {
    match dtype {
        DType::F32 => <f32 as Scalar>::elem_type_native(),
        DType::F16 => <f16 as Scalar>::elem_type_native(),
        DType::BF16 => <bf16 as Scalar>::elem_type_native(),
    }
}

/// A CubeCL server error as a [`KernelError`].
pub fn runtime_error(e: cubecl::server::ServerError) -> KernelError {
    KernelError::Runtime(format!("{e:?}"))
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
