//! What can be wrong with a kernel table, each naming the file (and the row and field where
//! there is one).

use thiserror::Error;

#[derive(Debug, Clone, Error)]
pub enum KernelError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}: missing column `{column}` (a {op} table has {expected})")]
    MissingColumn {
        file: String,
        op: String,
        column: String,
        expected: String,
    },
    #[error("{file}, row {row}, field `{field}`: {message}")]
    Row {
        file: String,
        row: usize,
        field: String,
        message: String,
    },
    #[error("no kernel table for GPU `{gpu}`{}", near_names(.near))]
    UnknownGpu { gpu: String, near: Vec<String> },
    #[error("GPU `{gpu}` has no {op} table (it has: {have})")]
    NoTable {
        gpu: String,
        op: String,
        have: String,
    },
}

fn near_names(near: &[String]) -> String {
    if near.is_empty() {
        String::new()
    } else {
        format!(" (nearest: {})", near.join(", "))
    }
}

impl KernelError {
    pub(crate) fn io(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        KernelError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }

    pub(crate) fn file(file: &str, message: impl Into<String>) -> Self {
        KernelError::File {
            file: file.to_string(),
            message: message.into(),
        }
    }
}
