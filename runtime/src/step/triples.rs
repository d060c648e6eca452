//! Negative sampling's steps: scored triples — each with its target, or in groups of a true
//! triple and its corruptions — through the scoring function's forward kernel, the loss and its
//! gradient with respect to each score on the host, back through the generated backward pass.

use cubecl::bytes::Bytes;

use super::relations::apply_relation_gradients;
use super::{StepReport, length_error};
use crate::agree::{agree_on_input, all_values, sum_f64};
use crate::error::{InputError, ShardError};
use crate::model::{ScoringFunction, ShardedModel};
use crate::objective::SampleLoss;
use crate::objective::host::{bce, sample_loss, sigmoid};

/// Binary cross-entropy of each triple against its target (1 for a true triple, 0 for a
/// corrupted one, or smoothed); the mean over the global batch's triples.
pub(super) fn with_targets<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    tails: &[u32],
    targets: &[f32],
) -> Result<StepReport, ShardError> {
    let bad_target = targets
        .iter()
        .position(|y| !(0.0..=1.0).contains(y))
        .map(|p| InputError::Target { position: p as u64 });
    let lengths = length_error(heads.len(), &[targets.len()]);
    scored(
        model,
        heads,
        relations,
        tails,
        lengths.or(bad_target),
        |scores, total| {
            let mut loss = 0.0f64;
            let upstream = scores
                .iter()
                .zip(targets)
                .map(|(&s, &y)| {
                    loss += bce(s as f64, y as f64);
                    ((sigmoid(s as f64) - y as f64) / total as f64) as f32
                })
                .collect();
            (loss, upstream)
        },
    )
}

/// `loss` over each group of a true triple followed by `per_positive` corruptions of it; the
/// mean over the global batch's groups.
pub(super) fn in_groups<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    tails: &[u32],
    per_positive: usize,
    loss: SampleLoss,
) -> Result<StepReport, ShardError> {
    let group = 1 + per_positive;
    let bad_groups = (!heads.len().is_multiple_of(group)).then_some(InputError::Groups {
        triples: heads.len() as u64,
        group: group as u64,
    });
    scored(
        model,
        heads,
        relations,
        tails,
        bad_groups,
        |scores, total| {
            let groups = total / group as u64;
            let (mut sum, mut s, mut g) = (0.0f64, vec![0.0; group], vec![0.0; group]);
            let mut upstream = Vec::with_capacity(scores.len());
            for chunk in scores.chunks(group) {
                s.iter_mut().zip(chunk).for_each(|(a, &b)| *a = b as f64);
                sum += sample_loss(loss, &s[..1], &s[1..], &mut g);
                upstream.extend(g.iter().map(|&x| (x / groups as f64) as f32));
            }
            // The report's loss is the mean over triples: per group, scaled back.
            (sum * group as f64, upstream)
        },
    )
}

/// A step on scored triples: `loss` turns the scores and the global number of triples into the
/// summed loss and each score's gradient (of the mean loss); `extra` is a verdict on the input
/// beyond its shape.
fn scored<S: ScoringFunction>(
    model: &mut ShardedModel<'_, S>,
    heads: &[u32],
    relations: &[u32],
    tails: &[u32],
    extra: Option<InputError>,
    loss: impl FnOnce(&[f32], u64) -> (f64, Vec<f32>),
) -> Result<StepReport, ShardError> {
    let n = heads.len();
    let verdict = length_error(n, &[relations.len(), tails.len()])
        .or(extra)
        .or_else(|| model.check_relations(relations));
    agree_on_input(model.comm, verdict)?;
    let total: u64 = all_values(model.comm, n as u64)?.iter().sum();
    if total == 0 {
        return Ok(StepReport::empty());
    }
    let ids: Vec<u32> = heads.iter().chain(tails).copied().collect();
    let rows = model.entities.lookup(&ids)?;
    let kernels = &model.kernels;
    let ent = kernels.upload_f32(rows);
    let positions: Vec<u32> = (0..2 * n as u32).collect();
    let triples = kernels.upload_triples(&positions[..n], relations, &positions[n..]);
    let rel = model.relation_rows();
    let scores = kernels.read(kernels.forward(&ent, &rel, &triples), n)?;
    let (loss, upstream) = loss(&scores, total);
    let upstream = kernels.client().create(Bytes::from_elems(upstream));
    let [dh, dr, dt] = kernels.backward(&ent, &rel, &triples, &upstream);
    let dim = model.spec.settings.dim;
    let mut grads = kernels.read(dh, n * dim)?;
    grads.extend(kernels.read(dt, n * dim)?);
    let dr = kernels.read(dr, n * model.relation_dim)?;
    let lr = model.spec.settings.entity.lr as f32;
    model.entities.apply_gradients(&ids, &grads, lr)?;
    apply_relation_gradients(model, relations, &dr)?;
    Ok(StepReport {
        loss: sum_f64(model.comm, loss)? / total as f64,
        examples: total,
    })
}
