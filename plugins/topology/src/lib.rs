//! Built-in network topologies (`[system] topology = "NAME"`, a `[components.NAME]` of one
//! of these kinds):
//!
//! | kind | what |
//! |---|---|
//! | `hierarchical` | the levels of `system.network` alone (perfcast's default; see `perfcast_core::topology::Hierarchical`) |
//! | `fat-tree` | a k-tier folded Clos with a down:up oversubscription per tier, NICs in device order |
//! | `rail-optimized` | one leaf per rail and scalable unit, a Clos over the leaves; cross-rail over NVLink (PXN) or the spine |
//! | `rail-only` | one Clos per rail, no spine (Wang et al. 2023, arXiv 2307.12169); cross-rail forwarded through NVLink |
//! | `torus` | 2D/3D (k-D) torus of scale-up domains or chips |
//! | `dragonfly` | groups of routers, local and global links (Kim et al. 2008); minimal, Valiant or adaptive routing |
//! | `nvl72` | GB200 NVL72 racks (72 GPUs on NVLink switches, NVLS), rail-optimised scale-out |
//!
//! Every topology takes its link technologies from the system's levels (`system.network[0]`
//! the scale-up domain, the last level the NIC: bandwidth per device and the fixed cost per
//! collective) and runs the collective algorithms of [`algo`] over them, with the
//! `collectives` parameter table; `prices` sets the [`cost`] table.

pub mod algo;
pub mod clos;
pub mod cost;
pub mod dragonfly;
pub mod links;
pub mod switched;
pub mod torus;

use perfcast_core::registry::Component;
use perfcast_core::topology::Hierarchical;
use perfcast_core::{params, PluginError};
use serde::Deserialize;
use std::sync::Arc;

pub use dragonfly::{Dragonfly, DragonflyParams};
pub use switched::{Switched, SwitchedParams};
pub use torus::{Torus, TorusParams};

/// `hierarchical` takes no parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

fn build_hierarchical(v: &serde_json::Value) -> Result<Component, PluginError> {
    let _: NoParams = params::parse(v)?;
    Ok(Component::Topology(Arc::new(Hierarchical)))
}

fn switched(kind: &'static str, v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: SwitchedParams = params::parse(v)?;
    Ok(Component::Topology(Arc::new(Switched::new(kind, p)?)))
}

fn build_fat_tree(v: &serde_json::Value) -> Result<Component, PluginError> {
    switched("fat-tree", v)
}
fn build_rail_optimized(v: &serde_json::Value) -> Result<Component, PluginError> {
    switched("rail-optimized", v)
}
fn build_rail_only(v: &serde_json::Value) -> Result<Component, PluginError> {
    switched("rail-only", v)
}
fn build_nvl72(v: &serde_json::Value) -> Result<Component, PluginError> {
    switched("nvl72", v)
}
fn build_torus(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: TorusParams = params::parse(v)?;
    Ok(Component::Topology(Arc::new(Torus::new(p)?)))
}
fn build_dragonfly(v: &serde_json::Value) -> Result<Component, PluginError> {
    let p: DragonflyParams = params::parse(v)?;
    Ok(Component::Topology(Arc::new(Dragonfly::new(p)?)))
}

perfcast_core::builtin!(
    Topology,
    "hierarchical",
    "network levels alone, innermost level holding the group (the default)",
    build_hierarchical
);
perfcast_core::builtin!(
    Topology,
    "fat-tree",
    "k-tier fat-tree (folded Clos) with per-tier oversubscription",
    build_fat_tree
);
perfcast_core::builtin!(
    Topology,
    "rail-optimized",
    "rail-optimised Clos: one leaf per rail, cross-rail via NVLink or the spine",
    build_rail_optimized
);
perfcast_core::builtin!(
    Topology,
    "rail-only",
    "rail-only network (Wang et al. 2023): one Clos per rail, no spine",
    build_rail_only
);
perfcast_core::builtin!(
    Topology,
    "torus",
    "k-dimensional torus of scale-up domains",
    build_torus
);
perfcast_core::builtin!(
    Topology,
    "dragonfly",
    "dragonfly: router groups, local and global links",
    build_dragonfly
);
perfcast_core::builtin!(
    Topology,
    "nvl72",
    "GB200 NVL72 racks (NVLink switches, NVLS), rail-optimised scale-out",
    build_nvl72
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests;
