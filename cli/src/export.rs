//! `rowshard export`: a checkpoint's full entity and relation tables with their vocabularies.

use std::path::PathBuf;

use clap::Args;
use rowshard::ShardedModel;
use rowshard::checkpoint::{self, Manifest};
use rowshard::comm::threads;
use rowshard::data::Dataset;
use rowshard::model::{ModelDefaults, ModelSpec, OptimizerSettings, ScoringFunction};
use rowshard_kernels::{DType, Optimizer};

/// Arguments of `rowshard export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The checkpoint (a checkpoint folder, or a --checkpoint-dir: its latest).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Where to write embeddings.safetensors, entities.txt and relations.txt.
    #[arg(long)]
    pub out: PathBuf,
    /// The data set the model was trained on (default: the one the checkpoint names).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Thread ranks that load the checkpoint and gather it on rank 0.
    #[arg(long, default_value_t = 2)]
    pub ranks: usize,
}

/// Runs `rowshard export`; `find` gives the export of a model named in a checkpoint.
pub fn run(args: ExportArgs, find: &FindExport<'_>) -> Result<(), Box<dyn std::error::Error>> {
    let (manifest, folder) = checkpoint::read_manifest(&args.checkpoint)?;
    let dataset = args
        .dataset
        .clone()
        .unwrap_or_else(|| PathBuf::from(&manifest.state.dataset));
    let data = Dataset::load(&dataset)?;
    let job = ExportJob {
        args: &args,
        manifest: &manifest,
        folder: &folder,
        data: &data,
    };
    let export = find(&manifest.model).map_err(|e| format!("{}: {e}", folder.display()))?;
    export(&job)?;
    eprintln!(
        "rowshard export: {} ({} entities × {}, {} relations × {}) from {} to {}",
        manifest.model,
        manifest.entities,
        manifest.dim,
        manifest.relations,
        manifest.relation_dim,
        folder.display(),
        args.out.display()
    );
    Ok(())
}

/// What exporting a checkpoint needs, for any model type.
pub struct ExportJob<'a> {
    args: &'a ExportArgs,
    manifest: &'a Manifest,
    folder: &'a PathBuf,
    data: &'a Dataset,
}

/// The optimizer settings a checkpoint's table was trained with.
fn optimizer(entry: &checkpoint::OptimizerEntry) -> Result<OptimizerSettings, String> {
    let o = Optimizer::from_name(&entry.name)
        .ok_or_else(|| format!("unknown optimizer `{}`", entry.name))?;
    let d = DType::from_name(&entry.state_dtype)
        .ok_or_else(|| format!("unknown dtype `{}`", entry.state_dtype))?;
    Ok(OptimizerSettings::new(o).with_state_dtype(d))
}

/// The export of the model a checkpoint names.
pub type FindExport<'a> = dyn Fn(&str) -> Result<ExportFn, Box<dyn std::error::Error>> + 'a;

/// Exports a checkpoint of model `S`: what the registry runs for it.
pub type ExportFn = fn(&ExportJob) -> Result<(), Box<dyn std::error::Error>>;

/// Loads `job`'s checkpoint into model `S` over its ranks and writes its tables.
pub fn export<S: ScoringFunction + ModelDefaults>(
    job: &ExportJob,
) -> Result<(), Box<dyn std::error::Error>> {
    {
        let m = job.manifest;
        let mut spec = ModelSpec::of::<S>(m.entities, m.relations);
        spec.settings.dim = m.dim;
        spec.settings.dtype =
            DType::from_name(&m.dtype).ok_or_else(|| format!("unknown dtype `{}`", m.dtype))?;
        spec.settings.entity = optimizer(&m.entity_optimizer)?;
        spec.settings.relation = optimizer(&m.relation_optimizer)?;
        let results = threads::run(
            job.args.ranks.max(1),
            |comm| -> Result<(), rowshard::ShardError> {
                let client = rowshard::Backend::Cpu.client()?;
                let mut model = ShardedModel::<S>::new(comm, &client, &spec)?;
                let fail = |e: checkpoint::CheckpointError| {
                    rowshard::ShardError::Unsupported(e.to_string())
                };
                checkpoint::load(&mut model, job.folder, job.data.vocabulary_digest())
                    .map_err(fail)?;
                checkpoint::export(&model, job.data, &job.args.out).map_err(fail)
            },
        );
        for r in results {
            r?;
        }
        Ok(())
    }
}
