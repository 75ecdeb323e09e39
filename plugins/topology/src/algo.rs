//! The collective algorithms a topology runs over its links: ring, double binary tree,
//! hierarchical (reduce-scatter inside the scale-up domain, all-reduce across domains,
//! all-gather inside), in-network reduction (NVLink SHARP "NVLS" in the scale-up switches,
//! NVLS-tree across domains, InfiniBand SHARP "CollNet" in the fabric), all-to-all and
//! send/recv, each under the LL, LL128 and Simple protocols, and NCCL's choice among them.
//!
//! Latencies and protocol bandwidth factors are NCCL's own tuning model (NVIDIA/nccl
//! `src/graph/tuning.cc`, 2.19: `baseLat`, `hwLat`, the LL/LL128 factors and CollNet's
//! 0.9 x 0.85); the efficiencies NCCL has no figure for are fitted once on the nccl-tests
//! sweeps of `configs/validation/collectives.toml` (shared by every case; see
//! `configs/validation/COLLECTIVES.md`). Every one is a named parameter of the `collectives`
//! table of a topology component.
//!
//! A step takes the slower of the link's own latency (its level's `latency`) and NCCL's
//! protocol step; each collective adds its levels' fixed cost (`collective_overhead`).
//!
//! Conventions: `S` is the full buffer of [`perfcast_core::Collective`]; a group has `p`
//! ranks, `r` of them in each of the `n` scale-up domains it spans; the NIC bandwidths
//! ([`Paths`]) are per device, after the topology's taper for the traffic pattern.

use crate::links::{Links, Tech};
use perfcast_core::op::CollectiveKind;
use perfcast_core::params::{fraction, non_negative};
use perfcast_core::topology::{CollectiveCost, GroupPlacement, LinkLoad, LinkLoads};
use perfcast_core::{PluginError, Seconds};
use serde::Deserialize;

/// The algorithm a topology runs: `auto` picks the fastest of NCCL's (ring, tree, NVLS,
/// NVLS-tree, CollNet/SHARP) for each collective, as NCCL's tuner does; the others force one
/// where it applies (a tree all-gather or a SHARP collective inside one domain fall back to
/// `auto`, as NCCL does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// The fastest of NCCL's algorithms.
    #[default]
    Auto,
    /// Ring (bandwidth-optimal, `p - 1` steps per phase).
    Ring,
    /// Double binary tree (all-reduce): log-depth latency.
    Tree,
    /// Reduce-scatter in the domain, all-reduce of the shard across domains, all-gather.
    Hierarchical,
    /// NVLink SHARP: reduction in the scale-up switches (one domain).
    Nvls,
    /// NVLS inside each domain, a tree across domains.
    NvlsTree,
    /// InfiniBand SHARP (NCCL CollNet): reduction in the fabric's switches.
    Sharp,
}

impl Algorithm {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::Nvls => "nvls",
            Algorithm::NvlsTree => "nvls_tree",
            Algorithm::Sharp => "sharp",
        }
    }
}

/// NCCL's protocols: `ll` (8-byte stores with flags: lowest latency, a quarter of the
/// bandwidth), `ll128` (128-byte lines, 120 of data), `simple` (full bandwidth, the largest
/// latency); `auto` takes the fastest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// The fastest.
    #[default]
    Auto,
    /// Low latency.
    Ll,
    /// Low latency, 128-byte lines.
    Ll128,
    /// Simple.
    Simple,
}

/// Parameters of the algorithm model (`[components.NAME.collectives]`). Triples are per
/// protocol, `[LL, LL128, Simple]`; times in microseconds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollectiveParams {
    /// The algorithm (default `auto`: NCCL's choice).
    pub algorithm: Algorithm,
    /// The protocol (default `auto`).
    pub protocol: Protocol,
    /// Fixed latency of a ring collective (NCCL `baseLat` ring: 6.6, 14, 8.4).
    pub ring_base_us: [f64; 3],
    /// Fixed latency of a tree collective (NCCL `baseLat` tree: 6.8, 14, 0).
    pub tree_base_us: [f64; 3],
    /// Ring step over NVLink (NCCL `hwLat` NVLink ring: 0.6, 1.9, 3.4).
    pub ring_nvlink_hop_us: [f64; 3],
    /// Tree step over NVLink (NCCL `hwLat` NVLink tree: 0.6, 1.25, 28).
    pub tree_nvlink_hop_us: [f64; 3],
    /// Ring step across the network (NCCL `hwLat` NET ring: 2.7, 4.0, 14).
    pub ring_net_hop_us: [f64; 3],
    /// Tree step across the network (NCCL `hwLat` NET tree: 5.0, 8.5, 28).
    pub tree_net_hop_us: [f64; 3],
    /// NVLS latency in the domain (NCCL `hwLat` NVLink NVLS: 23).
    pub nvls_hop_us: f64,
    /// NVLS-tree step across the network (NCCL `hwLat` NET NVLS tree: 14).
    pub nvls_tree_net_hop_us: f64,
    /// CollNet (SHARP) latency across the network (NCCL `hwLat` NET CollNet direct: 31).
    pub sharp_net_hop_us: f64,
    /// Bandwidth factor per protocol (NCCL: ring LL 1/4, LL128 0.92, Simple 1).
    pub protocol_bandwidth: [f64; 3],
    /// Tree bandwidth against the ring's (NCCL: `busBw * .92`).
    pub tree_efficiency: f64,
    /// Bandwidth a tree algorithm (tree, NVLS-tree) keeps per doubling of the domains past
    /// two. Fitted (nccl-tests tree and NVLS-tree at 2 and 46 nodes): 0.923.
    pub tree_scale_efficiency: f64,
    /// Achievable fraction of the scale-up bandwidth for NVLS traffic (each device sends and
    /// receives `S (1 + 1/p)`). Fitted (8-GPU H100/H200/B200 NVLS sweeps): 0.8.
    pub nvls_efficiency: f64,
    /// Achievable fraction of the NIC bandwidth with SHARP (NCCL CollNet: 0.9 x 0.85 on
    /// Hopper and later = 0.765).
    pub sharp_efficiency: f64,
    /// Achievable fraction of the NIC level's bandwidth for NCCL's ring, tree and
    /// all-to-all traffic across domains. Fitted (multi-node nccl-tests ring sweeps, 2 to 64
    /// nodes): 0.95.
    pub net_efficiency: f64,
}

impl Default for CollectiveParams {
    fn default() -> Self {
        CollectiveParams {
            algorithm: Algorithm::Auto,
            protocol: Protocol::Auto,
            ring_base_us: [6.6, 14.0, 8.4],
            tree_base_us: [6.8, 14.0, 0.0],
            ring_nvlink_hop_us: [0.6, 1.9, 3.4],
            tree_nvlink_hop_us: [0.6, 1.25, 28.0],
            ring_net_hop_us: [2.7, 4.0, 14.0],
            tree_net_hop_us: [5.0, 8.5, 28.0],
            nvls_hop_us: 23.0,
            nvls_tree_net_hop_us: 14.0,
            sharp_net_hop_us: 31.0,
            protocol_bandwidth: [0.25, 0.92, 1.0],
            tree_efficiency: 0.92,
            tree_scale_efficiency: 0.923,
            nvls_efficiency: 0.8,
            sharp_efficiency: 0.765,
            net_efficiency: 0.95,
        }
    }
}

impl CollectiveParams {
    /// Check every value; errors name the key below `collectives`.
    pub fn check(&self) -> Result<(), PluginError> {
        let k = |s: &str| format!("collectives.{s}");
        for (name, v) in [
            ("ring_base_us", &self.ring_base_us),
            ("tree_base_us", &self.tree_base_us),
            ("ring_nvlink_hop_us", &self.ring_nvlink_hop_us),
            ("tree_nvlink_hop_us", &self.tree_nvlink_hop_us),
            ("ring_net_hop_us", &self.ring_net_hop_us),
            ("tree_net_hop_us", &self.tree_net_hop_us),
        ] {
            for x in v {
                non_negative(&k(name), *x)?;
            }
        }
        for x in &self.protocol_bandwidth {
            fraction(&k("protocol_bandwidth"), *x)?;
        }
        for (name, v) in [
            ("nvls_hop_us", self.nvls_hop_us),
            ("nvls_tree_net_hop_us", self.nvls_tree_net_hop_us),
            ("sharp_net_hop_us", self.sharp_net_hop_us),
        ] {
            non_negative(&k(name), v)?;
        }
        for (name, v) in [
            ("tree_efficiency", self.tree_efficiency),
            ("tree_scale_efficiency", self.tree_scale_efficiency),
            ("nvls_efficiency", self.nvls_efficiency),
            ("sharp_efficiency", self.sharp_efficiency),
            ("net_efficiency", self.net_efficiency),
        ] {
            fraction(&k(name), v)?;
        }
        Ok(())
    }
}

/// What the switches can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    /// The scale-up switches reduce (NVSwitch 3 and later: NVLS).
    pub nvls: bool,
    /// The fabric's switches reduce (InfiniBand SHARP).
    pub sharp: bool,
}

/// A group's shape: ranks, ranks per scale-up domain, domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Ranks.
    pub p: u64,
    /// Ranks in each domain.
    pub r: u64,
    /// Domains spanned.
    pub n: u64,
}

impl Shape {
    /// The shape of `g` over scale-up domains of `domain` devices.
    pub fn of(g: &GroupPlacement, domain: u64) -> Shape {
        Shape {
            p: g.ranks(),
            r: g.members_within(domain).max(1),
            n: g.blocks(domain).max(1),
        }
    }
}

/// The cost of a group that stays in one scale-up domain (no NIC traffic, no loads).
pub fn in_domain(m: &Model<'_>, kind: CollectiveKind, bytes: f64, s: &Shape) -> CollectiveCost {
    CollectiveCost {
        time: Seconds(m.eval(kind, bytes, s, &NO_PATHS).time),
        loads: LinkLoads::default(),
    }
}

/// The loads of a collective across domains: every member's NIC (class 0) for `busy`, and
/// on each further class `(links, busy)`.
pub fn loads(
    p: u64,
    busy: f64,
    classes: impl Iterator<Item = (f64, f64)>,
) -> Result<LinkLoads, PluginError> {
    let mut l = LinkLoads::default();
    l.push(LinkLoad {
        class: 0,
        links: p as f64,
        busy: Seconds(busy),
    })?;
    for (i, (links, busy)) in classes.enumerate() {
        l.push(LinkLoad {
            class: (i + 1) as u32,
            links,
            busy: Seconds(busy),
        })?;
    }
    Ok(l)
}

/// Per-device NIC bandwidth (B/s) the topology grants each traffic pattern of a group that
/// leaves its domain, with its sibling groups running; extra NVLink bytes per byte sent for
/// all-to-all traffic forwarded through the domain (PXN, rail-only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paths {
    /// Neighbour traffic: rings, trees, hierarchical stages.
    pub ring: f64,
    /// All-to-all traffic.
    pub a2a: f64,
    /// Point-to-point hand-offs.
    pub p2p: f64,
    /// SHARP reduction trees.
    pub sharp: f64,
    /// NVLink bytes added per all-to-all byte sent across domains (forwarding to the
    /// destination's rail).
    pub a2a_forward: f64,
}

/// Which pattern a collective's traffic across domains has (for link loads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Rings, trees, hierarchical stages.
    Ring,
    /// All-to-all.
    AllToAll,
    /// Point to point.
    P2p,
    /// In-fabric reduction.
    Sharp,
}

/// A collective's time and its per-device NIC traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Eval {
    /// Seconds.
    pub time: f64,
    /// The traffic pattern across domains.
    pub pattern: Pattern,
    /// Bytes one device's NIC sends (zero inside one domain).
    pub nic_bytes: f64,
    /// The algorithm used.
    pub algorithm: Algorithm,
}

const US: f64 = 1e-6;

fn protocols(p: Protocol) -> &'static [usize] {
    match p {
        Protocol::Auto => &[0, 1, 2],
        Protocol::Ll => &[0],
        Protocol::Ll128 => &[1],
        Protocol::Simple => &[2],
    }
}

/// Steps of a ring phase and the factor of `S` each rank sends: all-reduce `2(p-1)`,
/// `2(p-1)/p`; all-gather, reduce-scatter `p-1`, `(p-1)/p`; broadcast `p-1`, 1.
fn ring_steps(kind: CollectiveKind, p: u64, n: u64) -> (f64, f64, f64) {
    let (p, n) = (p as f64, n as f64);
    match kind {
        CollectiveKind::AllReduce => (
            2.0 * (p - 1.0),
            if n > 1.0 { 2.0 * n } else { 0.0 },
            2.0 * (p - 1.0) / p,
        ),
        CollectiveKind::Broadcast => (p - 1.0, n - 1.0, 1.0),
        _ => (p - 1.0, n - 1.0, (p - 1.0) / p),
    }
}

/// The model, for one topology's links and capabilities.
pub struct Model<'a> {
    /// Parameters.
    pub params: &'a CollectiveParams,
    /// The links.
    pub links: &'a Links,
    /// Switch capabilities.
    pub caps: Caps,
}

impl Model<'_> {
    fn nic(&self) -> Tech {
        self.links.nic.unwrap_or(self.links.up)
    }
    fn overhead(&self, s: &Shape) -> f64 {
        if s.n > 1 {
            self.links.up.overhead.max(self.nic().overhead)
        } else {
            self.links.up.overhead
        }
    }

    /// One step over the scale-up links (seconds): the slower of the link's own latency
    /// (its level's `latency`) and NCCL's protocol step `nccl_us`.
    fn up_hop(&self, nccl_us: f64) -> f64 {
        self.links.up.hop.max(nccl_us * US)
    }

    /// One step across the network (seconds), likewise with the NIC level's latency.
    fn net_hop(&self, nccl_us: f64) -> f64 {
        self.nic().hop.max(nccl_us * US)
    }

    /// Inter-domain bandwidth of one domain's share of a group: `r` NICs at `per_nic`.
    fn node_bw(&self, s: &Shape, per_nic: f64) -> f64 {
        s.r as f64 * per_nic * self.params.net_efficiency
    }

    fn ring(&self, kind: CollectiveKind, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let q = self.params;
        let (steps, inter, factor) = ring_steps(kind, s.p, s.n);
        let bw = if s.n > 1 {
            self.links.up.bw.min(self.node_bw(s, paths.ring))
        } else {
            self.links.up.bw
        };
        let mut best = f64::INFINITY;
        for &i in protocols(q.protocol) {
            let lat = q.ring_base_us[i] * US
                + (steps - inter).max(0.0) * self.up_hop(q.ring_nvlink_hop_us[i])
                + inter * self.net_hop(q.ring_net_hop_us[i]);
            best = best.min(lat + factor * bytes / (bw * q.protocol_bandwidth[i]));
        }
        Eval {
            time: self.overhead(s) + best,
            pattern: Pattern::Ring,
            nic_bytes: if s.n > 1 {
                factor * bytes / s.r as f64
            } else {
                0.0
            },
            algorithm: Algorithm::Ring,
        }
    }

    /// The tree's bandwidth after its scale loss past two domains.
    fn tree_scale(&self, n: u64) -> f64 {
        let doublings = ((n as f64).log2() - 1.0).max(0.0);
        self.params.tree_scale_efficiency.powf(doublings)
    }

    fn tree(&self, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let q = self.params;
        let bw = if s.n > 1 {
            self.links.up.bw.min(self.node_bw(s, paths.ring))
        } else {
            self.links.up.bw
        } * q.tree_efficiency
            * self.tree_scale(s.n);
        let depth = (s.n as f64).log2().ceil();
        let factor = 2.0 * (s.p as f64 - 1.0) / s.p as f64;
        let mut best = f64::INFINITY;
        for &i in protocols(q.protocol) {
            let lat = q.tree_base_us[i] * US
                + 2.0
                    * ((s.r as f64 - 1.0) * self.up_hop(q.tree_nvlink_hop_us[i])
                        + depth * self.net_hop(q.tree_net_hop_us[i]));
            best = best.min(lat + factor * bytes / (bw * q.protocol_bandwidth[i]));
        }
        Eval {
            time: self.overhead(s) + best,
            pattern: Pattern::Ring,
            nic_bytes: if s.n > 1 {
                2.0 * bytes / s.r as f64
            } else {
                0.0
            },
            algorithm: Algorithm::Tree,
        }
    }

    /// NVLS in one domain of `r` devices: all-reduce sends and receives `S (1 + 1/r)` per
    /// device; all-gather and reduce-scatter `S (r-1)/r`.
    fn nvls_domain_time(&self, kind: CollectiveKind, bytes: f64, r: u64) -> f64 {
        let bw = self.links.up.bw * self.params.nvls_efficiency;
        let r = r as f64;
        match kind {
            CollectiveKind::AllReduce => bytes * (1.0 + 1.0 / r) / bw,
            _ => bytes * (r - 1.0) / r / bw,
        }
    }

    fn nvls(&self, kind: CollectiveKind, bytes: f64, s: &Shape) -> Eval {
        Eval {
            time: self.overhead(s)
                + self.up_hop(self.params.nvls_hop_us)
                + self.nvls_domain_time(kind, bytes, s.r),
            pattern: Pattern::Ring,
            nic_bytes: 0.0,
            algorithm: Algorithm::Nvls,
        }
    }

    /// NVLS in each domain, a double binary tree across the domains' NICs (each device's NIC
    /// carries `1/r` of the data): per direction `S` for two domains, `2S` for more.
    fn nvls_tree(&self, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let q = self.params;
        let per_nic = if s.n <= 2 { bytes } else { 2.0 * bytes } / s.r as f64;
        let inter = per_nic / (paths.ring * q.net_efficiency * self.tree_scale(s.n));
        let intra = self.nvls_domain_time(CollectiveKind::AllReduce, bytes, s.r);
        let depth = (s.n as f64).log2().ceil();
        Eval {
            time: self.overhead(s)
                + self.up_hop(q.nvls_hop_us)
                + 2.0 * depth * self.net_hop(q.nvls_tree_net_hop_us)
                + inter.max(intra),
            pattern: Pattern::Ring,
            nic_bytes: per_nic,
            algorithm: Algorithm::NvlsTree,
        }
    }

    /// SHARP: each device's NIC sends its `1/r` of the domain's data into the switch tree
    /// once and receives the reduction once; inside the domain NVLS or a ring.
    fn sharp(&self, kind: CollectiveKind, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let q = self.params;
        let (per_nic, eff) = match kind {
            CollectiveKind::AllReduce => (bytes / s.r as f64, q.sharp_efficiency),
            // CollNet all-gather / reduce-scatter: each NIC moves its share of the other
            // domains' data once, at the ring's efficiency.
            _ => (
                bytes * (s.p as f64 - 1.0) / s.p as f64 / s.r as f64,
                q.net_efficiency,
            ),
        };
        let inter = per_nic / (paths.sharp * eff);
        let intra = if self.caps.nvls {
            self.nvls_domain_time(kind, bytes, s.r)
        } else {
            let (_, _, f) = ring_steps(kind, s.r, 1);
            f * bytes / self.links.up.bw
        };
        Eval {
            time: self.overhead(s)
                + q.ring_base_us[2] * US
                + self.net_hop(q.sharp_net_hop_us)
                + inter.max(intra),
            pattern: Pattern::Sharp,
            nic_bytes: per_nic,
            algorithm: Algorithm::Sharp,
        }
    }

    /// Reduce-scatter in the domain, all-reduce (or all-gather, reduce-scatter) of the shard
    /// across domains on each device's NIC, all-gather in the domain: one after the other.
    fn hierarchical(&self, kind: CollectiveKind, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let inner = Shape {
            p: s.r,
            r: s.r,
            n: 1,
        };
        let outer = Shape {
            p: s.n,
            r: 1,
            n: s.n,
        };
        let shard = bytes / s.r as f64;
        let intra = |k: CollectiveKind| {
            if s.r > 1 {
                self.ring(k, bytes, &inner, paths).time
            } else {
                0.0
            }
        };
        use CollectiveKind::*;
        let across = self.ring(kind, shard, &outer, paths);
        let t = match kind {
            AllReduce => intra(ReduceScatter) + across.time + intra(AllGather),
            AllGather | ReduceScatter => across.time + intra(kind),
            _ => across.time,
        };
        Eval {
            time: t,
            pattern: Pattern::Ring,
            nic_bytes: across.nic_bytes,
            algorithm: Algorithm::Hierarchical,
        }
    }

    /// All-to-all: each device sends `S (r-1)/p` inside its domain and `S (p-r)/p` across
    /// (plus what it forwards for others), at the same time.
    fn all_to_all(&self, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let q = self.params;
        let p = s.p as f64;
        let intra = bytes * (s.r as f64 - 1.0) / p;
        let inter = bytes * (p - s.r as f64) / p;
        let up = (intra + inter * paths.a2a_forward) / self.links.up.bw;
        let net = if s.n > 1 {
            inter / (paths.a2a * q.net_efficiency)
        } else {
            0.0
        };
        let hop = if s.n > 1 {
            self.net_hop(q.ring_net_hop_us[2])
        } else {
            self.up_hop(q.ring_nvlink_hop_us[2])
        };
        Eval {
            time: self.overhead(s) + q.ring_base_us[2] * US + hop + up.max(net),
            pattern: Pattern::AllToAll,
            nic_bytes: if s.n > 1 { inter } else { 0.0 },
            algorithm: Algorithm::Auto,
        }
    }

    /// Send/recv between neighbouring ranks: `S` over the scale-up links, or one NIC when
    /// the pair is in two domains.
    fn send_recv(&self, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        let q = self.params;
        let (bw, hop) = if s.n > 1 {
            (
                paths.p2p * q.net_efficiency,
                self.net_hop(q.ring_net_hop_us[2]),
            )
        } else {
            (self.links.up.bw, self.up_hop(q.ring_nvlink_hop_us[2]))
        };
        Eval {
            time: self.overhead(s) + q.ring_base_us[2] * US + hop + bytes / bw,
            pattern: Pattern::P2p,
            nic_bytes: if s.n > 1 { bytes } else { 0.0 },
            algorithm: Algorithm::Auto,
        }
    }

    /// Time `kind` of `bytes` over a group of shape `s`; `paths` is needed when the group
    /// spans several domains.
    pub fn eval(&self, kind: CollectiveKind, bytes: f64, s: &Shape, paths: &Paths) -> Eval {
        use CollectiveKind::*;
        match kind {
            AllToAll => return self.all_to_all(bytes, s, paths),
            SendRecv => return self.send_recv(bytes, s, paths),
            _ => {}
        }
        let reduce_like = matches!(kind, AllReduce | AllGather | ReduceScatter);
        let nvls = self.caps.nvls && s.r > 1 && reduce_like;
        let sharp = self.caps.sharp && s.n > 1 && reduce_like;
        let forced = match self.params.algorithm {
            Algorithm::Tree if kind == AllReduce => Some(self.tree(bytes, s, paths)),
            Algorithm::Hierarchical if s.n > 1 && s.r > 1 && kind != Broadcast => {
                Some(self.hierarchical(kind, bytes, s, paths))
            }
            Algorithm::Nvls if nvls && s.n == 1 => Some(self.nvls(kind, bytes, s)),
            Algorithm::NvlsTree if nvls && s.n > 1 && kind == AllReduce => {
                Some(self.nvls_tree(bytes, s, paths))
            }
            Algorithm::Sharp if sharp => Some(self.sharp(kind, bytes, s, paths)),
            Algorithm::Ring => Some(self.ring(kind, bytes, s, paths)),
            _ => None,
        };
        if let Some(e) = forced {
            return e;
        }
        let mut best = self.ring(kind, bytes, s, paths);
        let mut consider = |e: Eval| {
            if e.time < best.time {
                best = e;
            }
        };
        if kind == AllReduce {
            consider(self.tree(bytes, s, paths));
        }
        if nvls && s.n == 1 {
            consider(self.nvls(kind, bytes, s));
        }
        if nvls && s.n > 1 && kind == AllReduce {
            consider(self.nvls_tree(bytes, s, paths));
        }
        if sharp {
            consider(self.sharp(kind, bytes, s, paths));
        }
        best
    }
}

/// Paths for a group inside one domain (no NIC traffic).
pub const NO_PATHS: Paths = Paths {
    ring: 1.0,
    a2a: 1.0,
    p2p: 1.0,
    sharp: 1.0,
    a2a_forward: 0.0,
};
