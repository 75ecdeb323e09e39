//! Reading a cases file: TOML, the top-level keys and `meta.schema`, every `[[case]]`
//! deserialized (an error names its key path) and checked ([`super::check`]); all errors of the
//! file are collected and returned together.

use super::check::check_case;
use super::schema::Case;
use std::collections::BTreeSet;
use std::path::Path;
use thiserror::Error;

/// The schema name this parser reads.
pub const SCHEMA: &str = "perfcast-validation/1";

/// A rejected cases file.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CasesError {
    #[error("{file}: cannot read: {message}")]
    Io { file: String, message: String },
    #[error("{file}: not valid TOML: {message}")]
    Toml { file: String, message: String },
    /// One or more schema errors, each naming the case and key.
    #[error("{file}: {} schema error(s):\n  {}", errors.len(), errors.join("\n  "))]
    Schema { file: String, errors: Vec<String> },
}
/// A parsed cases file.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesFile {
    /// Where it came from (for messages).
    pub file: String,
    pub cases: Vec<Case>,
}

impl CasesFile {
    /// Read and check a cases file.
    pub fn load(path: &Path) -> Result<CasesFile, CasesError> {
        let file = path.display().to_string();
        let text = perfcast_config::input::read_text(path, perfcast_config::input::MAX_TEXT_BYTES)
            .map_err(|e| CasesError::Io {
                file: file.clone(),
                message: e.to_string(),
            })?;
        CasesFile::parse(&text, &file)
    }

    /// Parse and check the text of a cases file; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<CasesFile, CasesError> {
        let root: toml::Table = toml::from_str(text).map_err(|e| CasesError::Toml {
            file: file.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let mut errors = Vec::new();
        for k in root.keys() {
            if k != "meta" && k != "case" {
                errors.push(format!(
                    "unknown top-level key `{k}` (allowed: `meta`, `case`)"
                ));
            }
        }
        match root.get("meta").and_then(|m| m.get("schema")) {
            Some(toml::Value::String(s)) if s == SCHEMA => {}
            Some(v) => errors.push(format!("meta.schema = {v}: expected \"{SCHEMA}\"")),
            None => errors.push(format!(
                "meta.schema missing: a cases file starts with [meta] schema = \"{SCHEMA}\""
            )),
        }
        if let Some(meta) = root.get("meta").and_then(|m| m.as_table()) {
            for k in meta.keys().filter(|k| *k != "schema") {
                errors.push(format!("unknown key `meta.{k}` (allowed: `schema`)"));
            }
        }
        let raw_cases = match root.get("case") {
            Some(toml::Value::Array(a)) if !a.is_empty() => a.clone(),
            Some(toml::Value::Array(_)) | None => {
                errors.push("no [[case]] entries".to_string());
                Vec::new()
            }
            Some(_) => {
                errors.push("`case` must be an array of tables ([[case]])".to_string());
                Vec::new()
            }
        };
        let mut cases = Vec::new();
        let mut ids = BTreeSet::new();
        for (i, raw) in raw_cases.into_iter().enumerate() {
            let label = match raw.get("id").and_then(|v| v.as_str()) {
                Some(id) => format!("case `{id}`"),
                None => format!("case #{} (no id)", i + 1),
            };
            let parsed: Result<Case, _> = serde_path_to_error::deserialize(raw);
            match parsed {
                Ok(c) => {
                    if !ids.insert(c.id.clone()) {
                        errors.push(format!("{label}: duplicate id"));
                    }
                    for e in check_case(&c) {
                        errors.push(format!("{label}: {e}"));
                    }
                    cases.push(c);
                }
                Err(e) => {
                    let path = e.path().to_string();
                    let msg = e.into_inner().to_string();
                    let msg = msg.trim_end();
                    if path == "." || path.is_empty() {
                        errors.push(format!("{label}: {msg}"));
                    } else {
                        errors.push(format!("{label}: key `{path}`: {msg}"));
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(CasesFile {
                file: file.to_string(),
                cases,
            })
        } else {
            Err(CasesError::Schema {
                file: file.to_string(),
                errors,
            })
        }
    }

    /// Cases of one group (all when `group` is `None`).
    pub fn group<'a>(&'a self, group: Option<&'a str>) -> impl Iterator<Item = &'a Case> + 'a {
        self.cases
            .iter()
            .filter(move |c| group.is_none_or(|g| c.group == g))
    }

    /// Group names in file order, each once.
    pub fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in &self.cases {
            if !out.contains(&c.group) {
                out.push(c.group.clone());
            }
        }
        out
    }
}
