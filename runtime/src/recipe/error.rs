//! What is wrong with a recipe: one line, naming the file, the line and the key where the key
//! came from a file.

use std::fmt;

/// A recipe that cannot be read or trained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecipeError {
    /// `file:line` of the key, when it came from a file.
    pub at: Option<String>,
    /// The key, when the error is about one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl RecipeError {
    /// An error about the recipe as a whole.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            at: None,
            key: None,
            message: message.into(),
        }
    }

    /// An error about `key`, placed where `origins` says it was given (nowhere for a flag or a
    /// default).
    pub fn about(
        origins: &std::collections::BTreeMap<String, String>,
        key: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            at: origins.get(key).cloned(),
            key: origins.contains_key(key).then(|| key.to_string()),
            message: message.into(),
        }
    }

    /// A value clap refused for `key`: the first line of its message.
    pub(crate) fn clap(key: &str, error: &clap::Error) -> Self {
        let message = error.to_string();
        let first = message
            .lines()
            .next()
            .unwrap_or("invalid value")
            .trim_start_matches("error: ");
        Self {
            at: None,
            key: Some(key.to_string()),
            message: first.to_string(),
        }
    }

    /// The same error, placed at `file:line`.
    pub(crate) fn at(mut self, at: String) -> Self {
        self.at = Some(at);
        self
    }
}

impl fmt::Display for RecipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.at, &self.key) {
            (Some(at), Some(key)) => write!(f, "{at}: `{key}`: {}", self.message),
            (Some(at), None) => write!(f, "{at}: {}", self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for RecipeError {}
