//! `rowshard train`: a recipe (`--config FILE`, flags over it) planned for a registered model and
//! run by the library's [`fit`](rowshard::train::fit) over thread ranks or an MPI job, printing
//! as it goes ([`Report`]); `--metrics-json` writes the run's report.

mod report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use rowshard::data::Dataset;
use rowshard::recipe::Recipe;
use rowshard::train::FitReport;

use crate::registry::Registry;
pub use report::Report;

/// Arguments of `rowshard train`: a recipe's keys as flags, and the recipe they override.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Read the keys from this recipe (a TOML file; see recipes/); flags on the command line
    /// override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Every key of a recipe.
    #[command(flatten)]
    pub recipe: Recipe,
}

impl TrainArgs {
    /// The recipe: the file's (if any) with the flags over it.
    pub fn recipe(&self) -> Result<Recipe, Box<dyn std::error::Error>> {
        Ok(match &self.config {
            Some(path) => Recipe::from_file(path)?.overlay(&self.recipe),
            None => self.recipe.clone(),
        })
    }
}

/// Where the data set is: as given, or — for the default — the copy shipped beside the sources.
pub fn dataset_folder(given: Option<&Path>) -> PathBuf {
    let default = Path::new("datasets/umls");
    match given {
        Some(path) if path.exists() || path != default => path.to_path_buf(),
        _ if default.exists() => default.to_path_buf(),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/umls"),
    }
}

/// The model a recipe names (default: DistMult, dicee's UMLS settings).
pub fn model_name(recipe: &Recipe) -> &str {
    recipe.model.model.as_deref().unwrap_or("distmult")
}

/// Runs `rowshard train`.
pub fn run(args: TrainArgs, registry: &Registry) -> Result<(), Box<dyn std::error::Error>> {
    let began = Instant::now();
    let recipe = args.recipe()?;
    let entry = registry.find(model_name(&recipe))?;
    let folder = dataset_folder(recipe.data.dataset.as_deref());
    let data = Dataset::load_with(folder, recipe.evaluation.unseen.unwrap_or_default())?;
    let plan = entry.plan(&recipe, &data)?;
    let bars = recipe.run.progress;
    let report = entry.run(&data, &plan, &move |start| {
        Box::new(Report::start(start, bars, began)) as Box<dyn rowshard::train::Progress + '_>
    })?;
    if let (Some(report), Some(path)) = (report, &recipe.run.metrics_json) {
        write_metrics(path, &report)?;
    }
    Ok(())
}

/// Writes `report` as JSON to `path`, through a temporary file.
pub fn write_metrics(path: &Path, report: &FitReport) -> Result<(), Box<dyn std::error::Error>> {
    let json = serde_json::to_string_pretty(report)?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}
