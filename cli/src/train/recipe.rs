//! Recipes: a TOML file of `rowshard train` flags (`lr = 0.1`, `batch-size = 500`,
//! `reg = "n3:0.05"`), read by `rowshard train --config FILE`. Every flag can appear; each value
//! goes through the same parser as on the command line, and a bad key, type or value is one line
//! naming the file, the line and the key, before anything is trained. Flags on the command line
//! override the file's.

use std::ffi::OsString;
use std::path::Path;

use clap::{ArgAction, Command};

/// A recipe's keys as command-line arguments (`--key value`), each checked against the `train`
/// subcommand of `cli`.
pub fn recipe_args(path: &Path, cli: &Command) -> Result<Vec<OsString>, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{file}: cannot read the recipe: {e}"))?;
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    type Entries = Vec<(toml::Spanned<String>, toml::Spanned<toml::Value>)>;
    let table: toml::Spanned<
        std::collections::BTreeMap<toml::Spanned<String>, toml::Spanned<toml::Value>>,
    > = toml::from_str(&text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(s.start));
        format!("{file}:{line}: {}", e.message())
    })?;
    let mut entries: Entries = table.into_inner().into_iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let train = cli
        .find_subcommand("train")
        .expect("the train subcommand")
        .clone();
    let mut out = Vec::new();
    for (key, value) in entries {
        let line = line_of(key.span().start);
        let name = key.get_ref().replace('_', "-");
        let at = |what: String| format!("{file}:{line}: `{}`: {what}", key.get_ref());
        let arg = train
            .get_arguments()
            .find(|a| a.get_long() == Some(name.as_str()))
            .filter(|_| name != "config" && name != "help")
            .ok_or_else(|| {
                format!(
                    "{file}:{line}: unknown key `{}`; a recipe's keys are the flags of `rowshard \
                     train` (see `rowshard train --help`)",
                    key.get_ref()
                )
            })?;
        let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        let text = match value.get_ref() {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.clone()),
                    toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                        Ok(v.to_string())
                    }
                    _ => Err(at("expected a list of numbers or strings".into())),
                })
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            other => {
                return Err(at(format!(
                    "expected a number, a string or a boolean, got a {}",
                    other.type_str()
                )));
            }
        };
        // `--key=value`, so a negative number is not read as a flag.
        let args: Vec<OsString> = if switch {
            match value.get_ref() {
                toml::Value::Boolean(true) => vec![format!("--{name}").into()],
                toml::Value::Boolean(false) => continue,
                _ => return Err(at("expected true or false".into())),
            }
        } else {
            vec![format!("--{name}={text}").into()]
        };
        // The same parser as on the command line, on this key alone.
        let mut check: Vec<OsString> = vec!["rowshard".into(), "train".into()];
        check.extend(args.iter().cloned());
        if let Err(e) = cli.clone().try_get_matches_from(check) {
            let message = e.to_string();
            let first = message
                .lines()
                .next()
                .unwrap_or("invalid value")
                .trim_start_matches("error: ");
            return Err(at(first.to_string()));
        }
        let hyper = name.replace('-', "_");
        if crate::hyper::is_hyper_parameter(&hyper) {
            let value: f64 = text
                .parse()
                .map_err(|_| at(format!("`{text}` is not a number")))?;
            crate::hyper::check_range(&hyper, value).map_err(at)?;
        }
        out.extend(args);
    }
    Ok(out)
}
