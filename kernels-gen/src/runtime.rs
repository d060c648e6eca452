//! The CubeCL runtimes rowshard runs on, behind cargo features; a runtime that is not compiled in
//! returns an error instead of failing to build.

use cubecl::prelude::Client;

use crate::{KernelError, RUNTIMES, RuntimeSpec};

/// A CubeCL runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The `cpu` runtime (LLVM JIT): the default.
    Cpu,
    /// The `wgpu` runtime on Vulkan (lavapipe on machines without a GPU).
    Wgpu,
    /// The `cuda` runtime, device 0.
    Cuda,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 3] = [Backend::Cpu, Backend::Wgpu, Backend::Cuda];

    /// This runtime's row of the runtime table (name, the dtypes it can store).
    pub fn spec(self) -> &'static RuntimeSpec {
        &RUNTIMES[self as usize]
    }

    /// Lower-case name for the CLI.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses [`Backend::name`].
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Opens the backend's first device.
    pub fn client(self) -> Result<Client, KernelError> {
        let unavailable = |e: &dyn std::fmt::Debug| {
            KernelError::DeviceUnavailable(format!("{}: {e:?}", self.name()))
        };
        let not_compiled = || {
            KernelError::DeviceUnavailable(format!(
                "rowshard was built without the `{0}` feature; rebuild with `--features {0}`",
                self.name()
            ))
        };
        match self {
            #[cfg(feature = "cpu")]
            Backend::Cpu => cubecl::Device::cpu()
                .map(|d| d.client())
                .map_err(|e| unavailable(&e)),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => cubecl::Device::vulkan(cubecl::wgpu::WgpuDeviceKind::Cpu)
                .or_else(|_| cubecl::Device::vulkan(Default::default()))
                .map(|d| d.client())
                .map_err(|e| unavailable(&e)),
            #[cfg(feature = "cuda")]
            Backend::Cuda => cubecl::Device::cuda(0)
                .map(|d| d.client())
                .map_err(|e| unavailable(&e)),
            #[allow(unreachable_patterns)]
            _ => {
                let _ = unavailable;
                Err(not_compiled())
            }
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_has_its_row_of_the_runtime_table() {
        assert_eq!(Backend::ALL.len(), RUNTIMES.len());
        for (i, backend) in Backend::ALL.into_iter().enumerate() {
            assert_eq!(backend as usize, i);
            assert_eq!(Backend::from_name(backend.name()), Some(backend));
        }
    }
}
