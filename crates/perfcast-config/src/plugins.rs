//! Plugin libraries and the registry listing.
//!
//! Only the paths a user names (`[[plugins]] path` in a config, `--load PATH`) are loaded:
//! loading a shared library runs its code, so there is no directory scanning.

use crate::error::HostError;
use perfcast_core::registry::{PluginGroup, RegistryError};
use perfcast_core::{Category, Registry};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `[[plugins]]`: a shared library to load.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// Relative paths are relative to the config file that names them.
    pub path: PathBuf,
    /// Optional sha256 pin of the file (hex).
    #[serde(default)]
    pub sha256: Option<String>,
    /// Run the library in a child process (`perfcast plugin-host`): a crash, hang or exit
    /// of the plugin becomes an error instead of ending perfcast.
    #[serde(default)]
    pub isolate: bool,
    /// Time limit of one call of an isolated library, seconds (default 10).
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// A library named by path alone (`--load PATH`): not pinned, isolated only by `--isolate`.
impl From<PathBuf> for PluginSpec {
    fn from(path: PathBuf) -> PluginSpec {
        PluginSpec {
            path,
            sha256: None,
            isolate: false,
            timeout_s: None,
        }
    }
}

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
    isolate: Option<&perfcast_loader::isolate::IsolateOptions>,
) -> Result<LibraryInfo, String> {
    let lib = match isolate {
        Some(opts) => perfcast_loader::load_library_isolated(path, sha256, registry, opts),
        None => perfcast_loader::load_library(path, sha256, registry),
    }
    .map_err(|e| e.to_string())?;
    Ok(LibraryInfo {
        path: lib.path,
        plugin: lib.plugin,
        version: lib.version,
        abi: lib.abi,
        components: lib.components,
    })
}

/// The plugins a host chose (bevy's `DefaultPlugins`, or a group of its own): every
/// configuration loaded with them starts from a registry holding this group, and the
/// libraries the configuration names are loaded on top. A library crate never picks the
/// built-ins itself; it takes the `Plugins` its host hands it (tests/layering.rs holds every
/// crate but the hosts and the testkit to that).
///
/// It also carries the kernel tables the host offers (`perfcast-kernel-data`'s, or none): a
/// device whose configuration names a table (`device.kernels`) times its GEMMs from it.
#[derive(Clone)]
pub struct Plugins {
    group: Arc<dyn PluginGroup + Send + Sync>,
    kernels: Option<Arc<perfcast_kernels::Catalog>>,
}

impl Plugins {
    /// The plugins of `group`, with no kernel tables.
    pub fn new(group: impl PluginGroup + Send + Sync + 'static) -> Plugins {
        Plugins {
            group: Arc::new(group),
            kernels: None,
        }
    }

    /// These plugins with the kernel tables of `catalog`.
    pub fn with_kernels(mut self, catalog: Arc<perfcast_kernels::Catalog>) -> Plugins {
        self.kernels = Some(catalog);
        self
    }

    /// The kernel tables the host offers.
    pub fn kernels(&self) -> Option<&Arc<perfcast_kernels::Catalog>> {
        self.kernels.as_ref()
    }

    /// No plugins: a configuration read for its data only (model presets, stacks) needs
    /// none, and resolving a component in it says that no plugins were handed in.
    pub fn none() -> Plugins {
        struct Empty;
        impl PluginGroup for Empty {
            fn register(&self, _: &mut Registry) -> Result<(), RegistryError> {
                Ok(())
            }
        }
        Plugins::new(Empty)
    }

    /// A fresh registry holding this group.
    pub fn registry(&self) -> Result<Registry, RegistryError> {
        let mut r = Registry::new();
        r.add_group(&*self.group)?;
        Ok(r)
    }
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Plugins(..)")
    }
}

/// The registry of `plugins` plus `libraries` (each isolated with `isolate`, if given), for
/// hosts that list plugins without a config.
pub fn registry_with(
    plugins: &Plugins,
    libraries: &[PluginSpec],
    isolate: Option<&perfcast_loader::isolate::IsolateOptions>,
) -> Result<(Registry, Vec<LibraryInfo>), HostError> {
    let mut registry = plugins.registry()?;
    let mut infos = Vec::new();
    for p in libraries {
        let info = load_library(&p.path, p.sha256.as_deref(), &mut registry, isolate).map_err(
            |message| HostError::Library {
                path: p.path.clone(),
                origin: Some("--load".into()),
                message,
            },
        )?;
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

/// One declared parameter of a plugin, as `perfcast plugins --describe` prints it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ParamRow {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub unit: String,
    /// `required`, the TOML value, or `(how it is computed)`.
    pub default: String,
    pub range: String,
    pub description: String,
    pub source: String,
}

/// What `perfcast plugins --describe KIND` shows of one plugin.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Described {
    pub category: Category,
    pub name: String,
    pub origin: String,
    pub description: String,
    /// `None`: the plugin declares no parameters (a library built before declarations).
    pub params: Option<Vec<ParamRow>>,
}

fn param_rows(params: &[perfcast_core::ParamSpec]) -> Vec<ParamRow> {
    params
        .iter()
        .map(|p| ParamRow {
            name: p.name.to_string(),
            ty: p.ty.to_string(),
            unit: p.unit.to_string(),
            default: p.default.to_string(),
            range: p.range.to_string(),
            description: p.doc.to_string(),
            source: p.source.to_string(),
        })
        .collect()
}

/// The plugins registered as `kind` (in any category), or an error naming the nearest kinds.
pub fn describe(registry: &Registry, kind: &str) -> Result<Vec<Described>, HostError> {
    let found: Vec<Described> = registry
        .plugins()
        .filter(|p| p.name == kind)
        .map(|p| Described {
            category: p.category,
            name: p.name.clone(),
            origin: p.origin.to_string(),
            description: p.description.clone(),
            params: p.params.as_deref().map(param_rows),
        })
        .collect();
    if found.is_empty() {
        let names: Vec<String> = registry.plugins().map(|p| p.name.clone()).collect();
        let mut known = names.clone();
        known.sort();
        known.dedup();
        return Err(HostError::UnknownPlugin {
            hint: perfcast_core::suggest::did_you_mean(kind, names.iter().map(String::as_str)),
            kind: kind.to_string(),
            known,
        });
    }
    Ok(found)
}

/// The parameter reference of every plugin of `registry`, as Markdown: `docs/reference.md`
/// is this for the built-ins (`perfcast plugins --reference > docs/reference.md`; a test
/// fails when the file is stale).
pub fn reference_markdown(registry: &Registry) -> String {
    use std::fmt::Write as _;
    let cell = |s: &str| s.replace('|', "\\|");
    let mut s = String::from(
        "# Plugin parameter reference\n\n\
         Every registered plugin and its parameters: the keys of a `[components.NAME]` table \
         of that `kind` (hardware) or of `options.strategy_params.NAME` (parallel strategies), \
         with type, unit, default (`required`, a value, or how it is computed), the values \
         allowed, what it means and where the default comes from. Generated from the plugins' \
         own declarations: `perfcast plugins --reference > docs/reference.md` (a test fails \
         when this file is stale); `perfcast plugins --describe KIND` prints one plugin, \
         loaded libraries included.\n",
    );
    for c in Category::ALL {
        let plugins: Vec<&perfcast_core::PluginInfo> =
            registry.plugins().filter(|p| p.category == c).collect();
        if plugins.is_empty() {
            continue;
        }
        let _ = write!(s, "\n## {c}\n");
        for p in plugins {
            let _ = write!(
                s,
                "\n### `{}`\n\n{} ({}).\n\n",
                p.name,
                cell(&p.description),
                p.origin
            );
            match &p.params {
                None => s.push_str("Parameters not declared.\n"),
                Some(ps) if ps.is_empty() => s.push_str("No parameters.\n"),
                Some(ps) => {
                    s.push_str(
                        "| parameter | type | unit | default | allowed | meaning | source |\n\
                         |---|---|---|---|---|---|---|\n",
                    );
                    for r in param_rows(ps) {
                        let _ = writeln!(
                            s,
                            "| `{}` | {} | {} | {} | {} | {} | {} |",
                            r.name,
                            r.ty,
                            cell(&r.unit),
                            cell(&r.default),
                            cell(&r.range),
                            cell(&r.description),
                            cell(&r.source)
                        );
                    }
                }
            }
        }
    }
    s
}
