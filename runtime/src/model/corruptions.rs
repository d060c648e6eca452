//! Losses over a true triple and its corruptions (negative sampling): the logistic loss with
//! self-adversarial weighting (Sun et al., 2019, RotatE), the softmax over the group, and the
//! margin ranking loss (Bordes et al., 2013, TransE). Computed on the host from the scores the
//! forward kernel returns; the gradients with respect to the scores go back through the
//! generated backward pass as any triple's.

/// A loss over groups of scores, each the true triple's first and then its corruptions'.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CorruptionLoss {
    /// `−log σ(s₀) − Σⱼ wⱼ log σ(−sⱼ)`: the logistic loss of the true triple plus the
    /// weighted logistic loss of its corruptions. The weights are the mean (`1/K`) without a
    /// temperature, and with temperature `α` the self-adversarial `softmax(α·sⱼ)` over the
    /// group's corruptions, held constant in the gradient (the RotatE paper's choice).
    Logistic {
        /// The self-adversarial temperature α, if any.
        adversarial: Option<f32>,
    },
    /// Softmax cross-entropy over the group, the true triple its class.
    Softmax,
    /// `(1/K) Σⱼ max(0, γ − s₀ + sⱼ)`: margin ranking against each corruption.
    Margin {
        /// The margin γ.
        margin: f32,
    },
}

/// `log(1 + eˣ)`, stable for large `|x|`.
pub(super) fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `σ(x)`, stable for large `|x|`.
pub(super) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

impl CorruptionLoss {
    /// The loss of one group of scores (the true triple's first) and its gradient with respect
    /// to each score, into `grad`.
    pub fn group(self, scores: &[f64], grad: &mut [f64]) -> f64 {
        let (s0, negatives) = (scores[0], &scores[1..]);
        let k = negatives.len();
        grad.iter_mut().for_each(|g| *g = 0.0);
        if k == 0 {
            return match self {
                CorruptionLoss::Logistic { .. } => {
                    grad[0] = sigmoid(s0) - 1.0;
                    softplus(-s0)
                }
                _ => 0.0,
            };
        }
        match self {
            CorruptionLoss::Logistic { adversarial } => {
                let weights: Vec<f64> = match adversarial {
                    None => vec![1.0 / k as f64; k],
                    Some(alpha) => {
                        let alpha = alpha as f64;
                        let top = negatives.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
                        let e: Vec<f64> = negatives
                            .iter()
                            .map(|&s| (alpha * (s - top)).exp())
                            .collect();
                        let sum: f64 = e.iter().sum();
                        e.iter().map(|x| x / sum).collect()
                    }
                };
                grad[0] = sigmoid(s0) - 1.0;
                let mut loss = softplus(-s0);
                for (j, (&s, w)) in negatives.iter().zip(weights).enumerate() {
                    loss += w * softplus(s);
                    grad[1 + j] = w * sigmoid(s);
                }
                loss
            }
            CorruptionLoss::Softmax => {
                let top = scores.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
                let sum: f64 = scores.iter().map(|&s| (s - top).exp()).sum();
                for (g, &s) in grad.iter_mut().zip(scores) {
                    *g = (s - top).exp() / sum;
                }
                grad[0] -= 1.0;
                top + sum.ln() - s0
            }
            CorruptionLoss::Margin { margin } => {
                let mut loss = 0.0;
                for (j, &s) in negatives.iter().enumerate() {
                    let violation = margin as f64 - s0 + s;
                    if violation > 0.0 {
                        loss += violation / k as f64;
                        grad[0] -= 1.0 / k as f64;
                        grad[1 + j] = 1.0 / k as f64;
                    }
                }
                loss
            }
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
            CorruptionLoss::Logistic { adversarial: None },
            CorruptionLoss::Logistic {
                adversarial: Some(1.0),
            },
            CorruptionLoss::Softmax,
            CorruptionLoss::Margin { margin: 1.5 },
        ];
        for loss in losses {
            let mut grad = [0.0; 5];
            loss.group(&scores, &mut grad);
            let frozen = |s: &[f64]| -> f64 {
                match loss {
                    CorruptionLoss::Logistic {
                        adversarial: Some(alpha),
                    } => {
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
                    _ => loss.group(s, &mut [0.0; 5]),
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
        let l = CorruptionLoss::Logistic {
            adversarial: Some(2.0),
        }
        .group(&[500.0, 400.0, -500.0], &mut grad);
        assert!(l.is_finite() && (l - 400.0).abs() < 1e-9, "{l}");
        assert!((grad[1] - 1.0).abs() < 1e-12 && grad[2] == 0.0, "{grad:?}");
    }
}
