//! The dense products and losses against `f64` host math on every runtime and dtype it stores
//! (`tests/dense_suite.rs`).

use rowshard_kernels::{Backend, DType};
use rowshard_tests::dense_suite::check_dense;

#[cfg(feature = "cpu")]
#[test]
fn dense_products_and_losses_on_cpu_f32() {
    check_dense(Backend::Cpu, DType::F32);
}

#[cfg(feature = "cpu")]
#[test]
fn dense_products_and_losses_on_cpu_f16() {
    check_dense(Backend::Cpu, DType::F16);
}

#[cfg(feature = "cpu")]
#[test]
fn dense_products_and_losses_on_cpu_bf16() {
    check_dense(Backend::Cpu, DType::BF16);
}

#[cfg(feature = "wgpu")]
#[test]
fn dense_products_and_losses_on_wgpu_f32() {
    check_dense(Backend::Wgpu, DType::F32);
}

#[cfg(feature = "wgpu")]
#[test]
fn dense_products_and_losses_on_wgpu_f16() {
    check_dense(Backend::Wgpu, DType::F16);
}

#[cfg(feature = "wgpu")]
#[test]
fn dense_kernels_refuse_bf16_on_wgpu_with_a_typed_error() {
    use rowshard_kernels::{DenseKernels, KernelError};
    let client = Backend::Wgpu.client().unwrap();
    let err = DenseKernels::new(&client, DType::BF16, 8).unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::UnsupportedDType {
                dtype: DType::BF16,
                ..
            }
        ),
        "{err}"
    );
}
