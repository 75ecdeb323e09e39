// Shared by the inference bench and integration tests (included with `#[path]`): systems
// built through the registry from the repository's hardware presets
// (configs/hardware/*.toml: every number there cites its datasheet; the calibrated efficiency
// factors are the team's shared ones), so the tests see what `perfcast infer` and the
// validation harness see.

use perfcast_core::hardware::MemoryHierarchy;
use perfcast_core::registry::{Category, Component, Registry};
use perfcast_core::System;
use std::path::PathBuf;

/// Every hardware preset of configs/hardware.
#[allow(dead_code)] // each includer uses a subset
pub const PRESETS: [&str; 6] = [
    "a100-sxm4-40gb.toml",
    "a100-sxm4-80gb.toml",
    "h100-sxm5-80gb.toml",
    "h200-sxm-141gb.toml",
    "b200-sxm-180gb.toml",
    "gb200.toml",
];

/// Which reference GPU.
#[allow(dead_code)] // each includer uses a subset
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gpu {
    A100,
    H100,
}

impl Gpu {
    fn preset(self) -> &'static str {
        match self {
            Gpu::A100 => "a100-sxm4-80gb.toml",
            Gpu::H100 => "h100-sxm5-80gb.toml",
        }
    }
}

fn build(registry: &Registry, table: &toml::Table, name: &str, category: Category) -> Component {
    let comp = table["components"][name]
        .as_table()
        .unwrap_or_else(|| panic!("preset has no component `{name}`"));
    let kind = comp["kind"].as_str().expect("component kind");
    let mut params = comp.clone();
    params.remove("kind");
    let json = serde_json::to_value(&params).expect("params as JSON");
    registry
        .build(category, kind, &json)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn names<'a>(table: &'a toml::Table, section: &str, key: &str) -> Vec<&'a str> {
    match &table[section][key] {
        toml::Value::String(s) => vec![s.as_str()],
        toml::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
        other => panic!("{section}.{key}: {other:?}"),
    }
}

/// `devices` GPUs of the preset, with the preset's network levels.
pub fn builtin_system(registry: &Registry, gpu: Gpu, devices: u32) -> System {
    preset_system(registry, gpu.preset(), devices)
}

/// `devices` GPUs of the preset file `file` in configs/hardware.
pub fn preset_system(registry: &Registry, file: &str, devices: u32) -> System {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../configs/hardware")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let compute = match build(
        registry,
        &table,
        names(&table, "device", "compute")[0],
        Category::ComputeUnit,
    ) {
        Component::ComputeUnit(c) => c,
        _ => unreachable!("registry checks the category"),
    };
    let memory = names(&table, "device", "memory")
        .into_iter()
        .map(|n| match build(registry, &table, n, Category::MemoryTier) {
            Component::MemoryTier(t) => t,
            _ => unreachable!("registry checks the category"),
        })
        .collect();
    let network = names(&table, "system", "network")
        .into_iter()
        .map(
            |n| match build(registry, &table, n, Category::Interconnect) {
                Component::Interconnect(l) => l,
                _ => unreachable!("registry checks the category"),
            },
        )
        .collect();
    System {
        name: table["system"]["name"]
            .as_str()
            .unwrap_or("preset")
            .to_string(),
        compute,
        memory: MemoryHierarchy::new(memory),
        network,
        topology: None,
        devices,
    }
}
