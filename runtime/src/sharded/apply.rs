//! `apply_gradients`: one optimizer step from a batch's gradients, routed to the rows' owners.

use rowshard_kernels::{NonFinitePolicy, reserve_for};

use super::ShardedTable;
use super::element::RowElement;
use super::local::GradientPart;
use super::lookup::as_u32;
use super::timings::{Clock, Phase};
use crate::error::{InputError, ShardError};

impl ShardedTable<'_> {
    /// Applies one optimizer step (WholeMemory's `gather_gradient_apply`): `grads` holds one
    /// `dim`-row per id; duplicates are summed here, one row per unique id goes to its owner, and
    /// each owner sums what it received (in rank order) and runs the fused update. Only touched
    /// rows and their states change. A collective: every rank calls it, with its own batch.
    pub fn apply_gradients(
        &mut self,
        ids: &[u32],
        grads: &[f32],
        lr: f32,
    ) -> Result<(), ShardError> {
        self.apply_gradients_as(ids, grads, lr)
    }

    /// [`ShardedTable::apply_gradients`] with gradients in `f32` or the table's storage dtype
    /// (widened to `f32` before they are summed; the math is `f32`). Reuses the routing plan of
    /// a [`lookup`](ShardedTable::lookup) of the same ids, and allocates nothing of batch size in
    /// a steady state of calls.
    pub fn apply_gradients_as<T: RowElement>(
        &mut self,
        ids: &[u32],
        grads: &[T],
        lr: f32,
    ) -> Result<(), ShardError> {
        self.apply_with(ids, grads, lr, None)
    }

    /// [`ShardedTable::apply_gradients`] for a step that also has a gradient of *every* row of
    /// this rank's shard on the device — a dense product's, as in KvsAll and 1vsAll training —
    /// summed on the device with the rows `(ids, grads)` routed here, in one fused update. The
    /// device gradient is read where it lies (no copy to the host and back); unlike the routed
    /// rows it is not checked for finiteness. Needs a table without a read-write cache.
    pub fn apply_gradients_with_device(
        &mut self,
        ids: &[u32],
        grads: &[f32],
        device: DeviceGradient,
        lr: f32,
    ) -> Result<(), ShardError> {
        self.apply_with(ids, grads, lr, Some(device))
    }

    fn apply_with<T: RowElement>(
        &mut self,
        ids: &[u32],
        grads: &[T],
        lr: f32,
        device: Option<DeviceGradient>,
    ) -> Result<(), ShardError> {
        if device.is_some() && self.host.is_some() {
            return Err(ShardError::Unsupported(
                "a device gradient of the whole shard with a read-write cache (the shard lives \
                 in host memory)"
                    .into(),
            ));
        }
        let dtype = self.config().weight_dtype;
        if T::DTYPE != rowshard_kernels::DType::F32 && T::DTYPE != dtype {
            return Err(ShardError::Unsupported(format!(
                "gradients as {} for a table stored as {dtype}; pass f32 or {dtype}",
                T::DTYPE
            )));
        }
        let mut clock = Clock::start();
        let dim = self.config().dim;
        let local = self.partition.local_rows(self.comm.rank());
        let mut verdict = self
            .check_ids(ids)
            .or_else(|| {
                (grads.len() != ids.len() * dim).then_some(InputError::GradientShape {
                    expected: (ids.len() * dim) as u64,
                    got: grads.len() as u64,
                })
            })
            .or_else(|| {
                device.as_ref().and_then(|d| {
                    (d.rows != local).then_some(InputError::GradientShape {
                        expected: (local * dim) as u64,
                        got: (d.rows * dim) as u64,
                    })
                })
            });
        let params = self.shard.next_params(lr);
        if params.is_err() {
            verdict = verdict.or(Some(InputError::LearningRate {
                value: lr.to_bits() as u64,
            }));
        }
        if verdict.is_some() {
            self.agree(verdict)?;
            unreachable!("agree returns this rank's error");
        }
        let params = params?;
        clock.lap(&self.timings, Phase::Check);
        // The messages are built (checking every gradient on the way) before the ranks agree
        // the batch is good: nothing is sent or written before that.
        let messages = self.route_and_pack(ids, grads, &mut clock);
        let bad = match messages {
            Ok(messages) => {
                let agreed = self.agree(None);
                if let Err(e) = agreed {
                    self.step.borrow_mut().pool.give_all(messages);
                    return Err(e);
                }
                return self.send_and_apply(messages, grads, &params, clock, device);
            }
            Err(bad) => bad,
        };
        if self.shard.non_finite_policy() == NonFinitePolicy::Reject {
            self.agree(Some(InputError::NonFiniteGradient {
                id: ids[bad[0]] as u64,
                position: bad[0] as u64,
            }))?;
            unreachable!("agree returns this rank's error");
        }
        self.agree(None)?;
        // Rare: drop the inputs with non-finite gradients, count them, and pack again.
        self.shard.count_skipped(bad.len() as u64);
        let keep: Vec<usize> = (0..ids.len())
            .filter(|p| bad.binary_search(p).is_err())
            .collect();
        let ids: Vec<u32> = keep.iter().map(|&p| ids[p]).collect();
        let grads: Vec<T> = keep
            .iter()
            .flat_map(|&p| grads[p * dim..(p + 1) * dim].iter().copied())
            .collect();
        let messages = self
            .route_and_pack(&ids, &grads, &mut clock)
            .unwrap_or_else(|_| unreachable!("every gradient left is finite"));
        self.send_and_apply(messages, &grads, &params, clock, device)
    }

    /// Plans `ids` and packs one message per owner: its local rows, then each one's gradient —
    /// its inputs' rows summed in batch order. `Err` holds the positions of non-finite gradient
    /// rows (then nothing is packed).
    fn route_and_pack<T: RowElement>(
        &self,
        ids: &[u32],
        grads: &[T],
        clock: &mut Clock,
    ) -> Result<Vec<Vec<u8>>, Vec<usize>> {
        let dim = self.config().dim;
        let bad: Vec<usize> = grads
            .chunks_exact(dim.max(1))
            .enumerate()
            .filter(|(_, row)| !all_finite(row))
            .map(|(p, _)| p)
            .collect();
        clock.lap(&self.timings, Phase::Check);
        if !bad.is_empty() {
            return Err(bad);
        }
        let step = &mut *self.step.borrow_mut();
        step.route.plan(ids, &self.partition);
        clock.lap(&self.timings, Phase::Dedup);
        let route = &step.route;
        let (me, world) = (self.comm.rank(), self.comm.world());
        step.sum.resize(dim, 0.0);
        let mut messages = Vec::with_capacity(world);
        for o in 0..world {
            // Gradients of rows this rank owns never travel (see `send_and_apply`).
            let range = if o == me { 0..0 } else { route.of_owner(o) };
            let mut message = step.pool.take(range.len() * (4 + 4 * dim));
            message.extend_from_slice(bytemuck::cast_slice(&route.locals[range.clone()]));
            for &u in &route.grouped[range] {
                pack_sum(
                    &mut message,
                    route.segments.inputs(u as usize),
                    grads,
                    dim,
                    &mut step.sum,
                );
            }
            messages.push(message);
        }
        clock.lap(&self.timings, Phase::Bucket);
        Ok(messages)
    }

    /// Sends the packed messages to the owners, and runs the fused update on what arrives;
    /// this rank's own rows go from `grads` straight into the upload, at its place in rank
    /// order (the order every owner sums in). A device gradient of every local row comes first.
    fn send_and_apply<T: RowElement>(
        &mut self,
        messages: Vec<Vec<u8>>,
        grads: &[T],
        params: &[f32],
        mut clock: Clock,
        device: Option<DeviceGradient>,
    ) -> Result<(), ShardError> {
        let dim = self.config().dim;
        let received = self.comm.all_to_all_v(messages)?;
        clock.lap(&self.timings, Phase::Exchange);
        let step = &mut *self.step.borrow_mut();
        let me = self.comm.rank();
        let route = &step.route;
        let own = route.of_owner(me);

        // Everything received, in rank order: each sender's gradients are uploaded from its
        // message as they lie (after the message's local rows); this rank's own are summed into
        // a buffer of their own.
        let row_bytes = 4 + 4 * dim;
        step.rows.clear();
        let dense_rows = device.as_ref().map_or(0, |d| d.rows);
        let total = received.iter().map(|m| m.len() / row_bytes).sum::<usize>() + own.len();
        reserve_for(&mut step.rows, dense_rows + total);
        step.rows.extend(0..dense_rows as u32);
        let mut scratch = Vec::new();
        let mut parts = Vec::with_capacity(received.len());
        for (r, message) in received.into_iter().enumerate() {
            if r == me {
                step.pool.give(message);
                step.rows.extend_from_slice(&route.locals[own.clone()]);
                let mut staged = step.pool.take(own.len() * dim * 4);
                for &u in &route.grouped[own.clone()] {
                    let inputs = route.segments.inputs(u as usize);
                    pack_sum(&mut staged, inputs, grads, dim, &mut step.sum);
                }
                parts.push(GradientPart {
                    buffer: staged,
                    start: 0,
                });
                continue;
            }
            let n = message.len() / row_bytes;
            step.rows
                .extend_from_slice(as_u32(&message[..4 * n], &mut scratch));
            parts.push(GradientPart {
                buffer: message,
                start: 4 * n,
            });
        }
        clock.lap(&self.timings, Phase::Decode);
        step.grouped.regroup(&step.rows, &mut step.scratch);
        self.rows_applied += step.grouped.len() as u64;
        match device {
            Some(d) => {
                let uploads = self.shard.uploads().clone();
                let parts = parts
                    .into_iter()
                    .map(|p| uploads.bytes_from(p.buffer, p.start))
                    .collect();
                self.shard.apply_grouped_after_device(
                    &step.grouped,
                    d.handle,
                    d.rows,
                    parts,
                    params,
                )?;
            }
            None => Self::apply_local(
                &mut self.shard,
                self.host.as_ref(),
                &step.grouped,
                parts,
                params,
            )?,
        }
        clock.lap(&self.timings, Phase::Apply);
        // Every rank drops its cached copies of the rows any rank just updated.
        if self.cache.borrow().is_some() {
            step.updated.clear();
            step.updated.extend(
                step.grouped
                    .rows
                    .iter()
                    .map(|&l| self.partition.global(me, l as usize) as u32),
            );
            let updated = self.comm.all_gather(bytemuck::cast_slice(&step.updated))?;
            let mut scratch = Vec::new();
            if let Some(cache) = self.cache.borrow_mut().as_mut() {
                for part in &updated {
                    cache.invalidate(as_u32(part, &mut scratch).iter().copied());
                }
            }
            clock.lap(&self.timings, Phase::Exchange);
        }
        Ok(())
    }
}

/// A gradient of every row of a rank's shard on the device (see
/// [`ShardedTable::apply_gradients_with_device`]): `handle` holds `rows` `f32` rows in local row
/// order, then room for the rows routed to this rank (one per id of the global batch at most;
/// with less, the rows are copied into a larger buffer — slower, not wrong).
#[derive(Clone, Copy, Debug)]
pub struct DeviceGradient<'a> {
    /// The device buffer.
    pub handle: &'a cubecl::server::Handle,
    /// The shard's rows (this rank's local rows).
    pub rows: usize,
}

/// Whether every value of `row` is finite: a scan without an early exit, which the compiler
/// vectorises (`all` stops at the first bad value and runs one value at a time).
fn all_finite<T: RowElement>(row: &[T]) -> bool {
    row.iter().fold(true, |ok, g| ok & g.to_f32().is_finite())
}

/// Appends the gradient of one unique row: its inputs' rows summed in batch order (`sum` is
/// scratch), as `f32` little-endian bytes.
fn pack_sum<T: RowElement>(
    out: &mut Vec<u8>,
    inputs: &[u32],
    grads: &[T],
    dim: usize,
    sum: &mut [f32],
) {
    if let [only] = inputs {
        push_row(out, &grads[*only as usize * dim..][..dim]);
        return;
    }
    sum.fill(0.0);
    for &position in inputs {
        let row = &grads[position as usize * dim..][..dim];
        for (s, g) in sum.iter_mut().zip(row) {
            *s += g.to_f32();
        }
    }
    out.extend_from_slice(bytemuck::cast_slice(sum));
}

/// Appends a gradient row as `f32` little-endian bytes.
fn push_row<T: RowElement>(message: &mut Vec<u8>, row: &[T]) {
    if T::DTYPE == rowshard_kernels::DType::F32 {
        message.extend_from_slice(bytemuck::cast_slice(row));
        return;
    }
    let start = message.len();
    message.resize(start + 4 * row.len(), 0);
    for (d, g) in message[start..].chunks_exact_mut(4).zip(row) {
        d.copy_from_slice(&g.to_f32().to_le_bytes());
    }
}
