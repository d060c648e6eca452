//! `--<hyper-parameter> VALUE` (and the key of the same name in `[optimizer]`) for every
//! hyper-parameter of the optimizer table: the flags are generated from the table, so a new
//! optimizer row brings its flags with it.

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use rowshard_kernels::TABLE;
use serde::ser::SerializeMap;

/// The hyper-parameters given, by table name (`eps = 1e-10` in `[optimizer]`, `--eps 1e-10`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HyperArgs(pub Vec<(&'static str, f64)>);

impl serde::Serialize for HyperArgs {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// Every hyper-parameter name of the table, once, with the optimizers that have it.
fn names() -> Vec<(&'static str, String, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, String, Vec<&'static str>)> = Vec::new();
    for spec in TABLE {
        for h in spec.hyper_parameters {
            match out.iter_mut().find(|(n, _, _)| *n == h.name) {
                Some(entry) => entry.2.push(spec.name),
                None => out.push((h.name, h.doc.to_string(), vec![spec.name])),
            }
        }
    }
    out
}

/// Checks `value` of hyper-parameter `name` against the range of every optimizer that has it
/// (recipes check values before anything runs; the command line's are checked when the
/// optimizer is set up).
pub fn check_range(name: &str, value: f64) -> Result<(), String> {
    for spec in TABLE {
        if let Some(h) = spec.hyper_parameters.iter().find(|h| h.name == name)
            && !h.range.contains(value)
        {
            return Err(format!(
                "{value} is outside the valid range {} of {}",
                h.range, spec.name
            ));
        }
    }
    Ok(())
}

/// Whether `name` is a hyper-parameter of some optimizer.
pub fn is_hyper_parameter(name: &str) -> bool {
    names().iter().any(|(n, _, _)| *n == name)
}

impl FromArgMatches for HyperArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(HyperArgs(
            names()
                .into_iter()
                .filter_map(|(name, _, _)| matches.get_one::<f64>(name).map(|&v| (name, v)))
                .collect(),
        ))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for HyperArgs {
    fn augment_args(cmd: Command) -> Command {
        names()
            .into_iter()
            .fold(cmd, |cmd, (name, doc, optimizers)| {
                cmd.arg(
                    Arg::new(name)
                        .long(name.replace('_', "-"))
                        .value_name("VALUE")
                        .value_parser(clap::value_parser!(f64))
                        .help(format!("{doc} ({})", optimizers.join(", "))),
                )
            })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}
