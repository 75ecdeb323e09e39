//! The operating point of a GPU derived from a process node under the reference die's area
//! and power: the numbers the study reports beside the derived device (supply, clock, MAC
//! count, which limit set them).
//!
//! The device itself comes from the `tech/node-scaled-gpu` plugin through the registry; its
//! trait object exposes the derived peaks, not how they were reached. This is the same pure
//! derivation as that plugin's (`plugins/technology/src/node.rs`, `operating_point`), kept
//! here so the study depends on `perfcast-core` traits only; a test checks that the two agree
//! (derived bf16 peak = reference peak x throughput) on the study's nodes.
//!
//! Method (the micro-architecture engine of DeepFlow, Isaev et al. 2023,
//! `case_study/arch_search2/tech-node-scaling.py` and `hw_component.py`, as summarised in the
//! seed-paper digest §3.5; the alpha-power law of Sakurai & Newton 1990): MAC units scale with
//! logic density under the reference's area; energy per MAC is `E_ref · energy_per_op ·
//! (V / vdd)²`; the clock is `f_ref · g(V) / g(vdd)` with `g(V) = (V − V_t)^α / V`; the MAC
//! array keeps the reference's power: at `vdd` if it fits (area-limited), else at the supply
//! where it fits (DVFS), else at the floor `V_t + margin` with only part of the MACs active
//! (dark silicon, Esmaeilzadeh et al. 2011).

use perfcast_core::params::{fraction, positive};
use perfcast_core::PluginError;
use serde::{Deserialize, Serialize};

/// How one node compares with the reference node (all densities and energies relative), as
/// the `tech/*` plugins take it (`node`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeScaling {
    /// Node name in nm (label only: the physics is in the ratios).
    pub node_nm: f64,
    /// Logic (MAC) density relative to the reference node.
    pub logic_density: f64,
    /// SRAM bit density relative to the reference node.
    pub sram_density: f64,
    /// Energy per MAC operation at the node's nominal supply, relative to the reference.
    pub energy_per_op: f64,
    /// Nominal supply voltage, V.
    pub vdd: f64,
    /// Threshold voltage, V.
    pub vt: f64,
}

impl NodeScaling {
    fn validate(&self) -> Result<(), PluginError> {
        positive("node.node_nm", self.node_nm)?;
        positive("node.logic_density", self.logic_density)?;
        positive("node.sram_density", self.sram_density)?;
        positive("node.energy_per_op", self.energy_per_op)?;
        positive("node.vdd", self.vdd)?;
        positive("node.vt", self.vt)?;
        if self.vt >= self.vdd {
            return Err(PluginError::Params {
                path: "node.vt".into(),
                message: format!(
                    "threshold {} V must be below the supply vdd = {} V",
                    self.vt, self.vdd
                ),
            });
        }
        Ok(())
    }
}

fn d_alpha() -> f64 {
    2.0
}
fn d_margin() -> f64 {
    0.1
}
fn d_power() -> f64 {
    1.0
}

/// Operating-point parameters of the derivation (`limits`; the plugin's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OperatingLimits {
    /// Alpha-power-law exponent (2 = long-channel square law, DeepFlow's choice; ~1.3 for
    /// velocity-saturated short channels, Sakurai & Newton 1990).
    #[serde(default = "d_alpha")]
    pub alpha: f64,
    /// Lowest usable supply above the threshold voltage, V (DeepFlow floors the solved supply
    /// at `V_t + margin`).
    #[serde(default = "d_margin")]
    pub vt_margin: f64,
    /// Power budget of the MAC array relative to the reference device's (1 = same die power).
    #[serde(default = "d_power")]
    pub power_budget: f64,
}

impl Default for OperatingLimits {
    fn default() -> Self {
        OperatingLimits {
            alpha: d_alpha(),
            vt_margin: d_margin(),
            power_budget: d_power(),
        }
    }
}

/// What the derivation found for one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OperatingPoint {
    /// MAC units relative to the reference (area-limited).
    pub mac_units: f64,
    /// Supply chosen, V.
    pub voltage: f64,
    /// Clock relative to the reference.
    pub clock: f64,
    /// Fraction of MAC units that can be active within the power budget.
    pub active: f64,
    /// Matrix throughput relative to the reference.
    pub throughput: f64,
    /// Which limit set the operating point.
    pub limit: Limit,
}

/// The limit that sets a node's operating point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Nominal supply within the power budget: area-limited.
    Area,
    /// Supply lowered to meet the power budget.
    PowerDvfs,
    /// Supply at the floor and MACs power-gated: dark silicon.
    DarkSilicon,
}

impl Limit {
    /// The name in the CSV and the finding.
    pub const fn name(self) -> &'static str {
        match self {
            Limit::Area => "area",
            Limit::PowerDvfs => "power (DVFS)",
            Limit::DarkSilicon => "power (dark silicon)",
        }
    }
}

/// Solve the operating point of `node` (relative to the reference node) under `limits`.
pub fn operating_point(
    node: &NodeScaling,
    limits: &OperatingLimits,
) -> Result<OperatingPoint, PluginError> {
    node.validate()?;
    positive("limits.alpha", limits.alpha)?;
    positive("limits.vt_margin", limits.vt_margin)?;
    positive("limits.power_budget", limits.power_budget)?;
    let (vdd, vt, a) = (node.vdd, node.vt, limits.alpha);
    let g = |v: f64| (v - vt).max(0.0).powf(a) / v;
    let clock = |v: f64| g(v) / g(vdd);
    let n = node.logic_density;
    let power = |v: f64| n * node.energy_per_op * (v / vdd).powi(2) * clock(v);
    let floor = (vt + limits.vt_margin).min(vdd);
    let budget = limits.power_budget;
    let (voltage, active, limit) = if power(vdd) <= budget {
        (vdd, 1.0, Limit::Area)
    } else if power(floor) <= budget {
        // P(V) is increasing on [floor, vdd]: bisect P(V) = budget.
        let (mut lo, mut hi) = (floor, vdd);
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if power(mid) > budget {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        (lo, 1.0, Limit::PowerDvfs)
    } else {
        (floor, budget / power(floor), Limit::DarkSilicon)
    };
    let f = clock(voltage);
    let point = OperatingPoint {
        mac_units: n,
        voltage,
        clock: f,
        active,
        throughput: n * active * f,
        limit,
    };
    for (k, v) in [
        ("clock", point.clock),
        ("throughput", point.throughput),
        ("voltage", point.voltage),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(PluginError::Params {
                path: "node".into(),
                message: format!(
                    "the derived {k} is {v}: check vdd > vt + vt_margin and positive ratios"
                ),
            });
        }
    }
    fraction("derived active fraction", point.active)?;
    Ok(point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::{DType, Engine};
    use serde_json::json;

    /// The study's 12 nm .. 1 nm rows (configs/studies/technology-nodes.toml) and a row in
    /// each regime.
    fn nodes() -> Vec<NodeScaling> {
        let row = |node_nm, logic_density, sram_density, energy_per_op, vdd| NodeScaling {
            node_nm,
            logic_density,
            sram_density,
            energy_per_op,
            vdd,
            vt: 0.30,
        };
        vec![
            row(12.0, 0.39, 0.36, 2.78, 0.80),
            row(7.0, 1.0, 1.0, 1.0, 0.75),
            row(5.0, 1.8, 1.29, 0.70, 0.72),
            row(3.0, 2.88, 1.29, 0.476, 0.70),
            row(2.0, 3.31, 1.54, 0.343, 0.65),
            row(1.0, 4.97, 2.08, 0.206, 0.60),
            row(7.0, 2.0, 1.0, 0.4, 0.75),
            row(7.0, 2.0, 1.0, 0.7, 0.75),
            row(7.0, 100.0, 1.0, 1.0, 0.75),
        ]
    }

    /// The derivation here and the plugin's agree: the registry's derived GPU has the
    /// reference's bf16 peak (312 TFLOP/s, A100) times this throughput, in every regime.
    #[test]
    fn agrees_with_the_technology_plugin() {
        let registry = crate::common::registry().unwrap();
        let limits = OperatingLimits::default();
        let mut regimes = Vec::new();
        for n in nodes() {
            let p = operating_point(&n, &limits).unwrap();
            let gpu = registry
                .compute_unit(
                    "tech/node-scaled-gpu",
                    &json!({"node": n, "limits": limits}),
                )
                .unwrap();
            let peak = gpu.peak(Engine::Matrix, DType::Bf16).unwrap().tflops();
            assert!((peak / (312.0 * p.throughput) - 1.0).abs() < 1e-12, "{n:?}");
            regimes.push(p.limit);
        }
        for l in [Limit::Area, Limit::PowerDvfs, Limit::DarkSilicon] {
            assert!(regimes.contains(&l), "{l:?}");
        }
    }

    #[test]
    fn reference_node_is_the_reference_device_and_bad_nodes_name_the_key() {
        let p = operating_point(&nodes()[1], &OperatingLimits::default()).unwrap();
        assert_eq!(p.limit, Limit::Area);
        assert!((p.throughput - 1.0).abs() < 1e-12 && (p.clock - 1.0).abs() < 1e-12);
        let bad = NodeScaling {
            vt: 0.9,
            ..nodes()[1]
        };
        let e = operating_point(&bad, &OperatingLimits::default()).unwrap_err();
        assert!(e.to_string().contains("node.vt"), "{e}");
    }
}
