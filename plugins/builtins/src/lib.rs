//! The built-in plugins as one group a host composes (bevy's `DefaultPlugins`).
//!
//! Each plugin crate exposes `register(&mut Registry)` (its [`perfcast_core::builtin!`]
//! entries, discovered with `inventory`); [`DefaultPlugins`] calls every crate's `register`,
//! and a host may leave crates or single plugins out, or replace one
//! ([`perfcast_core::Registry::replace`]) after building. Calling each crate's function is
//! also what keeps it linked: an `inventory` registration in a crate nobody names silently
//! vanishes.

use perfcast_core::registry::{Category, PluginGroup, Registry, RegistryError};

/// One built-in plugin crate: its package name and its `register` function.
#[derive(Clone, Copy)]
pub struct PluginCrate {
    /// The crate's package name (what `perfcast plugins` shows as the origin).
    pub name: &'static str,
    /// Adds the crate's plugins to a registry.
    pub register: fn(&mut Registry) -> Result<(), RegistryError>,
}

/// Every built-in plugin crate, in registration order.
pub const CRATES: [PluginCrate; 8] = [
    PluginCrate {
        name: "perfcast-plugin-gpu",
        register: perfcast_plugin_gpu::register,
    },
    PluginCrate {
        name: "perfcast-plugin-memory",
        register: perfcast_plugin_memory::register,
    },
    PluginCrate {
        name: "perfcast-plugin-network",
        register: perfcast_plugin_network::register,
    },
    PluginCrate {
        name: "perfcast-plugin-technology",
        register: perfcast_plugin_technology::register,
    },
    PluginCrate {
        name: "perfcast-plugin-parallel",
        register: perfcast_plugin_parallel::register,
    },
    PluginCrate {
        name: "perfcast-plugin-recompute",
        register: perfcast_plugin_recompute::register,
    },
    PluginCrate {
        name: "perfcast-plugin-schedule",
        register: perfcast_plugin_schedule::register,
    },
    PluginCrate {
        name: "perfcast-plugin-topology",
        register: perfcast_plugin_topology::register,
    },
];

/// The built-in plugins: all of them, or all but the crates and plugins left out.
///
/// ```
/// use perfcast_builtins::DefaultPlugins;
/// use perfcast_core::Category;
/// let registry = DefaultPlugins::new()
///     .without_crate("perfcast-plugin-technology")
///     .without(Category::Interconnect, "torus")
///     .build()
///     .unwrap();
/// assert!(registry.contains(Category::ComputeUnit, "gpu"));
/// assert!(!registry.contains(Category::ComputeUnit, "tech/gpu"));
/// assert!(!registry.contains(Category::Interconnect, "torus"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct DefaultPlugins {
    without_crates: Vec<String>,
    without: Vec<(Category, String)>,
}

impl DefaultPlugins {
    /// Every built-in crate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leave out every plugin of the crate `name` (a [`CRATES`] name).
    pub fn without_crate(mut self, name: &str) -> Self {
        self.without_crates.push(name.to_string());
        self
    }

    /// Leave out one plugin.
    pub fn without(mut self, category: Category, name: &str) -> Self {
        self.without.push((category, name.to_string()));
        self
    }

    /// A registry holding this group.
    pub fn build(&self) -> Result<Registry, RegistryError> {
        let mut r = Registry::new();
        r.add_group(self)?;
        Ok(r)
    }
}

impl PluginGroup for DefaultPlugins {
    fn register(&self, registry: &mut Registry) -> Result<(), RegistryError> {
        for name in &self.without_crates {
            if !CRATES.iter().any(|c| c.name == name) {
                return Err(RegistryError::NoCrate {
                    name: name.clone(),
                    known: CRATES.iter().map(|c| c.name.to_string()).collect(),
                });
            }
        }
        // Build the group apart, then move it in, so that leaving a plugin out never removes
        // one the registry held before.
        let mut group = Registry::new();
        for c in CRATES {
            if !self.without_crates.iter().any(|w| w == c.name) {
                (c.register)(&mut group)?;
            }
        }
        for (category, name) in &self.without {
            if group.remove(*category, name).is_none() {
                return Err(RegistryError::Unknown {
                    category: *category,
                    name: name.clone(),
                    known: group.names(*category),
                });
            }
        }
        registry.merge(group)
    }
}

/// A registry holding every built-in plugin.
pub fn registry() -> Result<Registry, RegistryError> {
    DefaultPlugins::new().build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::registry::linked_builtins;

    #[test]
    fn every_builtin_is_registered() {
        let r = registry().unwrap();
        assert!(r.contains(Category::ComputeUnit, "gpu"));
        for m in ["hbm", "dram", "sram", "host-dram"] {
            assert!(r.contains(Category::MemoryTier, m), "{m}");
        }
        for n in ["nvlink", "infiniband", "roce", "torus"] {
            assert!(r.contains(Category::Interconnect, n), "{n}");
        }
        for s in [
            "tensor", "sequence", "context", "pipeline", "data", "zero", "fsdp",
        ] {
            assert!(r.contains(Category::ParallelStrategy, s), "{s}");
        }
        for p in ["none", "selective", "full"] {
            assert!(r.contains(Category::RecomputePolicy, p), "{p}");
        }
        for s in ["gpipe", "1f1b", "interleaved-1f1b"] {
            assert!(r.contains(Category::PipelineSchedule, s), "{s}");
        }
    }

    /// No linked built-in belongs to a crate the group does not list (it would be silently
    /// missing from every host), and every listed crate registers something.
    #[test]
    fn the_group_covers_every_linked_builtin() {
        let r = registry().unwrap();
        for b in linked_builtins() {
            assert!(
                CRATES.iter().any(|c| c.name == b.crate_name),
                "{} is not in CRATES",
                b.crate_name
            );
            assert!(r.contains(b.category, b.name), "{}", b.name);
        }
        assert_eq!(r.plugins().count(), linked_builtins().count());
    }

    #[test]
    fn leaving_out_and_replacing() {
        let r = DefaultPlugins::new()
            .without_crate("perfcast-plugin-schedule")
            .build()
            .unwrap();
        assert!(r.names(Category::PipelineSchedule).is_empty());
        assert!(r.contains(Category::RecomputePolicy, "full"));
        let e = DefaultPlugins::new()
            .without(Category::Interconnect, "no-such-link")
            .build()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no-such-link") && e.contains("nvlink"), "{e}");
        let e = DefaultPlugins::new()
            .without_crate("perfcast-plugin-nope")
            .build()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("perfcast-plugin-gpu"), "{e}");
        // Replace one built-in with another factory under the same name.
        let mut r = registry().unwrap();
        let mut info = r.info(Category::RecomputePolicy, "none").unwrap().clone();
        let full = r
            .recompute_policy("full", &serde_json::Value::Null)
            .unwrap();
        info.description = "replaced".into();
        let old = r.replace(
            info,
            std::sync::Arc::new(move |_| {
                Ok(perfcast_core::Component::RecomputePolicy(full.clone()))
            }),
        );
        assert!(old.is_some());
        let p = r
            .recompute_policy("none", &serde_json::Value::Null)
            .unwrap();
        assert_eq!(p.kind(), "full");
        // Registering the group twice names both origins.
        let e = r.add_group(&DefaultPlugins::new()).unwrap_err().to_string();
        assert!(e.contains("registered twice"), "{e}");
    }
}
