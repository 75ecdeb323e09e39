//! A GPU derived from a process node under a fixed die area and power budget.
//!
//! Method (the micro-architecture engine of DeepFlow, Isaev et al. 2023,
//! `case_study/arch_search2/tech-node-scaling.py` and `hw_component.py`, as summarised in the
//! seed-paper digest §3.5; the alpha-power law of Sakurai & Newton 1990):
//!
//! 1. **Area.** The MAC array keeps the reference die's area, so the number of MAC units
//!    scales with logic density: `N = N_ref · logic_density`.
//! 2. **Energy.** A MAC operation at the node's nominal supply `vdd` costs
//!    `E_nom = E_ref · energy_per_op`; at another supply `V` it costs `E_nom · (V / vdd)²`
//!    (dynamic `C·V²` energy).
//! 3. **Frequency.** `f(V) = f_ref · g(V) / g(vdd)` with `g(V) = (V − V_t)^α / V` (alpha-power
//!    law; α = 2 is the long-channel value DeepFlow uses). At its nominal supply every node
//!    runs the reference clock ("frequency held", as in DeepFlow's recipe).
//! 4. **Power.** The MAC array gets the reference's share of the same board power. Relative
//!    to the reference, `P(V) = N/N_ref · E(V)/E_ref · f(V)/f_ref`. If `P(vdd) ≤ 1` the chip
//!    runs at `vdd` (no over-drive above the nominal supply). Otherwise the supply is lowered
//!    until `P(V) = 1` (DVFS); if even the floor `V_t + margin` draws too much, only the
//!    fraction `1 / P(V_floor)` of the MACs can be active at once (dark silicon, Esmaeilzadeh
//!    et al. 2011).
//! 5. **Throughput.** `peak = peak_ref · N/N_ref · active · f(V)/f_ref` for every format the
//!    reference supports (plus any `extra_formats` the node adds); the vector engine scales
//!    the same way. Leakage is not modelled (it would tighten the power wall further).
//!
//! At the reference node (all ratios 1, same `vdd`) the derived GPU is the reference GPU
//! exactly: the calibration anchor.

use perfcast_core::params::{fraction, positive};
use perfcast_core::{DType, PluginError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How one node compares with the reference node (all densities and energies relative).
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
    /// The reference node itself (TSMC N7 with the IRDS 7 nm-class supply).
    pub fn reference() -> Self {
        BUILTIN_NODES[1]
    }

    pub fn validate(&self) -> Result<(), PluginError> {
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

/// Built-in node table, relative to TSMC N7 (the A100's node). The study config
/// `configs/studies/technology-nodes.toml` carries the same table with the same citations so
/// that a user can edit it; these are the defaults when a component names only `node_nm`.
///
/// - 12 nm (TSMC 12FFN, V100): logic 0.39 = V100 21.1 B transistors / 815 mm² over A100 54.2 B /
///   826 mm² (NVIDIA V100 and A100 whitepapers); SRAM 0.36 = N7 HD bitcell 0.027 µm² over 16FF
///   0.074 µm² (TSMC IEDM 2016 / ISSCC 2017 disclosures); energy 2.78 = 1/(0.6·0.6) from TSMC's
///   "-40 % power" claims for 16FF+ -> N10 and N10 -> N7.
/// - 7 nm (N7): the reference.
/// - 5 nm (N5): logic 1.8x, -30 % power at iso-speed (TSMC N5 announcement, 2019); SRAM
///   bitcell 0.021 µm² (TSMC IEDM 2019) -> 1.29.
/// - 3 nm (N3E): logic x1.6 vs N5, -32 % power (TSMC N3E, 2022 Technology Symposium); SRAM
///   bitcell 0.021 µm², no scaling vs N5 (TSMC IEDM 2022) -> 1.29.
/// - 2 nm (N2): logic x1.15 vs N3E, -25..30 % power (TSMC N2, 2023 Technology Symposium);
///   SRAM bitcell 0.0175 µm² (TSMC IEDM 2024) -> 1.54.
/// - 1 nm: ASSUMPTION extrapolated from TSMC A14 (x1.2 logic, -25..30 % power vs N2, 2025
///   Technology Symposium) and one further CFET step (IRDS 2022 More Moore "1.0 eq" node):
///   logic x1.5 vs N2, energy x0.6, SRAM bitcell ~0.013 µm².
/// - Supplies: IRDS 2022 More Moore table (0.75 V at 7 nm-class falling to 0.60 V at the 1 nm
///   class; threshold ~0.30 V, nearly flat); 12 nm at 0.80 V (V100 nominal core).
pub const BUILTIN_NODES: [NodeScaling; 6] = [
    NodeScaling {
        node_nm: 12.0,
        logic_density: 0.39,
        sram_density: 0.36,
        energy_per_op: 2.78,
        vdd: 0.80,
        vt: 0.30,
    },
    NodeScaling {
        node_nm: 7.0,
        logic_density: 1.0,
        sram_density: 1.0,
        energy_per_op: 1.0,
        vdd: 0.75,
        vt: 0.30,
    },
    NodeScaling {
        node_nm: 5.0,
        logic_density: 1.8,
        sram_density: 1.29,
        energy_per_op: 0.70,
        vdd: 0.72,
        vt: 0.30,
    },
    NodeScaling {
        node_nm: 3.0,
        logic_density: 2.88,
        sram_density: 1.29,
        energy_per_op: 0.476,
        vdd: 0.70,
        vt: 0.30,
    },
    NodeScaling {
        node_nm: 2.0,
        logic_density: 3.31,
        sram_density: 1.54,
        energy_per_op: 0.343,
        vdd: 0.65,
        vt: 0.30,
    },
    NodeScaling {
        node_nm: 1.0,
        logic_density: 4.97,
        sram_density: 2.08,
        energy_per_op: 0.206,
        vdd: 0.60,
        vt: 0.30,
    },
];

/// The built-in row for `node_nm`, if there is one.
pub fn builtin_node(node_nm: f64) -> Option<NodeScaling> {
    BUILTIN_NODES
        .iter()
        .copied()
        .find(|n| (n.node_nm - node_nm).abs() < 1e-9)
}

fn d_ref_name() -> String {
    "A100-SXM4 (TSMC N7)".into()
}
fn d_ref_matrix() -> BTreeMap<DType, f64> {
    // NVIDIA A100 datasheet: dense tensor-core peaks, TFLOP/s.
    BTreeMap::from([
        (DType::Bf16, 312.0),
        (DType::Fp16, 312.0),
        (DType::Tf32, 156.0),
        (DType::Int8, 624.0),
    ])
}
fn d_ref_vector() -> BTreeMap<DType, f64> {
    // NVIDIA A100 datasheet: FP32 (non-tensor) 19.5 TFLOP/s.
    BTreeMap::from([(DType::Fp32, 19.5)])
}
fn d_sm() -> u32 {
    108
}
fn d_clock() -> f64 {
    1.41
}

/// The device the scaling starts from. Default: A100-SXM4 on TSMC N7 (datasheet peaks,
/// 108 SMs, 1.41 GHz boost).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceGpu {
    #[serde(default = "d_ref_name")]
    pub name: String,
    /// Dense matrix peaks per format, TFLOP/s.
    #[serde(default = "d_ref_matrix")]
    pub matrix_tflops: BTreeMap<DType, f64>,
    /// Vector peaks per format, TFLOP/s (`fp32` required).
    #[serde(default = "d_ref_vector")]
    pub vector_tflops: BTreeMap<DType, f64>,
    #[serde(default = "d_sm")]
    pub sm_count: u32,
    #[serde(default = "d_clock")]
    pub clock_ghz: f64,
}

impl Default for ReferenceGpu {
    fn default() -> Self {
        ReferenceGpu {
            name: d_ref_name(),
            matrix_tflops: d_ref_matrix(),
            vector_tflops: d_ref_vector(),
            sm_count: d_sm(),
            clock_ghz: d_clock(),
        }
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

/// Operating-point parameters of the derivation.
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OperatingPoint {
    pub node_nm: f64,
    /// MAC units relative to the reference (area-limited).
    pub mac_units: f64,
    /// Supply chosen, V.
    pub voltage: f64,
    /// Clock relative to the reference.
    pub clock: f64,
    /// Fraction of MAC units that can be active within the power budget.
    pub active: f64,
    /// Power drawn relative to the budget at the chosen point (<= 1).
    pub power: f64,
    /// Matrix throughput relative to the reference.
    pub throughput: f64,
    /// Which limit set the operating point.
    pub limit: Limit,
}

/// The limit that sets a node's operating point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Nominal supply within the power budget: area-limited.
    Area,
    /// Supply lowered to meet the power budget.
    PowerDvfs,
    /// Supply at the floor and MACs power-gated: dark silicon.
    DarkSilicon,
}

impl Limit {
    pub const fn name(self) -> &'static str {
        match self {
            Limit::Area => "area",
            Limit::PowerDvfs => "power (DVFS)",
            Limit::DarkSilicon => "power (dark silicon)",
        }
    }
}

/// Solve the operating point of `node` against the reference node `reference`.
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
        node_nm: node.node_nm,
        mac_units: n,
        voltage,
        clock: f,
        active,
        power: power(voltage) * active / budget,
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

    #[test]
    fn reference_node_is_the_reference_device() {
        let p = operating_point(&NodeScaling::reference(), &OperatingLimits::default()).unwrap();
        assert_eq!(p.limit, Limit::Area);
        assert!((p.throughput - 1.0).abs() < 1e-12);
        assert!((p.clock - 1.0).abs() < 1e-12);
        assert!((p.power - 1.0).abs() < 1e-12);
    }

    /// (logic density, energy per op, expected limit): data-driven table of the three regimes.
    #[test]
    fn regimes() {
        let base = NodeScaling::reference();
        let table = [
            (2.0, 0.4, Limit::Area),
            (2.0, 0.7, Limit::PowerDvfs),
            (100.0, 1.0, Limit::DarkSilicon),
        ];
        for (ld, e, want) in table {
            let n = NodeScaling {
                logic_density: ld,
                energy_per_op: e,
                ..base
            };
            let p = operating_point(&n, &OperatingLimits::default()).unwrap();
            assert_eq!(p.limit, want, "{ld} {e}");
            assert!(p.power <= 1.0 + 1e-9, "{p:?}");
            assert!(p.throughput <= ld + 1e-12);
        }
    }

    #[test]
    fn more_power_never_slower_and_builtin_nodes_scale_up() {
        let mut last = 0.0;
        for n in BUILTIN_NODES {
            let p = operating_point(&n, &OperatingLimits::default()).unwrap();
            assert!(p.throughput > last, "{n:?} -> {p:?}");
            last = p.throughput;
            let mut prev = 0.0;
            for budget in [0.5, 1.0, 2.0, 4.0] {
                let lim = OperatingLimits {
                    power_budget: budget,
                    ..Default::default()
                };
                let t = operating_point(&n, &lim).unwrap().throughput;
                assert!(t >= prev - 1e-12);
                prev = t;
            }
        }
    }

    #[test]
    fn bad_node_names_the_key() {
        let n = NodeScaling {
            vt: 0.9,
            ..NodeScaling::reference()
        };
        let e = operating_point(&n, &OperatingLimits::default()).unwrap_err();
        assert!(e.to_string().contains("node.vt"), "{e}");
        let n = NodeScaling {
            logic_density: f64::NAN,
            ..NodeScaling::reference()
        };
        let e = operating_point(&n, &OperatingLimits::default()).unwrap_err();
        assert!(e.to_string().contains("logic_density"), "{e}");
    }
}
