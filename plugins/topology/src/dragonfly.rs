//! `dragonfly` (Kim, Dally, Scott & Abts 2008): routers of `nics_per_router` NICs (`p`)
//! form groups of `routers_per_group` (`a`) joined all-to-all by local links; every router
//! has `global_links_per_router` (`h`) global links, and the groups are joined all-to-all
//! by them (`a h / (g - 1)` links between two groups). NICs are the devices' in order.
//!
//! A ring's traffic from one router (or group) to the next goes over the direct local
//! (global) links between the two under minimal routing, or over any intermediate router
//! (group), two hops, under Valiant routing; `adaptive` (UGAL) takes the better of the two.
//! With every sibling group running, a router's `p` NICs send a fraction `f` of their ring
//! traffic to the next router (`f = min(1, b / n)` of the blocks touched, as on a fat-tree):
//! minimal routing slows it by `f p B_nic / B_local`, Valiant by `2 f p B_nic / ((a-1)
//! B_local)`, likewise for groups with `p a` NICs over `a h / (g - 1)` global links (minimal)
//! or all `a h` at two hops (Valiant). All-to-all traffic spreads over every link.

use crate::algo::{self, Caps, CollectiveParams, Model, Paths, Pattern, Shape};
use crate::cost::{Bill, Prices};
use crate::links::{self, Links};
use perfcast_core::op::CollectiveKind;
use perfcast_core::params::positive;
use perfcast_core::topology::{CollectiveCost, GroupPlacement, LinkClass, NetworkCost};
use perfcast_core::{Bandwidth, Bytes, Interconnect, PluginError, Seconds, Topology};
use serde::Deserialize;
use std::sync::Arc;

/// Routing on a dragonfly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Direct links only.
    Minimal,
    /// Through a random intermediate router or group (two hops).
    Valiant,
    /// The better of the two (UGAL).
    #[default]
    Adaptive,
}

/// Parameters of `dragonfly`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DragonflyParams {
    /// NICs per router (`p`).
    pub nics_per_router: u64,
    /// Routers per group (`a`).
    pub routers_per_group: u64,
    /// Global links per router (`h`); Kim et al.'s balanced dragonfly has `a = 2p = 2h`.
    pub global_links_per_router: u64,
    /// Local link bandwidth, one direction, GB/s (default: the NIC's).
    #[serde(default)]
    pub local_bandwidth_gbs: Option<f64>,
    /// Global link bandwidth, one direction, GB/s (default: the NIC's).
    #[serde(default)]
    pub global_bandwidth_gbs: Option<f64>,
    /// Routing (default adaptive).
    #[serde(default)]
    pub routing: Routing,
    /// The scale-up switches reduce (NVLS).
    #[serde(default)]
    pub nvls: bool,
    /// The collective algorithm model.
    #[serde(default)]
    pub collectives: CollectiveParams,
    /// The price table (local links copper, global links and NIC links optical).
    #[serde(default)]
    pub prices: Prices,
}

/// A dragonfly.
#[derive(Debug, Clone)]
pub struct Dragonfly {
    p: DragonflyParams,
}

impl Dragonfly {
    /// Build from the parameters (errors name the key).
    pub fn new(p: DragonflyParams) -> Result<Dragonfly, PluginError> {
        for (k, v) in [
            ("nics_per_router", p.nics_per_router),
            ("routers_per_group", p.routers_per_group),
            ("global_links_per_router", p.global_links_per_router),
        ] {
            if v == 0 {
                return Err(PluginError::Params {
                    path: k.into(),
                    message: "must be at least 1".into(),
                });
            }
        }
        for (k, v) in [
            ("local_bandwidth_gbs", p.local_bandwidth_gbs),
            ("global_bandwidth_gbs", p.global_bandwidth_gbs),
        ] {
            if let Some(v) = v {
                positive(k, v)?;
            }
        }
        if p.collectives.algorithm == crate::algo::Algorithm::Sharp {
            return Err(PluginError::Params {
                path: "collectives.algorithm".into(),
                message: "a dragonfly's routers do not reduce (no `sharp`)".into(),
            });
        }
        p.collectives.check()?;
        p.prices.check()?;
        Ok(Dragonfly { p })
    }

    fn groups(&self, devices: u64) -> u64 {
        devices.div_ceil(self.p.nics_per_router * self.p.routers_per_group)
    }

    /// Local and global link bandwidths (B/s) for NICs of `nic` B/s.
    fn bw(&self, nic: f64) -> (f64, f64) {
        let gbs = |v: Option<f64>| v.map_or(nic, |g| g * 1e9);
        (
            gbs(self.p.local_bandwidth_gbs),
            gbs(self.p.global_bandwidth_gbs),
        )
    }

    /// Busy time of the local and of the global links per unit of NIC busy time, for ring
    /// and for all-to-all traffic (a collective is slowed by the largest, if above 1).
    fn route(&self, g: &GroupPlacement, l: &Links, nic: f64) -> ([f64; 2], [f64; 2]) {
        let (pr, a, h) = (
            self.p.nics_per_router as f64,
            self.p.routers_per_group as f64,
            self.p.global_links_per_router as f64,
        );
        let groups = self.groups(g.devices()) as f64;
        let (b_local, b_global) = self.bw(nic);
        let n = g.blocks(l.domain).max(1) as f64;
        let ring_f = |block: u64| {
            let b = g.blocks(block);
            if b > 1 {
                (b as f64 / n).min(1.0)
            } else {
                0.0
            }
        };
        let a2a_f = |block: u64| (1.0 - g.members_within(block) as f64 / g.ranks() as f64).max(0.0);
        let router = self.p.nics_per_router;
        let group = router * self.p.routers_per_group;
        let pick = |minimal: f64, valiant: f64| match self.p.routing {
            Routing::Minimal => minimal,
            Routing::Valiant => valiant,
            Routing::Adaptive => minimal.min(valiant),
        };
        let between = (a * h / (groups - 1.0).max(1.0)).floor().max(1.0);
        let (fl, fg) = (ring_f(router), ring_f(group));
        let ring_local = pick(
            fl * pr * nic / b_local,
            2.0 * fl * pr * nic / ((a - 1.0).max(1.0) * b_local),
        );
        let ring_global = pick(
            fg * pr * a * nic / (between * b_global),
            2.0 * fg * pr * a * nic / (a * h * b_global),
        );
        let (al, ag) = (a2a_f(router), a2a_f(group));
        let a2a_local = al * pr * nic / ((a - 1.0).max(1.0) * b_local);
        let a2a_global = pick(
            ag * pr * a * nic / (a * h * b_global),
            2.0 * ag * pr * a * nic / (a * h * b_global),
        );
        ([ring_local, ring_global], [a2a_local, a2a_global])
    }
}

impl Topology for Dragonfly {
    fn kind(&self) -> &str {
        "dragonfly"
    }

    fn check(&self, network: &[Arc<dyn Interconnect>], devices: u64) -> Result<(), PluginError> {
        links::links("dragonfly", network, devices)?;
        let g = self.groups(devices);
        let per_group = self.p.routers_per_group * self.p.global_links_per_router;
        if g > per_group + 1 {
            return Err(PluginError::Params {
                path: "global_links_per_router".into(),
                message: format!(
                    "{devices} devices need {g} groups, but {} routers x {} global links per \
                     group reach at most {} groups",
                    self.p.routers_per_group,
                    self.p.global_links_per_router,
                    per_group + 1
                ),
            });
        }
        Ok(())
    }

    fn links(
        &self,
        network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Vec<LinkClass>, PluginError> {
        let l = links::links("dragonfly", network, devices)?;
        let Some(nic) = l.nic else {
            return Ok(Vec::new());
        };
        let (b_local, b_global) = self.bw(nic.bw);
        let routers = self.groups(devices) * self.p.routers_per_group;
        Ok(vec![
            LinkClass {
                name: "nic".into(),
                count: devices as f64,
                bandwidth: Bandwidth(nic.bw),
            },
            LinkClass {
                name: "local".into(),
                count: (routers * (self.p.routers_per_group - 1)).max(1) as f64,
                bandwidth: Bandwidth(b_local),
            },
            LinkClass {
                name: "global".into(),
                count: (routers * self.p.global_links_per_router).max(1) as f64,
                bandwidth: Bandwidth(b_global),
            },
        ])
    }

    fn collective(
        &self,
        network: &[Arc<dyn Interconnect>],
        g: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, PluginError> {
        let l = links::links("dragonfly", network, g.devices())?;
        let shape = Shape::of(g, l.domain);
        let model = Model {
            params: &self.p.collectives,
            links: &l,
            caps: Caps {
                nvls: self.p.nvls,
                sharp: false,
            },
        };
        if shape.n <= 1 {
            return Ok(algo::in_domain(&model, kind, bytes.0, &shape));
        }
        let nic = links::nic("dragonfly", &l)?;
        let (ring_f, a2a_f) = self.route(g, &l, nic.bw);
        let slow = |f: [f64; 2]| f[0].max(f[1]).max(1.0);
        let paths = Paths {
            ring: nic.bw / slow(ring_f),
            a2a: nic.bw / slow(a2a_f),
            p2p: nic.bw / slow(ring_f),
            sharp: nic.bw,
            a2a_forward: 0.0,
        };
        let e = model.eval(kind, bytes.0, &shape, &paths);
        let busy = e.nic_bytes / nic.bw;
        let share = shape.p as f64 / g.devices() as f64;
        let routers = (self.groups(g.devices()) * self.p.routers_per_group) as f64;
        let counts = [
            (routers * (self.p.routers_per_group as f64 - 1.0)).max(1.0),
            (routers * self.p.global_links_per_router as f64).max(1.0),
        ];
        let f = if e.pattern == Pattern::AllToAll {
            a2a_f
        } else {
            ring_f
        };
        let loads = algo::loads(
            shape.p,
            busy,
            (0..2).map(|i| (counts[i] * share, f[i] * busy)),
        )?;
        Ok(CollectiveCost {
            time: Seconds(e.time),
            loads,
        })
    }

    fn cost(
        &self,
        _network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Option<NetworkCost>, PluginError> {
        let groups = self.groups(devices);
        let (p, a, h) = (
            self.p.nics_per_router,
            self.p.routers_per_group,
            self.p.global_links_per_router,
        );
        let routers = groups * a;
        let mut b = Bill::default();
        b.switches(&self.p.prices, routers, p + a - 1 + h);
        b.links(&self.p.prices, devices + routers * h / 2);
        b.copper(&self.p.prices, groups * a * (a - 1) / 2);
        Ok(Some(b.finish()))
    }

    fn describe(&self, _network: &[Arc<dyn Interconnect>], devices: u64) -> serde_json::Value {
        serde_json::json!({
            "groups": self.groups(devices),
            "router_radix": self.p.nics_per_router + self.p.routers_per_group - 1
                + self.p.global_links_per_router,
        })
    }
}
