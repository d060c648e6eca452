//! How a row kernel is launched on a given runtime.
//!
//! On the `cpu` runtime every unit of a cube is a task and every task walks every cube, so the
//! parallelism is the cube's units: one cube whose units each own a contiguous block of rows,
//! with wide vector loads, was measured 15–25× faster than a unit per element there. GPUs want
//! many cubes; there each unit owns one row (a unit per row, not coalesced across a warp: a
//! warp-per-row shape is the next step for GPUs).

use cubecl::prelude::*;

/// Units per cube on the `cpu` runtime (16–64 measured alike; enough blocks to balance 2 cores).
pub const CPU_UNITS: u32 = 32;
/// Units per cube on GPU runtimes.
pub const GPU_UNITS: u32 = 256;

/// Whether a client is the CubeCL `cpu` runtime (it reports CPU cores).
pub fn is_cpu_runtime(client: &Client) -> bool {
    cpu_cores(client).is_some()
}

/// The CPU cores of the CubeCL `cpu` runtime; `None` on other runtimes.
pub fn cpu_cores(client: &Client) -> Option<usize> {
    client
        .properties()
        .hardware
        .num_cpu_cores
        .map(|c| (c as usize).max(1))
}

/// A launch over `rows` rows: `cube_count × cube_dim` units, each owning `rows_per_unit` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Cubes along x.
    pub cube_count: u32,
    /// Units per cube along x.
    pub cube_dim: u32,
    /// Contiguous rows each unit owns.
    pub rows_per_unit: u32,
}

impl LaunchShape {
    /// The shape for `rows` rows on `client`'s runtime.
    pub fn for_rows(client: &Client, rows: usize) -> Self {
        let rows = rows.max(1) as u64;
        if is_cpu_runtime(client) {
            // A power of two: the runtime compiles a kernel anew for each cube shape, so at most
            // six shapes a kernel (the warm-ups make the smallest and the largest), where a
            // shape per row count compiled again at the first steps of training.
            let units = (CPU_UNITS as u64).min(rows).next_power_of_two();
            return Self {
                cube_count: 1,
                cube_dim: units as u32,
                rows_per_unit: rows.div_ceil(units) as u32,
            };
        }
        let max_cubes = client.properties().hardware.max_cube_count.0.max(1) as u64;
        let cubes = rows.div_ceil(GPU_UNITS as u64).min(max_cubes);
        let rows_per_unit = rows.div_ceil(cubes * GPU_UNITS as u64);
        Self {
            cube_count: cubes as u32,
            cube_dim: GPU_UNITS,
            rows_per_unit: rows_per_unit as u32,
        }
    }

    /// The CubeCL cube count.
    pub fn count(&self) -> CubeCount {
        CubeCount::Static(self.cube_count, 1, 1)
    }

    /// The CubeCL cube dim.
    pub fn dim(&self) -> CubeDim {
        CubeDim::new_1d(self.cube_dim)
    }
}

/// The widest vector size the runtime prefers for `f32` IO that divides `dim`.
pub fn vector_size(client: &Client, dim: usize) -> usize {
    client
        .io_optimized_vector_sizes(4)
        .find(|&n| dim.is_multiple_of(n))
        .unwrap_or(1)
}
