//! An independent f64 model of every optimizer, written from the formulas in docs/optimizers.md (not from
//! the kernels). Weights are rounded to their storage dtype after each step, as a table stores
//! them; per-element states are rounded to their dtype the same way.

// Element loops index weights, states and gradients together, as the formulas do.
#![allow(clippy::needless_range_loop)]

use std::collections::BTreeMap;

use rowshard_kernels::{BiasClock, DType, HyperParams, Optimizer, StateShape, TableConfig};

/// A table of `rows × dim` f64 weights and named f64 states.
pub struct ReferenceTable {
    /// Configuration being modelled.
    pub config: TableConfig,
    /// Hyper-parameters.
    pub hyper: HyperParams,
    /// Weights.
    pub weights: Vec<f64>,
    /// States by name.
    pub states: BTreeMap<&'static str, Vec<f64>>,
    /// Steps applied.
    pub step: u64,
    rows: usize,
}

impl ReferenceTable {
    /// A table starting at `init`.
    pub fn new(config: TableConfig, hyper: HyperParams, rows: usize, init: &[f32]) -> Self {
        let weights = init
            .iter()
            .map(|&x| config.weight_dtype.round(x) as f64)
            .collect();
        let states = config
            .optimizer
            .spec()
            .states
            .iter()
            .map(|s| {
                let len = match s.shape {
                    StateShape::PerElement => rows * config.dim,
                    StateShape::PerRow => rows,
                };
                (s.name, vec![0.0; len])
            })
            .collect();
        Self {
            config,
            hyper,
            weights,
            states,
            step: 0,
            rows,
        }
    }

    fn hp(&self, name: &str) -> f64 {
        self.hyper.get(name).unwrap_or(0.0)
    }

    fn round_state(&self, x: f64) -> f64 {
        self.config.state_dtype.round(x as f32) as f64
    }

    /// One step: duplicate ids' gradients are summed, then each touched row is updated once.
    pub fn apply(&mut self, ids: &[u32], grads: &[f32], lr: f64) {
        let d = self.config.dim;
        self.step += 1;
        let mut summed: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for (i, &id) in ids.iter().enumerate() {
            let acc = summed.entry(id).or_insert_with(|| vec![0.0; d]);
            for k in 0..d {
                acc[k] += grads[i * d + k] as f64;
            }
        }
        let wd = self.hp("weight_decay");
        let eps = self.hp("eps");
        for (&row, g_raw) in &summed {
            let r = row as usize;
            let base = r * d;
            let decoupled = self.config.decoupled_weight_decay;
            let g: Vec<f64> = (0..d)
                .map(|k| {
                    if decoupled {
                        g_raw[k]
                    } else {
                        g_raw[k] + wd * self.weights[base + k]
                    }
                })
                .collect();
            match self.config.optimizer {
                Optimizer::Sgd => {
                    for k in 0..d {
                        self.weights[base + k] -= lr * g[k];
                    }
                }
                Optimizer::Adam => {
                    let (b1, b2) = (self.hp("beta1"), self.hp("beta2"));
                    let t_row = self.states["step"][r] + 1.0;
                    self.states.get_mut("step").unwrap()[r] = t_row;
                    let t = match self.config.bias_clock {
                        BiasClock::PerRow => t_row,
                        BiasClock::Global => self.step as f64,
                    };
                    for k in 0..d {
                        let m =
                            self.round_state(b1 * self.states["m"][base + k] + (1.0 - b1) * g[k]);
                        let v = self.round_state(
                            b2 * self.states["v"][base + k] + (1.0 - b2) * g[k] * g[k],
                        );
                        self.states.get_mut("m").unwrap()[base + k] = m;
                        self.states.get_mut("v").unwrap()[base + k] = v;
                        let m_hat = m / (1.0 - b1.powf(t));
                        let v_hat = v / (1.0 - b2.powf(t));
                        let w = &mut self.weights[base + k];
                        if decoupled {
                            *w -= lr * wd * *w;
                        }
                        *w -= lr * m_hat / (v_hat.sqrt() + eps);
                    }
                }
                Optimizer::AdaGrad => {
                    for k in 0..d {
                        let s = self.round_state(self.states["sum"][base + k] + g[k] * g[k]);
                        self.states.get_mut("sum").unwrap()[base + k] = s;
                        self.weights[base + k] -= lr * g[k] / (s.sqrt() + eps);
                    }
                }
                Optimizer::RowWiseAdaGrad => {
                    let mean = g.iter().map(|x| x * x).sum::<f64>() / d as f64;
                    let s = self.states["sum"][r] + mean;
                    self.states.get_mut("sum").unwrap()[r] = s;
                    for k in 0..d {
                        self.weights[base + k] -= lr * g[k] / (s.sqrt() + eps);
                    }
                }
                Optimizer::RmsProp => {
                    let a = self.hp("alpha");
                    for k in 0..d {
                        let v = self
                            .round_state(a * self.states["v"][base + k] + (1.0 - a) * g[k] * g[k]);
                        self.states.get_mut("v").unwrap()[base + k] = v;
                        self.weights[base + k] -= lr * g[k] / (v.sqrt() + eps);
                    }
                }
            }
            for k in 0..d {
                let w = &mut self.weights[base + k];
                *w = self.config.weight_dtype.round(*w as f32) as f64;
            }
        }
        debug_assert_eq!(self.weights.len(), self.rows * d);
    }
}

/// How far a stored value may be from the reference: `abs + rel * |reference|`.
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        // f32 math against f64 over a few steps.
        DType::F32 => (2e-6, 2e-5),
        // Two units in the last place: the kernel rounds an f32 result, the reference an f64 one.
        DType::F16 => (2e-5, 2.0 * 2f64.powi(-10)),
        DType::BF16 => (1e-4, 2.0 * 2f64.powi(-7)),
    }
}

/// Asserts `actual` matches `expected` within `tol`, naming the first element that does not.
pub fn assert_close(what: &str, actual: &[f32], expected: &[f64], tol: (f64, f64)) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let bound = tol.0 + tol.1 * e.abs();
        assert!(
            (a as f64 - e).abs() <= bound,
            "{what}[{i}]: got {a}, expected {e} (|diff| {} > {bound})",
            (a as f64 - e).abs()
        );
    }
}
