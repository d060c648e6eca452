//! The losses' math on the host, in `f64`: the one home of the sigmoid, the softplus and the
//! log-sum-exp, and of each loss over one query's positives and negatives ([`sample_loss`]),
//! which negative sampling (a true triple and its corruptions) and shared negatives scored pair
//! by pair compute from the scores the forward kernel returns. Tests compare the device's losses
//! against these.

use super::loss::SampleLoss;

/// `log(1 + eˣ)`, stable for large `|x|`.
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `σ(x)`, stable for large `|x|`.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Binary cross-entropy of a logit `s` against the target `y`: `softplus(s) − y·s`.
pub fn bce(s: f64, y: f64) -> f64 {
    softplus(s) - y * s
}

/// `log Σ exp` of values given in parts, each `(max, Σ exp(x − max))` of some of them — one
/// value `x` is the part `(x, 1)`: the parts of one rank's shard, of every rank's, or of a
/// query's positives beside its sample, combined in the order given. `-∞` when nothing was
/// given (every part's max `-∞`).
pub fn log_sum_exp(parts: impl IntoIterator<Item = (f64, f64)> + Clone) -> f64 {
    let max = parts
        .clone()
        .into_iter()
        .fold(f64::NEG_INFINITY, |m, (x, _)| m.max(x));
    if max == f64::NEG_INFINITY {
        return max;
    }
    let mut sum = 0.0;
    for (x, s) in parts {
        sum += s * (x - max).exp();
    }
    max + sum.ln()
}

/// The loss of one query over the scores `pos` of its positives and `neg` of its negatives, and
/// its gradient with respect to each score into `grads` (`pos`'s, then `neg`'s).
pub fn sample_loss(loss: SampleLoss, pos: &[f64], neg: &[f64], grads: &mut [f64]) -> f64 {
    let (dpos, dneg) = grads.split_at_mut(pos.len());
    let share = 1.0 / pos.len().max(1) as f64;
    let logistic_positives = |dpos: &mut [f64]| {
        for (g, &s) in dpos.iter_mut().zip(pos) {
            *g = (sigmoid(s) - 1.0) * share;
        }
        pos.iter().map(|&s| softplus(-s)).sum::<f64>() * share
    };
    match loss {
        SampleLoss::Logistic => {
            let mean = 1.0 / neg.len().max(1) as f64;
            for (g, &s) in dneg.iter_mut().zip(neg) {
                *g = sigmoid(s) * mean;
            }
            logistic_positives(dpos) + neg.iter().map(|&s| softplus(s)).sum::<f64>() * mean
        }
        SampleLoss::SelfAdversarial { temperature } => {
            let alpha = temperature as f64;
            let top = neg.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let weights: Vec<f64> = neg.iter().map(|&s| (alpha * (s - top)).exp()).collect();
            let sum: f64 = weights.iter().sum();
            let mut total = logistic_positives(dpos);
            for ((g, &s), w) in dneg.iter_mut().zip(neg).zip(&weights) {
                let p = w / sum;
                *g = p * sigmoid(s);
                total += p * softplus(s);
            }
            total
        }
        SampleLoss::Softmax => {
            let top = pos
                .iter()
                .chain(neg)
                .fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let sum: f64 = pos.iter().chain(neg).map(|&s| (s - top).exp()).sum();
            for (g, &s) in grads.iter_mut().zip(pos.iter().chain(neg)) {
                *g = (s - top).exp() / sum;
            }
            for g in &mut grads[..pos.len()] {
                *g -= share;
            }
            top + sum.ln() - pos.iter().sum::<f64>() * share
        }
        SampleLoss::Margin { margin } => {
            let weight = share / neg.len().max(1) as f64;
            grads.iter_mut().for_each(|g| *g = 0.0);
            let (dpos, dneg) = grads.split_at_mut(pos.len());
            let mut total = 0.0;
            for (gp, &p) in dpos.iter_mut().zip(pos) {
                for (gn, &s) in dneg.iter_mut().zip(neg) {
                    let violation = margin as f64 - p + s;
                    if violation > 0.0 {
                        total += violation * weight;
                        *gp -= weight;
                        *gn += weight;
                    }
                }
            }
            total
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gradient against central differences of the loss, with the self-adversarial weights
    /// held at their values (they are constants of the gradient by definition).
    #[test]
    fn gradients_are_finite_differences_of_the_loss() {
        let scores = [0.7, -1.3, 2.1, 0.4, -0.2];
        let losses = [
            SampleLoss::Logistic,
            SampleLoss::SelfAdversarial { temperature: 1.0 },
            SampleLoss::Softmax,
            SampleLoss::Margin { margin: 1.5 },
        ];
        for loss in losses {
            let mut grad = [0.0; 5];
            sample_loss(loss, &scores[..1], &scores[1..], &mut grad);
            let frozen = |s: &[f64]| -> f64 {
                match loss {
                    SampleLoss::SelfAdversarial { temperature: alpha } => {
                        // Weights from the unperturbed scores.
                        let neg = &scores[1..];
                        let e: Vec<f64> = neg.iter().map(|&x| (alpha as f64 * x).exp()).collect();
                        let z: f64 = e.iter().sum();
                        softplus(-s[0])
                            + s[1..]
                                .iter()
                                .zip(&e)
                                .map(|(&x, w)| w / z * softplus(x))
                                .sum::<f64>()
                    }
                    _ => sample_loss(loss, &s[..1], &s[1..], &mut [0.0; 5]),
                }
            };
            for i in 0..5 {
                let h = 1e-6;
                let (mut up, mut down) = (scores, scores);
                up[i] += h;
                down[i] -= h;
                let fd = (frozen(&up) - frozen(&down)) / (2.0 * h);
                assert!(
                    (fd - grad[i]).abs() < 1e-6,
                    "{loss:?} score {i}: {fd} vs {}",
                    grad[i]
                );
            }
        }
        // Self-adversarial weights favour the hardest corruption; stable for scores of ±500.
        let mut grad = [0.0; 3];
        let l = sample_loss(
            SampleLoss::SelfAdversarial { temperature: 2.0 },
            &[500.0],
            &[400.0, -500.0],
            &mut grad,
        );
        assert!(l.is_finite() && (l - 400.0).abs() < 1e-9, "{l}");
        assert!((grad[1] - 1.0).abs() < 1e-12 && grad[2] == 0.0, "{grad:?}");
    }
}
