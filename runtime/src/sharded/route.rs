//! The routing plan of a batch: its ids deduplicated (a radix grouping), each unique id's owner
//! rank and local row, and the unique ids grouped by owner. Kept between calls: an
//! `apply_gradients` of the ids a `lookup` just routed reuses the plan.

use rowshard_kernels::{Segments, reserve_for};

use crate::partition::Partition;

/// Unique ids of a batch and where each goes.
#[derive(Default)]
pub(crate) struct Route {
    /// The batch grouped by id (unique ids ascending; inputs of each in batch order).
    pub segments: Segments,
    /// For each input position, the index of its id among the unique ids.
    pub inverse: Vec<u32>,
    /// For each unique id, its owner rank.
    pub owner: Vec<u32>,
    /// For each unique id, its place among the ids sent to its owner.
    pub slot: Vec<u32>,
    /// Per owner rank: where its ids start in `grouped` (`world + 1` entries).
    pub starts: Vec<usize>,
    /// Unique-id indices grouped by owner, ascending within each owner.
    pub grouped: Vec<u32>,
    /// The local row (on its owner) of each entry of `grouped`.
    pub locals: Vec<u32>,
    scratch: Vec<u64>,
    local_of_unique: Vec<u32>,
    next: Vec<usize>,
    /// The ids this plan is for.
    planned: Vec<u32>,
    valid: bool,
}

impl Route {
    /// Plans `ids` (already checked to be in range) over `partition`; returns `true` when the
    /// plan of the previous call was for the same ids and is reused as it is.
    pub fn plan(&mut self, ids: &[u32], partition: &Partition) -> bool {
        if self.valid && self.planned == ids {
            return true;
        }
        self.segments.regroup(ids, &mut self.scratch);
        let unique = self.segments.len();
        reserve_for(&mut self.inverse, ids.len());
        self.inverse.resize(ids.len(), 0);
        for u in 0..unique {
            for &position in self.segments.inputs(u) {
                self.inverse[position as usize] = u as u32;
            }
        }
        let world = partition.world();
        self.owner.clear();
        self.local_of_unique.clear();
        self.starts.clear();
        self.starts.resize(world + 1, 0);
        reserve_for(&mut self.owner, unique);
        reserve_for(&mut self.local_of_unique, unique);
        for &id in &self.segments.rows {
            let (owner, local) = partition.locate(id);
            self.owner.push(owner as u32);
            self.local_of_unique.push(local);
            self.starts[owner + 1] += 1;
        }
        for o in 0..world {
            self.starts[o + 1] += self.starts[o];
        }
        // Counting placement by owner: stable, so ids stay ascending within each owner.
        for v in [&mut self.grouped, &mut self.locals, &mut self.slot] {
            reserve_for(v, unique);
            v.resize(unique, 0);
        }
        self.next.clear();
        self.next.extend_from_slice(&self.starts[..world]);
        for u in 0..unique {
            let o = self.owner[u] as usize;
            let at = self.next[o];
            self.next[o] += 1;
            self.grouped[at] = u as u32;
            self.locals[at] = self.local_of_unique[u];
            self.slot[u] = (at - self.starts[o]) as u32;
        }
        self.planned.clear();
        reserve_for(&mut self.planned, ids.len());
        self.planned.extend_from_slice(ids);
        self.valid = true;
        false
    }

    /// The range of `grouped` (and `locals`) owner `o` gets.
    pub fn of_owner(&self, o: usize) -> std::ops::Range<usize> {
        self.starts[o]..self.starts[o + 1]
    }
}
