//! Errors of the host: every one names where the bad input came from (a file, an environment
//! variable, a `--set`), the key path inside the merged configuration, and what is allowed.

use perfcast_core::Category;
use std::path::PathBuf;
use thiserror::Error;

/// Anything that can go wrong while loading a configuration or composing a system from it.
#[derive(Debug, Error)]
pub enum HostError {
    /// The host's check of the configuration before its libraries load failed.
    #[error(transparent)]
    Precheck(Box<dyn std::error::Error + Send + Sync>),
    /// A configuration file that cannot be read (missing, a directory, no permission).
    #[error("cannot read config file `{}`{}: {source}", path.display(), included(included_by))]
    Read {
        path: PathBuf,
        included_by: Option<String>,
        #[source]
        source: std::io::Error,
    },

    /// A file whose text is not valid TOML, YAML or JSON.
    #[error("{format} syntax error in `{origin}` at line {line}, column {column}: {message}")]
    Syntax {
        origin: String,
        format: &'static str,
        line: usize,
        column: usize,
        message: String,
    },

    /// A file in a format perfcast does not read, or a file that is not a table at the top.
    #[error("`{origin}`: {message}")]
    Format { origin: String, message: String },

    /// `include = [...]` came back to a file that is already being included.
    #[error("include cycle: {}", chain.join(" -> "))]
    IncludeCycle { chain: Vec<String> },

    /// Includes nested deeper, or repeated more often, than a configuration can sensibly need
    /// (a chain of thousands of files, or diamonds that multiply).
    #[error("{origin}: {what} (at most {limit}); check its `include` lists")]
    TooManyIncludes {
        origin: String,
        what: String,
        limit: usize,
    },

    /// `preset:NAME` names no built-in preset.
    #[error("unknown preset `{name}`{}{}; built-in presets: {}", included(included_by), near(name, known), known.join(", "))]
    UnknownPreset {
        name: String,
        included_by: Option<String>,
        known: Vec<String>,
    },

    /// `stack = "NAME"` names no stack preset (`configs/stacks/`) and no stack file.
    #[error(
        "unknown stack `{name}` (from {origin}){}; stacks: {}",
        if nearest.is_empty() { String::new() } else { format!("; nearest: {}", nearest.join(", ")) },
        known.join(", ")
    )]
    UnknownStack {
        name: String,
        /// Where `stack` was set.
        origin: String,
        /// The known names closest to `name`, closest first.
        nearest: Vec<String>,
        known: Vec<String>,
    },

    /// A `--set` argument that is not `key=value` with a dotted key.
    #[error("invalid --set `{arg}`: {message} (expected `key.path=value`, e.g. `plan.tp=4`)")]
    BadSet { arg: String, message: String },

    /// A top-level key perfcast does not know.
    #[error("unknown top-level key `{key}` (from {origin}){}; allowed: {}", near(key, allowed), allowed.join(", "))]
    UnknownKey {
        key: String,
        origin: String,
        allowed: Vec<&'static str>,
    },

    /// A value of the wrong type, an unknown field, a missing field, an invalid value.
    #[error("invalid `{key}`{}: {message}", from(origin))]
    Invalid {
        key: String,
        origin: Option<String>,
        message: String,
    },

    /// A slot names a component that `[components]` does not define.
    #[error(
        "`{slot}` names component `{name}`{}, which is not defined{}; defined components: {}",
        from(origin),
        near(name, defined),
        list(defined)
    )]
    UndefinedComponent {
        slot: String,
        name: String,
        origin: Option<String>,
        defined: Vec<String>,
    },

    /// A component whose kind is registered under another category than its slot needs.
    #[error(transparent)]
    WrongCategory(Box<WrongCategory>),

    /// A component kind that no category of the registry knows.
    #[error(
        "unknown kind `{kind}` for `components.{name}.kind`{}{}{}; registered kinds: {}",
        from(origin),
        near_listed(kind, known),
        library_hint(kind),
        known
    )]
    UnknownKind {
        name: String,
        kind: String,
        origin: Option<String>,
        /// `category: a, b; category: c` for every category.
        known: String,
    },

    /// No plugin of this kind in any category (`perfcast plugins --describe KIND`).
    #[error("no plugin kind `{kind}`{hint}; registered: {}", known.join(", "))]
    UnknownPlugin {
        kind: String,
        /// `; did you mean ...?` or empty.
        hint: String,
        known: Vec<String>,
    },

    /// A plugin library that could not be loaded (`message` is the loader's, naming the file).
    #[error("cannot load {message}{}", named_by(origin))]
    Library {
        path: PathBuf,
        origin: Option<String>,
        message: String,
    },

    /// Built-in plugins that clash (a bug in the build, reported rather than hidden).
    #[error("plugin registry: {0}")]
    Registry(#[from] perfcast_core::registry::RegistryError),

    /// The model rejected a value or a plugin returned one that is not a finite number.
    #[error("{context}: {source}")]
    Model {
        context: String,
        #[source]
        source: perfcast_core::ModelError,
    },
}

/// `; did you mean ...?` for the nearest of `known`.
fn near<S: AsRef<str>>(word: &str, known: &[S]) -> String {
    perfcast_core::suggest::did_you_mean(word, known.iter().map(AsRef::as_ref))
}

/// [`near`] over the names of a `category: a, b; category: c` listing.
fn near_listed(word: &str, listing: &str) -> String {
    let names = listing
        .split(';')
        .filter_map(|part| part.split_once(':').map(|(_, names)| names))
        .flat_map(|names| names.split(','))
        .map(str::trim);
    perfcast_core::suggest::did_you_mean(word, names)
}

/// A namespaced kind (`vendor/name`) is a plugin library's: say how one is loaded.
fn library_hint(kind: &str) -> &'static str {
    if kind.contains('/') {
        " (a `vendor/name` kind is registered by a plugin library: load it with `--load PATH` \
         or a `[[plugins]]` entry of the configuration)"
    } else {
        ""
    }
}

fn included(by: &Option<String>) -> String {
    by.as_ref()
        .map(|b| format!(" (included by {b})"))
        .unwrap_or_default()
}

fn from(origin: &Option<String>) -> String {
    origin
        .as_ref()
        .map(|o| format!(" (from {o})"))
        .unwrap_or_default()
}

fn defined_in(origin: &Option<String>) -> String {
    origin
        .as_ref()
        .map(|o| format!(" (defined in {o})"))
        .unwrap_or_default()
}

fn named_by(origin: &Option<String>) -> String {
    origin
        .as_ref()
        .map(|o| format!(" (named by {o})"))
        .unwrap_or_default()
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// A slot (`device.compute`, `system.network[0]`, ...) names a component of another category.
#[derive(Debug, Error)]
#[error("`{slot}`{} needs a {wanted}, but component `{name}` is `{kind}`{}, of category {found}; {wanted} kinds: {}", from(slot_origin), defined_in(origin), list(known))]
pub struct WrongCategory {
    pub slot: String,
    pub slot_origin: Option<String>,
    pub name: String,
    pub kind: String,
    pub wanted: Category,
    pub found: Category,
    /// Where the component was defined.
    pub origin: Option<String>,
    /// The registered kinds of the wanted category.
    pub known: Vec<String>,
}
