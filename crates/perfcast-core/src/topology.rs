//! Network topologies: how the devices and the switches of a system are wired, where the
//! traffic of a communication group goes, how long a collective takes on it and which links
//! it keeps busy.
//!
//! A [`Topology`] is a plugin kind like the hardware traits. It is given the system's network
//! levels ([`Interconnect`]s, the link technologies: per-device bandwidth of the scale-up
//! domain, of the NIC, ...), the placement of one communication group on the devices
//! ([`GroupPlacement`]) and the collective, and answers its time and the links it loads
//! ([`CollectiveCost`]). The engine uses the loads for groups that run at the same time: see
//! [`LinkLoad`]. The default, [`Hierarchical`], is the model of the levels alone (each group
//! has every level's bandwidth to itself), which is what a system without a topology uses.
//!
//! Device numbering: the devices a plan uses are numbered `0..devices` in the order the plan
//! lays its mesh out (the first axis of the layout varies fastest). Topologies map numbers to
//! places: consecutive numbers fill a scale-up domain (`network[0].domain_size()` devices, a
//! node or an NVL72 rack) first, local rank `d % domain` is the device's NIC rail.

use crate::error::PluginError;
use crate::hardware::{CollectiveAlgorithm, Interconnect};
use crate::op::{Collective, CollectiveKind};
use crate::units::{Bandwidth, Bytes, Seconds};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Most axes a [`GroupPlacement`] may have.
pub const MAX_GROUP_AXES: usize = 6;

/// One axis of a group's lattice: `degree` members, `stride` device numbers apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupAxis {
    /// Members along the axis (at least 1).
    pub degree: u64,
    /// Distance between neighbours along the axis, in device numbers (at least 1).
    pub stride: u64,
}

/// Where one communication group sits on the devices.
///
/// The group that holds device 0 is the lattice `{ sum_k i_k * stride_k : 0 <= i_k < degree_k }`
/// of its axes, its members ordered with the first axis fastest (the order a ring visits
/// them). Every collective of a plan runs at the same time in all the groups of the same axes
/// (SPMD): `devices / ranks` groups, translates of this one, which together hold every device
/// once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupPlacement {
    axes: [GroupAxis; MAX_GROUP_AXES],
    len: usize,
    devices: u64,
}

impl GroupPlacement {
    /// A group of `axes` (axes of degree 1 are dropped) among `devices` devices. An error
    /// names the axis when a degree or a stride is zero, there are more than
    /// [`MAX_GROUP_AXES`] axes, or the group does not fit in `devices`.
    pub fn new(axes: &[GroupAxis], devices: u64) -> Result<GroupPlacement, PluginError> {
        let bad = |message: String| PluginError::Params {
            path: "group".into(),
            message,
        };
        let mut g = GroupPlacement {
            axes: [GroupAxis::default(); MAX_GROUP_AXES],
            len: 0,
            devices: devices.max(1),
        };
        let mut span = 1u64;
        for (i, a) in axes.iter().enumerate() {
            if a.degree == 0 || a.stride == 0 {
                return Err(bad(format!(
                    "axis {i} has degree {} and stride {}: both must be at least 1",
                    a.degree, a.stride
                )));
            }
            if a.degree == 1 {
                continue;
            }
            if g.len == MAX_GROUP_AXES {
                return Err(bad(format!(
                    "more than {MAX_GROUP_AXES} axes of degree > 1"
                )));
            }
            span = span.saturating_add((a.degree - 1).saturating_mul(a.stride));
            g.axes[g.len] = *a;
            g.len += 1;
        }
        if span > g.devices {
            return Err(bad(format!(
                "the group spans {span} device numbers but the plan has {} devices",
                g.devices
            )));
        }
        Ok(g)
    }

    /// The axes of degree > 1, first (fastest) first.
    pub fn axes(&self) -> &[GroupAxis] {
        &self.axes[..self.len]
    }

    /// Devices of the plan (the group and its translates hold all of them).
    pub fn devices(&self) -> u64 {
        self.devices
    }

    /// Members of the group.
    pub fn ranks(&self) -> u64 {
        self.axes().iter().map(|a| a.degree).product()
    }

    /// Groups of these axes running the same collective at the same time:
    /// `devices / ranks` (at least 1).
    pub fn groups(&self) -> u64 {
        (self.devices / self.ranks().max(1)).max(1)
    }

    /// Members of the group inside one aligned block of `block` consecutive device numbers
    /// (a node, a leaf switch's devices, ...): the product over the axes of
    /// `clamp(block / stride, 1, degree)`. Exact when every stride divides `block` or is a
    /// multiple of it, as mesh layouts are.
    pub fn members_within(&self, block: u64) -> u64 {
        self.axes()
            .iter()
            .map(|a| (block / a.stride).clamp(1, a.degree))
            .product()
    }

    /// Blocks of `block` consecutive device numbers the group touches:
    /// `ceil(ranks / members_within(block))`.
    pub fn blocks(&self, block: u64) -> u64 {
        self.ranks().div_ceil(self.members_within(block).max(1))
    }

    /// Device number of member `i` (first axis fastest); `i` is taken modulo the ranks.
    pub fn member(&self, i: u64) -> u64 {
        let mut rest = i % self.ranks().max(1);
        let mut d = 0;
        for a in self.axes() {
            d += (rest % a.degree) * a.stride;
            rest /= a.degree;
        }
        d
    }
}

/// One kind of link of a topology (e.g. "NIC", "leaf uplink", "global link").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkClass {
    /// Name for reports (`nic`, `leaf-spine`, ...).
    pub name: String,
    /// Links of the class in the system (one direction of one cable each).
    pub count: f64,
    /// Bandwidth of one link, one direction (achievable).
    pub bandwidth: Bandwidth,
}

/// What one collective of one group keeps busy on one link class.
///
/// The group's traffic loads `links` links of class `class` (an index into
/// [`Topology::links`]) for `busy` each: the time those links would need for it at their
/// full bandwidth. A collective takes at least the `busy` of every load. When several groups
/// run at the same time (the engine's concurrency, see `perfcast_engine::network`), their
/// loads on a class are spread over its links: the class needs
/// `sum over groups (links * busy) / count` and no collective of them finishes sooner.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkLoad {
    /// Index of the link class in [`Topology::links`].
    pub class: u32,
    /// Links of the class this one group loads.
    pub links: f64,
    /// Busy time of each of them.
    pub busy: Seconds,
}

/// Most link loads one [`CollectiveCost`] holds.
pub const MAX_LINK_LOADS: usize = 8;

/// A fixed-capacity list of [`LinkLoad`]s (no allocation on the hot path).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkLoads {
    items: [LinkLoad; MAX_LINK_LOADS],
    len: usize,
}

impl LinkLoads {
    /// Add a load; a load on a class already listed is merged into it (busy times add, the
    /// larger link count is kept); loads of zero busy time are left out. An error past
    /// [`MAX_LINK_LOADS`] classes.
    pub fn push(&mut self, load: LinkLoad) -> Result<(), PluginError> {
        if load.busy.0 <= 0.0 || load.links <= 0.0 {
            return Ok(());
        }
        if let Some(l) = self.items[..self.len]
            .iter_mut()
            .find(|l| l.class == load.class)
        {
            l.busy += load.busy;
            l.links = l.links.max(load.links);
            return Ok(());
        }
        if self.len == MAX_LINK_LOADS {
            return Err(PluginError::Failed {
                plugin: "topology".into(),
                message: format!(
                    "more than {MAX_LINK_LOADS} link classes loaded by one collective"
                ),
            });
        }
        self.items[self.len] = load;
        self.len += 1;
        Ok(())
    }
    /// The loads.
    pub fn as_slice(&self) -> &[LinkLoad] {
        &self.items[..self.len]
    }
    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The answer of [`Topology::collective`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CollectiveCost {
    /// Time of the collective in one group when its sibling groups (the other groups of the
    /// same axes) run the same collective at the same time, and nothing else does.
    pub time: Seconds,
    /// The links this one group keeps busy (empty: links nothing else shares).
    pub loads: LinkLoads,
}

/// One line of a topology's bill of materials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostItem {
    /// What (`switch`, `optical transceiver`, ...), as the price table names it.
    pub item: String,
    /// How many.
    pub count: f64,
    /// Price of one, US dollars.
    pub unit_usd: f64,
}

/// What a network costs: its switches, ports and optics, priced from the topology's
/// documented table.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetworkCost {
    /// Switches (scale-out and scale-up).
    pub switches: f64,
    /// Switch ports in use.
    pub switch_ports: f64,
    /// Optical transceivers (one per optical cable end).
    pub optics: f64,
    /// The bill, line by line.
    pub items: Vec<CostItem>,
}

impl NetworkCost {
    /// Total price, US dollars.
    pub fn total_usd(&self) -> f64 {
        self.items.iter().map(|i| i.count * i.unit_usd).sum()
    }
}

/// A network topology (see the [module docs](self)).
///
/// The engine builds the topology's view once per system (`check`, `links`) and then calls
/// `collective` for each collective of each plan it times; calls must be cheap (no
/// allocation), thread-safe and deterministic.
pub trait Topology: Send + Sync {
    /// Registered kind (e.g. `fat-tree`).
    fn kind(&self) -> &str;

    /// Whether the topology can hold `devices` devices joined by `network` (its levels,
    /// innermost first). Called once per system before any `collective`; an error names the
    /// parameter and the value (e.g. a torus whose dimensions do not multiply to the
    /// devices). Default: any.
    fn check(&self, _network: &[Arc<dyn Interconnect>], _devices: u64) -> Result<(), PluginError> {
        Ok(())
    }

    /// The link classes a [`LinkLoad`] refers to, for `devices` devices. Default: none (the
    /// topology reports no loads).
    fn links(
        &self,
        _network: &[Arc<dyn Interconnect>],
        _devices: u64,
    ) -> Result<Vec<LinkClass>, PluginError> {
        Ok(Vec::new())
    }

    /// Time one collective of `bytes` (the full buffer `S` of [`Collective`]) over `group`,
    /// with every sibling group running it at the same time, and the links it loads. An
    /// error when the topology cannot place the group (naming why) or a level cannot answer.
    fn collective(
        &self,
        network: &[Arc<dyn Interconnect>],
        group: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, PluginError>;

    /// The network's cost for `devices` devices, from the topology's price table; `None`
    /// when the topology has none. Not called by the engine.
    fn cost(
        &self,
        _network: &[Arc<dyn Interconnect>],
        _devices: u64,
    ) -> Result<Option<NetworkCost>, PluginError> {
        Ok(None)
    }

    /// What the topology derived from its parameters (tiers, switch counts, ...), as a JSON
    /// object for reports; `Null` by default. Not called by the engine.
    fn describe(&self, _network: &[Arc<dyn Interconnect>], _devices: u64) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The hierarchical network of levels: a group's collective runs on the innermost level
/// whose domain holds the whole group (the outermost otherwise); when the level below
/// already holds `r_in > 1` members, it runs in two stages (the two-level scheme of NCCL's
/// tree/CollNet and of Horovod's hierarchical all-reduce): all-reduce as reduce-scatter
/// inside the inner domain, the reduced shard (`S / r_in`) across domains, all-gather inside
/// again; all-gather and reduce-scatter likewise in one direction; all-to-all, send/recv and
/// broadcast on the outer level alone. Each level's time is its own
/// [`Interconnect::try_collective_time`], and each group has the level's per-device bandwidth
/// to itself: sibling groups do not slow each other and no link loads are reported.
///
/// This is perfcast's default topology (a system without one uses it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Hierarchical;

/// One collective on one level (zero for one rank or no bytes); a level's failure is kept
/// with the level's index.
fn level_time(
    network: &[Arc<dyn Interconnect>],
    level: usize,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u64,
) -> Result<f64, PluginError> {
    if ranks <= 1 || bytes <= 0.0 {
        return Ok(0.0);
    }
    let c = Collective {
        kind,
        bytes: Bytes(bytes),
        ranks: ranks.min(u32::MAX as u64) as u32,
    };
    network[level]
        .try_collective_time(&c, CollectiveAlgorithm::Auto)
        .map(|t| t.0)
        .map_err(|e| at_level(level, e))
}

/// `e` with the level's place (`system.network[i]`) added.
pub fn at_level(level: usize, e: PluginError) -> PluginError {
    let at = format!("system.network[{level}]");
    match e {
        PluginError::Failed { plugin, message } => PluginError::Failed {
            plugin,
            message: format!("{message} (at {at})"),
        },
        PluginError::BadValue {
            plugin,
            what,
            value,
        } => PluginError::BadValue {
            plugin,
            what: format!("{what} at {at}"),
            value,
        },
        PluginError::Params { path, message } => PluginError::Params {
            path: format!("{at}.{path}"),
            message,
        },
    }
}

impl Topology for Hierarchical {
    fn kind(&self) -> &str {
        "hierarchical"
    }

    fn collective(
        &self,
        network: &[Arc<dyn Interconnect>],
        group: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, PluginError> {
        let ranks = group.ranks();
        let done = |t: f64| CollectiveCost {
            time: Seconds(t),
            loads: LinkLoads::default(),
        };
        if ranks <= 1 || bytes.0 <= 0.0 || network.is_empty() {
            return Ok(done(0.0));
        }
        let domain = |i: usize| network[i].domain_size() as u64;
        // Innermost level whose domain holds the group; the outermost level otherwise.
        let last = network.len() - 1;
        let j = (0..network.len())
            .find(|&i| group.members_within(domain(i)) >= ranks)
            .unwrap_or(last);
        let r_in = if j == 0 {
            ranks
        } else {
            group.members_within(domain(j - 1))
        };
        let s = bytes.0;
        use CollectiveKind::*;
        if j == 0 || r_in <= 1 || matches!(kind, SendRecv | AllToAll | Broadcast) {
            return level_time(network, j, kind, s, ranks).map(done);
        }
        let r_out = ranks.div_ceil(r_in);
        let (inner, outer) = (j - 1, j);
        let t = match kind {
            AllReduce => {
                level_time(network, inner, ReduceScatter, s, r_in)?
                    + level_time(network, outer, AllReduce, s / r_in as f64, r_out)?
                    + level_time(network, inner, AllGather, s, r_in)?
            }
            AllGather => {
                level_time(network, outer, AllGather, s / r_in as f64, r_out)?
                    + level_time(network, inner, AllGather, s, r_in)?
            }
            ReduceScatter => {
                level_time(network, inner, ReduceScatter, s, r_in)?
                    + level_time(network, outer, ReduceScatter, s / r_in as f64, r_out)?
            }
            SendRecv | AllToAll | Broadcast => level_time(network, j, kind, s, ranks)?,
        };
        Ok(done(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(axes: &[(u64, u64)], devices: u64) -> GroupPlacement {
        let axes: Vec<GroupAxis> = axes
            .iter()
            .map(|&(degree, stride)| GroupAxis { degree, stride })
            .collect();
        GroupPlacement::new(&axes, devices).unwrap()
    }

    #[test]
    fn lattice_members_and_blocks() {
        // DP over 8 replicas of a TP 8 x PP 16 mesh: one member per node of 8.
        let dp = g(&[(8, 128)], 1024);
        assert_eq!(dp.ranks(), 8);
        assert_eq!(dp.groups(), 128);
        assert_eq!(dp.members_within(8), 1);
        assert_eq!(dp.blocks(8), 8);
        assert_eq!(dp.member(3), 384);
        // TP 2 x DP 4 (dp stride 2) inside nodes of 8: all 8 in one node.
        let h = g(&[(2, 1), (4, 2)], 64);
        assert_eq!(h.members_within(8), 8);
        assert_eq!(h.member(5), 1 + 2 * 2);
        // Degree-1 axes are dropped.
        assert_eq!(g(&[(1, 1), (4, 8)], 32).axes().len(), 1);
    }

    #[test]
    fn bad_groups_name_the_axis() {
        let e = GroupPlacement::new(
            &[GroupAxis {
                degree: 0,
                stride: 1,
            }],
            8,
        )
        .unwrap_err();
        assert!(e.to_string().contains("axis 0"), "{e}");
        let e = GroupPlacement::new(
            &[GroupAxis {
                degree: 4,
                stride: 4,
            }],
            8,
        )
        .unwrap_err();
        assert!(e.to_string().contains("8 devices"), "{e}");
    }

    #[test]
    fn loads_merge_per_class() {
        let mut l = LinkLoads::default();
        for (class, busy) in [(0, 1.0), (1, 2.0), (0, 0.5), (2, 0.0)] {
            l.push(LinkLoad {
                class,
                links: 4.0,
                busy: Seconds(busy),
            })
            .unwrap();
        }
        assert_eq!(l.as_slice().len(), 2);
        assert_eq!(l.as_slice()[0].busy, Seconds(1.5));
    }
}
