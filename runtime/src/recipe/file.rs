//! Recipe files: TOML whose keys are `rowshard train`'s flags, in their sections or at the top
//! (`lr = 0.2` at the top is `[optimizer] lr = 0.2`), each value read by the flag's own parser.
//! Every error is one line naming the file, the line and the key, before anything is trained.

use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::RecipeError;
use super::hyper::is_hyper_parameter;
use super::{Recipe, command, sections};

/// A key read from a file: its flag name, its value as a flag's text, and its line.
struct Entry {
    key: String,
    text: String,
    line: usize,
}

impl Recipe {
    /// Reads the recipe at `path`.
    pub fn from_file(path: &Path) -> Result<Recipe, RecipeError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            RecipeError::new(format!("{}: cannot read the recipe: {e}", path.display()))
        })?;
        Recipe::from_toml(&text, &path.display().to_string())
    }

    /// Reads a recipe from the TOML `text` of the file called `file` (in errors).
    pub fn from_toml(text: &str, file: &str) -> Result<Recipe, RecipeError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let table = DeTable::parse(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(s.start));
            RecipeError::new(format!("{file}:{line}: {}", e.message()))
        })?;
        let sections = sections();
        let section_of = |flag: &str| {
            sections
                .iter()
                .find(|(_, c)| c.get_arguments().any(|a| a.get_long() == Some(flag)))
                .map(|(name, _)| *name)
        };
        let unknown = |key: &str, line: usize| {
            RecipeError::new(format!(
                "{file}:{line}: unknown key `{key}`; a recipe's keys are the flags of `rowshard \
                 train` (see `rowshard train --help`)"
            ))
        };
        let mut entries = Vec::new();
        let mut read = |section: Option<&str>,
                        key: &Spanned<toml::de::DeString>,
                        value: &Spanned<DeValue>|
         -> Result<(), RecipeError> {
            let line = line_of(key.span().start);
            let name = key.get_ref().replace('_', "-");
            let at = |message: String| RecipeError {
                at: Some(format!("{file}:{line}")),
                key: Some(key.get_ref().to_string()),
                message,
            };
            let home = section_of(&name).filter(|_| name != "help");
            match (home, section) {
                (None, _) => return Err(unknown(key.get_ref(), line)),
                (Some(home), Some(given)) if home != given => {
                    return Err(at(format!("belongs in [{home}], not in [{given}]")));
                }
                _ => {}
            }
            let text = value_text(value.get_ref()).map_err(at)?;
            entries.push(Entry {
                key: name,
                text,
                line,
            });
            Ok(())
        };
        let mut top: Vec<_> = table.get_ref().iter().collect();
        top.sort_by_key(|(k, _)| k.span().start);
        for (key, value) in top {
            let is_section = sections
                .iter()
                .any(|(name, _)| *name == key.get_ref().as_ref());
            match value.get_ref() {
                DeValue::Table(inner) if is_section || section_of(key.get_ref()).is_none() => {
                    let section = key.get_ref().as_ref();
                    if !sections.iter().any(|(name, _)| *name == section) {
                        let line = line_of(key.span().start);
                        let names: Vec<&str> = sections.iter().map(|(n, _)| *n).collect();
                        return Err(RecipeError::new(format!(
                            "{file}:{line}: unknown section [{section}]; expected one of: {}",
                            names.join(", ")
                        )));
                    }
                    let mut keys: Vec<_> = inner.iter().collect();
                    keys.sort_by_key(|(k, _)| k.span().start);
                    for (key, value) in keys {
                        read(Some(section), key, value)?;
                    }
                }
                _ => read(None, key, value)?,
            }
        }
        let mut args: Vec<String> = Vec::new();
        let mut recipe_origins = std::collections::BTreeMap::new();
        for entry in &entries {
            let text = &entry.text;
            let arg = format!("--{}={text}", entry.key);
            // The flag's own parser, on this key alone, so a bad value names its line.
            if let Err(e) = command().try_get_matches_from([&arg]) {
                let key = entry.key.clone();
                return Err(RecipeError::clap(&key, &e).at(format!("{file}:{}", entry.line)));
            }
            if is_hyper_parameter(&entry.key.replace('-', "_")) {
                let value: f64 = text.parse().map_err(|_| RecipeError {
                    at: Some(format!("{file}:{}", entry.line)),
                    key: Some(entry.key.clone()),
                    message: format!("`{text}` is not a number"),
                })?;
                super::hyper::check_range(&entry.key.replace('-', "_"), value).map_err(|m| {
                    RecipeError {
                        at: Some(format!("{file}:{}", entry.line)),
                        key: Some(entry.key.clone()),
                        message: m,
                    }
                })?;
            }
            if recipe_origins
                .insert(entry.key.clone(), format!("{file}:{}", entry.line))
                .is_some()
            {
                return Err(RecipeError {
                    at: Some(format!("{file}:{}", entry.line)),
                    key: Some(entry.key.clone()),
                    message: "given twice".into(),
                });
            }
            args.push(arg);
        }
        let mut recipe = Recipe::from_args(&args).map_err(|e| {
            RecipeError::new(format!(
                "{file}: {}",
                e.to_string().lines().next().unwrap_or("")
            ))
        })?;
        recipe.origins = recipe_origins;
        Ok(recipe)
    }
}

/// A value as a flag's text: a string as it is, a number or a boolean as written, a list of
/// them joined by commas.
fn value_text(value: &DeValue) -> Result<String, String> {
    let scalar = |v: &DeValue| -> Option<String> {
        match v {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(i) => Some(i.as_str().replace('_', "")),
            DeValue::Float(f) => f
                .as_str()
                .replace('_', "")
                .parse::<f64>()
                .ok()
                .map(|x| x.to_string()),
            DeValue::Boolean(b) => Some(b.to_string()),
            _ => None,
        }
    };
    match value {
        DeValue::Array(items) => items
            .iter()
            .map(|v| scalar(v.get_ref()).ok_or("expected a list of numbers or strings".to_string()))
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join(",")),
        other => scalar(other).ok_or_else(|| {
            format!(
                "expected a number, a string or a boolean, got a {}",
                match other {
                    DeValue::Table(_) => "table",
                    DeValue::Datetime(_) => "datetime",
                    _ => "value",
                }
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_and_sectioned_files_read_alike_and_bad_keys_name_file_line_and_key() {
        let flat = Recipe::from_toml("model = \"complex\"\nlr = 0.2\neps = 1e-10\n", "r.toml");
        let sectioned = Recipe::from_toml(
            "[model]\nmodel = \"complex\"\n[optimizer]\nlr = 0.2\neps = 1e-10\n",
            "r.toml",
        );
        let (flat, sectioned) = (flat.unwrap(), sectioned.unwrap());
        assert_eq!(flat.to_args(), sectioned.to_args());
        assert_eq!(sectioned.origins["lr"], "r.toml:4");
        let error = |text: &str| Recipe::from_toml(text, "r.toml").unwrap_err().to_string();
        assert!(error("[model]\nlr = 1\n").starts_with("r.toml:2: `lr`: belongs in [optimizer]"));
        assert!(error("[modle]\ndim = 1\n").starts_with("r.toml:1: unknown section [modle]"));
        assert!(error("lr = 1\nlr = 2\n").starts_with("r.toml:2:"));
        assert!(error("x = 1\n").starts_with("r.toml:1: unknown key `x`"));
        assert!(error("eps = -1\n").starts_with("r.toml:1: `eps`:"));
    }
}
