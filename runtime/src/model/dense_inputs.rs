//! What the dense kernels read for a model: its queries and the rows they are scored against,
//! as they are for a score linear in the tail (`⟨q, t⟩`), or augmented for one quadratic in it
//! (`⟨[a, κ, c], [t, ‖t‖², 1]⟩`, see `augmented.rs`).

use std::cell::OnceCell;

use cubecl::bytes::Bytes;
use cubecl::prelude::Client;
use cubecl::server::Handle;

use super::scoring::{DeviceRows, ScoringFunction};
use super::sharded_model::ShardedModel;
use crate::error::ShardError;

/// Queries' values on the host: computed there, or left on the device and read the first time a
/// step asks for them — after the launches that do not need them are queued, and in the same
/// round trip as a read the step makes anyway where it can ([`HostQueries::pending`]).
pub(crate) struct HostQueries {
    values: OnceCell<Vec<f32>>,
    /// The buffer and its length, until read.
    device: Option<(Client, Handle, usize)>,
}

impl HostQueries {
    /// Values already on the host.
    pub fn given(values: Vec<f32>) -> Self {
        Self {
            values: OnceCell::from(values),
            device: None,
        }
    }

    /// The first `len` values of `handle`, not read yet.
    pub fn on_device(client: &Client, handle: Handle, len: usize) -> Self {
        Self {
            values: OnceCell::new(),
            device: Some((client.clone(), handle, len)),
        }
    }

    /// The read still to make, for a caller to batch with its own: hand what it read back to
    /// [`HostQueries::fill`].
    pub fn pending(&self) -> Option<(Handle, usize)> {
        match (&self.device, self.values.get()) {
            (Some((_, handle, len)), None) => Some((handle.clone(), *len)),
            _ => None,
        }
    }

    /// Keeps `values`, read by a caller from [`HostQueries::pending`].
    pub fn fill(&self, values: Vec<f32>) {
        let _ = self.values.set(values);
    }

    /// The values, read now if they are not yet.
    pub fn get(&self) -> Result<&[f32], ShardError> {
        if let Some(values) = self.values.get() {
            return Ok(values);
        }
        let (client, handle, len) = self.device.as_ref().expect("queries on the device");
        let mut read = rowshard_kernels::wait::read_f32(client, vec![(handle.clone(), *len)])?;
        Ok(self.values.get_or_init(|| read.remove(0)))
    }

    /// The values, owned.
    pub fn into_values(self) -> Result<Vec<f32>, ShardError> {
        self.get()?;
        Ok(self.values.into_inner().unwrap_or_default())
    }
}

/// A rank's queries in the dense kernels' layout.
pub(crate) struct DenseQueries {
    /// `q` (`dim` wide) or `q̃` (the augmented width), row-major: plain queries stay on the
    /// device until asked for.
    pub rows: HostQueries,
    /// Augmented queries only: the gradient of the offset `c(h, r)` with respect to the head
    /// rows fed and to the relation rows read (one row per query each), for the backward pass.
    pub offset_grads: Option<OffsetGrads>,
    /// Plain queries only: `rows` on the device, as the query kernel wrote them.
    pub device: Option<Handle>,
    /// Plain queries only: the head rows fed, on the device, with room after them for a row per
    /// query — the backward pass's tail rows, `∂loss/∂q` (see `back_through_queries`).
    pub heads: Option<DeviceRows>,
}

/// The gradient of augmented queries' offset `c(h, r)` at `t = 0`, a row per query.
pub(crate) struct OffsetGrads {
    /// With respect to the head rows fed.
    pub head: Vec<f32>,
    /// With respect to the relation rows read.
    pub relation: Vec<f32>,
}

/// Rows to score on the device in the dense kernels' layout.
pub(crate) struct DenseRows {
    /// The rows: in the table's dtype, or augmented in `f32`.
    pub table: Handle,
    /// Augmented rows only: the rows as read, `dim` wide in `f32` (to fold gradients back).
    pub plain: Option<Vec<f32>>,
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// The dense kernels' row width: the entity dim, or the augmented width.
    pub(crate) fn dense_width(&self) -> usize {
        self.augmented
            .map_or(self.spec.settings.dim, |form| form.width)
    }

    /// The queries of `head_rows` (as fed, `dim` wide each) and relations `relation_index` into
    /// `relation_rows`: the query kernel's `q`, or `[a, κ, c]` from the forward and backward
    /// kernels at a zero tail row. With `backward` (a training step), plain queries keep their
    /// head rows on the device with room for the backward pass's tails ([`DenseQueries::heads`]).
    pub(crate) fn dense_queries(
        &self,
        head_rows: &[f32],
        relation_rows: &DeviceRows,
        relation_index: &[u32],
        backward: bool,
    ) -> Result<DenseQueries, ShardError> {
        let dim = self.spec.settings.dim;
        let n = relation_index.len();
        let positions: Vec<u32> = (0..n as u32).collect();
        let Some(form) = self.augmented else {
            let room = if backward { n * dim } else { 0 };
            let ent = self.kernels.upload_f32_with_room(head_rows, room);
            let triples = self
                .kernels
                .upload_triples(&positions, relation_index, &positions);
            let q = self.kernels.query(&ent, relation_rows, &triples)?;
            return Ok(DenseQueries {
                rows: HostQueries::on_device(self.kernels.client(), q.clone(), n * dim),
                offset_grads: None,
                device: (n > 0).then_some(q),
                heads: backward.then_some(ent),
            });
        };
        // Every query's tail is the zero row after the heads.
        let mut rows = Vec::with_capacity((n + 1) * dim);
        rows.extend_from_slice(head_rows);
        rows.extend(std::iter::repeat_n(0.0, dim));
        let ent = self.kernels.upload_f32(rows);
        let zero = vec![n as u32; n];
        let triples = self
            .kernels
            .upload_triples(&positions, relation_index, &zero);
        let c = self.kernels.forward(&ent, relation_rows, &triples);
        let ones = self
            .kernels
            .client()
            .create(Bytes::from_elems(vec![1.0f32; n]));
        let [dh, dr, dt] = self.kernels.backward(&ent, relation_rows, &triples, &ones);
        let [c, a, dh, dr] = self.kernels.read_each([
            (c, n),
            (dt, n * dim),
            (dh, n * dim),
            (dr, n * self.relation_dim),
        ])?;
        Ok(DenseQueries {
            rows: HostQueries::given(form.queries(&a, &c)),
            offset_grads: Some(OffsetGrads {
                head: dh,
                relation: dr,
            }),
            device: None,
            heads: None,
        })
    }

    /// This rank's shard rows `rows` (local; `None`: the whole shard) for the dense kernels:
    /// on the device as they are, or read, augmented and uploaded.
    pub(crate) fn dense_rows(&self, rows: Option<&[u32]>) -> Result<DenseRows, ShardError> {
        let shard = self.entities.shard();
        let Some(form) = self.augmented else {
            return Ok(DenseRows {
                table: match rows {
                    None => shard.buffers().weights.clone(),
                    Some(rows) => shard.gather_on_device(rows)?,
                },
                plain: None,
            });
        };
        let plain = match rows {
            Some(rows) => shard.gather(rows)?,
            None => {
                let local = self.entities.partition().local_rows(self.comm.rank());
                shard.gather(&(0..local as u32).collect::<Vec<_>>())?
            }
        };
        let augmented = form.rows(&plain);
        let table = if augmented.is_empty() {
            self.kernels
                .client()
                .create(Bytes::from_elems(vec![0.0f32; form.width]))
        } else {
            self.kernels.client().create(Bytes::from_elems(augmented))
        };
        Ok(DenseRows {
            table,
            plain: Some(plain),
        })
    }
}
