//! The kernel suite on the CubeCL `cpu` runtime: f32, f16 and bf16.

rowshard_tests::kernel_suite!(Backend::Cpu, states: &[rowshard_kernels::DType::BF16], f32 => F32, f16 => F16, bf16 => BF16);
