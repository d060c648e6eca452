//! How the dense kernels' launches split their work: the register tiles per runtime, and the
//! units' shares of rows and query panels.

use cubecl::prelude::*;

use crate::kernels::dense::Tile;
use crate::shape::{CPU_UNITS, GPU_UNITS, is_cpu_runtime};

/// The tiles and chunking of the dense kernels on one runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseTiles {
    /// Scores: table rows × query vectors.
    pub scores: Tile,
    /// Table gradient: table rows × row vectors.
    pub table_grad: Tile,
    /// Query gradient: coordinates × query vectors (a score panel's: the same as `scores`).
    pub query_grad: Tile,
    /// Table rows per pass of the query gradient (`0`: all of them).
    pub chunk: usize,
    /// Exponentials of the losses by [`exp_lanes()`](crate::kernels::dense::tile::exp_lanes())
    /// (a polynomial, on the `cpu` runtime) instead of the runtime's own.
    pub polynomial_exp: bool,
}

impl DenseTiles {
    /// What was measured fastest on the `cpu` runtime (AVX-512, 32 vector registers; see
    /// docs/kernels.md), with `row_vectors` vectors per table row.
    pub fn cpu(row_vectors: usize) -> Self {
        let v = row_vectors.min(4);
        Self {
            scores: Tile {
                rows: 6,
                vectors: 4,
            },
            table_grad: Tile {
                rows: 6,
                vectors: v,
            },
            query_grad: Tile {
                rows: 6,
                vectors: 4,
            },
            chunk: 64,
            polynomial_exp: true,
        }
    }

    /// Small register tiles, one per unit, for GPU runtimes.
    pub fn gpu(row_vectors: usize) -> Self {
        let v = row_vectors.min(2);
        Self {
            scores: Tile {
                rows: 4,
                vectors: 2,
            },
            table_grad: Tile {
                rows: 4,
                vectors: v,
            },
            query_grad: Tile {
                rows: 4,
                vectors: 2,
            },
            chunk: 0,
            polynomial_exp: false,
        }
    }
}
/// How a launch splits its work: items (rows or queries) in `groups` of `per_unit` — the unit's
/// `x` position —, and `panels` in `panel_groups` ranges of `panels_per_unit` — its `y`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Items each group owns.
    pub per_unit: u32,
    /// Panels each unit owns within its group.
    pub panels_per_unit: u32,
    /// Ranges of panels (units along `y`).
    pub panel_groups: u32,
    /// Groups that own items (units along `x`).
    pub groups: usize,
    /// Cubes along `x`.
    pub cubes: u32,
    /// Units per cube along `x`.
    pub cube_dim: u32,
    /// Whether the units along `y` are a cube's (cpu) or cubes (GPUs).
    cpu: bool,
}

impl Split {
    /// The split of `items` in tiles of `tile_rows` and `panels` panels: on the `cpu` runtime one
    /// cube of [`CPU_UNITS`] units, each a contiguous range of whole tiles or nothing (panels
    /// are split only when there are too few items to keep the units busy); on GPUs a unit per
    /// tile and panel.
    pub fn new(client: &Client, items: usize, tile_rows: usize, panels: usize) -> Self {
        Self::with_min_tiles(client, items, tile_rows, panels, 1)
    }

    /// [`Split::new`], where on the `cpu` runtime a group owns at least `min_tiles` tiles as
    /// long as the panels keep [`CPU_UNITS`] units busy: a block of few rows against many
    /// panels (shared negatives: 256 rows × 32 panels) is then cut into squarer rectangles, and
    /// each unit streams a few panels instead of all of them (and a score block leaves fewer
    /// groups' statistics to combine).
    pub fn with_min_tiles(
        client: &Client,
        items: usize,
        tile_rows: usize,
        panels: usize,
        min_tiles: usize,
    ) -> Self {
        let items = items.max(1);
        let panels = panels.max(1);
        let tiles = items.div_ceil(tile_rows);
        let cpu = is_cpu_runtime(client);
        let (per_unit, panels_per_unit) = if cpu {
            let cap = CPU_UNITS as usize;
            let units = tiles
                .div_ceil(min_tiles.max(1))
                .max(cap / panels)
                .clamp(1, tiles.min(cap));
            let per_unit = tiles.div_ceil(units) * tile_rows;
            let groups = items.div_ceil(per_unit);
            let panel_groups = (cap / groups).clamp(1, panels);
            (per_unit, panels.div_ceil(panel_groups))
        } else {
            let max_cubes = client.properties().hardware.max_cube_count.0.max(1) as usize;
            let widen = tiles.div_ceil(GPU_UNITS as usize).div_ceil(max_cubes);
            (tile_rows * widen, 1)
        };
        let groups = items.div_ceil(per_unit);
        let panel_groups = panels.div_ceil(panels_per_unit) as u32;
        let (cubes, cube_dim) = if cpu {
            // As many units along `x` as fit beside the panel groups, whether or not each owns
            // items: a launch's shape then depends on `panel_groups` alone, and the `cpu`
            // runtime compiles a kernel once per shape (hundreds of milliseconds) — a block
            // whose row count changes from step to step (shared negatives) would otherwise
            // compile anew at every step.
            let fit = CPU_UNITS as usize / panel_groups as usize;
            (1, fit.max(groups) as u32)
        } else {
            (groups.div_ceil(GPU_UNITS as usize) as u32, GPU_UNITS)
        };
        Self {
            per_unit: per_unit as u32,
            panels_per_unit: panels_per_unit as u32,
            panel_groups,
            groups,
            cubes,
            cube_dim,
            cpu,
        }
    }

    /// Units launched (some past the last group may have nothing to do); a unit's
    /// `ABSOLUTE_POS` is below this.
    pub fn units(&self) -> usize {
        self.cubes as usize * self.cube_dim as usize * self.panel_groups as usize
    }

    pub(super) fn count(&self) -> CubeCount {
        if self.cpu {
            CubeCount::Static(1, 1, 1)
        } else {
            CubeCount::Static(self.cubes, self.panel_groups, 1)
        }
    }

    pub(super) fn dim(&self) -> CubeDim {
        if self.cpu {
            CubeDim::new_2d(self.cube_dim, self.panel_groups)
        } else {
            CubeDim::new_1d(self.cube_dim)
        }
    }
}
