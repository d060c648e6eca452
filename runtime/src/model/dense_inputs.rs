//! What the dense kernels read for a model: its queries and the rows they are scored against,
//! as they are for a score linear in the tail (`⟨q, t⟩`), or augmented for one quadratic in it
//! (`⟨[a, κ, c], [t, ‖t‖², 1]⟩`, see `augmented.rs`).

use cubecl::bytes::Bytes;
use cubecl::server::Handle;

use super::scoring::{DeviceRows, ScoringFunction};
use super::sharded_model::ShardedModel;
use crate::error::ShardError;

/// A rank's queries in the dense kernels' layout.
pub(super) struct DenseQueries {
    /// `q` (`dim` wide) or `q̃` (the augmented width), row-major.
    pub rows: Vec<f32>,
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
pub(super) struct OffsetGrads {
    /// With respect to the head rows fed.
    pub head: Vec<f32>,
    /// With respect to the relation rows read.
    pub relation: Vec<f32>,
}

/// Rows to score on the device in the dense kernels' layout.
pub(super) struct DenseRows {
    /// The rows: in the table's dtype, or augmented in `f32`.
    pub table: Handle,
    /// Augmented rows only: the rows as read, `dim` wide in `f32` (to fold gradients back).
    pub plain: Option<Vec<f32>>,
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// The dense kernels' row width: the entity dim, or the augmented width.
    pub(super) fn dense_width(&self) -> usize {
        self.augmented
            .map_or(self.spec.settings.dim, |form| form.width)
    }

    /// Why the model does not score against every entity by dense products.
    pub(super) fn not_dense(&self) -> String {
        self.dense_refusal.clone().unwrap_or_default()
    }

    /// The queries of `head_rows` (as fed, `dim` wide each) and relations `relation_index` into
    /// `relation_rows`: the query kernel's `q`, or `[a, κ, c]` from the forward and backward
    /// kernels at a zero tail row. With `backward` (a training step), plain queries keep their
    /// head rows on the device with room for the backward pass's tails ([`DenseQueries::heads`]).
    pub(super) fn dense_queries(
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
                rows: self.kernels.read(q.clone(), n * dim)?,
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
            rows: form.queries(&a, &c),
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
    pub(super) fn dense_rows(&self, rows: Option<&[u32]>) -> Result<DenseRows, ShardError> {
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
