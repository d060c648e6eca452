//! A step against shared negatives without batch negatives, data-parallel as PyTorch-BigGraph's
//! workers: each rank scores only its own queries, each against its chunk's sample.
//!
//! A chunk is a run of consecutive queries of the global batch with its own sample of
//! negatives (the whole batch unless `--chunk` says otherwise); a rank's queries meet one chunk
//! or a few. Every chunk's sample is looked up in the same exchange as the rank's heads and its
//! queries' true tails, which are scored apart (`positives.rs`). Per chunk, the dense kernels
//! score the chunk's queries against its sample (`candidate_losses.rs`); every log-sum-exp is the
//! rank's own, no query is gathered and no query gradient all-reduced, and the sample's gradient
//! goes to its owners through the sparse optimizer step like any looked-up row's.

use std::ops::Range;

use cubecl::bytes::Bytes;
use rowshard_kernels::DenseKernels;

use super::candidate_losses::{CandidateScoring, LossParts, block_labels, blocks};
use super::candidates::CandidateGradient;
use super::dense_inputs::{DenseQueries, HostQueries};
use super::id_lists::IdLists;
use super::positives::Positives;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use super::train::{EntityLoss, StepReport};
use crate::error::ShardError;

/// One chunk of a rank's queries and the sample they are scored against.
pub(super) struct SampleChunk {
    /// The rank's queries in it (positions in the rank's batch).
    pub queries: Range<usize>,
    /// Its sample: global ids, each once, ascending.
    pub sample: Vec<u32>,
}

/// The positions `[first, last)` of `owners` (ascending) that lie in `queries`.
fn owned_by(owners: &[usize], queries: &Range<usize>) -> Range<usize> {
    owners.partition_point(|&b| b < queries.start)..owners.partition_point(|&b| b < queries.end)
}

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// The true tails of every rank's queries (`labels` on each) that this rank owns, as local
    /// rows, one per (query, distinct true tail): what an entity regulariser needs, and
    /// nothing without one. A collective when there is one.
    pub(super) fn owned_true_tails(&self, labels: &IdLists) -> Result<Vec<u32>, ShardError> {
        if self.regularization.entities.is_none() {
            return Ok(Vec::new());
        }
        let labels_all = self.gather_labels(labels)?;
        let (partition, rank) = (self.entities.partition(), self.comm.rank());
        let (_, ids) = labels_all.distinct();
        Ok(ids
            .iter()
            .map(|&id| partition.locate(id))
            .filter_map(|(owner, local)| (owner == rank).then_some(local))
            .collect())
    }

    /// One step of `loss` on this rank's queries, each chunk against its sample; `total` queries
    /// over all ranks. With the true tails `apart`, each query's are looked up and scored on
    /// their own; else they are among their chunk's sample (batch negatives) and the targets
    /// are corrected from the label lists. The input is checked already. A collective.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn train_against_samples(
        &mut self,
        dense: &DenseKernels,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        loss: EntityLoss,
        chunks: &[SampleChunk],
        apart: bool,
        offset: usize,
        total: usize,
    ) -> Result<StepReport, ShardError> {
        let n = heads.len();
        let dim = self.spec.settings.dim;
        let width = self.dense_width();
        let client = self.kernels.client().clone();
        // The true tails (when apart) and every chunk's sample, looked up with the heads.
        let (owners, positive_ids) = if apart {
            labels.distinct()
        } else {
            (Vec::new(), Vec::new())
        };
        let mut looked_up = positive_ids.clone();
        for chunk in chunks {
            looked_up.extend_from_slice(&chunk.sample);
        }
        let (mut inputs, mut positive_rows) =
            self.query_inputs(heads, relations, offset, &looked_up)?;
        let sample_rows = positive_rows.split_off(positive_ids.len() * dim);
        let DenseQueries {
            rows: q,
            offset_grads,
            device: q_device,
            ..
        } = self.queries_of(&mut inputs)?;
        let tails = self.owned_true_tails(labels)?;
        // A chunk that is all of the rank's queries scores them where the query kernel left
        // them, and reads them back only when its loss asks (`HostQueries`); several chunks
        // upload theirs from the host.
        let whole = match (&q_device, chunks) {
            (Some(rows), [chunk]) if chunk.queries == (0..n) => Some(rows.clone()),
            _ => None,
        };
        if whole.is_none() {
            q.get()?;
        }
        // The true tails as scored (augmented ones keep their rows as read, to fold their
        // gradients back).
        let scored_positives = match self.augmented {
            Some(form) => form.rows(&positive_rows),
            None => std::mem::take(&mut positive_rows),
        };
        let fold = |grads: Vec<f32>, rows: &[f32]| match self.augmented {
            Some(form) => form.fold_rows(&grads, rows),
            None => grads,
        };
        let mut dq = vec![0.0f32; n * width];
        let (mut ids, mut grads) = (Vec::new(), Vec::new());
        let mut rank_loss = 0.0;
        let mut sample_at = 0;
        for chunk in chunks {
            let r = chunk.queries.clone();
            let p = owned_by(&owners, &r);
            let positives = Positives::new(
                owners[p.clone()].iter().map(|&b| b - r.start).collect(),
                positive_ids[p.clone()].to_vec(),
                &scored_positives[p.start * width..p.end * width],
                r.len(),
                width,
            );
            let rows = &sample_rows[sample_at * dim..(sample_at + chunk.sample.len()) * dim];
            sample_at += chunk.sample.len();
            let candidates = self.sample_candidates(chunk.sample.clone(), rows);
            let count = candidates.count;
            // The queries as the query kernel left them when the chunk is all of them (a view
            // of part of a buffer may not be bound at any offset on every runtime), else
            // uploaded.
            let chunk_q;
            let (queries, q_chunk) = match &whole {
                Some(rows) => (dense.queries_on_device(rows.clone(), n), &q),
                None => {
                    let values = q.get()?[r.start * width..r.end * width].to_vec();
                    let queries = dense.upload_queries(&values, r.len());
                    chunk_q = HostQueries::given(values);
                    (queries, &chunk_q)
                }
            };
            let blocks = blocks(count, queries.padded);
            // The chunk's queries' true tails among its rows (none when they are apart).
            let own = if apart {
                IdLists::new()
            } else {
                let lists: Vec<&[u32]> = r.clone().map(|b| labels.get(b)).collect();
                IdLists::from_lists(&lists)
            };
            let row = |id: u32| chunk.sample.binary_search(&id).ok().map(|at| at as u32);
            let targets = block_labels(&own, row, &blocks, loss);
            let dw = client.empty((count * width).max(1) * 4);
            let dq_buffer = if blocks.is_empty() {
                client.create(Bytes::from_elems(vec![0.0f32; width * queries.padded]))
            } else {
                dense.query_grad_buffer(&queries)
            };
            let LossParts {
                partial,
                scale,
                positive_loss,
                positive_grads,
            } = CandidateScoring {
                dense,
                comm: self.comm,
                queries: &queries,
                q: q_chunk,
                candidates: &candidates,
                blocks: &blocks,
                targets: &targets,
                dw: &dw,
                dq: &dq_buffer,
                total,
                local: true,
                width,
            }
            .run(loss, apart.then_some(&positives))?;
            rank_loss += partial * scale + positive_loss;
            let dq_chunk = &mut dq[r.start * width..r.end * width];
            let q_chunk = q_chunk.get()?;
            // The chunk's ∂Q and ∂W, in one round trip.
            let dq_len = dense.query_grad_len(&queries);
            let mut read = dense.read_each(vec![(dq_buffer, dq_len), (dw, count * width)])?;
            let dw_read = read.pop().expect("two buffers read");
            dq_chunk.copy_from_slice(&dense.query_grad_rows(&read[0], &queries));
            ids.extend_from_slice(&chunk.sample);
            grads.extend(fold(
                dw_read,
                candidates.plain.as_deref().unwrap_or_default(),
            ));
            let (more_ids, more) = positives.backward(&positive_grads, q_chunk, dq_chunk);
            ids.extend(more_ids);
            // Rows as read exist only for augmented rows, which fold back through them.
            let plain = positive_rows
                .get(p.start * dim..p.end * dim)
                .unwrap_or_default();
            grads.extend(fold(more, plain));
        }
        self.finish_entity_step(
            heads,
            relations,
            inputs,
            &mut dq,
            offset_grads,
            CandidateGradient::Host { ids, grads },
            &tails,
            total,
            rank_loss,
        )
    }
}
