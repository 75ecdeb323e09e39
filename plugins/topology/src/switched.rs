//! Switched scale-out fabrics over scale-up domains: `fat-tree` (any NIC to any leaf, in
//! device order), `rail-optimized` (NIC `q` of every node of a scalable unit on leaf `q`, a
//! Clos above the leaves; cross-rail traffic over the spine or forwarded through NVLink),
//! `rail-only` (Wang et al. 2023, arXiv 2307.12169: one Clos per rail, no spine; traffic
//! between rails is forwarded through the scale-up domain) and `nvl72` (GB200 NVL72 racks of
//! 72 GPUs on NVLink switches, rail-optimised scale-out between racks).
//!
//! How a group's traffic meets the tiers: NCCL's rings and trees leave a domain through the
//! NICs of the ranks that hold the ring's edge, visiting the group's domains in device order;
//! an edge crosses a tier-`t` subtree boundary when its two domains are under different
//! tier-`t` switches. With `b` subtrees touched by a group spanning `n` domains, a fraction
//! `f = min(1, b / n)` of each NIC's ring traffic goes up (none when `b = 1`); all-to-all
//! traffic goes up for every peer outside the sender's subtree. Every sibling group runs at
//! once, so every NIC sends alike and a tier whose subtree tapers by `o` (the product of the
//! ratios below it) slows the traffic by `max(1, f * o)`. Rail-aligned rings (the same NIC
//! index on both ends, as NCCL builds them on rail-optimised fabrics) stay on their rail's
//! leaf inside a scalable unit. SHARP reductions send one reduced stream up per switch and
//! see no taper.

use crate::algo::{self, Caps, CollectiveParams, Model, Paths, Pattern, Shape};
use crate::clos::{Clos, ClosParams, MAX_TIERS};
use crate::cost::{self, Prices};
use crate::links::{self, Links};
use perfcast_core::op::CollectiveKind;
use perfcast_core::topology::{CollectiveCost, GroupPlacement, LinkClass, NetworkCost};
use perfcast_core::{Bandwidth, Bytes, Interconnect, PluginError, Seconds, Topology};
use serde::Deserialize;
use std::sync::Arc;

/// How traffic between two rails travels on a rail-optimised fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossRail {
    /// Forwarded through the scale-up domain to the GPU on the destination's rail, then on
    /// the rail (NCCL's PXN, on by default since NCCL 2.12).
    #[default]
    Nvlink,
    /// Up the sender's leaf, over the spine, down the receiver's leaf.
    Spine,
}

/// How the devices of a scale-up domain are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleUp {
    /// Through switches (NVSwitch): every group gets each device's whole bandwidth.
    #[default]
    Switch,
    /// Point-to-point links between every pair (AMD Infinity Fabric on MI300X: 7 links per
    /// GPU): a group of `r` devices of a domain of `u` uses `r - 1` of the `u - 1` links.
    Mesh,
}

/// How a switched fabric connects the NICs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wiring {
    /// Any NIC on any leaf: NICs in device order, a node's NICs on one leaf.
    FatTree,
    /// One leaf per rail and scalable unit, a Clos over the leaves.
    RailOptimized(CrossRail),
    /// One Clos per rail and no spine; `forwarding`: traffic between rails is forwarded
    /// through the scale-up domain (false: such groups cannot be placed).
    RailOnly {
        /// Whether the scale-up domain forwards between rails.
        forwarding: bool,
    },
}

/// Parameters of `fat-tree`, `rail-optimized`, `rail-only` and `nvl72`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchedParams {
    /// Ports per switch of the scale-out Clos (per rail for `rail-only`); default 64
    /// (NVIDIA Quantum-2 QM9700: 64 NDR ports).
    #[serde(default = "d_radix")]
    pub radix: u64,
    /// Switch tiers (default: the fewest that reach every endpoint).
    #[serde(default)]
    pub tiers: Option<usize>,
    /// Down:up port ratio of each tier below the top, leaf first (missing tiers 1: full
    /// bisection; 2: 2:1 oversubscribed).
    #[serde(default)]
    pub oversubscription: Vec<f64>,
    /// The scale-up switches reduce (NVLink SHARP: NVSwitch 3 in HGX H100/H200, NVSwitch 4
    /// in HGX B200 and the NVL72 NVLink switches; NVIDIA NVLink/NVSwitch documentation).
    #[serde(default)]
    pub nvls: Option<bool>,
    /// The scale-out switches reduce (InfiniBand SHARP: Quantum-2 SHARPv3).
    #[serde(default)]
    pub sharp: bool,
    /// How the scale-up domain joins its devices (default `switch`).
    #[serde(default)]
    pub scale_up: ScaleUp,
    /// `rail-optimized` and `nvl72`: how traffic between rails travels.
    #[serde(default)]
    pub cross_rail: Option<CrossRail>,
    /// `rail-only`: whether the scale-up domain forwards between rails (default true).
    #[serde(default)]
    pub forwarding: Option<bool>,
    /// `nvl72`: GPUs per rack (NVL72: 72); must equal `system.network[0]`'s domain.
    #[serde(default)]
    pub rack: Option<u64>,
    /// The collective algorithm model.
    #[serde(default)]
    pub collectives: CollectiveParams,
    /// The price table.
    #[serde(default)]
    pub prices: Prices,
}

fn d_radix() -> u64 {
    ClosParams::default().radix
}

/// A switched fabric topology.
#[derive(Debug, Clone)]
pub struct Switched {
    kind: &'static str,
    wiring: Wiring,
    clos: ClosParams,
    caps: Caps,
    scale_up: ScaleUp,
    rack: Option<u64>,
    collectives: CollectiveParams,
    prices: Prices,
}

/// Per-tier fractions of a group's NIC traffic that go up, per pattern, and the tapers.
struct Route {
    tiers: usize,
    ring: [f64; MAX_TIERS],
    a2a: [f64; MAX_TIERS],
    taper: [f64; MAX_TIERS],
    /// NVLink bytes forwarded per all-to-all byte.
    forward: f64,
}

impl Route {
    fn slowdown(&self, f: &[f64; MAX_TIERS]) -> f64 {
        (0..self.tiers.saturating_sub(1))
            .map(|t| f[t] * self.taper[t])
            .fold(1.0, f64::max)
    }
}

impl Switched {
    /// Build `kind` from its parameters (the checks name the key).
    pub fn new(kind: &'static str, p: SwitchedParams) -> Result<Switched, PluginError> {
        let clos = ClosParams {
            radix: p.radix,
            tiers: p.tiers,
            oversubscription: p.oversubscription.clone(),
        };
        Clos::check(&clos, "")?;
        p.collectives.check()?;
        p.prices.check()?;
        let wiring = match kind {
            "fat-tree" => Wiring::FatTree,
            "rail-only" => Wiring::RailOnly {
                forwarding: p.forwarding.unwrap_or(true),
            },
            _ => Wiring::RailOptimized(p.cross_rail.unwrap_or_default()),
        };
        let misplaced = |key: &str, applies: &str| PluginError::Params {
            path: key.into(),
            message: format!("applies to {applies} only, not `{kind}`"),
        };
        if p.cross_rail.is_some() && !matches!(wiring, Wiring::RailOptimized(_)) {
            return Err(misplaced("cross_rail", "rail-optimized and nvl72"));
        }
        if p.forwarding.is_some() && !matches!(wiring, Wiring::RailOnly { .. }) {
            return Err(misplaced("forwarding", "rail-only"));
        }
        if p.rack.is_some() && kind != "nvl72" {
            return Err(misplaced("rack", "nvl72"));
        }
        let rack = (kind == "nvl72").then(|| p.rack.unwrap_or(72));
        if rack == Some(0) {
            return Err(PluginError::Params {
                path: "rack".into(),
                message: "must be at least 1".into(),
            });
        }
        let caps = Caps {
            nvls: p.nvls.unwrap_or(kind == "nvl72"),
            sharp: p.sharp,
        };
        let alg = p.collectives.algorithm;
        use crate::algo::Algorithm::*;
        if matches!(alg, Nvls | NvlsTree) && !caps.nvls {
            return Err(PluginError::Params {
                path: "collectives.algorithm".into(),
                message: format!(
                    "`{}` needs reduction in the scale-up switches: set nvls = true",
                    alg.name()
                ),
            });
        }
        if alg == Sharp && !caps.sharp {
            return Err(PluginError::Params {
                path: "collectives.algorithm".into(),
                message: "`sharp` needs reduction in the fabric's switches: set sharp = true"
                    .into(),
            });
        }
        Ok(Switched {
            kind,
            wiring,
            clos,
            caps,
            scale_up: p.scale_up,
            rack,
            collectives: p.collectives,
            prices: p.prices,
        })
    }

    fn fail(&self, message: String) -> PluginError {
        PluginError::Failed {
            plugin: self.kind.to_string(),
            message,
        }
    }

    /// The Clos of the scale-out network: over every NIC, or over one rail's NICs (one per
    /// domain) for `rail-only`.
    fn clos(&self, links: &Links, devices: u64) -> Result<Clos, PluginError> {
        let endpoints = match self.wiring {
            Wiring::RailOnly { .. } => devices.div_ceil(links.domain),
            _ => devices,
        };
        Clos::new(&self.clos, endpoints, "")
    }

    /// Devices under one tier-`t` subtree, as ring (same-rail) traffic sees them.
    fn ring_block(&self, c: &Clos, links: &Links, t: usize) -> u64 {
        let u = links.domain;
        match self.wiring {
            // A node's NICs are cabled to one leaf: a subtree holds whole nodes.
            Wiring::FatTree => {
                let b = c.block(t);
                if b >= u {
                    b / u * u
                } else {
                    b
                }
            }
            Wiring::RailOptimized(_) => {
                let su = c.down(0) * u;
                let pods: u64 = (1..=t).map(|k| (c.down(k) / u).max(1)).product();
                su * pods
            }
            Wiring::RailOnly { .. } => c.block(t) * u,
        }
    }

    fn route(&self, g: &GroupPlacement, links: &Links, c: &Clos) -> Route {
        let u = links.domain;
        let n = g.blocks(u).max(1);
        let p = g.ranks() as f64;
        let r = g.members_within(u).max(1);
        let mut route = Route {
            tiers: c.tiers,
            ring: [0.0; MAX_TIERS],
            a2a: [0.0; MAX_TIERS],
            taper: [1.0; MAX_TIERS],
            forward: 0.0,
        };
        for t in 0..c.tiers.saturating_sub(1) {
            route.taper[t] = c.taper(t);
            let block = self.ring_block(c, links, t);
            let b = g.blocks(block);
            route.ring[t] = if b > 1 {
                (b as f64 / n as f64).min(1.0)
            } else {
                0.0
            };
            let same = g.members_within(block) as f64;
            // Spine-routed cross-rail traffic leaves the leaf unless it is on the same rail.
            let same = match self.wiring {
                Wiring::RailOptimized(CrossRail::Spine) if t == 0 => same / r as f64,
                _ => same,
            };
            route.a2a[t] = (1.0 - same / p).max(0.0);
        }
        route.forward = match self.wiring {
            Wiring::FatTree | Wiring::RailOptimized(CrossRail::Spine) => 0.0,
            _ => (r as f64 - 1.0) / r as f64,
        };
        route
    }

    /// Scale-out links per rail network (`rail-only` has one Clos per rail).
    fn rails(&self, links: &Links) -> u64 {
        match self.wiring {
            Wiring::RailOnly { .. } => links.domain,
            _ => 1,
        }
    }

    /// Two members of `g` that talk across domains on different rails, if any: a ring's
    /// neighbours (all-to-all: any two members), in member order.
    fn cross_rail_pair(g: &GroupPlacement, u: u64, kind: CollectiveKind) -> Option<(u64, u64)> {
        let p = g.ranks();
        let crosses = |a: u64, b: u64| a / u != b / u && a % u != b % u;
        if kind == CollectiveKind::AllToAll {
            let first = g.member(0);
            return (1..p)
                .map(|i| g.member(i))
                .find(|&b| crosses(first, b))
                .map(|b| (first, b));
        }
        (0..p)
            .map(|i| (g.member(i), g.member((i + 1) % p)))
            .find(|&(a, b)| crosses(a, b))
    }
}

impl Topology for Switched {
    fn kind(&self) -> &str {
        self.kind
    }

    fn check(&self, network: &[Arc<dyn Interconnect>], devices: u64) -> Result<(), PluginError> {
        let l = links::links(self.kind, network, devices)?;
        if let Some(rack) = self.rack {
            if l.domain != rack {
                return Err(PluginError::Params {
                    path: "rack".into(),
                    message: format!(
                        "is {rack} but system.network[0] (the NVLink domain) holds {} GPUs",
                        l.domain
                    ),
                });
            }
        }
        if l.nic.is_some() {
            self.clos(&l, devices)?;
        }
        Ok(())
    }

    fn links(
        &self,
        network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Vec<LinkClass>, PluginError> {
        let l = links::links(self.kind, network, devices)?;
        let Some(nic) = l.nic else {
            return Ok(Vec::new());
        };
        let c = self.clos(&l, devices)?;
        let rails = self.rails(&l);
        let mut v = vec![LinkClass {
            name: "nic".into(),
            count: devices as f64,
            bandwidth: Bandwidth(nic.bw),
        }];
        for t in 0..c.tiers - 1 {
            v.push(LinkClass {
                name: format!("tier-{t} uplink"),
                count: (c.uplinks(t) * rails).max(1) as f64,
                bandwidth: Bandwidth(nic.bw),
            });
        }
        Ok(v)
    }

    fn collective(
        &self,
        network: &[Arc<dyn Interconnect>],
        g: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, PluginError> {
        let mut l = links::links(self.kind, network, g.devices())?;
        let shape = Shape::of(g, l.domain);
        if self.scale_up == ScaleUp::Mesh && l.domain > 1 && shape.r > 1 {
            l.up.bw *= (shape.r - 1) as f64 / (l.domain - 1) as f64;
        }
        let model = Model {
            params: &self.collectives,
            links: &l,
            caps: self.caps,
        };
        if shape.n <= 1 {
            return Ok(algo::in_domain(&model, kind, bytes.0, &shape));
        }
        let nic = links::nic(self.kind, &l)?;
        if let Wiring::RailOnly { forwarding: false } = self.wiring {
            if let Some((a, b)) = Self::cross_rail_pair(g, l.domain, kind) {
                return Err(self.fail(format!(
                    "cannot place the group: devices {a} (rail {}) and {b} (rail {}) are in \
                     different nodes and on different rails, and forwarding through the \
                     scale-up domain is off (forwarding = false)",
                    a % l.domain,
                    b % l.domain
                )));
            }
        }
        let c = self.clos(&l, g.devices())?;
        let route = self.route(g, &l, &c);
        let (ring_slow, a2a_slow) = (route.slowdown(&route.ring), route.slowdown(&route.a2a));
        let paths = Paths {
            ring: nic.bw / ring_slow,
            a2a: nic.bw / a2a_slow,
            p2p: nic.bw / ring_slow,
            sharp: nic.bw,
            a2a_forward: route.forward,
        };
        let e = model.eval(kind, bytes.0, &shape, &paths);
        let busy = e.nic_bytes / nic.bw;
        let rails = self.rails(&l);
        let tiers = (0..c.tiers - 1).map(|t| {
            let f = match e.pattern {
                Pattern::Ring | Pattern::P2p => route.ring[t],
                Pattern::AllToAll => route.a2a[t],
                Pattern::Sharp => 0.0,
            };
            let count = (c.uplinks(t) * rails).max(1) as f64;
            (
                count * shape.p as f64 / g.devices() as f64,
                f * route.taper[t] * busy,
            )
        });
        let loads = algo::loads(shape.p, busy, tiers)?;
        Ok(CollectiveCost {
            time: Seconds(e.time),
            loads,
        })
    }

    fn cost(
        &self,
        network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Option<NetworkCost>, PluginError> {
        let l = links::links(self.kind, network, devices)?;
        let mut b = cost::Bill::default();
        if let Some(rack) = self.rack {
            b.nvlink_trays(&self.prices, devices.div_ceil(rack) * 9);
        }
        if l.nic.is_some() {
            let c = self.clos(&l, devices)?;
            let rails = self.rails(&l);
            let sw = c.switches();
            let switches: u64 = sw[..c.tiers].iter().sum::<u64>() * rails;
            let uplinks: u64 = (0..c.tiers - 1).map(|t| c.uplinks(t)).sum::<u64>() * rails;
            b.switches(&self.prices, switches, self.clos.radix);
            // NIC to leaf, and every switch-to-switch link, optical at both ends.
            b.links(&self.prices, devices + uplinks);
        }
        Ok(Some(b.finish()))
    }

    fn describe(&self, network: &[Arc<dyn Interconnect>], devices: u64) -> serde_json::Value {
        let Ok(l) = links::links(self.kind, network, devices) else {
            return serde_json::Value::Null;
        };
        let Ok(c) = self.clos(&l, devices) else {
            return serde_json::Value::Null;
        };
        serde_json::json!({
            "tiers": c.tiers,
            "switches_per_tier": &c.switches()[..c.tiers],
            "domain": l.domain,
            "nvls": self.caps.nvls,
            "sharp": self.caps.sharp,
        })
    }
}
