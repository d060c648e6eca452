//! The true tails of a shared-negatives step without batch negatives: scored apart from the
//! shared sample, by the rank that owns the query.
//!
//! The sample is every query's negatives and is scored with the dense kernels on each rank's
//! share of it; a query's positives are only its own, so they are looked up like its head
//! (`B` rows, not `B × candidates` scores) and scored on the host, `s = ⟨q, t⟩`, once a loss
//! has the queries there ([`Positives::scored`]: the softmax reads them with its statistics).
//! Their part of the loss and gradient: `∂loss/∂s` per positive, then `∂q += g·t` and `∂t = g·q`.

use crate::objective::host::{log_sum_exp, sigmoid, softplus};

/// This rank's queries' positives: each distinct true tail of each query, with its row.
pub(super) struct Positives<'a> {
    /// Query (position in this rank's batch) of each positive.
    queries: Vec<usize>,
    /// Its entity.
    ids: Vec<u32>,
    /// The rows, as looked up: each positive's in turn, or where [`Positives::at`] says.
    rows: &'a [f32],
    /// Which row of `rows` each positive's is (`None`: the positive's own position).
    at: Option<Vec<usize>>,
    /// Positives of each query.
    counts: Vec<usize>,
    dim: usize,
}

/// [`Positives`] with their scores against the queries: what the losses read.
pub(super) struct ScoredPositives<'p, 'a> {
    positives: &'p Positives<'a>,
    /// `⟨q, t⟩`.
    scores: Vec<f64>,
}

impl<'a> Positives<'a> {
    /// The positives `(queries, ids)` (each query's distinct true tails, from
    /// `IdLists::distinct`) of `n` queries, with their looked-up `rows` (`dim` wide).
    pub fn new(queries: Vec<usize>, ids: Vec<u32>, rows: &'a [f32], n: usize, dim: usize) -> Self {
        let mut counts = vec![0; n];
        for &b in &queries {
            counts[b] += 1;
        }
        Self {
            queries,
            ids,
            rows,
            at: None,
            counts,
            dim,
        }
    }

    /// These positives with their rows at `at` (a row of `rows` each) instead of one after
    /// another: the merged 1vsAll pairs' true tails, which are their partners' heads.
    pub fn at(mut self, at: Vec<usize>) -> Self {
        self.at = Some(at);
        self
    }

    /// Positive `p`'s row.
    fn row(&self, p: usize) -> &[f32] {
        let i = self.at.as_ref().map_or(p, |at| at[p]);
        &self.rows[i * self.dim..(i + 1) * self.dim]
    }

    /// Scores each positive against its query in `q` (the `n` queries, `dim` wide).
    pub fn scored(&self, q: &[f32]) -> ScoredPositives<'_, 'a> {
        let dim = self.dim;
        let scores = self
            .queries
            .iter()
            .enumerate()
            .map(|(p, &b)| {
                let t = self.row(p);
                let q = &q[b * dim..(b + 1) * dim];
                q.iter().zip(t).map(|(&x, &y)| x as f64 * y as f64).sum()
            })
            .collect();
        ScoredPositives {
            positives: self,
            scores,
        }
    }

    /// Adds `g·t` of each positive to its query's gradient in `dq` (this rank's queries) and
    /// returns the positives' ids and gradients `g·q`.
    pub fn backward(&self, grads: &[f64], q: &[f32], dq: &mut [f32]) -> (Vec<u32>, Vec<f32>) {
        let dim = self.dim;
        let mut dt = Vec::with_capacity(self.ids.len() * dim);
        for (p, (&b, &g)) in self.queries.iter().zip(grads).enumerate() {
            self.add_to_query(p, b, g, dq);
            dt.extend(
                q[b * dim..(b + 1) * dim]
                    .iter()
                    .map(|&x| (g * x as f64) as f32),
            );
        }
        (self.ids.clone(), dt)
    }

    /// [`Positives::backward`] for positives whose rows lie at [`Positives::at`]: each one's
    /// gradient `g·q` is added to row `at[p]` of `onto` (a row per row of `rows`) instead of
    /// being returned.
    pub fn backward_onto(&self, grads: &[f64], q: &[f32], dq: &mut [f32], onto: &mut [f32]) {
        let dim = self.dim;
        for (p, (&b, &g)) in self.queries.iter().zip(grads).enumerate() {
            self.add_to_query(p, b, g, dq);
            let i = self.at.as_ref().map_or(p, |at| at[p]);
            for (d, &x) in onto[i * dim..(i + 1) * dim]
                .iter_mut()
                .zip(&q[b * dim..(b + 1) * dim])
            {
                *d += (g * x as f64) as f32;
            }
        }
    }

    /// `∂q += g·t` of positive `p` of query `b`.
    fn add_to_query(&self, p: usize, b: usize, g: f64, dq: &mut [f32]) {
        let dim = self.dim;
        for (d, &x) in dq[b * dim..(b + 1) * dim].iter_mut().zip(self.row(p)) {
            *d += (g * x as f64) as f32;
        }
    }
}

impl ScoredPositives<'_, '_> {
    /// Per query, `log Σ exp(s)` over its positives (`-∞` for none).
    pub fn log_sum_exp(&self) -> Vec<f64> {
        let mut out = vec![f64::NEG_INFINITY; self.positives.counts.len()];
        // A query's positives are consecutive (`IdLists::distinct` lists them query by query).
        let queries = &self.positives.queries;
        let mut p = 0;
        while p < queries.len() {
            let b = queries[p];
            let end = p + queries[p..].iter().take_while(|&&q| q == b).count();
            out[b] = log_sum_exp(self.scores[p..end].iter().map(|&s| (s, 1.0)));
            p = end;
        }
        out
    }

    /// The softmax cross-entropy's part: with `lse` the log-sum-exp of each query over the
    /// sample and its positives, the loss `−Σ s / |positives|` of each query and the gradient
    /// `(exp(s − lse) − 1/|positives|)·scale` of each positive.
    pub fn softmax(&self, lse: &[f64], scale: f64) -> (f64, Vec<f64>) {
        self.each(|b, s, share| (-share * s, ((s - lse[b]).exp() - share) * scale))
    }

    /// The logistic loss's part (PyTorch-BigGraph's: each query's positives and its negatives
    /// weigh the same): `softplus(−s) / |positives|` of each positive, times `scale`, and its
    /// gradient.
    pub fn logistic(&self, scale: f64) -> (f64, Vec<f64>) {
        self.each(|_, s, share| {
            let weight = scale * share;
            (weight * softplus(-s), weight * (sigmoid(s) - 1.0))
        })
    }

    /// The margin ranking loss's thresholds: with `k` the most positives of a query (at least
    /// 1), `k × padded` values where `[j · padded + b]` is `s₊ − γ` of query `b`'s `j`-th
    /// positive (in the order they were given), `+∞` past its positives; and per query the
    /// weight `1/|positives|` (0 without any, and past the queries).
    pub fn margin_thresholds(&self, margin: f32, padded: usize) -> (usize, Vec<f32>, Vec<f32>) {
        let k = self
            .positives
            .counts
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(1);
        let mut thresholds = vec![f32::INFINITY; k * padded];
        for (p, slot) in self.slots().into_iter().enumerate() {
            let b = self.positives.queries[p];
            thresholds[slot * padded + b] = (self.scores[p] - margin as f64) as f32;
        }
        let mut weights: Vec<f32> = self
            .positives
            .counts
            .iter()
            .map(|&c| if c == 0 { 0.0 } else { 1.0 / c as f32 })
            .collect();
        weights.resize(padded, 0.0);
        (k, thresholds, weights)
    }

    /// The margin ranking loss's gradients of the positives: `violations[j · padded + b]` pairs
    /// of query `b`'s `j`-th positive with a negative violate the margin (summed over the
    /// units and blocks), each with gradient `−scale / |positives|`.
    pub fn margin(&self, violations: &[f64], padded: usize, scale: f64) -> Vec<f64> {
        self.slots()
            .into_iter()
            .enumerate()
            .map(|(p, slot)| {
                let b = self.positives.queries[p];
                -scale * violations[slot * padded + b] / self.positives.counts[b] as f64
            })
            .collect()
    }

    /// Each positive's position among its query's positives.
    fn slots(&self) -> Vec<usize> {
        let mut next = vec![0; self.positives.counts.len()];
        self.positives
            .queries
            .iter()
            .map(|&b| {
                next[b] += 1;
                next[b] - 1
            })
            .collect()
    }

    /// The summed loss and the gradients of `f(query, score, 1/|the query's positives|)`, which
    /// gives a positive's (loss, gradient).
    fn each(&self, f: impl Fn(usize, f64, f64) -> (f64, f64)) -> (f64, Vec<f64>) {
        let mut loss = 0.0;
        let grads = self
            .positives
            .queries
            .iter()
            .zip(&self.scores)
            .map(|(&b, &s)| {
                let (l, g) = f(b, s, 1.0 / self.positives.counts[b] as f64);
                loss += l;
                g
            })
            .collect();
        (loss, grads)
    }
}
