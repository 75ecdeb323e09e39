//! Test fixture: two built-in topologies of `perfcast-plugin-topology`, the same code, exported
//! through the Rust ABI as `lib/fat-tree` and `lib/rail-only`. Loaded with `--load`, they must
//! give the results of the compiled-in `fat-tree` and `rail-only` bit for bit (the host's
//! levels cross as their numbers, which is all these topologies read of them).

use perfcast_core::PluginError;
use perfcast_plugin_topology::{Switched, SwitchedParams};

fn fat_tree(p: SwitchedParams) -> Result<Switched, PluginError> {
    Switched::new("fat-tree", p)
}

fn rail_only(p: SwitchedParams) -> Result<Switched, PluginError> {
    Switched::new("rail-only", p)
}

perfcast_abi::export_plugin! {
    name: "topology-builtins-lib",
    version: env!("CARGO_PKG_VERSION"),
    topologies: [
        "lib/fat-tree" => fat_tree : "the built-in fat-tree, as a library",
        "lib/rail-only" => rail_only : "the built-in rail-only, as a library",
    ],
}
