//! The network and the parallel strategies a training scenario runs on: the levels, the
//! topology that wires them (its component, kind, link classes, what it derived from its
//! parameters and its price), and the strategies in mesh order, so that a report names what
//! produced its communication times (`perfcast predict`; `perfcast-report` formats it).

use crate::training::TrainingScenario;
use crate::ScenarioError;
use perfcast_core::topology::{LinkClass, NetworkCost};
use perfcast_core::{PluginError, System};
use perfcast_engine::training::DEFAULT_STRATEGIES;
use serde::Serialize;

/// The kind a system without `[system] topology` runs on (the levels alone).
const LEVELS_ALONE: &str = "hierarchical";

/// One level of the network, innermost first.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    /// The interconnect's kind (`nvlink`, `infiniband`, ...).
    pub kind: String,
    /// Devices one domain of the level joins (`None`: no limit).
    pub domain_size: Option<u32>,
    /// Achievable bandwidth per device and direction, GB/s (decimal).
    pub bandwidth_gbs: f64,
}

/// The network of a report (see the module documentation).
#[derive(Debug, Clone, Serialize)]
pub struct NetworkUsed {
    /// The `[system] topology` component's name; `None`: the levels alone.
    pub component: Option<String>,
    /// The topology's kind (`hierarchical` for the levels alone).
    pub topology: String,
    /// The levels, innermost first.
    pub levels: Vec<Level>,
    /// The topology's link classes for the system's devices (none for the levels alone).
    pub links: Vec<LinkClass>,
    /// What the topology derived from its parameters (tiers, switches, ...); `null` when it
    /// says nothing.
    pub derived: serde_json::Value,
    /// Its bill, when the topology has a price table.
    pub cost: Option<NetworkCost>,
    /// The bill's total, US dollars.
    pub cost_usd: Option<f64>,
    /// The parallel strategies in mesh order (`options.strategies`).
    pub strategies: Vec<String>,
}

impl NetworkUsed {
    /// The network of `system` (its topology named `component` in the configuration) and
    /// the `strategies` in use. A topology that cannot list its links or price itself is an
    /// error (the engine has already timed the step on it, so this is its plugin failing).
    pub fn of(
        system: &System,
        component: Option<String>,
        strategies: Vec<String>,
    ) -> Result<Self, PluginError> {
        let devices = u64::from(system.devices);
        let levels = system
            .network
            .iter()
            .map(|l| Level {
                kind: l.kind().to_string(),
                domain_size: (l.domain_size() != u32::MAX).then(|| l.domain_size()),
                bandwidth_gbs: l.bandwidth().0 / 1e9,
            })
            .collect();
        let (topology, links, derived, cost) = match &system.topology {
            Some(t) => (
                t.kind().to_string(),
                t.links(&system.network, devices)?,
                t.describe(&system.network, devices),
                t.cost(&system.network, devices)?,
            ),
            None => (
                LEVELS_ALONE.to_string(),
                Vec::new(),
                serde_json::Value::Null,
                None,
            ),
        };
        Ok(NetworkUsed {
            component,
            topology,
            levels,
            links,
            derived,
            cost_usd: cost.as_ref().map(NetworkCost::total_usd),
            cost,
            strategies,
        })
    }

    /// The network of a training scenario: its system's, its `[system] topology` component's
    /// name, and the strategies of its `[options]` (default: the engine's).
    pub fn of_training(sc: &crate::Scenario, ts: &TrainingScenario) -> Result<Self, ScenarioError> {
        let cfg = sc.config();
        let component = cfg.extract_opt::<String>("system.topology")?;
        let strategies = match crate::training::options(sc)?.strategies {
            Some(s) => s,
            None => DEFAULT_STRATEGIES.iter().map(|s| s.to_string()).collect(),
        };
        Self::of(ts.training.system(), component, strategies)
            .map_err(|e| ScenarioError::Model(perfcast_core::ModelError::Plugin(e)))
    }

    /// Whether the built-in context-parallel strategy (whose option `plan.cp_comm` is) is in
    /// use.
    pub fn builtin_context(&self) -> bool {
        self.strategies.iter().any(|s| s == "context")
    }

    /// The topology's kind and component, e.g. "fat-tree (component `net`)".
    pub fn topology_label(&self) -> String {
        match &self.component {
            Some(c) => format!("{} (component `{c}`)", self.topology),
            None => format!("{} (the levels alone)", self.topology),
        }
    }

    /// One line for the report's head: the topology and the strategies.
    pub fn head(&self) -> String {
        format!(
            "network: {}; strategies: {}",
            self.topology_label(),
            self.strategies.join(", ")
        )
    }
}
