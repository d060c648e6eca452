//! The kernel suite on the `wgpu` runtime (Vulkan; lavapipe without a GPU): f32 and f16. bf16 is
//! refused with a typed error.

use rowshard_kernels::{Backend, DType, KernelError, KernelSet, Optimizer, TableConfig};

rowshard_tests::kernel_suite!(Backend::Wgpu, states: &[], f32 => F32, f16 => F16);

#[test]
fn bf16_is_refused_with_a_typed_error() {
    let client = Backend::Wgpu.client().unwrap();
    let err =
        KernelSet::new(&client, TableConfig::new(Optimizer::Adam, DType::BF16, 8)).unwrap_err();
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
