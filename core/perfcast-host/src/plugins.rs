//! Plugin libraries and the registry listing.
//!
//! Only the paths a user names (`[[plugins]] path` in a config, `--load PATH`) are loaded:
//! loading a shared library runs its code, so there is no directory scanning.

use crate::error::HostError;
use perfcast_core::{Category, Registry};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What a loaded library registered.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LibraryInfo {
    pub path: PathBuf,
    /// The plugin's own name.
    pub plugin: String,
    pub version: String,
    /// ABI the library was built against.
    pub abi: String,
    pub components: Vec<(Category, String)>,
}

/// Load one library into `registry`: the single place the host calls the loader. The error is
/// the loader's short message, which names the file.
pub fn load_library(
    path: &Path,
    sha256: Option<&str>,
    registry: &mut Registry,
) -> Result<LibraryInfo, String> {
    let lib = perfcast_loader::load_library(path, sha256, registry).map_err(|e| e.to_string())?;
    Ok(LibraryInfo {
        path: lib.path,
        plugin: lib.plugin,
        version: lib.version,
        abi: lib.abi,
        components: lib.components,
    })
}

/// The built-in registry plus `libraries`, for hosts that list plugins without a config.
pub fn registry_with(libraries: &[PathBuf]) -> Result<(Registry, Vec<LibraryInfo>), HostError> {
    let mut registry = perfcast_builtins::registry()?;
    let mut infos = Vec::new();
    for p in libraries {
        let info = load_library(p, None, &mut registry).map_err(|message| HostError::Library {
            path: p.clone(),
            origin: Some("--load".into()),
            message,
        })?;
        infos.push(info);
    }
    Ok((registry, infos))
}

/// One row of `perfcast plugins`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PluginRow {
    pub category: Category,
    pub name: String,
    /// `built-in (crate)` or the library file.
    pub origin: String,
    pub version: String,
    /// `-` for built-ins (linked in, no ABI).
    pub abi: String,
    pub description: String,
}

/// Every registered plugin, sorted by category then name.
pub fn plugin_rows(registry: &Registry) -> Vec<PluginRow> {
    registry
        .plugins()
        .map(|p| PluginRow {
            category: p.category,
            name: p.name.clone(),
            origin: p.origin.to_string(),
            version: p.version.clone(),
            abi: p.abi_version.clone().unwrap_or_else(|| "-".into()),
            description: p.description.clone(),
        })
        .collect()
}
