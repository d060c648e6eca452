//! What a step that scores queries against every entity scores them against on one rank: its
//! whole shard, its share of the step's shared candidates gathered into one block, or — when
//! each rank scores only its own queries — the whole shared sample, looked up.

use cubecl::bytes::Bytes;
use cubecl::server::Handle;

use crate::error::ShardError;
use crate::id_lists::IdLists;
use crate::model::{ScoringFunction, ShardedModel};
use crate::negatives::SharedSample;
use crate::partition::Partition;

/// Which rows a rank scores.
pub(super) enum Scored {
    /// Every row of its shard, in order.
    Shard,
    /// These local rows of its shard, ascending: its share of the step's candidates.
    Rows(Vec<u32>),
    /// The step's whole sample (global ids, ascending), every rank's rows: each rank scores
    /// only its own queries.
    Sample(Vec<u32>),
}

/// The rows one rank scores a step's queries against: its whole shard, its share of the step's
/// shared candidates, or the whole sample.
pub(super) struct Candidates {
    /// Which rows.
    pub rows: Scored,
    /// Their weights on the device in the dense kernels' layout: the shard's or the gathered
    /// rows in the table's dtype, or augmented (`dense_inputs.rs`).
    pub table: Handle,
    /// With augmented rows: the rows as read, in `f32` (their gradients fold back through them).
    pub plain: Option<Vec<f32>>,
    /// Rows this rank scores.
    pub count: usize,
    /// Rows every query is scored against, over all ranks: the `N` of the losses' means and
    /// of label smoothing.
    pub global: usize,
}

impl Candidates {
    /// The local row of candidate row `row` of this rank's shard (not of a sample).
    pub fn local(&self, row: u32) -> u32 {
        match &self.rows {
            Scored::Rows(rows) => rows[row as usize],
            Scored::Shard | Scored::Sample(_) => row,
        }
    }

    /// The global ids of the rows scored, unless they are the whole shard.
    pub fn ids(&self, partition: &Partition, rank: usize) -> Option<Vec<u32>> {
        match &self.rows {
            Scored::Shard => None,
            Scored::Rows(rows) => Some(
                rows.iter()
                    .map(|&l| partition.global(rank, l as usize) as u32)
                    .collect(),
            ),
            Scored::Sample(ids) => Some(ids.clone()),
        }
    }
}

/// The rows this rank scores a step's queries against: its shard, or — with shared
/// `negatives` — its share of the negatives (and of the global batch's true tails, with
/// batch negatives), gathered.
pub(super) fn candidates<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    negatives: Option<SharedSample>,
    labels: &IdLists,
) -> Result<Candidates, ShardError> {
    let rank = model.comm.rank();
    let partition = model.entities.partition();
    let Some(negatives) = negatives else {
        let count = partition.local_rows(rank);
        let dense = model.dense_rows(None)?;
        return Ok(Candidates {
            rows: Scored::Shard,
            table: dense.table,
            plain: dense.plain,
            count,
            global: model.spec.entities,
        });
    };
    let tails = if negatives.batch {
        labels.all_ids()
    } else {
        &[]
    };
    let mut ids: Vec<u32> = negatives
        .lists
        .all_ids()
        .iter()
        .chain(tails)
        .copied()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut rows: Vec<u32> = ids
        .iter()
        .filter_map(|&id| {
            let (owner, local) = partition.locate(id);
            (owner == rank).then_some(local)
        })
        .collect();
    rows.sort_unstable();
    model.entities.count_rows_read(rows.len());
    let dense = model.dense_rows(Some(&rows))?;
    Ok(Candidates {
        table: dense.table,
        plain: dense.plain,
        count: rows.len(),
        rows: Scored::Rows(rows),
        global: ids.len(),
    })
}

/// The whole shared `sample` (global ids, ascending, distinct) as the rows a rank scores
/// its own queries against: `rows` as looked up (`dim` each), in the dense kernels' layout.
pub(super) fn sample_candidates<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    sample: Vec<u32>,
    rows: &[f32],
) -> Candidates {
    // An empty sample still needs a buffer: one zero row, never read.
    let zero;
    let stored = if rows.is_empty() {
        zero = vec![0.0f32; model.spec.settings.dim];
        &zero[..]
    } else {
        rows
    };
    let (table, plain) = match model.augmented {
        Some(form) => {
            let augmented = Bytes::from_elems(form.rows(stored));
            (
                model.kernels.client().create(augmented),
                Some(rows.to_vec()),
            )
        }
        None => {
            let dtype = model.entities.config().weight_dtype;
            (model.kernels.upload_rows(stored, dtype).handle, None)
        }
    };
    Candidates {
        table,
        plain,
        count: sample.len(),
        global: sample.len(),
        rows: Scored::Sample(sample),
    }
}

/// The gradient of the rows a step scored on this rank.
pub(super) enum CandidateGradient<'a> {
    /// The whole shard's, on the device (its rows, and room after them).
    Device(&'a Handle),
    /// The shared candidates' (global ids, this rank's), read back.
    Host {
        /// Their ids.
        ids: Vec<u32>,
        /// Their gradients, a row each.
        grads: Vec<f32>,
        /// Gradients of the step's head rows as true tails of their partner queries (merged
        /// 1vsAll pairs, `pairs.rs`), a row per query, added to the heads' own.
        at_heads: Option<Vec<f32>>,
    },
}
