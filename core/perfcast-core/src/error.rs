//! Errors shared by plugins and the engine.

use thiserror::Error;

/// An error raised while building or calling a plugin.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PluginError {
    /// The parameters given to a factory were rejected (`path` is the key path inside the
    /// component's parameter table, empty for the table itself).
    #[error("invalid parameter{}: {message}", if path.is_empty() { String::new() } else { format!(" `{path}`") })]
    Params { path: String, message: String },
    /// The plugin returned an error or panicked; `message` is what it said.
    #[error("plugin `{plugin}` failed: {message}")]
    Failed { plugin: String, message: String },
    /// A value returned by a plugin was NaN, infinite or negative.
    #[error("plugin `{plugin}` returned an invalid {what}: {value}")]
    BadValue {
        plugin: String,
        what: String,
        value: f64,
    },
}

/// An error raised by the model while evaluating a scenario.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    #[error("{what} is not finite or is negative ({value})")]
    NonFinite { what: String, value: f64 },
    #[error("device `{device}` has no {engine} engine for {dtype}")]
    UnsupportedDType {
        device: String,
        engine: String,
        dtype: String,
    },
    #[error("invalid `{key}` = {value}: {rule}")]
    Invalid {
        key: String,
        value: String,
        rule: String,
    },
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

impl ModelError {
    pub fn invalid(key: impl Into<String>, value: impl ToString, rule: impl Into<String>) -> Self {
        ModelError::Invalid {
            key: key.into(),
            value: value.to_string(),
            rule: rule.into(),
        }
    }
}
