//! Search spaces: a TOML file naming the recipe the trials start from (`base`), how the search
//! proceeds (`[search]`), and the keys it varies (`[space]`), each a choice, a range, a log-range
//! or an integer range over any key of a recipe (a flag's name, or `section.key`). Every error is
//! one line naming the file, the line and the key, before anything trains.

use std::path::{Path, PathBuf};

use rowshard::recipe::Recipe;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::sobol::MAX_DIMENSIONS;

/// What one key of a space takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Domain {
    /// One of these values, as written (their text).
    Choice(Vec<String>),
    /// Uniform in `[lo, hi]`.
    Range(f64, f64),
    /// Log-uniform in `[lo, hi]`, `0 < lo`.
    LogRange(f64, f64),
    /// A whole number in `[lo, hi]`.
    IntRange(i64, i64),
}

/// One key a search varies.
#[derive(Clone, Debug, PartialEq)]
pub struct Dimension {
    /// The recipe key (a flag's name).
    pub key: String,
    /// What it takes.
    pub domain: Domain,
    /// The value's text around the number: `n3:{}` makes 0.05 the regulariser `n3:0.05`.
    pub format: Option<String>,
    /// Its line in the space file.
    pub line: usize,
}

/// How a search proceeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Successive halving's rungs; the last trains a trial as the base recipe does.
    pub rungs: usize,
    /// The fraction of a rung's trials that go on to the next (1/η).
    pub keep: f64,
    /// The most quasi-random trials a time budget may start.
    pub max_trials: usize,
    /// Training triples above which the lower rungs also train on a sample of them (GraSH's
    /// smaller graphs), halving the reduction between epochs and triples.
    pub subset_above: usize,
    /// Seeds the quasi-random points.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            rungs: 3,
            keep: 1.0 / 3.0,
            max_trials: 81,
            subset_above: 100_000,
            seed: 1,
        }
    }
}

/// A search space read from a file.
#[derive(Clone, Debug)]
pub struct Space {
    /// The file.
    pub file: PathBuf,
    /// The recipe the trials start from.
    pub base: Recipe,
    /// How the search proceeds.
    pub settings: Settings,
    /// The keys it varies, in file order.
    pub dimensions: Vec<Dimension>,
    /// The file's text (what a resumed search must find again).
    pub text: String,
}

impl Dimension {
    /// The value at `u` in `[0, 1)`, as the flag's text.
    pub fn value(&self, u: f64) -> String {
        let number = match &self.domain {
            Domain::Choice(values) => {
                let at = ((u * values.len() as f64) as usize).min(values.len() - 1);
                return values[at].clone();
            }
            Domain::Range(lo, hi) => significant(lo + u * (hi - lo)),
            Domain::LogRange(lo, hi) => significant((lo.ln() + u * (hi.ln() - lo.ln())).exp()),
            Domain::IntRange(lo, hi) => {
                let span = (hi - lo + 1) as f64;
                (lo + ((u * span) as i64).min(hi - lo)).to_string()
            }
        };
        match &self.format {
            Some(format) => format.replace("{}", &number),
            None => number,
        }
    }

    /// The values a check of the space tries: each choice, or the ends of the range.
    pub fn extremes(&self) -> Vec<String> {
        match &self.domain {
            Domain::Choice(values) => values.clone(),
            _ => vec![self.value(0.0), self.value(1.0 - f64::EPSILON)],
        }
    }
}

/// `x` to three significant digits, as a recipe would write it.
fn significant(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{x:.digits$}");
    let parsed: f64 = text.parse().unwrap_or(x);
    parsed.to_string()
}

impl Space {
    /// Reads the space at `path` and its base recipe.
    pub fn from_file(path: &Path) -> Result<Space, String> {
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{file}: cannot read: {e}"))?;
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let table = DeTable::parse(&text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(s.start));
            format!("{file}:{line}: {}", e.message())
        })?;
        let at = |key: &Spanned<toml::de::DeString>, what: String| {
            format!(
                "{file}:{}: `{}`: {what}",
                line_of(key.span().start),
                key.get_ref()
            )
        };
        let mut base = None;
        let mut settings = Settings::default();
        let mut dimensions = Vec::new();
        for (key, value) in table.get_ref() {
            match (key.get_ref().as_ref(), value.get_ref()) {
                ("base", DeValue::String(s)) => {
                    let recipe = path.parent().unwrap_or(Path::new(".")).join(s.as_ref());
                    base = Some(Recipe::from_file(&recipe).map_err(|e| e.to_string())?);
                }
                ("search", DeValue::Table(t)) => {
                    for (key, value) in t {
                        read_setting(&mut settings, key.get_ref(), value.get_ref())
                            .map_err(|e| at(key, e))?;
                    }
                }
                ("space", DeValue::Table(t)) => {
                    for (key, value) in t {
                        let line = line_of(key.span().start);
                        let dimension = read_dimension(key.get_ref(), value.get_ref(), line)
                            .map_err(|e| at(key, e))?;
                        dimensions.push(dimension);
                    }
                }
                (other, _) => {
                    return Err(at(
                        key,
                        format!(
                            "unknown entry `{other}`; a space file holds `base = \"recipe.toml\"`, \
                             [search] and [space]"
                        ),
                    ));
                }
            }
        }
        dimensions.sort_by_key(|d| d.line);
        if dimensions.is_empty() {
            return Err(format!(
                "{file}: the [space] section names no key to search"
            ));
        }
        if dimensions.len() > MAX_DIMENSIONS {
            return Err(format!(
                "{file}: {} keys; a space searches at most {MAX_DIMENSIONS}",
                dimensions.len()
            ));
        }
        for (i, d) in dimensions.iter().enumerate() {
            if dimensions[..i].iter().any(|e| e.key == d.key) {
                return Err(format!("{file}:{}: `{}`: given twice", d.line, d.key));
            }
        }
        Ok(Space {
            file: path.to_path_buf(),
            base: base.unwrap_or_default(),
            settings,
            dimensions,
            text: text.clone(),
        })
    }

    /// The settings of quasi-random point `u` (one coordinate per dimension): key and text.
    pub fn settings_at(&self, u: &[f64]) -> Vec<(String, String)> {
        self.dimensions
            .iter()
            .zip(u)
            .map(|(d, &x)| (d.key.clone(), d.value(x)))
            .collect()
    }

    /// `recipe` with `settings` set.
    pub fn apply(recipe: &Recipe, settings: &[(String, String)]) -> Result<Recipe, String> {
        settings.iter().try_fold(recipe.clone(), |r, (key, value)| {
            r.with(key, value).map_err(|e| e.to_string())
        })
    }

    /// `file:line: \`key\`: …` for dimension `d`.
    pub fn error_at(&self, d: &Dimension, what: impl std::fmt::Display) -> String {
        format!("{}:{}: `{}`: {what}", self.file.display(), d.line, d.key)
    }
}

fn read_setting(settings: &mut Settings, key: &str, value: &DeValue) -> Result<(), String> {
    let number = |v: &DeValue| -> Option<f64> {
        match v {
            DeValue::Integer(i) => i.as_str().replace('_', "").parse().ok(),
            DeValue::Float(f) => f.as_str().replace('_', "").parse().ok(),
            _ => None,
        }
    };
    let x = number(value).ok_or("expected a number")?;
    let whole = |x: f64, min: f64| -> Result<usize, String> {
        if x.fract() == 0.0 && x >= min {
            Ok(x as usize)
        } else {
            Err(format!("expected a whole number ≥ {min}"))
        }
    };
    match key {
        "rungs" => settings.rungs = whole(x, 1.0)?,
        "keep" if x > 0.0 && x < 1.0 => settings.keep = x,
        "keep" => return Err("expected a fraction in (0, 1)".into()),
        "max-trials" => settings.max_trials = whole(x, 1.0)?,
        "subset-above" => settings.subset_above = whole(x, 0.0)?,
        "seed" => settings.seed = whole(x, 0.0)? as u64,
        other => {
            return Err(format!(
                "unknown setting `{other}`; expected rungs, keep, max-trials, subset-above or seed"
            ));
        }
    }
    Ok(())
}

fn read_dimension(key: &str, value: &DeValue, line: usize) -> Result<Dimension, String> {
    let name = key.rsplit('.').next().unwrap_or(key).replace('_', "-");
    // Every flag of a recipe parses a value or refuses it; an unknown one is not there.
    let unknown = name == "help"
        || matches!(
            Recipe::from_args([format!("--{name}=__probe__")]),
            Err(e) if e.kind() == clap::error::ErrorKind::UnknownArgument
        );
    if unknown {
        return Err(format!(
            "unknown key `{key}`; a space's keys are a recipe's (the flags of `rowshard train`)"
        ));
    }
    let DeValue::Table(spec) = value else {
        return Err(
            "expected { choice = [...] }, { range = [LO, HI] }, { log-range = [LO, HI] } or \
             { int-range = [LO, HI] }"
                .into(),
        );
    };
    let mut domain = None;
    let mut format = None;
    for (k, v) in spec {
        let pair = |v: &DeValue| -> Result<(f64, f64), String> {
            let DeValue::Array(items) = v else {
                return Err(format!("`{}` takes [LO, HI]", k.get_ref()));
            };
            let numbers: Vec<f64> = items
                .iter()
                .filter_map(|i| match i.get_ref() {
                    DeValue::Integer(x) => x.as_str().replace('_', "").parse().ok(),
                    DeValue::Float(x) => x.as_str().replace('_', "").parse().ok(),
                    _ => None,
                })
                .collect();
            match numbers[..] {
                [lo, hi] if items.len() == 2 && lo.is_finite() && hi.is_finite() => Ok((lo, hi)),
                _ => Err(format!("`{}` takes [LO, HI], two numbers", k.get_ref())),
            }
        };
        match (k.get_ref().as_ref(), v.get_ref()) {
            ("choice", DeValue::Array(items)) => {
                let values: Vec<String> = items
                    .iter()
                    .map(|i| match i.get_ref() {
                        DeValue::String(s) => Ok(s.to_string()),
                        DeValue::Integer(x) => Ok(x.as_str().replace('_', "")),
                        DeValue::Float(x) => x
                            .as_str()
                            .replace('_', "")
                            .parse::<f64>()
                            .map(|f| f.to_string())
                            .map_err(|e| e.to_string()),
                        DeValue::Boolean(b) => Ok(b.to_string()),
                        _ => Err("a choice is a list of numbers, strings or booleans".to_string()),
                    })
                    .collect::<Result<_, _>>()?;
                if values.is_empty() {
                    return Err("an empty choice".into());
                }
                domain = Some(Domain::Choice(values));
            }
            ("range", v) => {
                let (lo, hi) = pair(v)?;
                if lo >= hi {
                    return Err(format!("an empty range [{lo}, {hi}]"));
                }
                domain = Some(Domain::Range(lo, hi));
            }
            ("log-range", v) => {
                let (lo, hi) = pair(v)?;
                if lo <= 0.0 {
                    return Err(format!(
                        "a log-range must lie above 0; [{lo}, {hi}] includes it"
                    ));
                }
                if lo >= hi {
                    return Err(format!("an empty range [{lo}, {hi}]"));
                }
                domain = Some(Domain::LogRange(lo, hi));
            }
            ("int-range", v) => {
                let (lo, hi) = pair(v)?;
                if lo.fract() != 0.0 || hi.fract() != 0.0 {
                    return Err(format!(
                        "an int-range takes whole numbers; got [{lo}, {hi}]"
                    ));
                }
                if lo > hi {
                    return Err(format!("an empty range [{lo}, {hi}]"));
                }
                domain = Some(Domain::IntRange(lo as i64, hi as i64));
            }
            ("format", DeValue::String(s)) if s.contains("{}") => format = Some(s.to_string()),
            ("format", _) => return Err("`format` is a string holding {} (e.g. \"n3:{}\")".into()),
            (other, _) => {
                return Err(format!(
                    "unknown `{other}`; expected choice, range, log-range or int-range, and \
                     optionally format"
                ));
            }
        }
    }
    let domain = domain.ok_or("expected one of choice, range, log-range or int-range")?;
    Ok(Dimension {
        key: name,
        domain,
        format,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_map_the_unit_interval_onto_each_domain() {
        let d = |domain, format: Option<&str>| Dimension {
            key: "k".into(),
            domain,
            format: format.map(String::from),
            line: 1,
        };
        let log = d(Domain::LogRange(0.001, 1.0), Some("n3:{}"));
        assert_eq!(log.value(0.0), "n3:0.001");
        assert_eq!(log.value(0.5), "n3:0.0316");
        assert_eq!(d(Domain::Range(0.0, 0.5), None).value(0.5), "0.25");
        let ints = d(Domain::IntRange(1, 3), None);
        assert_eq!(
            [ints.value(0.0), ints.value(0.5), ints.value(0.99)],
            ["1", "2", "3"]
        );
        let choice = d(Domain::Choice(vec!["a".into(), "b".into()]), None);
        assert_eq!([choice.value(0.49), choice.value(0.5)], ["a", "b"]);
        assert_eq!(significant(0.123456), "0.123");
        assert_eq!(significant(1234.4), "1234");
    }
}
