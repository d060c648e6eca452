//! `lookup`: rows of a batch of global ids, in the caller's order.

use std::time::{Duration, Instant};

use rowshard_kernels::{DType, reserve_for};

use super::ShardedTable;
use super::buffers::NOT_CACHED;
use super::element::{RowElement, write_row};
use super::timings::{Clock, Phase};
use crate::error::{InputError, ShardError};

/// `bytes` as `u32`s: borrowed when aligned, else copied into `scratch`.
pub(crate) fn as_u32<'a>(bytes: &'a [u8], scratch: &'a mut Vec<u32>) -> &'a [u32] {
    match bytemuck::try_cast_slice(bytes) {
        Ok(words) => words,
        Err(_) => {
            scratch.clear();
            scratch.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            scratch
        }
    }
}

impl ShardedTable<'_> {
    /// The rows of `ids`, in the caller's order (duplicates included), `ids.len() × dim` values.
    ///
    /// Ids are deduplicated here, bucketed by owner, exchanged, gathered on their owners by the
    /// gather kernel, and exchanged back in the storage dtype. A collective: every rank calls it,
    /// with its own ids (possibly none). An id out of range is refused on every rank first.
    pub fn lookup(&self, ids: &[u32]) -> Result<Vec<f32>, ShardError> {
        let mut out = vec![0.0f32; ids.len() * self.config().dim];
        self.lookup_into(ids, &mut out)?;
        Ok(out)
    }

    /// [`ShardedTable::lookup`] into the caller's buffer of `ids.len() × dim` elements of `T`:
    /// `f32`, or the table's storage dtype (rows as stored, no conversion). A steady state of
    /// calls allocates nothing of batch size.
    ///
    /// # Errors
    /// [`ShardError::Unsupported`] for another element type (the same on every rank);
    /// [`ShardError::BadInput`] on every rank for an id out of range or a buffer of the wrong
    /// length on any rank.
    pub fn lookup_into<T: RowElement>(&self, ids: &[u32], out: &mut [T]) -> Result<(), ShardError> {
        let dtype = self.config().weight_dtype;
        if T::DTYPE != DType::F32 && T::DTYPE != dtype {
            return Err(ShardError::Unsupported(format!(
                "rows as {} from a table stored as {dtype}; ask for f32 or {dtype}",
                T::DTYPE
            )));
        }
        let mut clock = Clock::start();
        let dim = self.config().dim;
        let verdict = self.check_ids(ids).or_else(|| {
            (out.len() != ids.len() * dim).then_some(InputError::BatchLength {
                expected: (ids.len() * dim) as u64,
                got: out.len() as u64,
            })
        });
        self.agree(verdict)?;
        self.count_rows_read(ids.len());
        clock.lap(&self.timings, Phase::Check);

        let step = &mut *self.step.borrow_mut();
        step.route.plan(ids, &self.partition);
        clock.lap(&self.timings, Phase::Dedup);
        let route = &step.route;
        let (me, world) = (self.comm.rank(), self.comm.world());
        // With a read-only cache, only the misses are requested.
        let mut cache = self.cache.borrow_mut();
        if let Some(cache) = cache.as_mut() {
            step.hit.clear();
            step.hit.resize(route.segments.len(), NOT_CACHED);
            step.fetch_slot.clear();
            step.fetch_slot.resize(route.segments.len(), 0);
            step.fetch_locals.clear();
            step.fetch_starts.clear();
            for o in 0..world {
                let start = step.fetch_locals.len();
                step.fetch_starts.push(start);
                if o == me {
                    continue;
                }
                for i in route.of_owner(o) {
                    let u = route.grouped[i] as usize;
                    match cache.get(route.segments.rows[u]) {
                        Some(slot) => step.hit[u] = slot as u32,
                        None => {
                            step.fetch_slot[u] = (step.fetch_locals.len() - start) as u32;
                            step.fetch_locals.push(route.locals[i]);
                        }
                    }
                }
            }
            step.fetch_starts.push(step.fetch_locals.len());
        }
        let cached = cache.is_some();
        // Rows this rank owns never travel: they are gathered with the others' requests and
        // written straight into `out`.
        let requests: Vec<Vec<u8>> = (0..world)
            .map(|o| {
                let locals = if o == me {
                    &[][..]
                } else if cached {
                    &step.fetch_locals[step.fetch_starts[o]..step.fetch_starts[o + 1]]
                } else {
                    &route.locals[route.of_owner(o)]
                };
                let mut message = step.pool.take(4 * locals.len());
                message.extend_from_slice(bytemuck::cast_slice(locals));
                message
            })
            .collect();
        clock.lap(&self.timings, Phase::Bucket);
        let requests = self.comm.all_to_all_v(requests)?;
        clock.lap(&self.timings, Phase::Exchange);

        // Every requester's rows in one gather (this rank's own at its place in rank order),
        // then each reply cut from it.
        let row_bytes = dim * dtype.size();
        step.rows.clear();
        let requested = requests.iter().map(|r| r.len() / 4).sum::<usize>();
        reserve_for(&mut step.rows, requested + route.of_owner(me).len());
        let mut scratch = Vec::new();
        let mut own_start = 0;
        for (r, request) in requests.iter().enumerate() {
            if r == me {
                own_start = step.rows.len();
                step.rows
                    .extend_from_slice(&route.locals[route.of_owner(me)]);
            } else {
                step.rows.extend_from_slice(as_u32(request, &mut scratch));
            }
        }
        let pool = &mut step.pool;
        let rows_out = &mut *out;
        let timings = &self.timings;
        let answers = self.gather_local(&step.rows, |gathered| {
            // The others' rows are cut out and sent first; this rank's own are decoded into
            // `out` while they travel.
            let mut at = 0;
            let replies: Vec<Vec<u8>> = requests
                .iter()
                .enumerate()
                .map(|(r, request)| {
                    if r == me {
                        at += route.of_owner(me).len() * row_bytes;
                        return Vec::new();
                    }
                    let len = request.len() / 4 * row_bytes;
                    let mut reply = pool.take(len);
                    reply.extend_from_slice(&gathered[at..at + len]);
                    at += len;
                    reply
                })
                .collect();
            pool.give_all(requests);
            clock.lap(timings, Phase::Gather);
            let mut decoding = Duration::ZERO;
            let answers = self.comm.all_to_all_v_overlapped(replies, &mut || {
                let started = Instant::now();
                let own = &gathered[own_start * row_bytes..];
                for (k, &u) in route.grouped[route.of_owner(me)].iter().enumerate() {
                    let src = &own[k * row_bytes..(k + 1) * row_bytes];
                    for &p in route.segments.inputs(u as usize) {
                        write_row(dtype, src, &mut rows_out[p as usize * dim..][..dim]);
                    }
                }
                decoding = started.elapsed();
            });
            clock.lap_nested(timings, Phase::Exchange, Phase::Decode, decoding);
            answers
        })??;
        let fetched: usize = answers.iter().map(|a| a.len() / row_bytes.max(1)).sum();
        self.rows_fetched
            .set(self.rows_fetched.get() + fetched as u64);

        // Input position p's row is a cached copy, or row k of its owner's answer.
        for (p, row) in out.chunks_exact_mut(dim.max(1)).enumerate().take(ids.len()) {
            let u = route.inverse[p] as usize;
            let owner = route.owner[u] as usize;
            if owner == me {
                continue;
            }
            if let Some(cache) = cache.as_ref() {
                // Hits in position order too: writes that stream through `out`.
                let slot = step.hit[u];
                if slot != NOT_CACHED {
                    write_row(dtype, cache.row(slot as usize), row);
                    continue;
                }
                let start = step.fetch_slot[u] as usize * row_bytes;
                write_row(dtype, &answers[owner][start..start + row_bytes], row);
                continue;
            }
            let start = route.slot[u] as usize * row_bytes;
            write_row(dtype, &answers[owner][start..start + row_bytes], row);
        }
        // Then the fetched rows are cached (after the hits were read: an insertion may replace
        // a line a hit used).
        if let Some(cache) = cache.as_mut() {
            for o in (0..world).filter(|&o| o != me) {
                for i in route.of_owner(o) {
                    let u = route.grouped[i] as usize;
                    if step.hit[u] == NOT_CACHED {
                        let start = step.fetch_slot[u] as usize * row_bytes;
                        cache.put(
                            route.segments.rows[u],
                            &answers[o][start..start + row_bytes],
                        );
                    }
                }
            }
        }
        step.pool.give_all(answers);
        clock.lap(&self.timings, Phase::Decode);
        Ok(())
    }
}
