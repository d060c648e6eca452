//! `rowshard synth`: a synthetic knowledge graph from a planted model with skewed degrees,
//! written in the prepared form (see `rowshard::data::synth`).

use std::path::PathBuf;

use clap::Args;
use rowshard::data::{SynthSpec, write_synthetic};

/// Arguments of `rowshard synth`.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Entities.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub entities: u32,
    /// Relations.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub relations: u32,
    /// Training triples.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub triples: u64,
    /// Valid triples, and as many test triples (default: min(5,000, triples / 20)).
    #[arg(long)]
    pub held_out: Option<u64>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Zipf exponent of the entities' popularity (0: uniform degrees).
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Clusters of the planted model (default: one per 1,000 entities).
    #[arg(long)]
    pub clusters: Option<u32>,
    /// Probability that a tail ignores the planted model, in [0, 1].
    #[arg(long, default_value_t = 0.1)]
    pub noise: f64,
    /// Folder to write the prepared graph into.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `rowshard synth`.
pub fn run(args: SynthArgs) -> Result<(), Box<dyn std::error::Error>> {
    let mut spec = SynthSpec::new(args.entities, args.relations, args.triples, args.seed);
    spec.zipf = args.zipf;
    spec.noise = args.noise;
    if let Some(k) = args.clusters {
        spec.clusters = k;
    }
    if let Some(n) = args.held_out {
        spec.held_out = n;
    }
    spec.check()?;
    let start = std::time::Instant::now();
    write_synthetic(&spec, &args.out)?;
    eprintln!(
        "rowshard synth: {} entities ({} clusters, Zipf {}), {} relations, {} training and {} + \
         {} held-out triples (noise {}) → {} in {:.1} s",
        spec.entities,
        spec.clusters,
        spec.zipf,
        spec.relations,
        spec.triples,
        spec.held_out,
        spec.held_out,
        spec.noise,
        args.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
