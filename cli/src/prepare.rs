//! `rowshard prepare`: the prepared (binary) form of a triples folder, which `rowshard train`
//! streams from disk a block at a time (see `rowshard::data::prepared`).

use std::path::PathBuf;

use clap::Args;

/// Arguments of `rowshard prepare`.
#[derive(Args, Debug)]
pub struct PrepareArgs {
    /// Folder with train.txt, valid.txt and test.txt.
    pub dataset: PathBuf,
    /// Folder to write entities.txt, relations.txt and train.bin, valid.bin, test.bin into.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `rowshard prepare`.
pub fn run(args: PrepareArgs) -> Result<(), Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    let p = rowshard::data::prepare(&args.dataset, &args.out)?;
    eprintln!(
        "rowshard prepare: {} → {}: {} entities, {} relations; {} / {} / {} triples (left out \
         {} valid and {} test triples with entities or relations unseen in training) in {:.1} s",
        args.dataset.display(),
        args.out.display(),
        p.entities,
        p.relations,
        p.train,
        p.valid,
        p.test,
        p.unseen.valid,
        p.unseen.test,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
