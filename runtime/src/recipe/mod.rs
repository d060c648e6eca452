//! Recipes: everything `rowshard train` takes, as one value ([`Recipe`]) — grouped in sections
//! as a reader looks for them (`[model]`, `[objective]`, `[negatives]`, `[optimizer]`,
//! `[regularization]`, `[training]`, `[evaluation]`, `[run]`, `[data]`), read from TOML
//! (`file.rs`), given as command-line flags (the same keys: `lr = 0.2` in `[optimizer]` is
//! `--lr 0.2`), built in code, and planned for a model into what [`fit`](crate::train::fit)
//! runs (`plan.rs`).
//!
//! One parser reads every value, from a file or a flag ([`values`]), so a bad value is the same
//! one-line error either way, naming the file, the line and the key for a file. Layering is by
//! keys: a recipe over another ([`Recipe::overlay`]) takes each key it sets.

mod error;
mod file;
pub mod hyper;
mod plan;
mod sections;
pub mod values;

pub use error::RecipeError;
pub use sections::{
    DataKeys, EvaluationKeys, ModelKeys, NegativeKeys, ObjectiveKeys, OptimizerKeys,
    RegularizationKeys, RunKeys, TrainingKeys,
};

use std::collections::BTreeMap;

use clap::{Args, Command, FromArgMatches};
use serde::Serialize;

/// Everything a training run takes. Keys left out (`None`) take their defaults when planned.
#[derive(Args, Clone, Debug, Default, PartialEq, Serialize)]
pub struct Recipe {
    /// `[data]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub data: DataKeys,
    /// `[model]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub model: ModelKeys,
    /// `[objective]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub objective: ObjectiveKeys,
    /// `[negatives]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub negatives: NegativeKeys,
    /// `[optimizer]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub optimizer: OptimizerKeys,
    /// `[regularization]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub regularization: RegularizationKeys,
    /// `[training]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub training: TrainingKeys,
    /// `[evaluation]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub evaluation: EvaluationKeys,
    /// `[run]`.
    #[command(flatten)]
    #[serde(skip_serializing_if = "is_default")]
    pub run: RunKeys,
    /// Where each key given in a file was given (`file:line`), for errors found when the recipe
    /// is planned.
    #[arg(skip)]
    #[serde(skip)]
    pub origins: BTreeMap<String, String>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The sections, by their names in a file, with the command that parses their keys.
pub(crate) fn sections() -> Vec<(&'static str, Command)> {
    let section = |name, augment: fn(Command) -> Command| (name, augment(Command::new(name)));
    vec![
        section("data", DataKeys::augment_args),
        section("model", ModelKeys::augment_args),
        section("objective", ObjectiveKeys::augment_args),
        section("negatives", NegativeKeys::augment_args),
        section("optimizer", OptimizerKeys::augment_args),
        section("regularization", RegularizationKeys::augment_args),
        section("training", TrainingKeys::augment_args),
        section("evaluation", EvaluationKeys::augment_args),
        section("run", RunKeys::augment_args),
    ]
}

/// The command that parses every key as a flag, a later flag overriding an earlier one.
fn command() -> Command {
    Recipe::augment_args(Command::new("recipe"))
        .no_binary_name(true)
        .args_override_self(true)
}

impl Recipe {
    /// The recipe of command-line style arguments (`--lr=0.2`, `--model complex`); a later
    /// flag overrides an earlier one.
    pub fn from_args<I, T>(args: I) -> Result<Recipe, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = command().try_get_matches_from(args)?;
        Recipe::from_arg_matches(&matches)
    }

    /// Every key set, as arguments that [`Recipe::from_args`] reads back to this recipe.
    pub fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let value = toml::Value::try_from(self).expect("a recipe serialises");
        for (_, section) in value.as_table().into_iter().flatten() {
            for (key, value) in section.as_table().into_iter().flatten() {
                let text = match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Float(f) => f.to_string(),
                    other => other.to_string(),
                };
                out.push(format!("--{key}={text}"));
            }
        }
        out
    }

    /// This recipe with every key `on_top` sets taken from it (and their origins).
    pub fn overlay(&self, on_top: &Recipe) -> Recipe {
        let mut args = self.to_args();
        args.extend(on_top.to_args());
        let mut merged =
            Recipe::from_args(args).expect("keys that parsed once parse again in any order");
        merged.origins = self.origins.clone();
        for key in on_top.keys() {
            match on_top.origins.get(&key) {
                Some(origin) => merged.origins.insert(key, origin.clone()),
                None => merged.origins.remove(&key),
            };
        }
        merged
    }

    /// The keys set, by name.
    pub fn keys(&self) -> Vec<String> {
        self.to_args()
            .iter()
            .filter_map(|a| a.strip_prefix("--")?.split('=').next().map(String::from))
            .collect()
    }

    /// This recipe with `key` (a flag's name, or `section.key`) set to `value` (its text, as on
    /// the command line).
    pub fn with(&self, key: &str, value: &str) -> Result<Recipe, RecipeError> {
        let name = key.rsplit('.').next().unwrap_or(key);
        let mut args = self.to_args();
        args.push(format!("--{name}={value}"));
        let mut recipe = Recipe::from_args(args).map_err(|e| RecipeError::clap(name, &e))?;
        recipe.origins = self.origins.clone();
        recipe.origins.remove(name);
        Ok(recipe)
    }

    /// The recipe as a TOML file: its sections, each with the keys set.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a recipe serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_arguments_and_later_keys_win() {
        let recipe = Recipe::from_args([
            "--model=complex",
            "--lr=0.2",
            "--eps=1e-10",
            "--reg=n3:0.05",
            "--negatives=uniform:1024,batch",
            "--label-smoothing=0.1",
            "--progress=false",
        ])
        .unwrap();
        assert_eq!(Recipe::from_args(recipe.to_args()).unwrap(), recipe);
        let over = Recipe::from_args(["--lr=0.5", "--epochs=3"]).unwrap();
        let merged = recipe.overlay(&over);
        assert_eq!(merged.optimizer.lr.map(|l| l.0), Some(0.5));
        assert_eq!(merged.model.model.as_deref(), Some("complex"));
        assert_eq!(merged.training.epochs.map(|e| e.0), Some(3));
        let set = merged.with("optimizer.lr", "0.01").unwrap();
        assert_eq!(set.optimizer.lr.map(|l| l.0), Some(0.01));
        assert!(merged.with("lr", "-1").is_err());
    }
}
