//! The registry: one `name -> factory` map per category, fed by built-in plugins (collected
//! with `inventory`) and by dynamic plugins (added by the host's loader) alike.

use crate::error::PluginError;
use crate::hardware::{ComputeUnit, Interconnect, MemoryTier};
use crate::parallel::{ParallelStrategy, PipelineSchedule, RecomputePolicy};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// Plugin categories: one trait each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    ComputeUnit,
    MemoryTier,
    Interconnect,
    ParallelStrategy,
    RecomputePolicy,
    PipelineSchedule,
}

impl Category {
    pub const ALL: [Category; 6] = [
        Category::ComputeUnit,
        Category::MemoryTier,
        Category::Interconnect,
        Category::ParallelStrategy,
        Category::RecomputePolicy,
        Category::PipelineSchedule,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            Category::ComputeUnit => "compute_unit",
            Category::MemoryTier => "memory_tier",
            Category::Interconnect => "interconnect",
            Category::ParallelStrategy => "parallel_strategy",
            Category::RecomputePolicy => "recompute_policy",
            Category::PipelineSchedule => "pipeline_schedule",
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
    ComputeUnit(Arc<dyn ComputeUnit>),
    MemoryTier(Arc<dyn MemoryTier>),
    Interconnect(Arc<dyn Interconnect>),
    ParallelStrategy(Arc<dyn ParallelStrategy>),
    RecomputePolicy(Arc<dyn RecomputePolicy>),
    PipelineSchedule(Arc<dyn PipelineSchedule>),
}

impl Component {
    pub fn category(&self) -> Category {
        match self {
            Component::ComputeUnit(_) => Category::ComputeUnit,
            Component::MemoryTier(_) => Category::MemoryTier,
            Component::Interconnect(_) => Category::Interconnect,
            Component::ParallelStrategy(_) => Category::ParallelStrategy,
            Component::RecomputePolicy(_) => Category::RecomputePolicy,
            Component::PipelineSchedule(_) => Category::PipelineSchedule,
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
    pub category: Category,
    pub name: String,
    pub origin: Origin,
    pub version: String,
    /// ABI the plugin was built against (`None` for built-ins, which need none).
    pub abi_version: Option<String>,
    pub description: String,
}

/// Builds a component from its parameters (a JSON object).
pub type Factory = Arc<dyn Fn(&serde_json::Value) -> Result<Component, PluginError> + Send + Sync>;

/// A built-in plugin, submitted with `perfcast_core::inventory::submit!`.
pub struct BuiltinPlugin {
    pub category: Category,
    pub name: &'static str,
    /// The crate that provides it (`env!("CARGO_PKG_NAME")`).
    pub crate_name: &'static str,
    pub version: &'static str,
    pub description: &'static str,
    pub factory: fn(&serde_json::Value) -> Result<Component, PluginError>,
}

inventory::collect!(BuiltinPlugin);

/// Register a built-in plugin of the calling crate:
/// `perfcast_core::builtin!(MemoryTier, "hbm", "description", factory_fn);`.
/// The crate name and version are the caller's (`env!` expands in the calling crate).
#[macro_export]
macro_rules! builtin {
    ($category:ident, $name:expr, $desc:expr, $factory:expr) => {
        $crate::inventory::submit! {
            $crate::registry::BuiltinPlugin {
                category: $crate::registry::Category::$category,
                name: $name,
                crate_name: env!("CARGO_PKG_NAME"),
                version: env!("CARGO_PKG_VERSION"),
                description: $desc,
                factory: $factory,
            }
        }
    };
}

/// Registry errors.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum RegistryError {
    #[error("{category} `{name}` is registered twice: by {first} and by {second}")]
    Duplicate {
        category: Category,
        name: String,
        first: String,
        second: String,
    },
    #[error("unknown {category} kind `{name}`; registered: {}", if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    Unknown {
        category: Category,
        name: String,
        known: Vec<String>,
    },
    #[error("{category} `{name}`: {source}")]
    Build {
        category: Category,
        name: String,
        source: PluginError,
    },
    #[error("{category} `{name}` built a {built} component")]
    WrongCategory {
        category: Category,
        name: String,
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
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding every built-in linked into this binary.
    pub fn with_builtins() -> Result<Self, RegistryError> {
        let mut r = Registry::new();
        let mut builtins: Vec<&BuiltinPlugin> =
            inventory::iter::<BuiltinPlugin>.into_iter().collect();
        builtins.sort_by_key(|b| (b.category, b.name));
        for b in builtins {
            let f = b.factory;
            r.register(
                PluginInfo {
                    category: b.category,
                    name: b.name.to_string(),
                    origin: Origin::BuiltIn(b.crate_name.to_string()),
                    version: b.version.to_string(),
                    abi_version: None,
                    description: b.description.to_string(),
                },
                Arc::new(f),
            )?;
        }
        Ok(r)
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

    pub fn info(&self, category: Category, name: &str) -> Option<&PluginInfo> {
        self.entries
            .get(&(category, name.to_string()))
            .map(|e| &e.info)
    }

    /// Build a component of `category` named `name` from `params`.
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
