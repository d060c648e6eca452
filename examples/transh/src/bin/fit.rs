//! TransH trained by the library, with a recipe built in code instead of a command line:
//! `train::run` starts the ranks and runs `fit` on each — the same loop, evaluation, early
//! stopping and best-model restore as `rowshard train`.
//!
//! Usage: `cargo run --release --bin transh-fit -- [DATASET_FOLDER]`.

use rowshard::data::Dataset;
use rowshard::recipe::Recipe;
use rowshard::train::{Event, FitReport, Progress, Start};
use transh::TransH;

/// Prints each evaluation, as a user's own reporter would.
struct Printer;

impl Progress for Printer {
    fn evaluated(
        &mut self,
        report: &rowshard::train::EpochReport,
        evaluation: &rowshard::train::Evaluation,
    ) {
        println!(
            "epoch {}: loss {:.4}, valid MRR {:.4}",
            report.epoch, report.loss, evaluation.valid.mrr
        );
    }

    fn event(&mut self, event: &Event) {
        if let Event::Restored { epoch, .. } = event {
            println!("restored the best model, after epoch {epoch}");
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let folder = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/umls").to_string());
    let data = Dataset::load(&folder)?;
    // The keys of a recipe file, set in code: negative sampling with the self-adversarial
    // loss, evaluation every two epochs, early stopping.
    let recipe = Recipe::from_args([
        "--mode=negsample",
        "--neg-ratio=16",
        "--loss=self-adversarial",
        "--optimizer=adam",
        "--lr=0.1",
        "--epochs=60",
        "--eval-every=5",
        "--patience=2",
    ])?;
    let plan = recipe.plan::<TransH>(&data, "transh")?;
    let report: Option<FitReport> = rowshard::train::run::<TransH>(&data, &plan, &|_: &Start| {
        Box::new(Printer) as Box<dyn Progress>
    })?;
    let report = report.expect("rank 0 reports");
    let test = report.test.expect("the plan tests the final model");
    println!(
        "TransH on {} ranks: best epoch {:?}, test MRR {:.4}, Hits@10 {:.4} ({} queries)",
        plan.run.ranks, report.best_epoch, test.mrr, test.hits10, test.queries
    );
    Ok(())
}
