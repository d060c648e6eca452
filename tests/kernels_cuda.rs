//! The kernel suite on the `cuda` runtime where a GPU is present; elsewhere, opening the device
//! must be a clean error, not a panic.

use rowshard_kernels::{Backend, DType, KernelError};
use rowshard_tests::suite;

#[test]
fn cuda_runs_the_kernel_suite_or_refuses_cleanly() {
    match Backend::Cuda.client() {
        Err(KernelError::DeviceUnavailable(reason)) => eprintln!("no CUDA device here: {reason}"),
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => {
            for dtype in DType::ALL {
                suite::every_optimizer(Backend::Cuda, dtype);
                suite::every_option(Backend::Cuda, dtype, &[DType::BF16]);
                suite::deterministic_and_gather(Backend::Cuda, dtype);
                suite::stochastic_rounding(Backend::Cuda, dtype);
            }
        }
    }
}
