//! The models the command line knows, by name: the shipped ones and a crate's own, registered
//! the same way ([`Registry::with`], or [`models!`](crate::models)). Each entry holds the
//! functions every subcommand runs for its model type, so `train`, `export`, `bench` and
//! `search` take any registered model by its name.

use std::error::Error;
use std::fmt;

use rowshard::data::Dataset;
use rowshard::model::{ModelDefaults, ScoringFunction};
use rowshard::models;
use rowshard::recipe::{Recipe, RecipeError};
use rowshard::train::{FitReport, Plan, Reporter};

/// A registered model: its name and the functions that run each subcommand for its type.
#[derive(Clone)]
pub struct Entry {
    name: String,
    type_name: &'static str,
    pub(crate) plan: fn(&Recipe, &Dataset, &str) -> Result<Plan, RecipeError>,
    pub(crate) run: RunFn,
    pub(crate) export: crate::export::ExportFn,
    pub(crate) bench: crate::bench::training::BenchFn,
}

/// Runs a plan for a registered model: [`rowshard::train::run`] for its type.
pub(crate) type RunFn =
    fn(&Dataset, &Plan, &Reporter) -> Result<Option<FitReport>, rowshard::train::FitError>;

impl Entry {
    fn of<S: ScoringFunction + ModelDefaults>(name: &str) -> Self {
        Entry {
            name: name.to_string(),
            type_name: std::any::type_name::<S>(),
            plan: |recipe, data, name| recipe.plan::<S>(data, name),
            run: rowshard::train::run::<S>,
            export: crate::export::export::<S>,
            bench: crate::bench::training::run_model::<S>,
        }
    }

    /// The name `--model` takes.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model's Rust type.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The recipe planned for this model on `data` (see [`Recipe::plan`]).
    pub fn plan(&self, recipe: &Recipe, data: &Dataset) -> Result<Plan, RecipeError> {
        (self.plan)(recipe, data, &self.name)
    }

    /// Runs `plan` for this model on `data` (see [`rowshard::train::run`]).
    pub fn run(
        &self,
        data: &Dataset,
        plan: &Plan,
        reporter: &Reporter,
    ) -> Result<Option<FitReport>, rowshard::train::FitError> {
        (self.run)(data, plan, reporter)
    }
}

/// The models the command line knows.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
}

/// A registry that cannot be built, or a name it does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryError {
    /// Two models under one name.
    Duplicate {
        /// The name, as the second was registered.
        name: String,
        /// The model registered first.
        first: &'static str,
        /// The model registered second.
        second: &'static str,
    },
    /// A name no model is registered under.
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: Vec<String>,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::Duplicate {
                name,
                first,
                second,
            } => write!(
                f,
                "two models are registered as `{name}`: {first} and {second}; register one \
                 under another name (models![{second} as \"my-name\"])"
            ),
            RegistryError::Unknown { name, known } => write!(
                f,
                "unknown model `{name}`; expected one of: {}",
                known.join(", ")
            ),
        }
    }
}

impl Error for RegistryError {}

/// A name as the registry compares it: in any case, with `-` and `_` left out.
fn key(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

impl Registry {
    /// No models.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The models rowshard ships, under their command-line names.
    pub fn shipped() -> Self {
        let mut registry = Self::empty();
        registry.push(Entry::of::<models::DistMult>("distmult"));
        registry.push(Entry::of::<models::ComplEx>("complex"));
        registry.push(Entry::of::<models::TransE>("transe"));
        registry.push(Entry::of::<models::TransEL2>("transe-l2"));
        registry.push(Entry::of::<models::TransESq>("transe-sq"));
        registry.push(Entry::of::<models::RotatE>("rotate"));
        registry.push(Entry::of::<models::RotatESq>("rotate-sq"));
        registry.push(Entry::of::<models::QMult>("qmult"));
        registry
    }

    fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
    }

    /// With model `S` under `name` (`None`: its struct's name in lower case, `TransH` →
    /// `transh`); a name taken already (in any case, `-` and `_` aside) is an error naming both
    /// models.
    pub fn with<S: ScoringFunction + ModelDefaults>(
        mut self,
        name: Option<&str>,
    ) -> Result<Self, RegistryError> {
        let name = name.map_or_else(|| S::NAME.to_lowercase(), str::to_string);
        if let Some(first) = self.entries.iter().find(|e| key(&e.name) == key(&name)) {
            return Err(RegistryError::Duplicate {
                name,
                first: first.type_name,
                second: std::any::type_name::<S>(),
            });
        }
        self.push(Entry::of::<S>(&name));
        Ok(self)
    }

    /// The model called `name` (in any case, `-` and `_` aside; its struct's name works too).
    pub fn find(&self, name: &str) -> Result<&Entry, RegistryError> {
        self.entries
            .iter()
            .find(|e| {
                key(&e.name) == key(name)
                    || key(e.type_name.rsplit("::").next().unwrap_or("")) == key(name)
            })
            .ok_or_else(|| RegistryError::Unknown {
                name: name.to_string(),
                known: self.names(),
            })
    }

    /// Every registered name, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name.clone()).collect()
    }
}

/// The shipped models and `models` (each a type with `#[sharded_embedding]` and `#[scoring]`,
/// registered under its struct's name in lower case, or `Type as "name"`), for
/// [`main`](crate::main):
///
/// ```ignore
/// fn main() {
///     rowshard_cli::main(rowshard_cli::models![TransH, MyDistMult as "my-distmult"]);
/// }
/// ```
#[macro_export]
macro_rules! models {
    ($($model:ty $(as $name:literal)?),* $(,)?) => {{
        let registry: ::std::result::Result<$crate::Registry, $crate::RegistryError> =
            ::std::result::Result::Ok($crate::Registry::shipped());
        $(
            let registry = registry.and_then(|r| {
                r.with::<$model>($crate::__name!($($name)?))
            });
        )*
        registry
    }};
}

/// The name of a `models!` entry: given, or none.
#[doc(hidden)]
#[macro_export]
macro_rules! __name {
    () => {
        ::std::option::Option::None
    };
    ($name:literal) => {
        ::std::option::Option::Some($name)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_in_any_case_and_a_duplicate_names_both_models() {
        let registry = Registry::shipped();
        assert_eq!(registry.find("TransE_L2").unwrap().name(), "transe-l2");
        assert_eq!(registry.find("ComplEx").unwrap().name(), "complex");
        let unknown = registry.find("holE").err().unwrap().to_string();
        assert!(unknown.starts_with("unknown model `holE`; expected one of: distmult, complex"));
        let duplicate = Registry::shipped()
            .with::<models::ComplEx>(Some("Complex"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            duplicate.contains("`Complex`: rowshard::models::complex::ComplEx and rowshard::models::complex::ComplEx"),
            "{duplicate}"
        );
    }
}
