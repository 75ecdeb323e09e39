//! An example third-party topology: **Dragonfly+** (Shpiner et al. 2017, "Dragonfly+: Low
//! Cost Topology for Scaling Datacenters", HiPINEB): each group is a two-level fat-tree of
//! `leaves_per_group` leaf switches (`nics_per_leaf` NICs each) and `spines_per_group` spine
//! switches, every leaf wired to every spine of its group; each spine has
//! `global_links_per_spine` links to spines of other groups (all-to-all between groups).
//!
//! Its collective model is its own (it depends on `perfcast-core` and `perfcast-abi` only):
//! rings over the scale-up domain (`system.network[0]`) and the NICs (the last level), whose
//! NIC bandwidth is divided by the busiest tier a group's traffic crosses when every sibling
//! group runs: `f H / S` on the leaf uplinks (`H` NICs share `S` uplinks) and `f L H / (S G)`
//! on the global links, `f` the share of ring edges that leave a leaf (a group).

use perfcast_core::op::CollectiveKind;
use perfcast_core::params::positive;
use perfcast_core::topology::{CollectiveCost, CostItem, GroupPlacement, NetworkCost};
use perfcast_core::{Bytes, Interconnect, PluginError, Seconds, Topology};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// NICs per leaf switch (`H`).
    pub nics_per_leaf: u64,
    /// Leaf switches per group (`L`).
    pub leaves_per_group: u64,
    /// Spine switches per group (`S`).
    pub spines_per_group: u64,
    /// Global links per spine (`G`).
    pub global_links_per_spine: u64,
    /// Global link bandwidth, one direction, GB/s (default: the NIC's).
    #[serde(default)]
    pub global_bandwidth_gbs: Option<f64>,
    /// Price of one switch and of one optical transceiver, US dollars (example figures).
    #[serde(default = "switch_usd")]
    pub switch_usd: f64,
    #[serde(default = "optic_usd")]
    pub optic_usd: f64,
}

fn switch_usd() -> f64 {
    25_000.0
}
fn optic_usd() -> f64 {
    600.0
}

pub struct DragonflyPlus(Params);

pub fn build(p: Params) -> Result<DragonflyPlus, PluginError> {
    for (k, v) in [
        ("nics_per_leaf", p.nics_per_leaf),
        ("leaves_per_group", p.leaves_per_group),
        ("spines_per_group", p.spines_per_group),
        ("global_links_per_spine", p.global_links_per_spine),
    ] {
        if v == 0 {
            return Err(PluginError::Params {
                path: k.into(),
                message: "must be at least 1".into(),
            });
        }
    }
    if let Some(g) = p.global_bandwidth_gbs {
        positive("global_bandwidth_gbs", g)?;
    }
    positive("switch_usd", p.switch_usd)?;
    positive("optic_usd", p.optic_usd)?;
    Ok(DragonflyPlus(p))
}

impl DragonflyPlus {
    fn group_nics(&self) -> u64 {
        self.0.nics_per_leaf * self.0.leaves_per_group
    }
    fn groups(&self, devices: u64) -> u64 {
        devices.div_ceil(self.group_nics())
    }
    fn fail(&self, message: String) -> PluginError {
        PluginError::Failed {
            plugin: "example/dragonfly-plus".into(),
            message,
        }
    }
}

impl Topology for DragonflyPlus {
    fn kind(&self) -> &str {
        "example/dragonfly-plus"
    }

    fn check(&self, network: &[Arc<dyn Interconnect>], devices: u64) -> Result<(), PluginError> {
        if network.len() < 2 {
            return Err(
                self.fail("needs a scale-up level and a NIC level in system.network".into())
            );
        }
        let most = self.0.spines_per_group * self.0.global_links_per_spine + 1;
        if self.groups(devices) > most {
            return Err(PluginError::Params {
                path: "global_links_per_spine".into(),
                message: format!(
                    "{devices} devices need {} groups; the global links reach {most}",
                    self.groups(devices)
                ),
            });
        }
        Ok(())
    }

    fn collective(
        &self,
        network: &[Arc<dyn Interconnect>],
        g: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, PluginError> {
        let (up, nic) = match network {
            [up, .., nic] => (up, nic),
            _ => return Err(self.fail("needs a scale-up level and a NIC level".into())),
        };
        let u = (up.domain_size() as u64).max(1);
        let (p, r, n) = (g.ranks(), g.members_within(u).max(1), g.blocks(u).max(1));
        let share = |block: u64| {
            let b = g.blocks(block);
            if b > 1 {
                (b as f64 / n as f64).min(1.0)
            } else {
                0.0
            }
        };
        let q = &self.0;
        let b_nic = nic.bandwidth().0;
        let b_global = q.global_bandwidth_gbs.map_or(b_nic, |x| x * 1e9);
        let leaf = share(q.nics_per_leaf) * q.nics_per_leaf as f64 / q.spines_per_group as f64;
        let global = share(self.group_nics()) * self.group_nics() as f64 * b_nic
            / ((q.spines_per_group * q.global_links_per_spine) as f64 * b_global);
        let per_nic = b_nic / leaf.max(global).max(1.0);
        let bw = if n > 1 {
            up.bandwidth().0.min(r as f64 * per_nic)
        } else {
            up.bandwidth().0
        };
        let (overhead, step) = if n > 1 {
            (nic.collective_overhead().0, nic.latency().0)
        } else {
            (up.collective_overhead().0, up.latency().0)
        };
        let pf = p as f64;
        let t = match kind {
            CollectiveKind::AllReduce => {
                2.0 * (pf - 1.0) * step + 2.0 * (pf - 1.0) / pf * bytes.0 / bw
            }
            CollectiveKind::AllToAll => step + (pf - r as f64) / pf * bytes.0 / per_nic,
            CollectiveKind::SendRecv => step + bytes.0 / if n > 1 { per_nic } else { bw },
            _ => (pf - 1.0) * step + (pf - 1.0) / pf * bytes.0 / bw,
        };
        Ok(CollectiveCost {
            time: Seconds(overhead + t),
            loads: Default::default(),
        })
    }

    fn cost(
        &self,
        _network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Option<NetworkCost>, PluginError> {
        let q = &self.0;
        let groups = self.groups(devices) as f64;
        let switches = groups * (q.leaves_per_group + q.spines_per_group) as f64;
        let globals = groups * (q.spines_per_group * q.global_links_per_spine) as f64 / 2.0;
        let optics = 2.0 * (devices as f64 + globals);
        Ok(Some(NetworkCost {
            switches,
            switch_ports: groups
                * (q.leaves_per_group * (q.nics_per_leaf + q.spines_per_group)) as f64
                + groups
                    * (q.spines_per_group * (q.leaves_per_group + q.global_links_per_spine)) as f64,
            optics,
            items: vec![
                CostItem {
                    item: "switch".into(),
                    count: switches,
                    unit_usd: q.switch_usd,
                },
                CostItem {
                    item: "optical transceiver".into(),
                    count: optics,
                    unit_usd: q.optic_usd,
                },
            ],
        }))
    }
}

perfcast_abi::export_plugin! {
    name: "dragonfly-plus",
    version: env!("CARGO_PKG_VERSION"),
    topologies: [
        "example/dragonfly-plus" => build : "Dragonfly+: fat-tree groups joined by global links",
    ],
}
