//! What each CubeCL runtime can store, for checks made before any device is opened (the macro's
//! compile-time check of `dtype` against `runtime`). `KernelSet::new` still asks the device itself.

use crate::DType;

/// One runtime rowshard can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeSpec {
    /// Lower-case name used by the CLI and the macro.
    pub name: &'static str,
    /// Weight dtypes its kernels can store and convert.
    pub weight_dtypes: &'static [DType],
    /// One line for the docs.
    pub doc: &'static str,
}

/// Every runtime, in the order of `Backend::ALL`.
pub static RUNTIMES: &[RuntimeSpec] = &[
    RuntimeSpec {
        name: "cpu",
        weight_dtypes: &DType::ALL,
        doc: "CubeCL's LLVM JIT on the host; the default",
    },
    RuntimeSpec {
        name: "wgpu",
        weight_dtypes: &[DType::F32, DType::F16],
        doc: "Vulkan through wgpu, Mesa lavapipe without a GPU; WGSL has no bf16",
    },
    RuntimeSpec {
        name: "cuda",
        weight_dtypes: &DType::ALL,
        doc: "NVIDIA GPUs",
    },
];

/// The runtime called `name`.
pub fn runtime(name: &str) -> Option<&'static RuntimeSpec> {
    RUNTIMES.iter().find(|r| r.name == name)
}

/// The runtimes' names, for "expected one of" messages.
pub fn runtime_names() -> Vec<&'static str> {
    RUNTIMES.iter().map(|r| r.name).collect()
}
