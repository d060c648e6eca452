//! A table split row-wise across the ranks of a [`Communicator`]: lookups go to the owning rank,
//! gradients go back to it, and each owner runs the fused update on the rows it received.

mod apply;
mod buffers;
mod element;
mod local;
mod lookup;
mod route;
mod timings;

use std::cell::RefCell;

use cubecl::prelude::Client;
use rowshard_kernels::{HyperParams, LocalTable, NonFinitePolicy, Slot, StateShape, TableConfig};

use crate::cache::{CachePolicy, CacheStats, RowCache, WriteBackCache};
use crate::comm::{Communicator, from_bytes, to_bytes};
use crate::error::{InputError, ShardError};
use crate::init::Initializer;
use crate::partition::{Partition, PartitionScheme};
pub use apply::DeviceGradient;
use buffers::StepBuffers;
pub use element::RowElement;
pub use timings::{Phase, Timings};

/// Refuses a table whose device buffers the runtime cannot hold — the shard's `rows` rows, or
/// with a read-write cache of `ratio`, its lines — before anything is allocated: each buffer
/// must fit the runtime's largest allocation, and all of them its memory where it says.
fn check_device_fits(
    client: &Client,
    config: &TableConfig,
    rows: usize,
    write_back: Option<f64>,
) -> Result<(), ShardError> {
    let device_rows = match write_back {
        Some(ratio) => crate::cache::Directory::capacity_for(rows, ratio),
        None => rows,
    } as u64;
    let buffers: Vec<u64> = rowshard_kernels::slot_layout(config)
        .into_iter()
        .map(|(_, dtype, width)| device_rows * (width * dtype.size()) as u64)
        .collect();
    let memory = &client.properties().memory;
    let largest = buffers.iter().copied().max().unwrap_or(0);
    let total: u64 = buffers.iter().sum();
    let limit = if largest > memory.max_page_size {
        format!(
            "a buffer of {largest} bytes, and its largest is {}",
            memory.max_page_size
        )
    } else if let Some(max) = memory.max_memory().filter(|&m| total > m) {
        format!("{total} bytes, and it has {max}")
    } else {
        return Ok(());
    };
    Err(match write_back {
        Some(ratio) => ShardError::InvalidCache(format!(
            "a read-write cache of ratio {ratio} ({device_rows} lines) needs {limit} on this \
             runtime: use a smaller ratio"
        )),
        None => ShardError::InvalidCache(format!(
            "a shard of {device_rows} rows needs {limit} on this runtime: keep it in host \
             memory with a read-write cache (CachePolicy::ReadWrite)"
        )),
    })
}

/// Where optimizer state lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StateLocation {
    /// Beside the shard's weights, on the same device.
    #[default]
    WithShard,
    /// In host memory (dicee's `adam_device="cpu"`). On the `cpu` runtime the device memory is
    /// host memory, so this is what `WithShard` gives there; on GPU runtimes it needs the
    /// read-write cache ([`CachePolicy::ReadWrite`]), which keeps the whole shard — weights and
    /// states — in host memory and its hot rows on the device.
    Host,
}

/// Everything that describes a sharded table; every rank must pass the same.
#[derive(Clone, Debug)]
pub struct ShardedTableSpec {
    /// Rows in the whole table.
    pub rows: usize,
    /// Optimizer, dtypes, dim and options.
    pub config: TableConfig,
    /// The optimizer's hyper-parameters (validated against the optimizer table; change them
    /// later with [`ShardedTable::set_parameter`]).
    pub hyper: HyperParams,
    /// How rows are split.
    pub scheme: PartitionScheme,
    /// Initial weights, by global row (so every partition starts alike).
    pub init: Initializer,
    /// Where optimizer state lives.
    pub state_location: StateLocation,
    /// The embedding cache.
    pub cache: CachePolicy,
}

/// One rank's view of a row-wise sharded table.
pub struct ShardedTable<'c> {
    comm: &'c dyn Communicator,
    partition: Partition,
    shard: LocalTable,
    timings: Timings,
    rows_applied: u64,
    rows_fetched: std::cell::Cell<u64>,
    rows_read: std::cell::Cell<u64>,
    step: RefCell<StepBuffers>,
    cache: RefCell<Option<RowCache>>,
    /// With a read-write cache: the shard in host memory (`shard` then holds its lines).
    host: Option<RefCell<WriteBackCache>>,
}

impl<'c> ShardedTable<'c> {
    /// Creates this rank's shard on `client`, after checking that every rank describes the same
    /// table over the same world. A collective: every rank must call it.
    pub fn new(
        comm: &'c dyn Communicator,
        client: &Client,
        spec: &ShardedTableSpec,
    ) -> Result<Self, ShardError> {
        let partition = Partition::new(spec.rows, comm.world(), spec.scheme.clone());
        // Agree on the description (or on the failure to build it) before anyone allocates.
        let fields = match &partition {
            Ok(p) => describe(spec, p),
            Err(e) => vec![("partition", format!("invalid: {e}"))],
        };
        crate::agree::agree_on(comm, &fields)?;
        // Every rank agreed on the policy, so every rank refuses a bad one alike.
        spec.cache.validate()?;
        let partition = partition?;
        let write_back = match spec.cache {
            CachePolicy::ReadWrite { ratio } => Some(ratio),
            _ => None,
        };
        if spec.state_location == StateLocation::Host
            && write_back.is_none()
            && !rowshard_kernels::shape::is_cpu_runtime(client)
        {
            return Err(ShardError::Unsupported(
                "optimizer state in host memory on a GPU runtime needs the read-write cache \
                 (CachePolicy::ReadWrite)"
                    .into(),
            ));
        }
        if write_back.is_some() && spec.config.stochastic_rounding {
            return Err(ShardError::Unsupported(
                "stochastic rounding with the read-write cache (rounding is keyed by a row's \
                 place on the device, which a cache line changes)"
                    .into(),
            ));
        }
        // The same verdict on every rank: the largest shard decides.
        let largest = (0..comm.world())
            .map(|r| partition.local_rows(r))
            .max()
            .unwrap_or(0);
        check_device_fits(client, &spec.config, largest, write_back)?;
        if spec.hyper.optimizer() != spec.config.optimizer {
            return Err(ShardError::Unsupported(format!(
                "hyper-parameters of {} for a table that uses {}",
                spec.hyper.optimizer(),
                spec.config.optimizer
            )));
        }
        let rank = comm.rank();
        let local = partition.local_rows(rank);
        let dim = spec.config.dim;
        let init_rows = |rows: std::ops::Range<usize>, out: &mut Vec<f32>| {
            for l in rows {
                spec.init.extend_row(partition.global(rank, l), dim, out);
            }
        };
        let (mut shard, host) = match write_back {
            None => (
                LocalTable::new_in_blocks(client, spec.config, local, init_rows)?,
                None,
            ),
            Some(ratio) => {
                let mut init = Vec::with_capacity(local * dim);
                init_rows(0..local, &mut init);
                let host = WriteBackCache::new(&spec.config, local, ratio, &init)?;
                let lines = host.lines();
                let zeros = vec![0.0; lines * dim];
                let lines = LocalTable::new(client, spec.config, lines, &zeros).map_err(|e| {
                    ShardError::InvalidCache(format!(
                        "{lines} cache lines do not fit on this runtime: {e}"
                    ))
                })?;
                (lines, Some(RefCell::new(host)))
            }
        };
        for (name, value) in spec.hyper.iter() {
            shard.set_parameter(name, value)?;
        }
        // Last: a refused table allocates no cache.
        let cache = match spec.cache {
            CachePolicy::ReadOnly { ratio } => Some(RowCache::new(
                spec.rows,
                ratio,
                spec.config.dim * spec.config.weight_dtype.size(),
            )),
            CachePolicy::None | CachePolicy::ReadWrite { .. } => None,
        };
        // Messages and uploads share one pool: a received gradient message is uploaded as it is,
        // and comes back to the pool as the next step's message.
        let step = RefCell::new(StepBuffers {
            pool: shard.uploads().clone(),
            ..StepBuffers::default()
        });
        Ok(Self {
            comm,
            partition,
            shard,
            timings: Timings::default(),
            rows_applied: 0,
            rows_fetched: Default::default(),
            rows_read: Default::default(),
            step,
            cache: RefCell::new(cache),
            host,
        })
    }

    /// The partition.
    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// This rank's shard on the device (with a read-write cache: its cache lines).
    pub fn shard(&self) -> &LocalTable {
        &self.shard
    }

    /// This rank's shard, to restore it from a checkpoint: keep every rank's step count equal.
    pub fn shard_mut(&mut self) -> &mut LocalTable {
        &mut self.shard
    }

    /// The configuration.
    pub fn config(&self) -> &TableConfig {
        self.shard.config()
    }

    /// What this rank's cache did so far (zeros without a cache).
    pub fn cache_stats(&self) -> CacheStats {
        if let Some(host) = &self.host {
            return host.borrow().stats();
        }
        self.cache
            .borrow()
            .as_ref()
            .map(RowCache::stats)
            .unwrap_or_default()
    }

    /// With a read-write cache, writes every modified line back to host memory (lines stay
    /// cached); otherwise does nothing. This rank only (not a collective). A failure changes
    /// nothing.
    pub fn write_back_all(&self) -> Result<(), ShardError> {
        match &self.host {
            Some(host) => host.borrow_mut().write_back_all(&self.shard),
            None => Ok(()),
        }
    }

    /// With a read-write cache, writes every modified line back and then invalidates every
    /// line; otherwise does nothing. This rank only. A failure changes nothing.
    pub fn drop_all(&self) -> Result<(), ShardError> {
        match &self.host {
            Some(host) => host.borrow_mut().drop_all(&self.shard),
            None => Ok(()),
        }
    }

    /// Makes the read-write cache's next write-back fail, to test the failure path.
    #[doc(hidden)]
    pub fn fail_next_write_back(&self) {
        if let Some(host) = &self.host {
            host.borrow_mut().fail_next_write_back();
        }
    }

    /// Drops every read-only cached copy on this rank: call it on every rank after writing
    /// shards directly (through [`ShardedTable::shard_mut`]); checkpoint loads do.
    pub fn clear_cache(&self) {
        if let Some(cache) = self.cache.borrow_mut().as_mut() {
            cache.clear();
        }
    }

    /// Steps applied (equal on every rank).
    pub fn step(&self) -> u64 {
        self.shard.step()
    }

    /// Time spent so far, split into routing, gathering and applying.
    pub fn timings(&self) -> &Timings {
        &self.timings
    }

    /// Unique rows this rank's shard has updated, summed over steps.
    pub fn rows_applied(&self) -> u64 {
        self.rows_applied
    }

    /// Rows this rank's lookups received from other ranks, summed over calls.
    pub fn rows_fetched(&self) -> u64 {
        self.rows_fetched.get()
    }

    /// Rows read for this rank, summed over calls: the ids its lookups asked for (duplicates
    /// included) and the rows steps gathered from its shard themselves (shared negatives; see
    /// [`ShardedTable::count_rows_read`]).
    pub fn rows_read(&self) -> u64 {
        self.rows_read.get()
    }

    /// Counts `rows` read from this rank's shard other than by [`ShardedTable::lookup`] (a
    /// model's step that gathers rows for the dense kernels).
    pub fn count_rows_read(&self, rows: usize) {
        self.rows_read.set(self.rows_read.get() + rows as u64);
    }

    /// Resets [`ShardedTable::timings`], [`ShardedTable::rows_applied`],
    /// [`ShardedTable::rows_fetched`] and [`ShardedTable::rows_read`].
    pub fn reset_timings(&mut self) {
        self.timings = Timings::default();
        self.rows_applied = 0;
        self.rows_fetched.set(0);
        self.rows_read.set(0);
    }

    /// Sets a hyper-parameter by name (WholeMemory's `set_parameter`); call it on every rank.
    pub fn set_parameter(&mut self, name: &str, value: f64) -> Result<(), ShardError> {
        Ok(self.shard.set_parameter(name, value)?)
    }

    /// Chooses what non-finite gradients do (refuse the step, or skip and count the inputs).
    pub fn set_non_finite_policy(&mut self, policy: NonFinitePolicy) {
        self.shard.set_non_finite_policy(policy);
    }

    /// Seeds stochastic rounding; the rank is mixed in so shards draw different bits.
    pub fn set_seed(&mut self, seed: u32) {
        self.shard
            .set_seed(seed ^ (self.comm.rank() as u32).wrapping_mul(0x9e37_79b9));
    }

    /// Inputs this rank dropped for non-finite gradients under `NonFinitePolicy::Skip`.
    pub fn skipped_inputs(&self) -> u64 {
        self.shard.skipped_inputs()
    }

    /// The optimizer's state names.
    pub fn state_names(&self) -> Vec<&'static str> {
        self.shard.state_names()
    }

    /// Agrees on every rank's input check: all ranks return the first rank's error, or all go on.
    fn agree(&self, verdict: Option<InputError>) -> Result<(), ShardError> {
        crate::agree::agree_on_input(self.comm, verdict)
    }

    fn check_ids(&self, ids: &[u32]) -> Option<InputError> {
        let rows = self.partition.rows() as u64;
        ids.iter()
            .find(|&&id| id as u64 >= rows)
            .map(|&id| InputError::IdOutOfRange {
                id: id as u64,
                rows,
            })
    }

    /// The whole table on `root`, assembled from bounded messages of at most `chunk_rows` rows per
    /// rank; `None` on the other ranks. A collective.
    pub fn gather_to_root(
        &self,
        root: usize,
        chunk_rows: usize,
    ) -> Result<Option<Vec<f32>>, ShardError> {
        let local = self.partition.local_rows(self.comm.rank());
        self.write_back_all()?;
        self.assemble(
            root,
            chunk_rows,
            |first, n| {
                if let Some(host) = &self.host {
                    let host = host.borrow();
                    let (bytes, dtype) = host.host_slot(Slot::Weights).expect("weights");
                    let dim = self.config().dim;
                    return Ok(dtype
                        .decode(&bytes[first * dim * dtype.size()..][..n * dim * dtype.size()]));
                }
                let rows: Vec<u32> = (first as u32..(first + n) as u32).collect();
                Ok(self.shard.gather(&rows)?)
            },
            local,
            self.config().dim,
        )
    }

    /// Optimizer state `name` of the whole table on `root` (per element: `rows × dim`; per row:
    /// `rows`), in bounded messages; `None` elsewhere. A collective.
    pub fn gather_state_to_root(
        &self,
        name: &str,
        root: usize,
        chunk_rows: usize,
    ) -> Result<Option<Vec<f32>>, ShardError> {
        let spec = self.config().optimizer.spec();
        let state = match &self.host {
            Some(host) => {
                // `read_rows` refuses names the optimizer does not have.
                self.shard.read_rows(Slot::State(name), &[])?;
                self.write_back_all()?;
                let host = host.borrow();
                let (bytes, dtype) = host.host_slot(Slot::State(name)).expect("checked");
                dtype.decode(bytes)
            }
            // `state` refuses names the optimizer does not have.
            None => self.shard.state(name)?,
        };
        let per_element = spec
            .states
            .iter()
            .any(|s| s.name == name && s.shape == StateShape::PerElement);
        let width = if per_element { self.config().dim } else { 1 };
        let local = self.partition.local_rows(self.comm.rank());
        self.assemble(
            root,
            chunk_rows,
            |first, n| Ok(state[first * width..(first + n) * width].to_vec()),
            local,
            width,
        )
    }

    fn assemble(
        &self,
        root: usize,
        chunk_rows: usize,
        read: impl Fn(usize, usize) -> Result<Vec<f32>, ShardError>,
        local: usize,
        width: usize,
    ) -> Result<Option<Vec<f32>>, ShardError> {
        let chunk = chunk_rows.max(1);
        let world = self.comm.world();
        let rounds = (0..world)
            .map(|r| self.partition.local_rows(r).div_ceil(chunk))
            .max()
            .unwrap_or(0);
        let mut full =
            (self.comm.rank() == root).then(|| vec![0.0f32; self.partition.rows() * width]);
        for round in 0..rounds {
            let first = (round * chunk).min(local);
            let n = chunk.min(local - first);
            let part = read(first, n)?;
            if let Some(parts) = self.comm.gather(root, &to_bytes(&part))? {
                let full = full.as_mut().expect("root");
                for (rank, bytes) in parts.iter().enumerate() {
                    let values: Vec<f32> = from_bytes(bytes);
                    for (k, row) in values.chunks_exact(width).enumerate() {
                        let global = self.partition.global(rank, round * chunk + k);
                        full[global * width..][..width].copy_from_slice(row);
                    }
                }
            }
        }
        Ok(full)
    }
}

/// What every rank must agree on, field by field (a mismatch names the fields that differ).
fn describe(spec: &ShardedTableSpec, partition: &Partition) -> Vec<(&'static str, String)> {
    let c = &spec.config;
    let mut fields = vec![
        ("rows", spec.rows.to_string()),
        ("dim", c.dim.to_string()),
        ("world", partition.world().to_string()),
        (
            "partition",
            format!("{} (digest {:x})", spec.scheme.name(), partition.digest()),
        ),
        ("optimizer", c.optimizer.to_string()),
        ("weight dtype", c.weight_dtype.to_string()),
        ("state dtype", c.state_dtype.to_string()),
        ("bias clock", format!("{:?}", c.bias_clock)),
        (
            "decoupled weight decay",
            c.decoupled_weight_decay.to_string(),
        ),
        ("stochastic rounding", c.stochastic_rounding.to_string()),
        ("state location", format!("{:?}", spec.state_location)),
        ("cache", format!("{:?}", spec.cache)),
        ("hyper-parameters of", spec.hyper.optimizer().to_string()),
    ];
    fields.extend(
        spec.hyper
            .iter()
            .map(|(name, value)| (name, value.to_string())),
    );
    fields
}
