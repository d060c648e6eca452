//! `Qᵀ` panel by panel from `Q` on the device: the score kernel's layout of queries that a
//! kernel wrote (the query kernel's output), without a round trip through the host.

use cubecl::prelude::*;

/// `out[((b / panel) · dim + k) · panel + b % panel] = rows[b · dim + k]` for every query `b <
/// count` and coordinate `k`, and `0` for the padding queries `count ≤ b < padded`.
///
/// `rows` is `Q` row-major (`count × dim`); `out` holds `padded / panel` panels of `dim × panel`
/// values. The unit at `ABSOLUTE_POS` owns the `per_unit` queries from `ABSOLUTE_POS · per_unit`:
/// it reads each of its rows in order and writes them a panel's width apart.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn query_panels(
    rows: &[f32],
    out: &mut [f32],
    count: u32,
    padded: u32,
    dim: u32,
    panel: u32,
    per_unit: u32,
) {
    let dim = dim as usize;
    let panel = panel as usize;
    let begin = ABSOLUTE_POS * per_unit as usize;
    let end = min(begin + per_unit as usize, padded as usize);
    for b in begin..end {
        let at = (b / panel) * dim * panel + b % panel;
        if b < count as usize {
            for k in 0..dim {
                out[at + k * panel] = rows[b * dim + k];
            }
        } else {
            for k in 0..dim {
                out[at + k * panel] = 0.0f32;
            }
        }
    }
}
