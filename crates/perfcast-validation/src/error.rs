//! The errors of the validation crate, [`Error`]: each variant says what failed (a file, a
//! case, the stack rules, a preset or the hardware, the configuration, an overlay, a
//! calibration, a collective, a kernel), and its message is the one the harness has always
//! written (the CLI prints it after `error: `). A typed error underneath (perfcast-config's,
//! perfcast-scenario's, the engine's) is kept as the source; those that are not `Clone` are
//! held in an [`Arc`] so that an error can be shared, as a system composed once for many cases
//! is.

use crate::cases::CasesError;
use perfcast_config::HostError;
use perfcast_core::registry::RegistryError;
use perfcast_core::ModelError;
use perfcast_scenario::ScenarioError;
use std::path::PathBuf;
use std::sync::Arc;

/// The result of the validation crate: `Err` is an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a validation, a calibration or one of their inputs failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A cases file that cannot be read, is not TOML or breaks the schema.
    #[error(transparent)]
    Cases(#[from] CasesError),
    /// A file named on the command line found neither as given nor relative to a parent of the
    /// current directory.
    #[error(
        "{}: no such file (also looked relative to every parent of the current directory)",
        path.display()
    )]
    NotFound {
        /// The path as named.
        path: PathBuf,
    },
    /// A file that cannot be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file, as named in messages.
        path: String,
        /// The operating system's error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A file whose text is refused: not TOML (or not UTF-8), the wrong schema, no entries (an
    /// overlay, a residuals, kernels or collectives file, the stack rules, a cases file to
    /// remeasure).
    #[error("{file}: {message}")]
    File {
        /// The file, as named in messages.
        file: String,
        /// What is wrong with it.
        message: String,
    },
    /// The schema errors of a collectives file, every entry's together.
    #[error("{file}: {} schema error(s):\n  {}", errors.len(), errors.join("\n  "))]
    Schema {
        /// The file, as named in messages.
        file: String,
        /// One message per error, naming the entry and the key.
        errors: Vec<String>,
    },
    /// `--group` names no group of the file.
    #[error("{file}: no {what} of group `{group}`{did_you_mean}; groups: {}", groups.join(", "))]
    UnknownGroup {
        /// The file, as named in messages.
        file: String,
        /// What the file holds (`case`, `collective`).
        what: &'static str,
        /// The group asked for.
        group: String,
        /// `; did you mean ...?`, or empty.
        did_you_mean: String,
        /// The groups of the file, in file order.
        groups: Vec<String>,
    },
    /// Something about one case.
    #[error("{id}: {source}")]
    Case {
        /// The case's id.
        id: String,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },
    /// A case the engines do not model (the reason, as the report gives it).
    #[error("{0}")]
    Unsupported(String),
    /// A count of a case that does not fit the engines' 32-bit fields.
    #[error("{key} = {value} is too large")]
    TooLarge {
        /// The case's key (`parallel.tp`, `inference.batch`).
        key: String,
        /// Its value.
        value: u64,
    },
    /// A rule of the stack rules (`configs/validation/stacks.toml`) that is refused.
    #[error("{file}: rule {rule} (stack = \"{stack}\"): {source}")]
    StackRule {
        /// The rule file, as named in messages.
        file: String,
        /// The rule, counted from 1.
        rule: usize,
        /// The stack preset it names.
        stack: String,
        /// Why it is refused.
        #[source]
        source: Box<Error>,
    },
    /// A stack profile whose engine options cannot be listed as a case's keys.
    #[error("stack {stack}: {source}")]
    Stack {
        /// The stack preset.
        stack: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A model preset that cannot be read or is not a valid model.
    #[error("{}: {source}", preset.as_deref().unwrap_or("model preset"))]
    ModelPreset {
        /// `preset:NAME`; `None` when the preset itself cannot be loaded (the source names it).
        preset: Option<String>,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },
    /// The configuration of an accelerator's hardware (its preset or catalog entry, with the
    /// case's settings) that perfcast-config refuses.
    #[error("system.gpu = \"{accelerator}\" ({from}): {source}")]
    Hardware {
        /// The catalog id.
        accelerator: String,
        /// Where the hardware came from (`preset:NAME`, or the catalog).
        from: String,
        /// perfcast-config's error.
        #[source]
        source: Arc<HostError>,
    },
    /// An accelerator that is not an id of the catalog.
    #[error("system.gpu = \"{accelerator}\" is not an id of configs/validation/accelerators.toml")]
    UnknownAccelerator {
        /// The id asked for.
        accelerator: String,
    },
    /// An accelerator without a hardware preset whose catalog entry lacks what a device needs.
    #[error(
        "accelerator `{accelerator}` has no hardware preset and its catalog entry lacks {lacks}"
    )]
    CatalogEntry {
        /// The catalog id.
        accelerator: String,
        /// What is missing (the key in backquotes, and what else would do).
        lacks: String,
    },
    /// A configuration error (a key, where it came from, what is allowed).
    #[error(transparent)]
    Config(Arc<HostError>),
    /// A configuration that does not make a scenario (its options, its stack).
    #[error(transparent)]
    Scenario(Arc<ScenarioError>),
    /// An error of the engines or of a plugin.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Plugins whose registry cannot be built.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A case's engine options that do not read (once an overlay's keys are set, when `with`
    /// names them).
    #[error("{}: {source}", options_label(with))]
    Options {
        /// The overlay's option keys set; `None` for the options as the case reads them.
        with: Option<Vec<String>>,
        /// The error reading them.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// An overlay key that applies to no case's configuration.
    #[error(
        "{overlay}: `{key}` applies to no case's configuration{}{}",
        group.as_ref().map(|g| format!(" in group `{g}`")).unwrap_or_default(),
        nearest_keys(nearest)
    )]
    OverlayKey {
        /// Where the overlay came from (a file, or `--set`).
        overlay: String,
        /// The key.
        key: String,
        /// The group validated, if one was named.
        group: Option<String>,
        /// The nearest keys of the cases' configurations (at most three).
        nearest: Vec<String>,
    },
    /// An overlay entry (a `--set` argument, or a key) that cannot be set.
    #[error("{entry}: {source}")]
    OverlayEntry {
        /// The argument or the key.
        entry: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A `--param` argument that is not `KEY[,KEY...][=LO..HI]`.
    #[error(
        "--param `{param}`: {message} (expected {})",
        crate::calibrate::params::SYNTAX
    )]
    ParamSyntax {
        /// The argument.
        param: String,
        /// What is wrong with it.
        message: String,
    },
    /// A calibration parameter that cannot be fitted (no case has it, no bounds, refused
    /// bounds, it moves no prediction).
    #[error("--param {param}: {message}")]
    Param {
        /// The parameter (its keys, and its bounds when given).
        param: String,
        /// Why it cannot be fitted.
        message: String,
    },
    /// A cross-validation scheme that is unknown or that the scored cases cannot fold.
    #[error("--cv {0}")]
    CrossValidation(String),
    /// A calibration with nothing to fit on (no case runs, no parameter applies, nothing
    /// scored).
    #[error("{file}: {message}")]
    Calibration {
        /// The cases file, as named in messages.
        file: String,
        /// Why.
        message: String,
    },
    /// An error-bar level outside (0, 1).
    #[error("interval level {level}: must be strictly between 0 and 1 (e.g. 0.8 for 80%)")]
    Level {
        /// The level given.
        level: f64,
    },
    /// A collective benchmark entry the model cannot predict.
    #[error("{0}")]
    Collective(String),
    /// A kernel measurement that cannot be predicted.
    #[error("{id}: {source}")]
    Kernel {
        /// The measurement's id.
        id: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A kernel table (AIConfigurator's GEMM timings) that cannot be checked against the
    /// model.
    #[error("{0}")]
    KernelTable(String),
    /// JSON that cannot be written or read back.
    #[error(transparent)]
    Json(Arc<serde_json::Error>),
    /// TOML that does not read.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// A value that cannot be written as TOML.
    #[error(transparent)]
    TomlWrite(#[from] toml::ser::Error),
    /// Anything else, as free text.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// [`Error::Invalid`] of `message`.
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid(message.into())
    }

    /// [`Error::Case`]: `self` about case `id`.
    pub fn for_case(self, id: impl Into<String>) -> Error {
        Error::Case {
            id: id.into(),
            source: Box::new(self),
        }
    }
}

impl From<HostError> for Error {
    fn from(e: HostError) -> Error {
        Error::Config(Arc::new(e))
    }
}

impl From<ScenarioError> for Error {
    fn from(e: ScenarioError) -> Error {
        Error::Scenario(Arc::new(e))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::Json(Arc::new(e))
    }
}

/// The text of the file at `path` (named `file` in messages): [`Error::Io`] when it cannot be
/// read.
pub(crate) fn read(path: &std::path::Path, file: &str) -> Result<String> {
    perfcast_config::input::read_text(path, perfcast_config::input::MAX_TEXT_BYTES).map_err(|e| {
        Error::Io {
            path: file.to_string(),
            source: Arc::new(e),
        }
    })
}

/// TOML `text` (of `file`, for messages) read as a `T`: [`Error::File`], `not valid TOML`
/// with the parser's message, when it does not read.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, file: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| Error::File {
        file: file.to_string(),
        message: format!("not valid TOML: {}", e.to_string().trim_end()),
    })
}

/// `options` or `options (with a, b)`.
fn options_label(with: &Option<Vec<String>>) -> String {
    match with {
        None => "options".to_string(),
        Some(keys) => format!("options (with {})", keys.join(", ")),
    }
}

/// `; nearest keys: a, b`, or empty.
fn nearest_keys(nearest: &[String]) -> String {
    if nearest.is_empty() {
        String::new()
    } else {
        format!("; nearest keys: {}", nearest.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each message is the text the harness wrote before it had a type (the CLI's golden
    /// outputs and error tests compare them byte for byte).
    #[test]
    fn messages_are_the_old_texts() {
        let table: Vec<(Error, &str)> = vec![
            (
                Error::NotFound {
                    path: PathBuf::from("no/cases.toml"),
                },
                "no/cases.toml: no such file (also looked relative to every parent of the current directory)",
            ),
            (
                Error::File {
                    file: "o.toml".into(),
                    message: "the overlay sets no key".into(),
                },
                "o.toml: the overlay sets no key",
            ),
            (
                Error::Schema {
                    file: "c.toml".into(),
                    errors: vec!["missing `schema`".into(), "no entry".into()],
                },
                "c.toml: 2 schema error(s):\n  missing `schema`\n  no entry",
            ),
            (
                Error::UnknownGroup {
                    file: "c.toml".into(),
                    what: "case",
                    group: "tabel1".into(),
                    did_you_mean: "; did you mean `table1`?".into(),
                    groups: vec!["table1".into(), "table2".into()],
                },
                "c.toml: no case of group `tabel1`; did you mean `table1`?; groups: table1, table2",
            ),
            (
                Error::TooLarge {
                    key: "parallel.tp".into(),
                    value: 1 << 40,
                },
                "parallel.tp = 1099511627776 is too large",
            ),
            (
                Error::StackRule {
                    file: "s.toml".into(),
                    rule: 2,
                    stack: "x".into(),
                    source: Box::new(Error::invalid("`why` is empty")),
                },
                "s.toml: rule 2 (stack = \"x\"): `why` is empty",
            ),
            (
                Error::ModelPreset {
                    preset: None,
                    source: Box::new(Error::invalid("unknown preset `gpt-5`")),
                },
                "model preset: unknown preset `gpt-5`",
            ),
            (
                Error::CatalogEntry {
                    accelerator: "TPU-v4".into(),
                    lacks: "`sm_count`".into(),
                },
                "accelerator `TPU-v4` has no hardware preset and its catalog entry lacks `sm_count`",
            ),
            (
                Error::OverlayKey {
                    overlay: "--set".into(),
                    key: "a.b".into(),
                    group: Some("g".into()),
                    nearest: vec!["a.c".into()],
                },
                "--set: `a.b` applies to no case's configuration in group `g`; nearest keys: a.c",
            ),
            (
                Error::OverlayKey {
                    overlay: "o.toml".into(),
                    key: "a.b".into(),
                    group: None,
                    nearest: Vec::new(),
                },
                "o.toml: `a.b` applies to no case's configuration",
            ),
            (
                Error::ParamSyntax {
                    param: "a..b".into(),
                    message: "key segment `` of `a..b` must be non-empty letters, digits, `_` or `-`".into(),
                },
                "--param `a..b`: key segment `` of `a..b` must be non-empty letters, digits, `_` or `-` (expected KEY[,KEY...][=LO..HI], e.g. components.h100_sxm5_80gb.matmul_efficiency=0.5..0.8)",
            ),
            (
                Error::Hardware {
                    accelerator: "MI350X".into(),
                    from: "built from configs/validation/accelerators.toml".into(),
                    source: Arc::new(HostError::Format {
                        origin: "--set".into(),
                        message: "bad".into(),
                    }),
                },
                "system.gpu = \"MI350X\" (built from configs/validation/accelerators.toml): `--set`: bad",
            ),
            (
                Error::Options {
                    with: Some(vec!["options.a".into(), "stacks.s.b".into()]),
                    source: Arc::new(serde_json::from_str::<u8>("-1").unwrap_err()),
                },
                "options (with options.a, stacks.s.b): invalid value: integer `-1`, expected u8 at line 1 column 2",
            ),
            (
                Error::Param {
                    param: "a.b=0..1".into(),
                    message: "applies only to cases that are not scored, nothing to fit it on".into(),
                },
                "--param a.b=0..1: applies only to cases that are not scored, nothing to fit it on",
            ),
            (
                Error::CrossValidation("cases needs at least two scored cases (use --cv none)".into()),
                "--cv cases needs at least two scored cases (use --cv none)",
            ),
            (
                Error::Level { level: 1.5 },
                "interval level 1.5: must be strictly between 0 and 1 (e.g. 0.8 for 80%)",
            ),
        ];
        for (e, want) in table {
            assert_eq!(e.to_string(), want, "{e:?}");
        }
    }

    /// An error can be shared between threads and handed to `anyhow`.
    #[test]
    fn the_error_is_send_sync_and_static() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<Error>();
    }

    /// A case's error names the case, then says what went wrong; the cause stays reachable.
    #[test]
    fn a_case_error_names_the_case() {
        let e = Error::TooLarge {
            key: "inference.batch".into(),
            value: 1 << 33,
        }
        .for_case("llama-70b-h100");
        assert_eq!(
            e.to_string(),
            "llama-70b-h100: inference.batch = 8589934592 is too large"
        );
        let cause = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(
            cause.as_deref(),
            Some("inference.batch = 8589934592 is too large")
        );
    }
}
