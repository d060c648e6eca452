//! The routing plan of one call: the caller's ids deduplicated, and the unique ids bucketed by
//! owner rank.

use rowshard_kernels::Segments;

use crate::partition::Partition;

/// Unique ids of a batch and where each goes.
pub(crate) struct Route {
    /// The batch grouped by id (unique ids ascending; inputs of each in batch order).
    pub segments: Segments,
    /// For each owner rank, indices into `segments.rows` of the ids it owns, ascending.
    pub by_owner: Vec<Vec<u32>>,
    /// For each owner rank, the local rows of those ids.
    pub local_rows: Vec<Vec<u32>>,
}

impl Route {
    /// Plans `ids` (already checked to be in range) over `partition`.
    pub fn plan(ids: &[u32], partition: &Partition) -> Self {
        let segments = Segments::group(ids);
        let world = partition.world();
        let mut by_owner = vec![Vec::new(); world];
        let mut local_rows = vec![Vec::new(); world];
        for (u, &id) in segments.rows.iter().enumerate() {
            let (owner, local) = partition.locate(id);
            by_owner[owner].push(u as u32);
            local_rows[owner].push(local);
        }
        Self {
            segments,
            by_owner,
            local_rows,
        }
    }

    /// Unique ids.
    pub fn unique(&self) -> usize {
        self.segments.len()
    }

    /// For each input position, the index of its id among the unique ids.
    pub fn inverse(&self) -> Vec<u32> {
        let mut inverse = vec![0u32; self.segments.order.len()];
        for u in 0..self.segments.len() {
            let (a, b) = (
                self.segments.offsets[u] as usize,
                self.segments.offsets[u + 1] as usize,
            );
            for &position in &self.segments.order[a..b] {
                inverse[position as usize] = u as u32;
            }
        }
        inverse
    }

    /// One message per owner rank: the local rows it owns, then each one's gradient (its inputs'
    /// rows summed in batch order), as bytes.
    pub fn messages(&self, grads: &[f32], dim: usize) -> Vec<Vec<u8>> {
        let mut sum = vec![0.0f32; dim];
        self.by_owner
            .iter()
            .zip(&self.local_rows)
            .map(|(indices, locals)| {
                let mut message = Vec::with_capacity(locals.len() * (4 + 4 * dim));
                message.extend_from_slice(bytemuck::cast_slice(locals));
                for &u in indices {
                    let u = u as usize;
                    let inputs = &self.segments.order
                        [self.segments.offsets[u] as usize..self.segments.offsets[u + 1] as usize];
                    if let [only] = inputs {
                        message.extend_from_slice(bytemuck::cast_slice(
                            &grads[*only as usize * dim..][..dim],
                        ));
                        continue;
                    }
                    sum.fill(0.0);
                    for &position in inputs {
                        for (s, g) in sum.iter_mut().zip(&grads[position as usize * dim..][..dim]) {
                            *s += g;
                        }
                    }
                    message.extend_from_slice(bytemuck::cast_slice(&sum));
                }
                message
            })
            .collect()
    }
}
