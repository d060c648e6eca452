//! Synthetic knowledge graphs of any size, drawn from a planted model, so that training speed
//! *and* accuracy can be measured at scales no shipped data set has.
//!
//! The planted model is a block model with skewed degrees. Entity `e` sits in cluster
//! `e mod K` at popularity rank `e div K`; each relation `r` maps cluster `c` to cluster
//! `(c + shiftᵣ) mod K`. A triple draws its relation uniformly, its head from a uniform cluster
//! at a Zipf-distributed rank (exponent `s`: a few entities take most triples, as in real
//! graphs), and its tail, with probability `1 − noise`, from the head's image cluster at a Zipf
//! rank — otherwise uniformly from all entities. A model that learns the clusters, the
//! relations' shifts and the entities' popularity ranks well; the best filtered MRR is about
//! `(1 − noise) · Σⱼ pⱼ / (j + 1)` for the within-cluster Zipf probabilities `pⱼ` (0.2–0.3 with
//! clusters of 1,000 and `s = 1`). Triples are independent draws: a few repeat, and a few
//! valid and test triples are also training triples.
//!
//! Written straight in the prepared form ([`prepared`](super::prepared)): names `e…` and `r…`
//! zero-padded so that their sorted order is their numeric order.

use std::path::Path;

use super::binary::TripleWriter;
use super::dataset::{Split, vocabulary_digest};
use super::error::DataError;
use super::prepared::{ENTITIES, RELATIONS, bin_name, write_names};
use super::triple::Triple;
use crate::init::SplitMix64;

/// What to draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SynthSpec {
    /// Entities.
    pub entities: u32,
    /// Relations.
    pub relations: u32,
    /// Training triples.
    pub triples: u64,
    /// Valid triples, and as many test triples.
    pub held_out: u64,
    /// Seeds everything.
    pub seed: u64,
    /// Zipf exponent of the popularity ranks (0: uniform).
    pub zipf: f64,
    /// Clusters `K` (at most the entities).
    pub clusters: u32,
    /// Probability that a tail ignores the planted model.
    pub noise: f64,
}

impl SynthSpec {
    /// `entities`, `relations` and `triples` with the defaults: clusters of about 1,000
    /// entities, Zipf exponent 1, noise 0.1, valid and test of `min(5,000, triples / 20)`.
    pub fn new(entities: u32, relations: u32, triples: u64, seed: u64) -> Self {
        Self {
            entities,
            relations,
            triples,
            held_out: (triples / 20).min(5000),
            seed,
            zipf: 1.0,
            clusters: entities.div_ceil(1000).max(1),
            noise: 0.1,
        }
    }

    /// Why the spec cannot be drawn, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.entities == 0 || self.relations == 0 || self.triples == 0 {
            return Err("a graph needs at least one entity, relation and training triple".into());
        }
        if self.clusters == 0 || self.clusters > self.entities {
            return Err(format!(
                "clusters must be in 1..={} (the entities), not {}",
                self.entities, self.clusters
            ));
        }
        if !(0.0..=1.0).contains(&self.noise) {
            return Err(format!("noise must be in [0, 1], not {}", self.noise));
        }
        if !(self.zipf.is_finite() && self.zipf >= 0.0) {
            return Err(format!("the Zipf exponent must be ≥ 0, not {}", self.zipf));
        }
        Ok(())
    }
}

/// Draws triples from a [`SynthSpec`]'s planted model.
pub struct Planted {
    spec: SynthSpec,
    /// Cumulative popularity of the ranks within a cluster, normalised to end at 1.
    ranks: Vec<f64>,
    shifts: Vec<u32>,
    rng: SplitMix64,
}

impl Planted {
    /// The model of `spec`, drawing from stream `stream` (0 train, 1 valid, 2 test).
    pub fn new(spec: &SynthSpec, stream: u64) -> Self {
        let size = spec.entities.div_ceil(spec.clusters) as usize;
        let mut ranks = Vec::with_capacity(size);
        let mut total = 0.0;
        for j in 0..size {
            total += 1.0 / ((j + 1) as f64).powf(spec.zipf);
            ranks.push(total);
        }
        ranks.iter_mut().for_each(|c| *c /= total);
        let mut shift_rng = SplitMix64::new(spec.seed ^ 0x7368_6966_7473);
        let shifts = (0..spec.relations)
            .map(|_| (shift_rng.next_u64() % spec.clusters as u64) as u32)
            .collect();
        let rng = SplitMix64::new(spec.seed ^ (stream + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Self {
            spec: *spec,
            ranks,
            shifts,
            rng,
        }
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An entity of `cluster` at a Zipf rank (redrawn past the last entity).
    fn in_cluster(&mut self, cluster: u32) -> u32 {
        let k = self.spec.clusters as u64;
        loop {
            let u = self.uniform();
            let j = self
                .ranks
                .partition_point(|&c| c <= u)
                .min(self.ranks.len() - 1);
            let e = j as u64 * k + cluster as u64;
            if e < self.spec.entities as u64 {
                return e as u32;
            }
        }
    }

    /// The next triple.
    pub fn draw(&mut self) -> Triple {
        let s = self.spec;
        let r = (self.rng.next_u64() % s.relations as u64) as u32;
        let head_cluster = (self.rng.next_u64() % s.clusters as u64) as u32;
        let h = self.in_cluster(head_cluster);
        let t = if self.uniform() < s.noise {
            (self.rng.next_u64() % s.entities as u64) as u32
        } else {
            self.in_cluster((head_cluster + self.shifts[r as usize]) % s.clusters)
        };
        [h, r, t]
    }
}

/// Zero-padded names `prefix0…n−1` whose sorted order is their numeric order.
fn names(prefix: char, n: u32) -> impl Iterator<Item = String> {
    let width = n.saturating_sub(1).max(1).to_string().len();
    (0..n).map(move |i| format!("{prefix}{i:0width$}"))
}

/// Writes the graph of `spec` into `out` (created if needed) as a prepared folder.
pub fn write_synthetic(spec: &SynthSpec, out: &Path) -> Result<(), DataError> {
    std::fs::create_dir_all(out).map_err(|error| DataError::Io {
        file: out.to_path_buf(),
        error,
    })?;
    write_names(&out.join(ENTITIES), names('e', spec.entities))?;
    write_names(&out.join(RELATIONS), names('r', spec.relations))?;
    let digest = vocabulary_digest(names('e', spec.entities), names('r', spec.relations));
    for (stream, (split, count)) in [
        (Split::Train, spec.triples),
        (Split::Valid, spec.held_out),
        (Split::Test, spec.held_out),
    ]
    .into_iter()
    .enumerate()
    {
        let mut planted = Planted::new(spec, stream as u64);
        let mut w = TripleWriter::create(
            &out.join(bin_name(split)),
            spec.entities,
            spec.relations,
            digest,
        )?;
        for _ in 0..count {
            w.push(planted.draw())?;
        }
        w.finish()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;

    #[test]
    fn draws_a_skewed_planted_graph_that_loads() {
        let spec = SynthSpec::new(2000, 5, 20_000, 3);
        assert_eq!(spec.clusters, 2);
        let dir = std::env::temp_dir().join(format!("rowshard-synth-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_synthetic(&spec, &dir).unwrap();
        let d = Dataset::load(&dir).unwrap();
        assert_eq!((d.entities.len(), d.relations.len()), (2000, 5));
        assert_eq!(
            (d.train_len(), d.valid.len(), d.test.len()),
            (20_000, 1000, 1000)
        );
        assert_eq!(
            (d.entities[0].as_str(), d.entities[1999].as_str()),
            ("e0000", "e1999")
        );
        let mut train = Vec::new();
        d.read_train(0..20_000, &mut train).unwrap();
        // Planted: most tails sit in the head's cluster shifted by the relation's shift.
        let planted = Planted::new(&spec, 0);
        let on_model = train
            .iter()
            .filter(|&&[h, r, t]| (h + planted.shifts[r as usize]) % 2 == t % 2)
            .count();
        assert!(on_model > 20_000 * 9 / 10, "{on_model}");
        // Skewed: the most popular rank of each cluster (entities 0 and 1) heads far more than
        // its share.
        let top = train.iter().filter(|t| t[0] < 2).count();
        assert!(top > 20_000 / 20, "{top}");
        // The same seed draws the same graph.
        let mut again = Planted::new(&spec, 0);
        assert!(train.iter().take(100).all(|&t| t == again.draw()));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
