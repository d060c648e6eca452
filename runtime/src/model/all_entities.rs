//! A step that scores queries against every entity — KvsAll and 1vsAll — model-parallel.
//!
//! Each rank maps its queries `(h, r)` through the query kernel to `q` (the score is `⟨q, t⟩`),
//! every rank's `q` are gathered, and each rank scores all of them against its own shard with
//! the dense kernels: the loss is fused into the score tiles, the true entities' targets are
//! corrected on the device from the label lists, the shard's gradient stays local and the
//! queries' gradient is all-reduced and sent back through the query's backward pass. With the
//! softmax cross-entropy each rank first reduces its shard to a (max, Σ exp) per query, the ranks
//! combine those into the log-sum-exp, and each computes its shard's gradient from it. No rank
//! holds a whole score row or the whole table.
//!
//! With shared negatives the same step runs against a sample instead of every entity. With batch
//! negatives (the batch's true tails among the candidates) each rank gathers its share of the
//! sampled ids and of the true tails into one block and scores everyone's queries against it.
//! Without, each query's positives are scored apart, and each rank scores only its own queries
//! against the whole sample, looked up with its heads — data-parallel, as PyTorch-BigGraph's
//! workers: no queries gathered, no gradient of them all-reduced, every log-sum-exp local. Either
//! way the sample's gradient goes back through the sparse optimizer step like any looked-up
//! row's, summed over the ranks at the rows' owners.
//!
//! Each loss's launches over the blocks of candidate rows are in `candidate_losses.rs`; a score
//! the dense kernels cannot take meets shared negatives pair by pair (`per_pair.rs`).

use cubecl::bytes::Bytes;

use super::candidate_losses::{CandidateScoring, LossParts, block_labels, blocks};
use super::candidates::{CandidateGradient, Scored, SharedNegatives, describe_ids};
use super::dense_inputs::{DenseQueries, HostQueries, OffsetGrads};
use super::dropout::{DropoutSide, Masks};
use super::id_lists::IdLists;
use super::regularize::StepRows;
use super::sample_step::SampleChunk;
use super::scoring::DeviceRows;
use super::scoring::ScoringFunction;
use super::sharded_model::ShardedModel;
use super::train::{EntityLoss, StepReport, length_error};
use crate::agree::{agree_on, agree_on_input, all_values, sum_f64};
use crate::comm::{all_gather_values, from_bytes, to_bytes};
use crate::error::{InputError, ShardError};
use crate::sharded::DeviceGradient;

impl<S: ScoringFunction> ShardedModel<'_, S> {
    /// One step of `loss` on this rank's queries against every entity, or against the shared
    /// candidates: `negatives` and the global batch's true tails. A collective.
    pub(super) fn train_all_entities(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        loss: EntityLoss,
        negatives: Option<SharedNegatives>,
    ) -> Result<StepReport, ShardError> {
        let apart = self.check_entity_step(heads, relations, labels, loss, negatives)?;
        // Each rank scores only its own queries against shared negatives, chunk by chunk —
        // unless batch negatives make the whole batch one chunk of candidates.
        let local = apart || negatives.is_some_and(|s| s.batch && s.chunk > 0);
        let n = heads.len();
        let counts = all_values(self.comm, n as u64)?;
        let total = counts.iter().sum::<u64>() as usize;
        if total == 0 {
            return Ok(StepReport {
                loss: 0.0,
                examples: 0,
            });
        }
        let rank = self.comm.rank();
        let offset = counts[..rank].iter().sum::<u64>() as usize;
        if let Some(shared) = negatives {
            // The lists are the same on every rank (checked), so every rank refuses alike.
            let chunks = shared.chunks(total);
            if shared.lists.len() != chunks.len() {
                let error = InputError::NegativeChunks {
                    lists: shared.lists.len() as u64,
                    chunks: chunks.len() as u64,
                };
                return Err(ShardError::BadInput { rank: 0, error });
            }
            if local {
                // Each rank scores its own queries, chunk by chunk (`sample_step.rs`); with
                // batch negatives a chunk's candidates are its sample and its queries' true
                // tails, every rank's.
                if !apart && self.dense.is_none() {
                    return Err(ShardError::Unsupported(format!(
                        "batch negatives for {}, whose score the dense kernels cannot take \
                         ({}); train it with uniform or degree negatives alone",
                        S::NAME,
                        self.not_dense()
                    )));
                }
                let labels_all = if apart {
                    IdLists::new()
                } else {
                    self.gather_labels(labels)?
                };
                let mine = offset..offset + n;
                let chunks: Vec<SampleChunk> = chunks
                    .iter()
                    .enumerate()
                    .filter_map(|(c, range)| {
                        let start = range.start.max(mine.start);
                        let end = range.end.min(mine.end);
                        (start < end).then(|| {
                            let mut sample = shared.lists.get(c).to_vec();
                            if !apart {
                                for b in range.clone() {
                                    sample.extend_from_slice(labels_all.get(b));
                                }
                            }
                            sample.sort_unstable();
                            sample.dedup();
                            SampleChunk {
                                queries: start - offset..end - offset,
                                sample,
                            }
                        })
                    })
                    .collect();
                return match self.dense.clone() {
                    Some(dense) => self.train_against_samples(
                        &dense, heads, relations, labels, loss, &chunks, apart, offset, total,
                    ),
                    // A score the dense kernels cannot take, pair by pair (`per_pair.rs`).
                    None => {
                        self.train_per_pair(heads, relations, labels, loss, &chunks, offset, total)
                    }
                };
            }
        }
        let Some(dense) = self.dense.clone() else {
            return Err(ShardError::Unsupported(format!(
                "training {} against every entity (KvsAll, 1vsAll) or shared negatives with \
                 batch negatives: {}; train it with negative sampling, or shared negatives \
                 without batch negatives (scored pair by pair)",
                S::NAME,
                self.not_dense()
            )));
        };
        let dim = self.spec.settings.dim;
        // The dense kernels' row width: `dim`, or the augmented rows' (`augmented.rs`).
        let width = self.dense_width();
        let client = self.kernels.client().clone();

        // Every rank scores everyone's queries against its shard, or its share of the
        // candidates (model-parallel: no rank holds a whole score row).
        let (mut inputs, _) = self.query_inputs(heads, relations, offset, &[])?;
        let DenseQueries {
            rows: q,
            offset_grads,
            ..
        } = self.queries_of(&mut inputs)?;
        let q_all = all_gather_values(self.comm, q.into_values()?)?;
        // Everyone's label lists: the targets among the rows scored here, and the true tails
        // this rank owns for the regularisers.
        let labels_all = self.gather_labels(labels)?;

        // Every query against this rank's candidates, in blocks of rows.
        let partition = self.entities.partition().clone();
        let candidates = self.candidates(negatives, &labels_all)?;
        let count = candidates.count;
        let queries = dense.upload_queries(&q_all, total);
        let q_all = HostQueries::given(q_all);
        let blocks = blocks(count, queries.padded);
        // Where a label lies among the scored rows.
        let row = |id: u32| {
            let (owner, at) = partition.locate(id);
            match &candidates.rows {
                _ if owner != rank => None,
                Scored::Shard => Some(at),
                Scored::Rows(rows) => rows.binary_search(&at).ok().map(|r| r as u32),
                Scored::Sample(_) => None,
            }
        };
        let targets = block_labels(&labels_all, row, &blocks, loss);
        // The true tails this rank owns, as local rows (the regularisers').
        let tails: Vec<u32> = targets
            .iter()
            .zip(&blocks)
            .flat_map(|(t, b)| t.rows.iter().map(move |&r| r + b.start as u32))
            .map(|r| candidates.local(r))
            .collect();
        // The candidates' gradient; for the whole shard with room after it for the rows the
        // step routes here: a head of any rank, a true tail or a distinct row of this rank's
        // (regularisers).
        let room = match candidates.rows {
            Scored::Shard => total + tails.len() + count,
            Scored::Rows(_) | Scored::Sample(_) => 0,
        };
        let dw = client.empty(((count + room) * width).max(1) * 4);
        let dq = if blocks.is_empty() {
            client.create(Bytes::from_elems(vec![0.0f32; width * queries.padded]))
        } else {
            dense.query_grad_buffer(&queries)
        };
        let LossParts { partial, scale, .. } = CandidateScoring {
            dense: &dense,
            comm: self.comm,
            queries: &queries,
            q: &q_all,
            candidates: &candidates,
            blocks: &blocks,
            targets: &targets,
            dw: &dw,
            dq: &dq,
            total,
            local: false,
            width,
        }
        .run(loss, None)?;
        let mut dq = dense.read_query_grad(dq, &queries)?;
        self.comm.all_reduce_sum(&mut dq)?;
        let dq = &mut dq[offset * width..(offset + n) * width];
        // Augmented rows' gradients fold back to the rows' (`augmented.rs`).
        let fold = |grads: Vec<f32>, rows: &[f32]| match self.augmented {
            Some(form) => form.fold_rows(&grads, rows),
            None => grads,
        };
        let dw = match (&self.augmented, &candidates.rows, &candidates.plain) {
            (Some(_), Scored::Shard, Some(plain)) => {
                let mut grads = fold(dense.read(dw, count * width)?, plain);
                grads.resize(((count + room) * dim).max(1), 0.0);
                client.create(Bytes::from_elems(grads))
            }
            _ => dw,
        };
        let candidate_grads = match candidates.ids(&partition, rank) {
            None => CandidateGradient::Device(&dw),
            Some(ids) => {
                let read = dense.read(dw.clone(), count * width)?;
                let grads = fold(read, candidates.plain.as_deref().unwrap_or_default());
                CandidateGradient::Host { ids, grads }
            }
        };
        self.finish_entity_step(
            heads,
            relations,
            inputs,
            dq,
            offset_grads,
            candidate_grads,
            &tails,
            total,
            partial * scale,
        )
    }

    /// The end of a step against every entity or shared negatives: this rank's queries'
    /// gradient `dq` — `∂q`, or `(∂a, ∂c)` of augmented queries — goes back through the queries
    /// and the candidates' gradient to their rows (`back_through_queries`). `rank_loss` is this
    /// rank's part of the loss, before the regularisers'.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_entity_step(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        inputs: QueryInputs,
        dq: &mut [f32],
        offset_grads: Option<OffsetGrads>,
        candidates: CandidateGradient,
        tails: &[u32],
        total: usize,
        rank_loss: f64,
    ) -> Result<StepReport, ShardError> {
        let (da, offset_grad) = match self.augmented {
            Some(form) => {
                let (da, dc) = form.split_queries(dq);
                (Some(da), offset_grads.map(|grads| (dc, grads)))
            }
            None => (None, None),
        };
        let penalty = self.back_through_queries(
            heads,
            relations,
            inputs,
            QueryGradient {
                dq: da.as_deref().unwrap_or(dq),
                offset: offset_grad,
            },
            candidates,
            tails,
            total,
        )?;
        Ok(StepReport {
            loss: sum_f64(self.comm, rank_loss + penalty)?,
            examples: total as u64,
        })
    }

    /// Refuses bad input (on any rank, on every rank) and settings the step cannot train; says
    /// whether the queries' true tails are scored apart from the negatives: shared negatives
    /// without batch negatives. A collective.
    fn check_entity_step(
        &self,
        heads: &[u32],
        relations: &[u32],
        labels: &IdLists,
        loss: EntityLoss,
        negatives: Option<SharedNegatives>,
    ) -> Result<bool, ShardError> {
        let n = heads.len();
        let entities = self.spec.entities;
        let smoothing = loss.smoothing();
        let verdict = length_error(n, &[relations.len(), labels.len()])
            .or_else(|| self.check_relations(relations))
            .or_else(|| {
                heads
                    .iter()
                    .chain(labels.all_ids())
                    .chain(negatives.map_or(&[][..], |s| s.lists.all_ids()))
                    .find(|&&id| id as usize >= entities)
                    .map(|&id| InputError::IdOutOfRange {
                        id: id as u64,
                        rows: entities as u64,
                    })
            })
            .or_else(|| {
                (!(0.0..1.0).contains(&smoothing)).then_some(InputError::Smoothing {
                    value: smoothing.to_bits() as u64,
                })
            })
            .or_else(|| match loss {
                EntityLoss::SoftmaxCrossEntropy { .. } => (0..n)
                    .find(|&b| labels.get(b).is_empty())
                    .map(|b| InputError::NoLabels { position: b as u64 }),
                EntityLoss::BinaryCrossEntropy { .. }
                | EntityLoss::SelfAdversarial { .. }
                | EntityLoss::Margin { .. } => None,
            });
        agree_on_input(self.comm, verdict)?;
        if let Some(shared) = negatives {
            let what = format!(
                "{} in {} lists, chunks of {} queries, batch negatives: {}",
                describe_ids(shared.lists.all_ids()),
                shared.lists.len(),
                shared.chunk,
                shared.batch
            );
            agree_on(self.comm, &[("the shared negatives", what)])?;
            if !shared.batch && smoothing > 0.0 {
                return Err(ShardError::Unsupported(
                    "label smoothing with shared negatives needs batch negatives (it spreads \
                     over the candidates, and without them each query has its own)"
                        .into(),
                ));
            }
        }
        // Without batch negatives each query's positives are scored apart from the sample.
        let apart = negatives.is_some_and(|s| !s.batch);
        if let EntityLoss::SelfAdversarial { temperature } = loss {
            if !apart {
                return Err(ShardError::Unsupported(
                    "self-adversarial weighting needs shared negatives without batch negatives \
                     (it weighs each query's negatives, apart from its true tails)"
                        .into(),
                ));
            }
            if !(temperature > 0.0 && temperature.is_finite()) {
                return Err(ShardError::Unsupported(format!(
                    "a self-adversarial temperature of {temperature} (it must be > 0)"
                )));
            }
        }
        if let EntityLoss::Margin { margin } = loss {
            if !apart {
                return Err(ShardError::Unsupported(
                    "margin ranking needs shared negatives without batch negatives (it ranks \
                     each query's true tails, scored apart, against its negatives)"
                        .into(),
                ));
            }
            if !(margin >= 0.0 && margin.is_finite()) {
                return Err(ShardError::Unsupported(format!(
                    "a margin of {margin} (it must be ≥ 0 and finite)"
                )));
            }
        }
        Ok(apart)
    }

    /// The query kernel's output for `inputs` (see `dense_queries`); the head rows it read stay
    /// on the device in `inputs`, for the backward pass.
    pub(super) fn queries_of(&self, inputs: &mut QueryInputs) -> Result<DenseQueries, ShardError> {
        let mut queries = self.dense_queries(
            inputs.fed_heads(),
            &inputs.relation_rows,
            &inputs.relation_index,
            true,
        )?;
        inputs.fed_on_device = queries.heads.take();
        Ok(queries)
    }

    /// Every rank's label lists, in rank order. A collective.
    pub(super) fn gather_labels(&self, labels: &IdLists) -> Result<IdLists, ShardError> {
        let mut all = IdLists::new();
        for part in self.comm.all_gather(&to_bytes(&labels.encode()))? {
            all.extend_encoded(&from_bytes::<u32>(&part));
        }
        Ok(all)
    }

    /// What the query kernel reads for this rank's queries: the head rows, and the relation
    /// rows — with dropout, masked copies (one relation row per query) and the masks. The rows
    /// of `also` are looked up in the same call (one exchange; an entity among both heads and
    /// `also` travels once) and returned beside.
    pub(super) fn query_inputs(
        &self,
        heads: &[u32],
        relations: &[u32],
        offset: usize,
        also: &[u32],
    ) -> Result<(QueryInputs, Vec<f32>), ShardError> {
        let n = heads.len();
        let dim = self.spec.settings.dim;
        let ids: Vec<u32> = heads.iter().chain(also).copied().collect();
        let mut head_rows = self.entities.lookup(&ids)?;
        let also_rows = head_rows.split_off(n * dim);
        let (p_head, p_relation) = self.dropout;
        if p_head == 0.0 && p_relation == 0.0 {
            let inputs = QueryInputs {
                head_rows_fed: None,
                fed_on_device: None,
                head_rows,
                relation_rows: self.relation_rows(),
                relation_index: relations.to_vec(),
                masks: None,
            };
            return Ok((inputs, also_rows));
        }
        let (seed, step) = (self.spec.seed, self.entities.step());
        let head_mask = Masks::new(p_head, seed, step, DropoutSide::Head, offset, n, dim);
        let relation_mask = Masks::new(
            p_relation,
            seed,
            step,
            DropoutSide::Relation,
            offset,
            n,
            self.relation_dim,
        );
        let mut head_rows_fed = head_rows.clone();
        head_mask.apply(&mut head_rows_fed);
        let mut rows = self.relations.gather(relations)?;
        relation_mask.apply(&mut rows);
        let inputs = QueryInputs {
            head_rows,
            head_rows_fed: Some(head_rows_fed),
            fed_on_device: None,
            relation_rows: self.kernels.upload_f32(rows),
            relation_index: (0..n as u32).collect(),
            masks: Some((head_mask, relation_mask)),
        };
        Ok((inputs, also_rows))
    }

    /// Applies the step: `dq` (this rank's queries' gradient) goes back through the query —
    /// `score(h, r, t) = ⟨q(h, r), t⟩`, so the backward kernel with `t = ∂loss/∂q` and an
    /// upstream of 1 gives `∂loss/∂h` and `∂loss/∂r` (and through dropout's masks); for an
    /// augmented query `score = c + ⟨a, t⟩ + κ‖t‖²` the same call gives `∂c + J_aᵀ∂a`, and
    /// `(∂c − 1)` times the offset's gradient completes it —, the regularisers add theirs, and
    /// the scored rows get theirs (`candidates`). `tails` are the true tails this rank owns
    /// (local rows). Returns this rank's part of the penalty.
    #[allow(clippy::too_many_arguments)]
    fn back_through_queries(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        mut inputs: QueryInputs,
        gradient: QueryGradient,
        candidates: CandidateGradient,
        tails: &[u32],
        total: usize,
    ) -> Result<f64, ShardError> {
        let dq = gradient.dq;
        let n = heads.len();
        let dim = self.spec.settings.dim;
        // The tails are `∂loss/∂q`, after the heads: written beside the head rows where the query
        // kernel left them, else uploaded with them.
        let ent = match inputs.fed_on_device.take() {
            Some(heads) if heads.len == 2 * n * dim => {
                self.kernels.write_f32(&heads.handle, n * dim, dq);
                heads
            }
            _ => {
                let mut rows = Vec::with_capacity(2 * n * dim);
                rows.extend_from_slice(inputs.fed_heads());
                rows.extend_from_slice(dq);
                self.kernels.upload_f32(rows)
            }
        };
        let positions: Vec<u32> = (0..2 * n as u32).collect();
        let triples =
            self.kernels
                .upload_triples(&positions[..n], &inputs.relation_index, &positions[n..]);
        let ones = self
            .kernels
            .client()
            .create(Bytes::from_elems(vec![1.0f32; n]));
        let [dh, dr, _] = self
            .kernels
            .backward(&ent, &inputs.relation_rows, &triples, &ones);
        let [mut grads, mut dr] = self
            .kernels
            .read_each([(dh, n * dim), (dr, n * self.relation_dim)])?;
        if let Some((dc, offset)) = &gradient.offset {
            let (dh0, dr0) = (&offset.head, &offset.relation);
            let rdim = self.relation_dim;
            for (b, &dc) in dc.iter().enumerate() {
                let more = dc - 1.0;
                let rows = [(&mut grads, dh0, dim), (&mut dr, dr0, rdim)];
                for (out, offset, width) in rows {
                    for (x, &o) in out[b * width..(b + 1) * width]
                        .iter_mut()
                        .zip(&offset[b * width..(b + 1) * width])
                    {
                        *x += more * o;
                    }
                }
            }
        }
        self.apply_query_gradients(
            heads, relations, &inputs, grads, dr, candidates, tails, total,
        )
    }

    /// Applies a step's gradients of the rows its queries read — `head_grads` and
    /// `relation_grads`, a row per query, through dropout's masks — with the regularisers'
    /// (`tails`: the true tails this rank owns, local rows) and the scored rows' (`candidates`).
    /// Returns this rank's part of the penalty. A collective.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_query_gradients(
        &mut self,
        heads: &[u32],
        relations: &[u32],
        inputs: &QueryInputs,
        mut grads: Vec<f32>,
        mut dr: Vec<f32>,
        candidates: CandidateGradient,
        tails: &[u32],
        total: usize,
    ) -> Result<f64, ShardError> {
        if let Some((head_mask, relation_mask)) = &inputs.masks {
            head_mask.apply(&mut grads);
            relation_mask.apply(&mut dr);
        }
        let (penalty, extra) = self.regularize(
            StepRows {
                heads,
                head_rows: &inputs.head_rows,
                head_grads: &mut grads,
                tails,
                relations,
                relation_grads: &mut dr,
            },
            total,
        )?;
        let mut ids = heads.to_vec();
        ids.extend_from_slice(&extra.ids);
        grads.extend_from_slice(&extra.grads);
        let mut relation_ids = relations.to_vec();
        relation_ids.extend_from_slice(&extra.relation_ids);
        dr.extend_from_slice(&extra.relation_grads);
        let lr = self.spec.settings.entity.lr as f32;
        match candidates {
            CandidateGradient::Device(handle) => {
                let rows = self.entities.partition().local_rows(self.comm.rank());
                let device = DeviceGradient { handle, rows };
                self.entities
                    .apply_gradients_with_device(&ids, &grads, device, lr)?;
            }
            CandidateGradient::Host {
                ids: candidate_ids,
                grads: candidate_grads,
            } => {
                ids.extend_from_slice(&candidate_ids);
                grads.extend_from_slice(&candidate_grads);
                self.entities.apply_gradients(&ids, &grads, lr)?;
            }
        }
        self.apply_relation_gradients(&relation_ids, &dr)?;
        Ok(penalty)
    }
}

/// The gradient of a rank's queries (see `back_through_queries`).
struct QueryGradient<'a> {
    /// `∂loss/∂q` (`∂loss/∂a` of augmented queries), a row per query.
    dq: &'a [f32],
    /// Augmented queries: `∂loss/∂c` per query, and the offset's gradient with respect to the
    /// head rows fed and the relation rows (`DenseQueries::offset_grads`).
    offset: Option<(Vec<f32>, OffsetGrads)>,
}

/// What the query kernel reads for a rank's queries (see `query_inputs`).
pub(super) struct QueryInputs {
    /// The head rows, as looked up.
    pub(super) head_rows: Vec<f32>,
    /// The head rows fed to the query, masked with dropout (`None`: as looked up).
    head_rows_fed: Option<Vec<f32>>,
    /// The head rows fed, on the device once the query kernel has read them, with room for a row
    /// per query after them (`DenseQueries::heads`).
    fed_on_device: Option<DeviceRows>,
    /// The relation rows fed to the query: the relation table, or masked copies.
    pub(super) relation_rows: DeviceRows,
    /// Which of `relation_rows` each query reads.
    pub(super) relation_index: Vec<u32>,
    /// The head and relation masks, with dropout.
    pub(super) masks: Option<(Masks, Masks)>,
}

impl QueryInputs {
    /// The head rows fed to the query.
    pub(super) fn fed_heads(&self) -> &[f32] {
        self.head_rows_fed.as_deref().unwrap_or(&self.head_rows)
    }
}
