//! A table (or one rank's shard of one) on one device, with its optimizer state.

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::element::runtime_error;
use crate::kernel_set::{DeviceStep, KernelSet, TableBuffers};
use crate::upload::UploadPool;
use crate::{DType, HyperParams, KernelError, Segments, StateShape, TableConfig};

/// One of a table's device buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot<'a> {
    /// The weights.
    Weights,
    /// The optimizer state of that name.
    State(&'a str),
}

/// Every buffer a table of `config` keeps, weights first, then each optimizer state in table
/// order: its storage dtype and values per row.
pub fn slot_layout(config: &TableConfig) -> Vec<(Slot<'static>, DType, usize)> {
    let mut slots = vec![(Slot::Weights, config.weight_dtype, config.dim)];
    for state in config.optimizer.spec().states {
        slots.push(match state.shape {
            StateShape::PerElement => (Slot::State(state.name), config.state_dtype, config.dim),
            StateShape::PerRow => (Slot::State(state.name), DType::F32, 1),
        });
    }
    slots
}

/// The fields of [`TableBuffers`].
#[derive(Clone, Copy)]
enum Buffer {
    Weights,
    StateA,
    StateB,
    RowState,
}

impl Buffer {
    fn of(self, b: &TableBuffers) -> &Handle {
        match self {
            Buffer::Weights => &b.weights,
            Buffer::StateA => &b.state_a,
            Buffer::StateB => &b.state_b,
            Buffer::RowState => &b.row_state,
        }
    }

    fn of_mut(self, b: &mut TableBuffers) -> &mut Handle {
        match self {
            Buffer::Weights => &mut b.weights,
            Buffer::StateA => &mut b.state_a,
            Buffer::StateB => &mut b.state_b,
            Buffer::RowState => &mut b.row_state,
        }
    }
}

/// Rows a table built by [`LocalTable::new_in_blocks`] writes at a time (32 MiB of `f32` weights
/// at dim 128).
pub const INIT_BLOCK_ROWS: usize = 1 << 16;

/// What to do with a non-finite gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NonFinitePolicy {
    /// Refuse the whole step with [`KernelError::NonFiniteGradient`]; nothing changes.
    #[default]
    Reject,
    /// Drop the inputs whose gradient row has a non-finite value, and count them.
    Skip,
}

/// `rows × dim` weights and their optimizer state on one device, updated by the fused kernels.
///
/// All host-facing values are `f32`; storage is the configured dtype. Every entry point checks
/// its input first and changes nothing when it refuses it.
#[derive(Debug)]
pub struct LocalTable {
    kernels: KernelSet,
    /// Always `Some` until dropped.
    buffers: Option<TableBuffers>,
    rows: usize,
    hyper: HyperParams,
    step: u64,
    seed: u32,
    non_finite: NonFinitePolicy,
    skipped: u64,
    uploads: UploadPool,
}

impl LocalTable {
    /// Creates a table with the given initial weights (`rows × dim`), compiling its kernels.
    pub fn new(
        client: &Client,
        config: TableConfig,
        rows: usize,
        init: &[f32],
    ) -> Result<Self, KernelError> {
        Self::with_kernels(KernelSet::new(client, config)?, rows, init)
    }

    /// Creates a table of `rows` rows, compiling its kernels, with the weights `init` appends
    /// for each block of rows it is given (`f32`, rounded to the weight dtype) and zero
    /// optimizer states, written [`INIT_BLOCK_ROWS`] rows at a time with one block in flight:
    /// a large table is never held twice, nor zeroed or copied whole on its way to the device.
    /// Rows that are not whole 32-bit words (an odd dim of 16-bit values) are written at once.
    pub fn new_in_blocks(
        client: &Client,
        config: TableConfig,
        rows: usize,
        mut init: impl FnMut(std::ops::Range<usize>, &mut Vec<f32>),
    ) -> Result<Self, KernelError> {
        let layout = slot_layout(&config);
        let whole_words = layout
            .iter()
            .all(|(_, dtype, width)| (width * dtype.size()).is_multiple_of(4));
        if rows == 0 || !whole_words {
            let mut weights = Vec::with_capacity(rows * config.dim);
            init(0..rows, &mut weights);
            return Self::new(client, config, rows, &weights);
        }
        let kernels = KernelSet::new(client, config)?;
        check_row_count(rows)?;
        let buffers = kernels.allocate_unwritten(rows)?;
        let table = Self::from_parts(kernels, buffers, rows);
        let (mut weights, mut zeros) = (Vec::new(), Vec::new());
        for first in (0..rows).step_by(INIT_BLOCK_ROWS) {
            let block = first..(first + INIT_BLOCK_ROWS).min(rows);
            let ids: Vec<u32> = block.clone().map(|r| r as u32).collect();
            weights.clear();
            init(block, &mut weights);
            if weights.len() != ids.len() * config.dim {
                return Err(KernelError::ShapeMismatch {
                    what: "initial weights of a block of rows",
                    expected: ids.len() * config.dim,
                    got: weights.len(),
                });
            }
            let bytes = config.weight_dtype.encode(&weights);
            table.write_rows(Slot::Weights, &ids, &bytes)?;
            for &(slot, dtype, width) in &layout[1..] {
                zeros.resize(ids.len() * width * dtype.size(), 0u8);
                table.write_rows(slot, &ids, &zeros)?;
            }
            // One block in flight: queued uploads would otherwise hold a second copy of the
            // table until the runtime reached them.
            crate::wait::sync(client)?;
        }
        Ok(table)
    }

    /// Creates a table on already compiled kernels.
    pub fn with_kernels(
        kernels: KernelSet,
        rows: usize,
        init: &[f32],
    ) -> Result<Self, KernelError> {
        check_row_count(rows)?;
        let buffers = kernels.allocate(rows, init)?;
        Ok(Self::from_parts(kernels, buffers, rows))
    }

    fn from_parts(kernels: KernelSet, buffers: TableBuffers, rows: usize) -> Self {
        let hyper = HyperParams::new(kernels.config().optimizer);
        Self {
            kernels,
            buffers: Some(buffers),
            rows,
            hyper,
            step: 0,
            seed: 0,
            non_finite: NonFinitePolicy::Reject,
            skipped: 0,
            uploads: UploadPool::default(),
        }
    }

    /// The device buffers (weights and optimizer states), for kernels that read the table in
    /// place, such as KvsAll's dense scoring.
    pub fn buffers(&self) -> &TableBuffers {
        self.buffers.as_ref().expect("buffers live until drop")
    }

    /// Bytes the table holds on its device: weights and optimizer states.
    pub fn resident_bytes(&self) -> u64 {
        let config = self.kernels.config();
        let spec = config.optimizer.spec();
        let elements = (self.rows * self.dim()) as u64;
        let states = spec.element_states().count() as u64;
        let row_state = if spec.row_state().is_some() { 4 } else { 0 };
        elements * config.weight_dtype.size() as u64
            + states * elements * config.state_dtype.size() as u64
            + row_state * self.rows as u64
    }

    /// Rows in this table.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row length.
    pub fn dim(&self) -> usize {
        self.kernels.config().dim
    }

    /// The configuration.
    pub fn config(&self) -> &TableConfig {
        self.kernels.config()
    }

    /// The compiled kernels.
    pub fn kernels(&self) -> &KernelSet {
        &self.kernels
    }

    /// Steps applied so far (Adam's global clock).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Sets the step count, as when restoring a checkpoint.
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// The hyper-parameters.
    pub fn hyper_params(&self) -> &HyperParams {
        &self.hyper
    }

    /// Sets a hyper-parameter by name between steps (WholeMemory's `set_parameter`).
    pub fn set_parameter(&mut self, name: &str, value: f64) -> Result<(), KernelError> {
        self.hyper.set(name, value)
    }

    /// Seeds stochastic rounding.
    pub fn set_seed(&mut self, seed: u32) {
        self.seed = seed;
    }

    /// Chooses what a non-finite gradient does.
    pub fn set_non_finite_policy(&mut self, policy: NonFinitePolicy) {
        self.non_finite = policy;
    }

    /// What a non-finite gradient does.
    pub fn non_finite_policy(&self) -> NonFinitePolicy {
        self.non_finite
    }

    /// Adds `n` to [`LocalTable::skipped_inputs`], for inputs a caller dropped before grouping.
    pub fn count_skipped(&mut self, n: u64) {
        self.skipped += n;
    }

    /// Inputs dropped so far under [`NonFinitePolicy::Skip`].
    pub fn skipped_inputs(&self) -> u64 {
        self.skipped
    }

    /// Checks that every row is below [`LocalTable::rows`].
    pub fn check_rows(&self, rows: &[u32]) -> Result<(), KernelError> {
        match rows.iter().find(|&&r| r as usize >= self.rows) {
            Some(&row) => Err(KernelError::RowOutOfRange {
                row: row as u64,
                rows: self.rows as u64,
            }),
            None => Ok(()),
        }
    }

    /// The rows `rows`, in that order (duplicates allowed), as `rows.len() × dim` values.
    pub fn gather(&self, rows: &[u32]) -> Result<Vec<f32>, KernelError> {
        Ok(self.config().weight_dtype.decode(&self.gather_raw(rows)?))
    }

    /// [`LocalTable::gather`] in the storage dtype's little-endian bytes, as sent between ranks.
    pub fn gather_raw(&self, rows: &[u32]) -> Result<Vec<u8>, KernelError> {
        let mut out = Vec::new();
        self.gather_raw_into(rows, &mut out)?;
        Ok(out)
    }

    /// Appends the rows `rows` to `out` in the storage dtype's little-endian bytes; reuses the
    /// upload and device buffers of earlier calls.
    pub fn gather_raw_into(&self, rows: &[u32], out: &mut Vec<u8>) -> Result<(), KernelError> {
        self.gather_with(rows, |bytes| out.extend_from_slice(bytes))
    }

    /// Gathers the rows `rows` and hands their storage-dtype bytes to `f` (on the `cpu` runtime
    /// a view of device memory: no copy before `f`'s).
    pub fn gather_with<R>(
        &self,
        rows: &[u32],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, KernelError> {
        if rows.is_empty() {
            self.check_rows(rows)?;
            return Ok(f(&[]));
        }
        let device_out = self.gather_on_device(rows)?;
        let bytes = crate::wait::read_one(self.kernels.client(), device_out)?;
        Ok(f(&bytes))
    }

    /// The rows `rows` gathered into a new device buffer, in the storage dtype (`rows.len() ×
    /// dim` elements; a few bytes when there are none, as a buffer cannot be empty): for kernels
    /// that read them next, with no trip through the host.
    pub fn gather_on_device(&self, rows: &[u32]) -> Result<Handle, KernelError> {
        self.check_rows(rows)?;
        let client = self.kernels.client();
        let dtype = self.config().weight_dtype;
        let device_out = client.empty((rows.len() * self.dim() * dtype.size()).max(4));
        if !rows.is_empty() {
            let ids = client.create(self.uploads.bytes_of(rows));
            self.kernels
                .gather(self.buffers(), &ids, rows.len(), &device_out);
        }
        Ok(device_out)
    }

    /// The pool the table's uploads come from: fill a buffer from it for
    /// [`LocalTable::apply_grouped`].
    pub fn uploads(&self) -> &UploadPool {
        &self.uploads
    }

    /// Applies one optimizer step: `grads` holds one `dim`-row per entry of `ids`; duplicate ids
    /// are summed in input order; only the rows in `ids` and their states change.
    pub fn apply(&mut self, ids: &[u32], grads: &[f32], lr: f32) -> Result<(), KernelError> {
        let dim = self.dim();
        if grads.len() != ids.len() * dim {
            return Err(KernelError::ShapeMismatch {
                what: "gradients",
                expected: ids.len() * dim,
                got: grads.len(),
            });
        }
        self.check_rows(ids)?;
        let params = self.hyper.kernel_block(lr, self.step + 1, dim)?;
        let mut segments = Segments::group(ids);
        let bad = self.non_finite_inputs(ids, grads)?;
        if !bad.is_empty() {
            let keep: Vec<u32> = (0..ids.len() as u32)
                .filter(|i| bad.binary_search(i).is_err())
                .collect();
            let ids: Vec<u32> = keep.iter().map(|&i| ids[i as usize]).collect();
            segments = Segments::group(&ids);
            for p in segments.order.iter_mut() {
                *p = keep[*p as usize];
            }
            self.skipped += bad.len() as u64;
        }
        let mut staged = self.uploads.take(std::mem::size_of_val(grads));
        staged.extend_from_slice(bytemuck::cast_slice(grads));
        self.apply_grouped(&segments, staged, &params)
    }

    /// Input positions whose gradient row is not finite; an error under `Reject`.
    fn non_finite_inputs(&self, ids: &[u32], grads: &[f32]) -> Result<Vec<u32>, KernelError> {
        let mut bad = Vec::new();
        for (position, row) in grads.chunks_exact(self.dim().max(1)).enumerate() {
            if let Some(&value) = row.iter().find(|v| !v.is_finite()) {
                if self.non_finite == NonFinitePolicy::Reject {
                    return Err(KernelError::NonFiniteGradient {
                        row: ids[position] as u64,
                        position,
                        value,
                    });
                }
                bad.push(position as u32);
            }
        }
        Ok(bad)
    }

    /// Runs the fused update for already grouped inputs. `grads` holds the gradient rows the
    /// segments' `order` points into, as `f32` little-endian bytes, in a buffer from
    /// [`LocalTable::uploads`] (it goes back there once uploaded). The gradients' finiteness is
    /// the caller's to check.
    ///
    /// # Errors
    /// [`KernelError::RowOutOfRange`] for a row past the table, [`KernelError::ShapeMismatch`]
    /// for segments that do not fit the gradients; nothing changes then.
    pub fn apply_grouped(
        &mut self,
        segments: &Segments,
        grads: Vec<u8>,
        params: &[f32],
    ) -> Result<(), KernelError> {
        let grads = self.uploads.bytes(grads);
        self.apply_grouped_parts(segments, vec![grads], params)
    }

    /// [`LocalTable::apply_grouped`] with the gradient rows in parts (one per sender, say), laid
    /// one after another in device memory: each part is copied in once, where it lies, instead of
    /// being assembled in one host buffer first. Build the parts with
    /// [`UploadPool::bytes_from`] on [`LocalTable::uploads`] to have their buffers come back.
    ///
    /// # Errors
    /// As [`LocalTable::apply_grouped`]; nothing changes then.
    pub fn apply_grouped_parts(
        &mut self,
        segments: &Segments,
        parts: Vec<Bytes>,
        params: &[f32],
    ) -> Result<(), KernelError> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let row_bytes = 4 * self.dim();
        if !total.is_multiple_of(row_bytes) {
            return Err(KernelError::ShapeMismatch {
                what: "gradient bytes (whole f32 rows)",
                expected: total.next_multiple_of(row_bytes),
                got: total,
            });
        }
        let inputs = total / row_bytes;
        self.check_rows(&segments.rows)?;
        segments.check(inputs)?;
        let client = self.kernels.client();
        let mut parts: Vec<Bytes> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let grads = if parts.len() <= 1 {
            client.create(
                parts
                    .pop()
                    .unwrap_or_else(|| self.uploads.bytes(Vec::new())),
            )
        } else {
            let grads = client.empty(total);
            write_parts(client, &grads, 0, parts);
            grads
        };
        self.run_step(segments, grads, inputs, params)
    }

    /// [`LocalTable::apply_grouped_parts`] after gradient rows that are already on the device:
    /// `dense` holds `dense_rows` `f32` rows first and, usually, room after them, where `parts`
    /// are written; `segments`' inputs index the whole buffer (`dense_rows` first). For a step
    /// whose gradient of every row is computed on the device (a dense product) and summed with
    /// rows that arrive from elsewhere. When `parts` do not fit the room, the dense rows are
    /// copied into a buffer that holds both (slower, never wrong: how many rows arrive is only
    /// known after the exchange, so a shortfall must not fail one rank of a collective step).
    ///
    /// # Errors
    /// As [`LocalTable::apply_grouped`], and [`KernelError::ShapeMismatch`] when `parts` are
    /// not whole rows or `dense` is smaller than its rows; nothing changes then.
    pub fn apply_grouped_after_device(
        &mut self,
        segments: &Segments,
        dense: &Handle,
        dense_rows: usize,
        parts: Vec<Bytes>,
        params: &[f32],
    ) -> Result<(), KernelError> {
        let row_bytes = 4 * self.dim();
        let sparse: usize = parts.iter().map(|p| p.len()).sum();
        let (dense_bytes, room) = (dense_rows * row_bytes, dense.size_in_used() as usize);
        if !sparse.is_multiple_of(row_bytes) || dense_bytes > room {
            return Err(KernelError::ShapeMismatch {
                what: "gradient rows after the device rows (whole f32 rows)",
                expected: room,
                got: dense_bytes + sparse,
            });
        }
        let total = dense_bytes + sparse;
        let inputs = total / row_bytes;
        self.check_rows(&segments.rows)?;
        segments.check(inputs)?;
        let parts: Vec<Bytes> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let client = self.kernels.client().clone();
        let grads = if total <= room {
            dense.clone()
        } else {
            let mut rows = crate::wait::read_one(&client, dense.clone())?.to_vec();
            rows.truncate(dense_bytes);
            rows.resize(total, 0);
            client.create(Bytes::from_bytes_vec(rows))
        };
        write_parts(&client, &grads, dense_bytes, parts);
        self.run_step(segments, grads, inputs, params)
    }

    /// Uploads the step's segments and parameters and runs the fused update on `grads`.
    fn run_step(
        &mut self,
        segments: &Segments,
        grads: Handle,
        inputs: usize,
        params: &[f32],
    ) -> Result<(), KernelError> {
        let client = self.kernels.client();
        let pool = &self.uploads;
        let step = DeviceStep {
            rows: client.create(pool.bytes_of(&segments.rows)),
            offsets: client.create(pool.bytes_of(&segments.offsets)),
            order: client.create(pool.bytes_of(&segments.order)),
            grads,
            params: client.create(pool.bytes_of(params)),
            unique: segments.len(),
            inputs,
        };
        self.step += 1;
        self.kernels
            .apply(self.buffers(), &step, self.seed, self.step as u32);
        crate::wait::sync(client)?;
        Ok(())
    }

    /// The kernel parameter block for the next step at learning rate `lr`.
    pub fn next_params(&self, lr: f32) -> Result<Vec<f32>, KernelError> {
        Ok(self
            .hyper
            .kernel_block(lr, self.step + 1, self.dim())?
            .to_vec())
    }

    /// Every weight, `rows × dim`.
    pub fn weights(&self) -> Result<Vec<f32>, KernelError> {
        let (bytes, dtype, _) = self.read_slot(Slot::Weights)?;
        Ok(dtype.decode(&bytes))
    }

    /// The names of the optimizer's state slots, in table order.
    pub fn state_names(&self) -> Vec<&'static str> {
        self.config()
            .optimizer
            .spec()
            .states
            .iter()
            .map(|s| s.name)
            .collect()
    }

    /// The optimizer state `name`: `rows × dim` values for a per-element slot, `rows` for a
    /// per-row slot.
    pub fn state(&self, name: &str) -> Result<Vec<f32>, KernelError> {
        let (bytes, dtype, _) = self.read_slot(Slot::State(name))?;
        Ok(dtype.decode(&bytes))
    }

    /// Which buffer holds `slot`, its storage dtype and values per row.
    fn slot(&self, slot: Slot) -> Result<(Buffer, DType, usize), KernelError> {
        let spec = self.config().optimizer.spec();
        let name = match slot {
            Slot::Weights => return Ok((Buffer::Weights, self.config().weight_dtype, self.dim())),
            Slot::State(name) => name,
        };
        let unknown = || KernelError::UnknownState {
            optimizer: spec.optimizer,
            name: name.to_string(),
            expected: self.state_names().join(", "),
        };
        let state = spec
            .states
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(unknown)?;
        Ok(match state.shape {
            StateShape::PerRow => (Buffer::RowState, DType::F32, 1),
            StateShape::PerElement => {
                let k = spec
                    .element_states()
                    .position(|s| s.name == name)
                    .ok_or_else(unknown)?;
                let buffer = if k == 0 {
                    Buffer::StateA
                } else {
                    Buffer::StateB
                };
                (buffer, self.config().state_dtype, self.dim())
            }
        })
    }

    /// Buffer `slot` in its storage dtype's little-endian bytes (`rows × width` values), with
    /// that dtype and the width: what checkpoints store, bit for bit.
    pub fn read_slot(&self, slot: Slot) -> Result<(Vec<u8>, DType, usize), KernelError> {
        let (buffer, dtype, width) = self.slot(slot)?;
        let handle = buffer.of(self.buffers()).clone();
        let mut bytes = self
            .kernels
            .client()
            .read_one(handle)
            .map_err(runtime_error)?
            .to_vec();
        bytes.truncate(self.rows * width * dtype.size());
        Ok((bytes, dtype, width))
    }

    /// Overwrites buffer `slot` with `bytes` as [`LocalTable::read_slot`] returns them. A wrong
    /// length is refused and changes nothing.
    pub fn write_slot(&mut self, slot: Slot, bytes: &[u8]) -> Result<(), KernelError> {
        let (buffer, dtype, width) = self.slot(slot)?;
        let expected = self.rows * width * dtype.size();
        if bytes.len() != expected {
            return Err(KernelError::ShapeMismatch {
                what: "restored buffer (bytes)",
                expected,
                got: bytes.len(),
            });
        }
        if self.rows == 0 {
            return Ok(());
        }
        let handle = self
            .kernels
            .client()
            .create(Bytes::from_bytes_vec(bytes.to_vec()));
        let buffers = self.buffers.as_mut().expect("buffers live until drop");
        let target = buffer.of_mut(buffers);
        *target = handle;
        Ok(())
    }
}

impl LocalTable {
    /// The rows `rows` of buffer `slot`, in that order, in its storage dtype's little-endian
    /// bytes (`rows.len() × width` values): single lines of a table, for a cache to write back.
    /// Rows must be whole 32-bit words (an even `dim` for 16-bit dtypes).
    pub fn read_rows(&self, slot: Slot, rows: &[u32]) -> Result<Vec<u8>, KernelError> {
        self.check_rows(rows)?;
        let (buffer, dtype, width) = self.slot(slot)?;
        let row_bytes = whole_words(width * dtype.size())?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.kernels.client();
        let src_rows = client.create(self.uploads.bytes_of(rows));
        let iota: Vec<u32> = (0..rows.len() as u32).collect();
        let dst_rows = client.create(self.uploads.bytes_of(&iota));
        let out = client.empty(rows.len() * row_bytes);
        let src = buffer.of(self.buffers());
        self.kernels.copy_rows(
            (src, &src_rows),
            (&out, &dst_rows),
            rows.len(),
            row_bytes / 4,
        );
        let mut bytes = crate::wait::read_one(client, out)?.to_vec();
        bytes.truncate(rows.len() * row_bytes);
        Ok(bytes)
    }

    /// Overwrites the rows `rows` (distinct) of buffer `slot` with `bytes`, laid out as
    /// [`LocalTable::read_rows`] returns them: loads cache lines. Refused input changes nothing.
    /// The copy is enqueued on the device; later reads and kernels of the table see it.
    pub fn write_rows(&self, slot: Slot, rows: &[u32], bytes: &[u8]) -> Result<(), KernelError> {
        self.check_rows(rows)?;
        let (buffer, dtype, width) = self.slot(slot)?;
        let row_bytes = whole_words(width * dtype.size())?;
        if bytes.len() != rows.len() * row_bytes {
            return Err(KernelError::ShapeMismatch {
                what: "rows to write (bytes)",
                expected: rows.len() * row_bytes,
                got: bytes.len(),
            });
        }
        let mut seen = rows.to_vec();
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(KernelError::InvalidShape(format!(
                "row {} written twice in one call",
                w[0]
            )));
        }
        if rows.is_empty() {
            return Ok(());
        }
        let client = self.kernels.client();
        let mut staged = self.uploads.take(bytes.len());
        staged.extend_from_slice(bytes);
        let src = client.create(self.uploads.bytes(staged));
        let iota: Vec<u32> = (0..rows.len() as u32).collect();
        let src_rows = client.create(self.uploads.bytes_of(&iota));
        let dst_rows = client.create(self.uploads.bytes_of(rows));
        let dst = buffer.of(self.buffers());
        // Enqueued, not waited for: the next read or kernel of this table sees the rows (a
        // runtime failure surfaces there).
        self.kernels.copy_rows(
            (&src, &src_rows),
            (dst, &dst_rows),
            rows.len(),
            row_bytes / 4,
        );
        Ok(())
    }
}

/// Refuses more rows than a `u32` row index reaches.
fn check_row_count(rows: usize) -> Result<(), KernelError> {
    if rows > u32::MAX as usize {
        return Err(KernelError::InvalidShape(format!(
            "{rows} rows exceed the u32 row index"
        )));
    }
    Ok(())
}

/// `row_bytes`, if rows of that many bytes are whole 32-bit words (what the row copy moves).
fn whole_words(row_bytes: usize) -> Result<usize, KernelError> {
    if row_bytes.is_multiple_of(4) {
        Ok(row_bytes)
    } else {
        Err(KernelError::InvalidShape(format!(
            "rows of {row_bytes} bytes are not whole 32-bit words (use an even dim with 16-bit dtypes)"
        )))
    }
}

impl Drop for LocalTable {
    /// Frees the buffers and asks the runtime to return the memory: the `cpu` runtime pools memory
    /// per stream (per thread), and a pool whose thread is gone would otherwise keep it.
    fn drop(&mut self) {
        drop(self.buffers.take());
        let _ = self.kernels.client().memory_cleanup();
    }
}

/// Writes `parts` one after another into `buffer` from byte `start` of its view (a handle may
/// come with offsets of its own: positions count from where its view starts and ends).
fn write_parts(client: &Client, buffer: &Handle, start: usize, parts: Vec<Bytes>) {
    let len = buffer.size_in_used() as usize;
    let mut at = start;
    for part in parts {
        let size = part.len();
        let place = buffer
            .clone()
            .offset_start(at as u64)
            .offset_end((len - at - size) as u64);
        client.write(&place, part);
        at += size;
    }
}
