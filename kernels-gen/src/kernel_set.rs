//! The kernels one table needs, compiled when the table is created.

use std::time::{Duration, Instant};

use cubecl::bytes::Bytes;
use cubecl::features::TypeUsage;
use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::element::runtime_error;
use crate::kernels::{
    apply::fused_apply, copy::copy_rows, gather::gather_rows, update::UpdateRule,
};
use crate::shape::{CPU_UNITS, LaunchShape, vector_size};
use crate::{DType, KernelError, TableConfig, with_dtype};

/// The buffers of one table on a device: weights, and the optimizer's state buffers (one-vector
/// placeholders where the optimizer has no such state).
#[derive(Clone, Debug)]
pub struct TableBuffers {
    /// `rows × dim` weights.
    pub weights: Handle,
    /// First per-element state.
    pub state_a: Handle,
    /// Second per-element state.
    pub state_b: Handle,
    /// Per-row state (`f32`).
    pub row_state: Handle,
}

/// One step's grouped gradients, on the device.
#[derive(Debug)]
pub struct DeviceStep {
    /// Unique local rows.
    pub rows: Handle,
    /// Offsets into `order`.
    pub offsets: Handle,
    /// Input positions grouped by row.
    pub order: Handle,
    /// Gradients, one `dim`-row per input, `f32`.
    pub grads: Handle,
    /// The kernel's parameter block.
    pub params: Handle,
    /// Number of unique rows.
    pub unique: usize,
    /// Number of input rows.
    pub inputs: usize,
}

/// The JIT-compiled kernels for one [`TableConfig`] on one client.
#[derive(Clone)]
pub struct KernelSet {
    client: Client,
    config: TableConfig,
    rule: UpdateRule,
    vector_size: usize,
    jit_time: Duration,
}

impl KernelSet {
    /// Validates `config`, checks the runtime can store its dtypes, and compiles the gather and
    /// fused-apply kernels by running each once on a one-row table. The time that took is
    /// [`KernelSet::jit_time`].
    pub fn new(client: &Client, config: TableConfig) -> Result<Self, KernelError> {
        config.validate()?;
        check_dtype(client, config.weight_dtype)?;
        check_dtype(client, config.state_dtype)?;
        let mut set = Self {
            client: client.clone(),
            config,
            rule: UpdateRule::new(&config),
            vector_size: vector_size(client, config.dim),
            jit_time: Duration::ZERO,
        };
        let start = Instant::now();
        set.warm_up()?;
        set.jit_time = start.elapsed();
        Ok(set)
    }

    fn warm_up(&self) -> Result<(), KernelError> {
        // One row, and as many as a launch has units on the `cpu` runtime: the launch shapes of
        // a single row and of any batch (see `LaunchShape::for_rows`).
        for n in [1, CPU_UNITS as usize] {
            let dim = self.config.dim;
            let ids: Vec<u32> = (0..n as u32).collect();
            let buffers = self.allocate(n, &vec![0.0; n * dim])?;
            let rows = self.client.create(Bytes::from_elems(ids.clone()));
            let out = self.client.empty(n * dim * self.config.weight_dtype.size());
            self.gather(&buffers, &rows, n, &out);
            let offsets: Vec<u32> = (0..=n as u32).collect();
            let step = DeviceStep {
                rows: self.client.create(Bytes::from_elems(ids.clone())),
                offsets: self.client.create(Bytes::from_elems(offsets)),
                order: self.client.create(Bytes::from_elems(ids)),
                grads: self.client.create(Bytes::from_elems(vec![0.0f32; n * dim])),
                params: self.client.create(Bytes::from_elems(vec![
                    0.0f32;
                    crate::kernels::update::PARAM_LEN
                ])),
                unique: n,
                inputs: n,
            };
            self.apply(&buffers, &step, 0, 1);
            self.client
                .read_one(buffers.weights)
                .map_err(runtime_error)?;
            self.client.read_one(out).map_err(runtime_error)?;
        }
        Ok(())
    }

    /// The client the kernels run on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The configuration the kernels are specialised for.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// How long compiling (JIT) and the first launch of every kernel took.
    pub fn jit_time(&self) -> Duration {
        self.jit_time
    }

    /// Elements per vector load.
    pub fn vector_size(&self) -> usize {
        self.vector_size
    }

    /// Allocates a table of `rows` rows with the given initial weights (`rows × dim`, `f32`,
    /// rounded to the weight dtype) and zeroed optimizer states.
    pub fn allocate(&self, rows: usize, init: &[f32]) -> Result<TableBuffers, KernelError> {
        let dim = self.config.dim;
        if init.len() != rows * dim {
            return Err(KernelError::ShapeMismatch {
                what: "initial weights",
                expected: rows * dim,
                got: init.len(),
            });
        }
        self.allocate_with(rows, Some(self.config.weight_dtype.encode(init)))
    }

    /// Allocates a table of `rows` rows and leaves its weights and optimizer states unwritten:
    /// the caller writes every row of every slot (as [`crate::LocalTable::new_in_blocks`]
    /// does, a block of rows at a time), so that no host buffer of the whole table is made,
    /// copied or zeroed. Placeholder states (of an optimizer without them) are zeroed.
    pub fn allocate_unwritten(&self, rows: usize) -> Result<TableBuffers, KernelError> {
        self.allocate_with(rows, None)
    }

    /// Allocates the buffers: the weights from `weights` (encoded) and zero optimizer states,
    /// or, for `None`, every row-sized buffer unwritten.
    fn allocate_with(
        &self,
        rows: usize,
        weights: Option<Vec<u8>>,
    ) -> Result<TableBuffers, KernelError> {
        let dim = self.config.dim;
        let spec = self.config.optimizer.spec();
        let n_elem_states = spec.element_states().count();
        let unwritten = weights.is_none();
        let zeros = |len: usize, dtype: DType| {
            self.client
                .create(Bytes::from_bytes_vec(vec![0u8; len * dtype.size()]))
        };
        // A state of `per_row` values a row, or a zeroed placeholder of `placeholder` values.
        let state_or_placeholder =
            |used: bool, per_row: usize, placeholder: usize, dtype: DType| {
                if !used {
                    zeros(placeholder, dtype)
                } else if unwritten {
                    self.client.empty((rows * per_row).max(1) * dtype.size())
                } else {
                    zeros((rows * per_row).max(1), dtype)
                }
            };
        let state = self.config.state_dtype;
        // Exact-fit, persistent memory: a table lives as long as the process, and allocated in
        // the runtime's ordinary pools it would size the pages of every later per-step buffer
        // (they are carved from pages as large as the largest allocation seen).
        let weights = weights.map(Bytes::from_bytes_vec);
        Ok(self
            .client
            .memory_persistent_allocation(weights, |weights| TableBuffers {
                weights: match weights {
                    Some(bytes) => self.client.create(bytes),
                    None => self
                        .client
                        .empty(rows.max(1) * dim * self.config.weight_dtype.size()),
                },
                state_a: state_or_placeholder(n_elem_states > 0, dim, self.vector_size, state),
                state_b: state_or_placeholder(n_elem_states > 1, dim, self.vector_size, state),
                row_state: state_or_placeholder(spec.row_state().is_some(), 1, 1, DType::F32),
            }))
    }

    /// Enqueues `out[i] = weights[rows[i]]` for `n` rows. The caller has checked every row.
    pub fn gather(&self, table: &TableBuffers, rows: &Handle, n: usize, out: &Handle) {
        if n == 0 {
            return;
        }
        let shape = LaunchShape::for_rows(&self.client, n);
        let dim = self.config.dim;
        with_dtype!(self.config.weight_dtype, F => {
            // SAFETY: rows holds `n` indices the caller checked against the table, `out` holds
            // `n × dim` elements, and each unit touches only its own block of output rows.
            unsafe {
                gather_rows::launch_unchecked::<F>(
                    &self.client,
                    shape.count(),
                    shape.dim(),
                    self.vector_size,
                    BufferArg::from_raw_parts(table.weights.clone(), table.weights.size() as usize / self.config.weight_dtype.size()),
                    BufferArg::from_raw_parts(rows.clone(), n),
                    BufferArg::from_raw_parts(out.clone(), n * dim),
                    (dim / self.vector_size) as u32,
                    shape.rows_per_unit,
                )
            }
        })
    }

    /// Enqueues `dst[dst_rows[i]] = src[src_rows[i]]` for `n` pairs of rows of `words` 32-bit
    /// words each. The caller has checked every index and that `dst_rows` has no duplicate.
    pub fn copy_rows(
        &self,
        src: (&Handle, &Handle),
        dst: (&Handle, &Handle),
        n: usize,
        words: usize,
    ) {
        if n == 0 || words == 0 {
            return;
        }
        let shape = LaunchShape::for_rows(&self.client, n);
        let len = |h: &Handle| h.size() as usize / 4;
        // SAFETY: every index is a row of its buffer (checked by the caller), and distinct
        // destination rows give each unit disjoint words to write.
        unsafe {
            copy_rows::launch_unchecked(
                &self.client,
                shape.count(),
                shape.dim(),
                BufferArg::from_raw_parts(src.0.clone(), len(src.0)),
                BufferArg::from_raw_parts(src.1.clone(), n),
                BufferArg::from_raw_parts(dst.0.clone(), len(dst.0)),
                BufferArg::from_raw_parts(dst.1.clone(), n),
                words as u32,
                shape.rows_per_unit,
            )
        }
    }

    /// Enqueues the fused update of `step` into `table`. The caller has checked every row and
    /// input position; `seed` and `step_index` key stochastic rounding.
    pub fn apply(&self, table: &TableBuffers, step: &DeviceStep, seed: u32, step_index: u32) {
        if step.unique == 0 {
            return;
        }
        let shape = LaunchShape::for_rows(&self.client, step.unique);
        let dim = self.config.dim;
        let (wd, sd) = (self.config.weight_dtype, self.config.state_dtype);
        let len = |h: &Handle, d: DType| h.size() as usize / d.size();
        with_dtype!(wd, F => with_dtype!(sd, S => {
            // SAFETY: every row in `step.rows` is a row of the table, every entry of `order` an
            // input position below `step.inputs`, offsets are non-decreasing and end at
            // `order`'s length, and unique rows give each unit disjoint rows to write.
            unsafe {
                fused_apply::launch_unchecked::<F, S>(
                    &self.client,
                    shape.count(),
                    shape.dim(),
                    self.vector_size,
                    BufferArg::from_raw_parts(table.weights.clone(), len(&table.weights, wd)),
                    BufferArg::from_raw_parts(table.state_a.clone(), len(&table.state_a, sd)),
                    BufferArg::from_raw_parts(table.state_b.clone(), len(&table.state_b, sd)),
                    BufferArg::from_raw_parts(table.row_state.clone(), len(&table.row_state, DType::F32)),
                    BufferArg::from_raw_parts(step.rows.clone(), step.unique),
                    BufferArg::from_raw_parts(step.offsets.clone(), step.unique + 1),
                    BufferArg::from_raw_parts(step.order.clone(), step.inputs),
                    BufferArg::from_raw_parts(step.grads.clone(), step.inputs * dim),
                    BufferArg::from_raw_parts(step.params.clone(), crate::kernels::update::PARAM_LEN),
                    (dim / self.vector_size) as u32,
                    shape.rows_per_unit,
                    seed,
                    step_index,
                    self.rule,
                )
            }
        }))
    }
}

impl std::fmt::Debug for KernelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSet")
            .field("runtime", &self.client.name())
            .field("config", &self.config)
            .field("vector_size", &self.vector_size)
            .field("jit_time", &self.jit_time)
            .finish()
    }
}

/// Refuses a dtype the runtime cannot keep in a buffer or convert.
pub(crate) fn check_dtype(client: &Client, dtype: DType) -> Result<(), KernelError> {
    let usable = |d: DType| {
        let uses = client.features().type_usage(crate::element::elem_type(d));
        uses.contains(TypeUsage::Buffer) && uses.contains(TypeUsage::Conversion)
    };
    if usable(dtype) {
        return Ok(());
    }
    let supported = DType::ALL
        .into_iter()
        .filter(|&d| usable(d))
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ");
    Err(KernelError::UnsupportedDType {
        dtype,
        runtime: client.name().to_string(),
        missing: "buffer storage and conversion".into(),
        supported,
    })
}
