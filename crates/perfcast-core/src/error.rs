//! Errors shared by plugins and the engine: [`PluginError`] (what a plugin or its factory
//! reports), [`ModelError`] (what the model reports about a scenario, a plugin's error
//! included), and the typed configuration [`Key`] an error is about.

use std::borrow::Cow;
use std::fmt;
use thiserror::Error;

/// The configuration section a [`Key`] lives in. Section names are the configuration's own
/// (`[model]`, `[plan]`, `[inference]`, `[options]`, `[system]`), so a host shows a key as
/// the user spells it without rewriting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// `[model]`: the workload.
    Model,
    /// `[plan]`: the training plan.
    Plan,
    /// `[inference]`: the inference plan.
    Inference,
    /// `[options]`: the engine's options (training or inference).
    Options,
    /// `[system]`: devices, memory and network.
    System,
    /// `[serving]`: the serving deployment, its scheduler and its workload.
    Serving,
    /// `[slo]`: the latency objectives of serving.
    Slo,
    /// Not a configuration key (a plugin, the registry, a derived quantity): shown as is.
    Other,
}

impl Section {
    /// The section's name in configurations (empty for [`Section::Other`]).
    pub const fn name(self) -> &'static str {
        match self {
            Section::Model => "model",
            Section::Plan => "plan",
            Section::Inference => "inference",
            Section::Options => "options",
            Section::System => "system",
            Section::Serving => "serving",
            Section::Slo => "slo",
            Section::Other => "",
        }
    }
}

/// What an error is about: a key of the scenario's configuration (a section and the path
/// inside it), typed so that hosts map it to provenance without parsing or rewriting text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The section.
    pub section: Section,
    /// The path inside the section (`tp`, `network[0].domain_size`; empty for the section).
    pub path: Cow<'static, str>,
}

impl Key {
    /// A key of `section`.
    pub const fn new(section: Section, path: &'static str) -> Key {
        Key {
            section,
            path: Cow::Borrowed(path),
        }
    }
    /// A key of `section` with a path built at run time.
    pub fn owned(section: Section, path: String) -> Key {
        Key {
            section,
            path: Cow::Owned(path),
        }
    }
    /// `model.<path>`.
    pub const fn model(path: &'static str) -> Key {
        Key::new(Section::Model, path)
    }
    /// `plan.<path>` (the training plan).
    pub const fn plan(path: &'static str) -> Key {
        Key::new(Section::Plan, path)
    }
    /// `inference.<path>` (the inference plan).
    pub const fn inference(path: &'static str) -> Key {
        Key::new(Section::Inference, path)
    }
    /// `options.<path>`.
    pub const fn options(path: &'static str) -> Key {
        Key::new(Section::Options, path)
    }
    /// `system.<path>`.
    pub const fn system(path: &'static str) -> Key {
        Key::new(Section::System, path)
    }
    /// `serving.<path>`.
    pub const fn serving(path: &'static str) -> Key {
        Key::new(Section::Serving, path)
    }
    /// `slo.<path>`.
    pub const fn slo(path: &'static str) -> Key {
        Key::new(Section::Slo, path)
    }
    /// Something that is not a configuration key, shown as `what`.
    pub const fn other(what: &'static str) -> Key {
        Key::new(Section::Other, what)
    }
    /// A key given as text (`plan.tp`), e.g. by a dynamic plugin: the section when the first
    /// component names one, else [`Section::Other`].
    pub fn parse(text: &str) -> Key {
        let (head, rest) = text.split_once('.').unwrap_or((text, ""));
        let section = [
            Section::Model,
            Section::Plan,
            Section::Inference,
            Section::Options,
            Section::System,
            Section::Serving,
            Section::Slo,
        ]
        .into_iter()
        .find(|s| s.name() == head);
        match section {
            Some(s) => Key::owned(s, rest.to_string()),
            None => Key::owned(Section::Other, text.to_string()),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.section, self.path.is_empty()) {
            (Section::Other, _) => f.write_str(&self.path),
            (s, true) => f.write_str(s.name()),
            (s, false) => write!(f, "{}.{}", s.name(), self.path),
        }
    }
}

/// An error raised while building or calling a plugin.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum PluginError {
    /// The parameters given to a factory were rejected (`path` is the key path inside the
    /// component's parameter table, empty for the table itself).
    #[error("invalid parameter{}: {message}", if path.is_empty() { String::new() } else { format!(" `{path}`") })]
    Params {
        /// Key path inside the parameter table (`inner.b`, `matrix_tflops.bf16`).
        path: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The plugin returned an error or panicked; `message` is what it said.
    #[error("plugin `{plugin}` failed: {message}")]
    Failed {
        /// The component's registered kind.
        plugin: String,
        /// The plugin's own message.
        message: String,
    },
    /// A value returned by a plugin was NaN, infinite or negative.
    #[error("plugin `{plugin}` returned an invalid {what}: {value}")]
    BadValue {
        /// The component's registered kind.
        plugin: String,
        /// The quantity, with what it was asked for (e.g. the collective and its size).
        what: String,
        /// The value returned.
        value: f64,
    },
}

/// An error raised by the model while evaluating a scenario.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelError {
    /// A quantity computed or returned was NaN, infinite or negative; the roofline also
    /// reports a non-positive peak or bandwidth, or an efficiency outside (0, 1], as this.
    #[error("{what} is not finite or is negative ({value})")]
    NonFinite {
        /// The quantity, and whose it is.
        what: String,
        /// The value found.
        value: f64,
    },
    /// The compute unit has no peak for an op's format on the op's engine
    /// ([`crate::ComputeUnit::peak`] returned `None`).
    #[error("device `{device}` has no {engine} engine for {dtype}")]
    UnsupportedDType {
        /// The compute unit's kind.
        device: String,
        /// The engine's name ([`crate::Engine::name`]).
        engine: String,
        /// The format's name ([`crate::DType::name`]).
        dtype: String,
    },
    /// A value the model refuses: the key, the value as text, and the rule it breaks.
    #[error("invalid `{key}` = {value}: {rule}")]
    Invalid {
        /// What the error is about.
        key: Key,
        /// The refused value, as text.
        value: String,
        /// What is allowed.
        rule: String,
    },
    /// A result that breaks a physical law (a utilisation above 1: work done faster than the
    /// device's peak): a bug, or a plugin whose times undercut its own declared peaks.
    #[error("{what} = {value} breaks a physical law: {law}")]
    Unphysical {
        /// The quantity.
        what: String,
        /// Its value.
        value: f64,
        /// The law, with the numbers it compares.
        law: String,
    },
    /// A plugin's error, passed on unchanged.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

impl ModelError {
    /// [`ModelError::Unphysical`] unless `value`, a utilisation of `what`, is at most 1 (to
    /// rounding); `of` says of what, and is only called for the error (the check runs on
    /// every evaluation).
    pub fn check_utilisation(
        what: &str,
        value: f64,
        of: impl FnOnce() -> String,
    ) -> Result<(), ModelError> {
        if value <= 1.0 + 1e-9 {
            return Ok(());
        }
        Err(ModelError::Unphysical {
            what: what.to_string(),
            value,
            law: format!(
                "{} cannot exceed the device's peak (a utilisation of at most 1)",
                of()
            ),
        })
    }

    /// [`ModelError::Invalid`] of `key`.
    pub fn invalid(key: Key, value: impl ToString, rule: impl Into<String>) -> Self {
        ModelError::Invalid {
            key,
            value: value.to_string(),
            rule: rule.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_display_and_parse() {
        let table = [
            (Key::plan("tp"), "plan.tp"),
            (Key::inference(""), "inference"),
            (
                Key::owned(Section::System, "network[1].domain_size".into()),
                "system.network[1].domain_size",
            ),
            (Key::other("parallel strategies"), "parallel strategies"),
        ];
        for (k, text) in table {
            assert_eq!(k.to_string(), text);
            assert_eq!(Key::parse(text), k, "{text}");
        }
        assert_eq!(Key::parse("options.engine.x").path, "engine.x");
        assert_eq!(Key::parse("registry").section, Section::Other);
    }
}
