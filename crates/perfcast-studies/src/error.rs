//! Errors of the studies: each names the study config file, the key and what is allowed.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StudyError {
    /// A study name that is not one of [`crate::STUDIES`].
    #[error("unknown study `{name}`{}; known studies: {}", perfcast_core::suggest::did_you_mean(name, known.iter().map(String::as_str)), known.join(", "))]
    Unknown { name: String, known: Vec<String> },

    /// The study config cannot be read.
    #[error("cannot read study config `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A bad value in the study config.
    #[error("{}: invalid `{key}`: {message}", file.display())]
    Config {
        file: PathBuf,
        key: String,
        message: String,
    },

    /// A system or model file named by the study config could not be loaded.
    #[error("{}: `{key}` = {}: {source}", file.display(), target.display())]
    Host {
        file: PathBuf,
        key: String,
        target: PathBuf,
        #[source]
        source: Box<perfcast_scenario::ScenarioError>,
    },

    /// The model rejected a scenario of the study.
    #[error("{context}: {source}")]
    Model {
        context: String,
        #[source]
        source: Box<perfcast_core::ModelError>,
    },

    /// A plot could not be drawn (non-finite data).
    #[error(transparent)]
    Plot(#[from] perfcast_render::figure::PlotError),

    /// An output file could not be written.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
