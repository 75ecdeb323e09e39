//! The operating point of a GPU derived from a process node under the reference die's area
//! and power: the numbers the study reports beside the derived device (supply, clock, MAC
//! count, which limit set them).
//!
//! The `tech/node-scaled-gpu` plugin derives it (DeepFlow's micro-architecture engine, Isaev
//! et al. 2023, with the alpha-power law of Sakurai & Newton 1990: see the plugin's `node`
//! module) and reports it through `ComputeUnit::derived`; the study reads it from the trait
//! object, so it depends on `perfcast-core` traits only and the derivation lives once.

use perfcast_core::ComputeUnit;
use serde::Deserialize;

/// What the derivation found for one node (the plugin's `derived()` object).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct OperatingPoint {
    /// MAC units relative to the reference (area-limited).
    pub mac_units: f64,
    /// Supply chosen, V.
    pub voltage: f64,
    /// Clock relative to the reference.
    pub clock: f64,
    /// The derived clock, GHz.
    pub clock_ghz: f64,
    /// Fraction of MAC units that can be active within the power budget.
    pub active: f64,
    /// Matrix throughput relative to the reference.
    pub throughput: f64,
    /// Which limit set the operating point, in words (`area`, `power (DVFS)`, ...).
    pub limit: String,
}

impl OperatingPoint {
    /// The operating point a `tech/node-scaled-gpu` compute unit reports, or why not.
    pub fn of(unit: &dyn ComputeUnit) -> Result<Self, String> {
        serde_json::from_value(unit.derived()).map_err(|e| {
            format!(
                "compute unit `{}` reports no operating point ({e}): is it a tech/node-scaled-gpu?",
                unit.kind()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::{DType, Engine};
    use serde_json::json;

    /// The plugin reports the point its peaks were derived at: the reference node is the
    /// reference device, a denser node with a high energy per op is power-limited, and the
    /// bf16 peak is the reference's (312 TFLOP/s, A100) times the throughput.
    #[test]
    fn the_plugin_reports_its_operating_point() {
        let registry = crate::common::registry(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
        .unwrap();
        let row = |logic_density: f64, energy_per_op: f64| {
            json!({"node_nm": 7.0, "logic_density": logic_density, "sram_density": 1.0,
                   "energy_per_op": energy_per_op, "vdd": 0.75, "vt": 0.30})
        };
        for (node, limit) in [
            (row(1.0, 1.0), "area"),
            (row(2.0, 0.7), "power (DVFS)"),
            (row(100.0, 1.0), "power (dark silicon)"),
        ] {
            let gpu = registry
                .compute_unit("tech/node-scaled-gpu", &json!({ "node": node }))
                .unwrap();
            let p = OperatingPoint::of(gpu.as_ref()).unwrap();
            assert_eq!(p.limit, limit);
            let peak = gpu.peak(Engine::Matrix, DType::Bf16).unwrap().tflops();
            assert!((peak / (312.0 * p.throughput) - 1.0).abs() < 1e-12, "{p:?}");
        }
        let gpu = registry
            .compute_unit("gpu", &json!({"matrix_tflops": {"bf16": 1.0}, "vector_tflops": {"fp32": 1.0}, "sm_count": 1}))
            .unwrap();
        assert!(OperatingPoint::of(gpu.as_ref())
            .unwrap_err()
            .contains("no operating point"));
    }
}
