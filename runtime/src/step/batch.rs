//! A batch of queries over the ranks, before a dense or per-pair step scores it: checked on every
//! rank (refused on all if bad on any), this rank's queries placed in the global batch, and every
//! rank's label lists gathered where a step needs them.

use super::length_error;
use crate::agree::{agree_on, agree_on_input, all_values};
use crate::comm::{from_bytes, to_bytes};
use crate::error::{InputError, ShardError};
use crate::id_lists::IdLists;
use crate::model::{ScoringFunction, ShardedModel};
use crate::negatives::{SharedSample, describe_ids};

/// Where this rank's queries lie in the global batch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Placed {
    /// The global position of this rank's first query.
    pub offset: usize,
    /// Queries in the global batch.
    pub total: usize,
}

/// Checks this rank's queries — their lengths, relations and ids, the shared negatives' ids,
/// a true entity for each query when `needs_labels` (the softmax) — and refuses bad input on
/// every rank; makes every rank agree on the shared negatives; places the queries. `None` for
/// an empty global batch. A collective.
pub(super) fn place<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    labels: &IdLists,
    shared: Option<SharedSample>,
    needs_labels: bool,
) -> Result<Option<Placed>, ShardError> {
    let n = heads.len();
    let entities = model.spec.entities;
    let verdict = length_error(n, &[relations.len(), labels.len()])
        .or_else(|| model.check_relations(relations))
        .or_else(|| {
            heads
                .iter()
                .chain(labels.all_ids())
                .chain(shared.map_or(&[][..], |s| s.lists.all_ids()))
                .find(|&&id| id as usize >= entities)
                .map(|&id| InputError::IdOutOfRange {
                    id: id as u64,
                    rows: entities as u64,
                })
        })
        .or_else(|| {
            needs_labels
                .then(|| (0..n).find(|&b| labels.get(b).is_empty()))
                .flatten()
                .map(|b| InputError::NoLabels { position: b as u64 })
        });
    agree_on_input(model.comm, verdict)?;
    if let Some(shared) = shared {
        let what = format!(
            "{} in {} lists, chunks of {} queries, batch negatives: {}",
            describe_ids(shared.lists.all_ids()),
            shared.lists.len(),
            shared.chunk,
            shared.batch
        );
        agree_on(model.comm, &[("the shared negatives", what)])?;
    }
    let counts = all_values(model.comm, n as u64)?;
    let total = counts.iter().sum::<u64>() as usize;
    if total == 0 {
        return Ok(None);
    }
    let offset = counts[..model.comm.rank()].iter().sum::<u64>() as usize;
    if let Some(shared) = shared {
        // The lists are the same on every rank (agreed), so every rank refuses alike.
        let chunks = shared.chunks(total).len();
        if shared.lists.len() != chunks {
            let error = InputError::NegativeChunks {
                lists: shared.lists.len() as u64,
                chunks: chunks as u64,
            };
            return Err(ShardError::BadInput { rank: 0, error });
        }
    }
    Ok(Some(Placed { offset, total }))
}

/// Every rank's label lists, in rank order. A collective.
pub(super) fn gather_labels<S: ScoringFunction>(
    model: &ShardedModel<'_, S>,
    labels: &IdLists,
) -> Result<IdLists, ShardError> {
    let mut all = IdLists::new();
    for part in model.comm.all_gather(&to_bytes(&labels.encode()))? {
        all.extend_encoded(&from_bytes::<u32>(&part));
    }
    Ok(all)
}
