//! The registry: one `name -> factory` map per category, fed by built-in plugins and by
//! dynamic plugins (added by the host's loader) alike. Built-ins are discovered with
//! `inventory` ([`builtin!`](crate::builtin!)) and added crate by crate, as the host
//! chooses ([`Registry::register_builtins_of`], [`register_fn!`](crate::register_fn!),
//! [`PluginGroup`]).

use crate::error::PluginError;
use crate::hardware::{ComputeUnit, Interconnect, MemoryTier};
use crate::parallel::{ParallelStrategy, PipelineSchedule, RecomputePolicy};
pub use crate::param_spec::{ParamDefault, ParamSpec, ParamType};
use crate::topology::Topology;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// Plugin categories: one trait each.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// [`ComputeUnit`] plugins.
    ComputeUnit,
    /// [`MemoryTier`] plugins.
    MemoryTier,
    /// [`Interconnect`] plugins.
    Interconnect,
    /// [`ParallelStrategy`] plugins.
    ParallelStrategy,
    /// [`RecomputePolicy`] plugins.
    RecomputePolicy,
    /// [`PipelineSchedule`] plugins.
    PipelineSchedule,
    /// [`Topology`] plugins.
    Topology,
}

impl Category {
    /// Every category, in declaration order.
    pub const ALL: [Category; 7] = [
        Category::ComputeUnit,
        Category::MemoryTier,
        Category::Interconnect,
        Category::ParallelStrategy,
        Category::RecomputePolicy,
        Category::PipelineSchedule,
        Category::Topology,
    ];
    /// Snake-case name (`compute_unit`, ...), as messages and listings spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Category::ComputeUnit => "compute_unit",
            Category::MemoryTier => "memory_tier",
            Category::Interconnect => "interconnect",
            Category::ParallelStrategy => "parallel_strategy",
            Category::RecomputePolicy => "recompute_policy",
            Category::PipelineSchedule => "pipeline_schedule",
            Category::Topology => "topology",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A built component: the trait object of its category.
#[derive(Clone)]
pub enum Component {
    /// A compute unit.
    ComputeUnit(Arc<dyn ComputeUnit>),
    /// A memory tier.
    MemoryTier(Arc<dyn MemoryTier>),
    /// An interconnect level.
    Interconnect(Arc<dyn Interconnect>),
    /// A parallel strategy.
    ParallelStrategy(Arc<dyn ParallelStrategy>),
    /// A recompute policy.
    RecomputePolicy(Arc<dyn RecomputePolicy>),
    /// A pipeline schedule.
    PipelineSchedule(Arc<dyn PipelineSchedule>),
    /// A network topology.
    Topology(Arc<dyn Topology>),
}

impl Component {
    /// The category of the trait object held.
    pub fn category(&self) -> Category {
        match self {
            Component::ComputeUnit(_) => Category::ComputeUnit,
            Component::MemoryTier(_) => Category::MemoryTier,
            Component::Interconnect(_) => Category::Interconnect,
            Component::ParallelStrategy(_) => Category::ParallelStrategy,
            Component::RecomputePolicy(_) => Category::RecomputePolicy,
            Component::PipelineSchedule(_) => Category::PipelineSchedule,
            Component::Topology(_) => Category::Topology,
        }
    }
}

/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "path")]
pub enum Origin {
    /// Linked into the binary (the crate name).
    BuiltIn(String),
    /// Loaded from a shared library.
    Library(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::BuiltIn(c) => write!(f, "built-in ({c})"),
            Origin::Library(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What the registry knows about a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    /// The trait it implements.
    pub category: Category,
    /// Registered name, unique in its category (`vendor/name` for dynamic plugins).
    pub name: String,
    /// Where it comes from.
    pub origin: Origin,
    /// The providing crate's version (built-ins) or the library's own version.
    pub version: String,
    /// ABI the plugin was built against (`None` for built-ins, which need none).
    pub abi_version: Option<String>,
    /// One line on what it models, for listings.
    pub description: String,
    /// Its parameters as the plugin declares them (`None`: the plugin declared nothing, as a
    /// library built before declarations existed).
    pub params: Option<Vec<ParamSpec>>,
}

/// Builds a component from its parameters (a JSON object).
pub type Factory = Arc<dyn Fn(&serde_json::Value) -> Result<Component, PluginError> + Send + Sync>;

/// A built-in plugin, submitted with `perfcast_core::inventory::submit!`.
pub struct BuiltinPlugin {
    /// The trait it implements.
    pub category: Category,
    /// Registered name, unique in its category.
    pub name: &'static str,
    /// The crate that provides it (`env!("CARGO_PKG_NAME")`).
    pub crate_name: &'static str,
    /// The crate's version (`env!("CARGO_PKG_VERSION")`).
    pub version: &'static str,
    /// One line on what it models, for listings.
    pub description: &'static str,
    /// Builds the component from its parameters (JSON; `null` when none are given, which
    /// [`crate::params::parse`] reads as an empty table).
    pub factory: fn(&serde_json::Value) -> Result<Component, PluginError>,
    /// Its parameters (`None`: not declared; `Some(&[])`: it takes none).
    pub params: Option<&'static [ParamSpec]>,
}

impl BuiltinPlugin {
    /// What the registry records of this built-in.
    pub fn info(&self) -> PluginInfo {
        PluginInfo {
            category: self.category,
            name: self.name.to_string(),
            origin: Origin::BuiltIn(self.crate_name.to_string()),
            version: self.version.to_string(),
            abi_version: None,
            description: self.description.to_string(),
            params: self.params.map(<[ParamSpec]>::to_vec),
        }
    }
}

/// Every built-in linked into this binary, whichever crate submitted it (for checks that no
/// crate is left out of a group).
pub fn linked_builtins() -> impl Iterator<Item = &'static BuiltinPlugin> {
    inventory::iter::<BuiltinPlugin>.into_iter()
}

/// A set of plugins a host adds to a registry in one call, as bevy's `PluginGroup`: each
/// plugin crate exposes `register(&mut Registry)`, and `perfcast-builtins` composes them.
pub trait PluginGroup {
    /// Add this group's plugins to `registry`.
    fn register(&self, registry: &mut Registry) -> Result<(), RegistryError>;
}

inventory::collect!(BuiltinPlugin);

/// Register a built-in plugin of the calling crate, with its parameters:
/// `perfcast_core::builtin!(MemoryTier, "hbm", "description", factory_fn, params = HBM_PARAMS);`
/// (`HBM_PARAMS: &[ParamSpec]`, a `static`; `params = &[]` for a plugin that takes none).
/// The form without `params` registers a plugin whose parameters are not declared.
/// The crate name and version are the caller's (`env!` expands in the calling crate).
#[macro_export]
macro_rules! builtin {
    ($category:ident, $name:expr, $desc:expr, $factory:expr, params = $params:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::BuiltinPlugin {
                category: $crate::registry::Category::$category,
                name: $name,
                crate_name: env!("CARGO_PKG_NAME"),
                version: env!("CARGO_PKG_VERSION"),
                description: $desc,
                factory: $factory,
                params: ::std::option::Option::Some($params),
            }
        }
    };
    ($category:ident, $name:expr, $desc:expr, $factory:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::BuiltinPlugin {
                category: $crate::registry::Category::$category,
                name: $name,
                crate_name: env!("CARGO_PKG_NAME"),
                version: env!("CARGO_PKG_VERSION"),
                description: $desc,
                factory: $factory,
                params: ::std::option::Option::None,
            }
        }
    };
}

/// Define the calling plugin crate's `pub fn register(registry: &mut Registry)`, which adds
/// every plugin the crate submitted with [`builtin!`](crate::builtin!). Hosts compose crates
/// by calling their `register` (naming the function also keeps the crate, and its inventory
/// entries, linked).
#[macro_export]
macro_rules! register_fn {
    () => {
        /// Register this crate's built-in plugins in `registry` (an error if a name is taken).
        pub fn register(
            registry: &mut $crate::Registry,
        ) -> ::std::result::Result<(), $crate::registry::RegistryError> {
            registry
                .register_builtins_of(env!("CARGO_PKG_NAME"))
                .map(|_| ())
        }
    };
}

/// Registry errors.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum RegistryError {
    /// A name already taken in its category.
    #[error("{category} `{name}` is registered twice: by {first} and by {second}")]
    Duplicate {
        /// The category.
        category: Category,
        /// The name.
        name: String,
        /// Origin of the plugin registered first.
        first: String,
        /// Origin of the one refused.
        second: String,
    },
    /// No plugin of this name in the category.
    #[error("unknown {category} kind `{name}`{}; registered: {}", crate::suggest::did_you_mean(name, known.iter().map(String::as_str)), if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    Unknown {
        /// The category.
        category: Category,
        /// The name asked for.
        name: String,
        /// The names registered in the category, sorted.
        known: Vec<String>,
    },
    /// The factory refused its parameters or failed.
    #[error("{category} `{name}`: {source}")]
    Build {
        /// The category.
        category: Category,
        /// The plugin's name.
        name: String,
        /// What the factory said.
        source: PluginError,
    },
    /// A built-in crate named (e.g. to leave it out of a group) is not one of the group's.
    #[error("no built-in plugin crate `{name}`; built-in crates: {}", known.join(", "))]
    NoCrate {
        /// The crate name given.
        name: String,
        /// The group's crate names.
        known: Vec<String>,
    },
    /// A crate registered through [`Registry::register_builtins_of`] submitted no built-in.
    #[error("plugin crate `{crate_name}` registered no built-in (is it linked?)")]
    NoBuiltins {
        /// The crate name given.
        crate_name: String,
    },
    /// A factory built a component of another category than it was registered under.
    #[error("{category} `{name}` built a {built} component")]
    WrongCategory {
        /// The category asked for (and registered under).
        category: Category,
        /// The plugin's name.
        name: String,
        /// The category of what the factory built.
        built: Category,
    },
}

struct Entry {
    info: PluginInfo,
    factory: Factory,
}

/// The name -> factory maps.
#[derive(Default)]
pub struct Registry {
    entries: BTreeMap<(Category, String), Entry>,
}

impl Registry {
    /// An empty registry (no built-ins: add them with [`Registry::register_builtins_of`] or
    /// a [`PluginGroup`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Register every built-in that the crate `crate_name` submitted with
    /// [`builtin!`](crate::builtin!) (inventory is how built-ins are discovered; which crates
    /// a registry holds is the host's choice: see `perfcast-builtins`). Returns how many were
    /// registered; a crate with none is an error, since its registrations were lost (the
    /// crate not linked). A name already taken is an error; the crate's plugins registered
    /// before it stay.
    pub fn register_builtins_of(&mut self, crate_name: &str) -> Result<usize, RegistryError> {
        let mut builtins: Vec<&BuiltinPlugin> = inventory::iter::<BuiltinPlugin>
            .into_iter()
            .filter(|b| b.crate_name == crate_name)
            .collect();
        if builtins.is_empty() {
            return Err(RegistryError::NoBuiltins {
                crate_name: crate_name.to_string(),
            });
        }
        builtins.sort_by_key(|b| (b.category, b.name));
        for b in &builtins {
            let f = b.factory;
            self.register(b.info(), Arc::new(f))?;
        }
        Ok(builtins.len())
    }

    /// Add every plugin of `group` (bevy's `PluginGroup`).
    pub fn add_group(&mut self, group: &dyn PluginGroup) -> Result<(), RegistryError> {
        group.register(self)
    }

    /// Move every plugin of `other` into this registry (a name taken in both is an error
    /// naming both origins, and nothing of `other` is added).
    pub fn merge(&mut self, other: Registry) -> Result<(), RegistryError> {
        for (key, e) in &other.entries {
            if let Some(prev) = self.entries.get(key) {
                return Err(RegistryError::Duplicate {
                    category: key.0,
                    name: key.1.clone(),
                    first: prev.info.origin.to_string(),
                    second: e.info.origin.to_string(),
                });
            }
        }
        self.entries.extend(other.entries);
        Ok(())
    }

    /// Remove a plugin; what it was, if it was registered.
    pub fn remove(&mut self, category: Category, name: &str) -> Option<PluginInfo> {
        self.entries
            .remove(&(category, name.to_string()))
            .map(|e| e.info)
    }

    /// Register a plugin in place of the one of the same category and name (or add it);
    /// what it replaced, if anything.
    pub fn replace(&mut self, info: PluginInfo, factory: Factory) -> Option<PluginInfo> {
        let key = (info.category, info.name.clone());
        self.entries
            .insert(key, Entry { info, factory })
            .map(|e| e.info)
    }

    /// Add a plugin; a name already taken in its category is an error naming both origins.
    pub fn register(&mut self, info: PluginInfo, factory: Factory) -> Result<(), RegistryError> {
        let key = (info.category, info.name.clone());
        if let Some(prev) = self.entries.get(&key) {
            return Err(RegistryError::Duplicate {
                category: info.category,
                name: info.name,
                first: prev.info.origin.to_string(),
                second: info.origin.to_string(),
            });
        }
        self.entries.insert(key, Entry { info, factory });
        Ok(())
    }

    /// Whether `name` is registered in `category`.
    pub fn contains(&self, category: Category, name: &str) -> bool {
        self.entries.contains_key(&(category, name.to_string()))
    }

    /// Registered names of a category, sorted.
    pub fn names(&self, category: Category) -> Vec<String> {
        self.entries
            .keys()
            .filter(|(c, _)| *c == category)
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// Every plugin, sorted by category then name.
    pub fn plugins(&self) -> impl Iterator<Item = &PluginInfo> {
        self.entries.values().map(|e| &e.info)
    }

    /// What is registered as `name` in `category`, if anything.
    pub fn info(&self, category: Category, name: &str) -> Option<&PluginInfo> {
        self.entries
            .get(&(category, name.to_string()))
            .map(|e| &e.info)
    }

    /// Build a component of `category` named `name` from `params`: an error if the name is
    /// unknown (listing the registered ones), the factory fails, or it builds another
    /// category.
    pub fn build(
        &self,
        category: Category,
        name: &str,
        params: &serde_json::Value,
    ) -> Result<Component, RegistryError> {
        let entry = self
            .entries
            .get(&(category, name.to_string()))
            .ok_or_else(|| RegistryError::Unknown {
                category,
                name: name.to_string(),
                known: self.names(category),
            })?;
        let c = (entry.factory)(params).map_err(|source| RegistryError::Build {
            category,
            name: name.to_string(),
            source,
        })?;
        if c.category() != category {
            return Err(RegistryError::WrongCategory {
                category,
                name: name.to_string(),
                built: c.category(),
            });
        }
        Ok(c)
    }
}

macro_rules! typed_build {
    ($fn:ident, $variant:ident, $tr:path) => {
        impl Registry {
            #[doc = concat!("Build a `", stringify!($variant), "` by name.")]
            pub fn $fn(
                &self,
                name: &str,
                params: &serde_json::Value,
            ) -> Result<Arc<dyn $tr>, RegistryError> {
                match self.build(Category::$variant, name, params)? {
                    Component::$variant(c) => Ok(c),
                    other => Err(RegistryError::WrongCategory {
                        category: Category::$variant,
                        name: name.to_string(),
                        built: other.category(),
                    }),
                }
            }
        }
    };
}

typed_build!(compute_unit, ComputeUnit, ComputeUnit);
typed_build!(memory_tier, MemoryTier, MemoryTier);
typed_build!(interconnect, Interconnect, Interconnect);
typed_build!(parallel_strategy, ParallelStrategy, ParallelStrategy);
typed_build!(recompute_policy, RecomputePolicy, RecomputePolicy);
typed_build!(pipeline_schedule, PipelineSchedule, PipelineSchedule);
typed_build!(topology, Topology, Topology);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::hardware::Engine;
    use crate::units::FlopRate;

    struct Dummy;
    impl ComputeUnit for Dummy {
        fn kind(&self) -> &str {
            "dummy"
        }
        fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
            Some(FlopRate(1.0))
        }
    }

    fn info(name: &str, origin: Origin) -> PluginInfo {
        PluginInfo {
            category: Category::ComputeUnit,
            name: name.into(),
            origin,
            version: "1".into(),
            abi_version: None,
            description: String::new(),
            params: None,
        }
    }

    fn factory() -> Factory {
        Arc::new(|_| Ok(Component::ComputeUnit(Arc::new(Dummy))))
    }

    #[test]
    fn duplicate_names_both_origins() {
        let mut r = Registry::new();
        r.register(info("x/dev", Origin::BuiltIn("a".into())), factory())
            .unwrap();
        let e = r
            .register(
                info("x/dev", Origin::Library("/tmp/libx.so".into())),
                factory(),
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("built-in (a)") && e.contains("/tmp/libx.so"),
            "{e}"
        );
    }

    #[test]
    fn unknown_lists_known_and_typed_build_checks_category() {
        let mut r = Registry::new();
        r.register(info("x/dev", Origin::BuiltIn("a".into())), factory())
            .unwrap();
        let e = r
            .build(Category::ComputeUnit, "nope", &serde_json::Value::Null)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("x/dev"), "{e}");
        assert!(r.compute_unit("x/dev", &serde_json::Value::Null).is_ok());
        // A factory filed under the wrong category is caught.
        let mut bad = info("y", Origin::BuiltIn("a".into()));
        bad.category = Category::MemoryTier;
        r.register(bad, factory()).unwrap();
        assert!(matches!(
            r.memory_tier("y", &serde_json::Value::Null),
            Err(RegistryError::WrongCategory { .. })
        ));
    }
}
