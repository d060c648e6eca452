//! This rank's own rows, gathered and updated: straight on the device shard, or through the
//! read-write cache, which makes them resident in lines first (in rounds when they do not all fit
//! at once).

use std::cell::RefCell;

use rowshard_kernels::{LocalTable, Segments};

use super::ShardedTable;
use crate::cache::WriteBackCache;
use crate::error::ShardError;

/// Gradient rows for the owner's update: `buffer[start..]`, `f32` little-endian (a received
/// message past its local rows, or this rank's own sums).
pub(super) struct GradientPart {
    pub buffer: Vec<u8>,
    pub start: usize,
}

impl ShardedTable<'_> {
    /// Gathers the local rows `rows` (repeats allowed) and hands their storage-dtype bytes, in
    /// that order, to `f`.
    pub(super) fn gather_local<R>(
        &self,
        rows: &[u32],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, ShardError> {
        let Some(host) = &self.host else {
            return Ok(self.shard.gather_with(rows, f)?);
        };
        let mut host = host.borrow_mut();
        let row_bytes = self.config().dim * self.config().weight_dtype.size();
        let groups = Segments::group(rows);
        let mut out = std::mem::take(&mut host.gathered);
        out.resize(rows.len() * row_bytes, 0);
        let mut pending: Vec<usize> = (0..groups.len()).collect();
        while let Some(round) = host.next_round(&self.shard, &groups.rows, &mut pending)? {
            self.shard.gather_with(&round.lines, |bytes| {
                for (k, &u) in round.positions.iter().enumerate() {
                    let row = &bytes[k * row_bytes..][..row_bytes];
                    for &p in groups.inputs(u) {
                        out[p as usize * row_bytes..][..row_bytes].copy_from_slice(row);
                    }
                }
            })?;
        }
        let result = f(&out);
        host.gathered = out;
        Ok(result)
    }

    /// Runs the fused update of the grouped local rows (see
    /// [`rowshard_kernels::LocalTable::apply_grouped_parts`]): one step, whatever the rounds.
    /// `parts` hold the gradient rows in the order of `grouped`'s inputs.
    pub(super) fn apply_local(
        shard: &mut LocalTable,
        host: Option<&RefCell<WriteBackCache>>,
        grouped: &Segments,
        parts: Vec<GradientPart>,
        params: &[f32],
    ) -> Result<(), ShardError> {
        let Some(host) = host else {
            let uploads = shard.uploads().clone();
            let parts = parts
                .into_iter()
                .map(|p| uploads.bytes_from(p.buffer, p.start))
                .collect();
            return Ok(shard.apply_grouped_parts(grouped, parts, params)?);
        };
        // The write-back cache uploads the gradients once per round: in one buffer.
        let total = parts.iter().map(|p| p.buffer.len() - p.start).sum();
        let mut grads = shard.uploads().take(total);
        for p in parts {
            grads.extend_from_slice(&p.buffer[p.start..]);
            shard.uploads().give(p.buffer);
        }
        let mut host = host.borrow_mut();
        let step = shard.step();
        let mut pending: Vec<usize> = (0..grouped.len()).collect();
        let mut part = Segments::default();
        let mut grads = Some(grads);
        while let Some(round) = host.next_round(shard, &grouped.rows, &mut pending)? {
            // The round's rows, at their lines, with their inputs in the same order.
            part.rows.clone_from(&round.lines);
            part.offsets.clear();
            part.order.clear();
            part.offsets.push(0);
            for &u in &round.positions {
                part.order.extend_from_slice(grouped.inputs(u));
                part.offsets.push(part.order.len() as u32);
            }
            // The last round uploads the gradients themselves; earlier ones a copy.
            let all = grads.as_ref().expect("kept until the last round");
            let staged = if pending.is_empty() {
                grads.take().expect("kept until the last round")
            } else {
                let mut copy = shard.uploads().take(all.len());
                copy.extend_from_slice(all);
                copy
            };
            // Every round is the same optimizer step.
            shard.set_step(step);
            shard.apply_grouped(&part, staged, params)?;
            host.mark_modified(&round.lines);
        }
        shard.set_step(step + 1);
        if let Some(unused) = grads {
            shard.uploads().give(unused);
        }
        Ok(())
    }
}
