//! `rowshard search`: hyper-parameter search over a space of recipe keys for a registered model
//! on a data set, within a budget of wall-clock time or trials.
//!
//! Quasi-random trials (a shifted Sobol sequence, `sobol.rs`; trial 0 is the base recipe's own
//! settings) meet successive halving over rungs of fewer epochs — and, on large graphs, samples
//! of the training triples, as GraSH does (Kochsiek et al., 2022) —; the best fraction of each
//! rung goes on, the last rung training as the base recipe does. Each trial is trained and
//! evaluated on valid by this program's own `train`, in a process of its own (`trial.rs`). The
//! search folder is the record (`ledger.rs`): started again, a search resumes where it stopped.
//! At the end it prints and writes a summary, writes the best settings as a recipe, and with
//! `--final` trains that recipe to the end and tests it — the only time the test split is
//! touched.

mod ledger;
mod sobol;
mod space;
mod trial;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use rowshard::data::Dataset;
use rowshard::recipe::Recipe;

use crate::registry::Registry;
use crate::train::{dataset_folder, model_name};
use ledger::{Header, Ledger, Record, Status, write_atomic};
use sobol::Sobol;
use space::Space;
use trial::Trial;

/// Arguments of `rowshard search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// The search space: a TOML file naming its base recipe and the keys to search (see
    /// recipes/search/).
    #[arg(long)]
    pub space: PathBuf,
    /// The budget: wall-clock time (90m, 2h, 600s) for the trials and the final training, or a
    /// number of first-rung trials (40).
    #[arg(long, value_parser = parse_budget)]
    pub budget: Budget,
    /// The search folder: its ledger, trials, summary and best recipe. A search started again
    /// with the same folder resumes.
    #[arg(long)]
    pub out: PathBuf,
    /// The recipe the trials start from, in place of the space's `base`.
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// Then train the best recipe to the end and evaluate it on test.
    #[arg(long = "final")]
    pub final_run: bool,
    /// Keys over the space's base recipe for every trial (`--metrics-json`: the final run's
    /// report).
    #[command(flatten)]
    pub recipe: Recipe,
}

/// What a search may spend.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// Seconds of wall-clock time, for every trial and the final training.
    Time(f64),
    /// First-rung trials.
    Trials(usize),
}

fn parse_budget(s: &str) -> Result<Budget, String> {
    let s = s.trim();
    let bad = || {
        format!("`{s}` is not a budget; expected a time (90m, 2h, 600s) or a number of trials (40)")
    };
    if let Ok(n) = s.trim_end_matches("trials").trim().parse::<usize>() {
        return if n > 0 {
            Ok(Budget::Trials(n))
        } else {
            Err(bad())
        };
    }
    let (number, unit) = s.split_at(s.len().saturating_sub(1));
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    match number.parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(Budget::Time(x * scale)),
        _ => Err(bad()),
    }
}

/// A rung of successive halving: what its trials are given.
#[derive(Clone, Copy, Debug)]
struct Rung {
    epochs: usize,
    train_fraction: f64,
}

/// The rungs for a base recipe of `epochs` epochs: rung `r` of `R` reduces the cost by
/// `keep^(R−1−r)`, in epochs alone, or — with `subset` — half in epochs and half in training
/// triples.
fn rungs(epochs: usize, settings: &space::Settings, subset: bool) -> Vec<Rung> {
    let r = settings.rungs;
    (0..r)
        .map(|i| {
            let reduction = settings.keep.powi((r - 1 - i) as i32);
            let (epoch_share, train_fraction) = match subset {
                true => (reduction.sqrt(), reduction.sqrt()),
                false => (reduction, 1.0),
            };
            Rung {
                epochs: ((epochs as f64 * epoch_share).round() as usize).clamp(1, epochs),
                train_fraction: if i + 1 == r { 1.0 } else { train_fraction },
            }
        })
        .collect()
}

/// Runs `rowshard search` for a model of `registry`.
pub fn run(args: SearchArgs, registry: &Registry) -> Result<(), Box<dyn std::error::Error>> {
    let space = Space::from_file(&args.space)?;
    let base = match &args.base {
        Some(path) => Recipe::from_file(path)?,
        None => space.base.clone(),
    };
    let mut base = base.overlay(&args.recipe);
    let final_metrics = base.run.metrics_json.take();
    base.run.checkpoint_dir = None;
    base.run.resume = None;
    let entry = registry.find(model_name(&base))?;
    let folder = dataset_folder(base.data.dataset.as_deref());
    let folder = std::fs::canonicalize(&folder).unwrap_or(folder);
    let data = Dataset::load_with(&folder, base.evaluation.unseen.unwrap_or_default())?;
    base = base.with("dataset", &folder.display().to_string())?;
    base = base.with("model", entry.name())?;
    // Every key at its extremes must plan, before anything trains.
    entry.plan(&base, &data)?;
    for d in &space.dimensions {
        for value in d.extremes() {
            let recipe = Space::apply(&base, &[(d.key.clone(), value.clone())])
                .map_err(|e| space.error_at(d, e))?;
            entry
                .plan(&recipe, &data)
                .map_err(|e| space.error_at(d, format!("{value}: {e}")))?;
        }
    }
    let epochs = entry.plan(&base, &data)?.config.epochs;
    let subset = data.train_len() > space.settings.subset_above;
    let rungs = rungs(epochs, &space.settings, subset);
    let mut header = Header {
        space: space.text.clone(),
        base: base.to_toml(),
        budget: format!("{:?}", args.budget),
        trials: None,
    };
    let mut ledger = Ledger::open(&args.out, &mut header)?;
    let program = std::env::current_exe()?;
    let sobol = Sobol::new(space.dimensions.len(), space.settings.seed);
    // Trial 0 is the base recipe: the searched keys it sets, as it sets them.
    let base_settings: Vec<(String, String)> = space
        .dimensions
        .iter()
        .filter_map(|d| Some((d.key.clone(), base_value(&base, &d.key)?)))
        .collect();
    let settings_of = |trial: usize| -> Vec<(String, String)> {
        match trial {
            0 => base_settings.clone(),
            t => space.settings_at(&sobol.point(t as u64 - 1)),
        }
    };
    let began = Instant::now();
    let spent = ledger.seconds();
    let elapsed = move || spent + began.elapsed().as_secs_f64();
    eprintln!(
        "rowshard search: {} on {} ({} training triples), {} keys, {} rungs ({}), budget {}; \
         folder {}",
        entry.name(),
        data.folder.display(),
        data.train_len(),
        space.dimensions.len(),
        rungs.len(),
        rungs
            .iter()
            .map(|r| format!("{} epochs on {:.0}%", r.epochs, 100.0 * r.train_fraction))
            .collect::<Vec<_>>()
            .join(", "),
        describe(args.budget),
        args.out.display(),
    );
    if !ledger.records.is_empty() {
        eprintln!(
            "  resuming: {} trials already ended ({:.0} s); a trial cut short runs again",
            ledger.records.len(),
            ledger.seconds()
        );
    }
    let trials_dir = args.out.join("trials");
    // Runs a trial that has not ended yet; says whether it ran.
    let run_trial = |ledger: &mut Ledger, trial: usize, rung: usize| -> Result<bool, String> {
        if ledger.find(trial, rung).is_some() {
            return Ok(false);
        }
        let settings = settings_of(trial);
        let mut recipe = Space::apply(&base, &settings)?;
        let r = rungs[rung];
        recipe = recipe
            .with("epochs", &r.epochs.to_string())
            .and_then(|x| x.with("test", "false"))
            .map_err(|e| e.to_string())?;
        if r.train_fraction < 1.0 {
            recipe = recipe
                .with("train-fraction", &r.train_fraction.to_string())
                .map_err(|e| e.to_string())?;
        }
        let record = Trial {
            trial,
            rung,
            settings: &settings,
            recipe: &recipe,
            epochs: r.epochs,
            train_fraction: r.train_fraction,
        }
        .run(&program, &trials_dir);
        ledger.push(record)?;
        Ok(true)
    };
    // The first rung's size: given, or from what the base recipe's first trial cost.
    let first_trials = match (args.budget, header.trials) {
        (_, Some(n)) => n,
        (Budget::Trials(n), None) => n,
        (Budget::Time(seconds), None) => {
            if run_trial(&mut ledger, 0, 0)? {
                report(&ledger, 0, 0, None, &rungs);
            }
            let cost = ledger.find(0, 0).map_or(1.0, |r| r.seconds.max(1.0));
            let rung_costs: f64 = rungs
                .iter()
                .enumerate()
                .map(|(i, r)| space.settings.keep.powi(i as i32) * relative(r, &rungs[0]))
                .sum();
            let reserve = if args.final_run {
                cost * relative(&rungs[rungs.len() - 1], &rungs[0])
            } else {
                0.0
            };
            let n = ((seconds - reserve) / (cost * rung_costs)).floor().max(1.0) as usize;
            n.min(space.settings.max_trials)
        }
    };
    ledger.decide(&mut header, first_trials)?;
    let out_of_time = |ledger: &Ledger, rung: &Rung| match args.budget {
        Budget::Time(seconds) => {
            let cost = ledger
                .records
                .iter()
                .find(|r| r.rung == 0)
                .map_or(0.0, |r| r.seconds * relative(rung, &rungs[0]));
            elapsed() + cost > seconds
        }
        Budget::Trials(_) => false,
    };
    let mut in_rung: Vec<usize> = (0..first_trials).collect();
    let mut stopped = false;
    for (rung, r) in rungs.iter().enumerate() {
        if rung > 0 {
            let mut ranked: Vec<&Record> = in_rung
                .iter()
                .filter_map(|&t| ledger.find(t, rung - 1))
                .filter(|rec| rec.status == Status::Finished)
                .collect();
            ranked.sort_by(|a, b| b.mrr().total_cmp(&a.mrr()).then(a.trial.cmp(&b.trial)));
            let goes_on = ((ranked.len() as f64 * space.settings.keep).ceil() as usize).max(1);
            in_rung = ranked.iter().take(goes_on).map(|rec| rec.trial).collect();
            if in_rung.is_empty() {
                break;
            }
        }
        for (i, &trial) in in_rung.iter().enumerate() {
            if ledger.find(trial, rung).is_none() && out_of_time(&ledger, r) {
                eprintln!("  out of time before trial {trial} at rung {}", rung + 1);
                stopped = true;
                break;
            }
            if run_trial(&mut ledger, trial, rung)? {
                report(&ledger, trial, rung, Some((i + 1, in_rung.len())), &rungs);
            }
        }
        if stopped {
            break;
        }
    }
    let best = best(&ledger).ok_or("no trial finished; see the logs in the search folder")?;
    let best_recipe = Space::apply(&base, &best.settings)?;
    let best_path = args.out.join("best.toml");
    write_atomic(
        &best_path,
        &format!(
            "# The best settings of `rowshard search --space {}`: trial {} (rung {} of {}), \
             valid MRR {:.4}.\n\n{}",
            args.space.display(),
            best.trial,
            best.rung + 1,
            rungs.len(),
            best.mrr(),
            best_recipe.to_toml()
        ),
    )?;
    let mut summary = serde_json::json!({
        "model": entry.name(),
        "dataset": data.folder,
        "budget": describe(args.budget),
        "seconds": ledger.seconds(),
        "best": best,
        "best_recipe": best_path,
        "trials": ledger.records,
    });
    print_summary(&ledger, &best);
    if args.final_run {
        eprintln!(
            "  final: {} trained to the end and tested",
            best_path.display()
        );
        let final_json = args.out.join("final.json");
        let status = std::process::Command::new(&program)
            .arg("train")
            .arg("--config")
            .arg(&best_path)
            .arg("--metrics-json")
            .arg(&final_json)
            .args(["--progress", "false"])
            .status()?;
        if !status.success() {
            return Err(format!("the final training failed ({status})").into());
        }
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&final_json)?)?;
        summary["final"] = report.clone();
        if let Some(path) = &final_metrics {
            write_atomic(path, &serde_json::to_string_pretty(&report)?)?;
        }
    }
    write_atomic(
        &args.out.join("summary.json"),
        &serde_json::to_string_pretty(&summary)?,
    )?;
    Ok(())
}

/// A rung's cost relative to `first`'s: epochs times the share of triples.
fn relative(rung: &Rung, first: &Rung) -> f64 {
    (rung.epochs as f64 * rung.train_fraction) / (first.epochs as f64 * first.train_fraction)
}

/// The best trial: the highest rung's best valid MRR.
fn best(ledger: &Ledger) -> Option<Record> {
    ledger
        .records
        .iter()
        .filter(|r| r.status == Status::Finished)
        .max_by(|a, b| {
            a.rung
                .cmp(&b.rung)
                .then(a.mrr().total_cmp(&b.mrr()))
                .then(b.trial.cmp(&a.trial))
        })
        .cloned()
}

/// The base recipe's value of `key`, as a flag's text, if it sets one.
fn base_value(base: &Recipe, key: &str) -> Option<String> {
    base.to_args().iter().find_map(|a| {
        let (k, v) = a.strip_prefix("--")?.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

fn describe(budget: Budget) -> String {
    match budget {
        Budget::Time(s) if s >= 3600.0 => format!("{:.1} h", s / 3600.0),
        Budget::Time(s) => format!("{:.0} min", s / 60.0),
        Budget::Trials(n) => format!("{n} first-rung trials"),
    }
}

/// One line on the trial that just ended (`of`: its place in the rung).
fn report(ledger: &Ledger, trial: usize, rung: usize, of: Option<(usize, usize)>, rungs: &[Rung]) {
    let Some(rec) = ledger.find(trial, rung) else {
        return;
    };
    let best = best(ledger);
    let settings: Vec<String> = rec
        .settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let outcome = match (&rec.status, rec.valid) {
        (Status::Finished, Some(m)) => format!("valid MRR {:.4}", m.mrr),
        _ => format!("failed: {}", rec.error.as_deref().unwrap_or("")),
    };
    eprintln!(
        "  trial {trial}{}, rung {}/{} ({} epochs{}): {} → {outcome} in {:.0} s; best {}",
        of.map_or(String::new(), |(i, n)| format!(" ({i} of {n})")),
        rung + 1,
        rungs.len(),
        rec.epochs,
        if rec.train_fraction < 1.0 {
            format!(" on {:.0}% of the triples", 100.0 * rec.train_fraction)
        } else {
            String::new()
        },
        settings.join(", "),
        rec.seconds,
        best.map_or("–".into(), |b| format!(
            "{:.4} (trial {}, rung {})",
            b.mrr(),
            b.trial,
            b.rung + 1
        )),
    );
}

fn print_summary(ledger: &Ledger, best: &Record) {
    let mut records: Vec<&Record> = ledger.records.iter().collect();
    records.sort_by(|a, b| {
        b.rung
            .cmp(&a.rung)
            .then(b.mrr().total_cmp(&a.mrr()))
            .then(a.trial.cmp(&b.trial))
    });
    println!(
        "{:>5} {:>4} {:>6} {:>8} {:>8} {:>7}  settings",
        "trial", "rung", "epochs", "seconds", "valid", "status"
    );
    for r in records {
        let settings: Vec<String> = r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{:>5} {:>4} {:>6} {:>8.0} {:>8} {:>7}  {}",
            r.trial,
            r.rung + 1,
            r.epochs_trained,
            r.seconds,
            r.valid.map_or("–".into(), |m| format!("{:.4}", m.mrr)),
            match r.status {
                Status::Finished => "ok",
                Status::Failed => "failed",
            },
            settings.join(", ")
        );
    }
    println!(
        "best: trial {} at rung {}, valid MRR {:.4}; {:.0} s of trials",
        best.trial,
        best.rung + 1,
        best.mrr(),
        ledger.seconds()
    );
}
