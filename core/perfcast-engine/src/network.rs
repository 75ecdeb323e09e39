//! Placement of communication groups on the devices, and collectives timed through the
//! system's topology.
//!
//! The mesh is laid out TP innermost, then CP, PP, DP outermost (Megatron-LM's rank order):
//! consecutive TP ranks are neighbours, a CP step is `tp` ranks, a PP step `tp·cp`, a DP step
//! `tp·cp·pp`; the first and last pipeline stage (the embedding group) are `tp·cp·(pp-1)`
//! apart. A group of several axes is the lattice of those axes' `(degree, stride)`
//! ([`GroupPlacement`]); the system's [`Topology`] times each collective on it (the default,
//! [`Hierarchical`], runs it on the innermost level whose domain holds the group, in two
//! stages when the level below already holds several members: see its docs).
//!
//! # Concurrency
//!
//! Which collectives the engine assumes to run at the same time, and so to share links:
//!
//! 1. **Sibling groups.** Every collective runs at once in all the groups of its axes (the
//!    many DP groups of a plan, its TP groups, every pipeline boundary of a micro-batch):
//!    SPMD training issues the same collective on every rank. The topology accounts for it
//!    itself ([`perfcast_core::topology::CollectiveCost::time`] is the time with the
//!    siblings running); on the hierarchical default siblings do not interact (each device
//!    has each level's bandwidth to itself).
//! 2. **The step's hidden reductions and the last backward's hand-off.** A collective of the
//!    step (`Phase::Step`) hidden behind the last micro-batch's backward (`Overlap::Behind`
//!    `Window::LastBackward`: the DP gradient reduce-scatter or all-reduce with
//!    `overlap_grad_reduce`, bucket by bucket) runs while that backward hands its activation
//!    gradient to the previous stage (`Phase::Boundary`, once). Where both load a link class
//!    (the NIC of a node whose PP and DP groups both leave it), the reduction takes at least
//!    `sum over both (groups * links * busy) / links of the class`; the hand-off, one of
//!    many per step, keeps its own time.
//!
//! Nothing else is concurrent: collectives exposed on the critical path run one after the
//! other, and collectives hidden behind the same compute window are pooled by the overlap
//! model (their times summed). The hierarchical default reports no link loads, so (2) never
//! changes its times.

use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{AxisSet, CommList, Overlap, Phase, Window};
use perfcast_core::topology::{CollectiveCost, GroupAxis, GroupPlacement, Hierarchical, LinkClass};
use perfcast_core::{
    Bytes, Interconnect, Key, ModelError, PluginError, Seconds, Section, Topology,
};
use std::sync::Arc;

/// Degrees of the mesh axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mesh {
    pub tp: u32,
    pub cp: u32,
    pub pp: u32,
    pub dp: u32,
}

/// Every axis bit a mesh lays out (`AxisSet` TENSOR, CONTEXT, PIPELINE, DATA, PIPELINE_ENDS).
const KNOWN_AXES: u8 = 1 | 2 | 4 | 8 | 16;

impl Mesh {
    /// `(degree, stride)` of each axis in `set` (axes of degree 1 omitted).
    fn axes(&self, set: AxisSet) -> [(u64, u64); 5] {
        let tp = self.tp.max(1) as u64;
        let cp = self.cp.max(1) as u64;
        let pp = self.pp.max(1) as u64;
        let dp = self.dp.max(1) as u64;
        let pick = |a: AxisSet, deg: u64, stride: u64| {
            if set.contains(a) {
                (deg, stride)
            } else {
                (1, 1)
            }
        };
        [
            pick(AxisSet::TENSOR, tp, 1),
            pick(AxisSet::CONTEXT, cp, tp),
            pick(AxisSet::PIPELINE, pp, tp * cp),
            pick(AxisSet::DATA, dp, tp * cp * pp),
            pick(AxisSet::PIPELINE_ENDS, pp.min(2), tp * cp * (pp - 1).max(1)),
        ]
    }

    /// Devices of the mesh.
    pub fn devices(&self) -> u64 {
        [self.tp, self.cp, self.pp, self.dp]
            .iter()
            .map(|&d| d.max(1) as u64)
            .product()
    }

    /// Ranks in a group over `set`.
    pub fn ranks(&self, set: AxisSet) -> u64 {
        self.axes(set).iter().map(|a| a.0).product()
    }

    /// Members of a group over `set` inside one domain of `domain` consecutive devices.
    pub fn members_in_domain(&self, set: AxisSet, domain: u64) -> u64 {
        self.axes(set)
            .iter()
            .map(|&(deg, stride)| (domain / stride).clamp(1, deg))
            .product()
    }

    /// The group over `set` as a lattice of device numbers; an axis bit the mesh does not
    /// lay out is an error naming it.
    pub fn placement(&self, set: AxisSet) -> Result<GroupPlacement, ModelError> {
        if set.0 & !KNOWN_AXES != 0 {
            return Err(ModelError::invalid(
                Key::other("parallel strategies"),
                format!("group axes {:#07b}", set.0),
                format!(
                    "names axis bit(s) {:#07b} that the mesh does not lay out (axes: tp, cp, \
                     pp, dp and the pipeline ends)",
                    set.0 & !KNOWN_AXES
                ),
            ));
        }
        let mut axes = [GroupAxis::default(); 5];
        for (a, (degree, stride)) in axes.iter_mut().zip(self.axes(set)) {
            *a = GroupAxis { degree, stride };
        }
        GroupPlacement::new(&axes, self.devices()).map_err(ModelError::Plugin)
    }
}

/// The network of a system: its levels (innermost first) and the topology that wires them.
#[derive(Clone)]
pub struct Network {
    levels: Vec<Arc<dyn Interconnect>>,
    topology: Arc<dyn Topology>,
    /// The topology's link classes for the system's devices (what loads index).
    classes: Vec<LinkClass>,
}

impl Network {
    /// The hierarchical network of `levels`.
    pub fn new(levels: &[Arc<dyn Interconnect>]) -> Result<Self, ModelError> {
        Self::with_topology(levels, None, 1)
    }

    /// `levels` wired as `topology` says (the hierarchical network when `None`) for
    /// `devices` devices: the levels are checked, then the topology (`check`, `links`).
    pub fn with_topology(
        levels: &[Arc<dyn Interconnect>],
        topology: Option<Arc<dyn Topology>>,
        devices: u64,
    ) -> Result<Self, ModelError> {
        let mut prev: Option<u64> = None;
        for (i, l) in levels.iter().enumerate() {
            let d = l.domain_size();
            let bw = l.bandwidth().0;
            if d == 0 {
                return Err(ModelError::invalid(
                    Key::owned(Section::System, format!("network[{i}].domain_size")),
                    d,
                    "must be at least 1",
                ));
            }
            if !(bw.is_finite() && bw > 0.0) {
                return Err(ModelError::invalid(
                    Key::owned(
                        Section::System,
                        format!("network[{i}] ({}) bandwidth", l.kind()),
                    ),
                    bw,
                    "must be finite and > 0",
                ));
            }
            if let Some(prev) = prev {
                if (d as u64) < prev {
                    return Err(ModelError::invalid(
                        Key::owned(Section::System, format!("network[{i}].domain_size")),
                        d,
                        "network levels must be listed innermost (smallest domain) first",
                    ));
                }
            }
            prev = Some(d as u64);
        }
        let (topology, classes) = match topology {
            None => (Arc::new(Hierarchical) as Arc<dyn Topology>, Vec::new()),
            Some(t) => {
                t.check(levels, devices)
                    .map_err(|e| topology_error(&*t, e))?;
                let classes = t
                    .links(levels, devices)
                    .map_err(|e| topology_error(&*t, e))?;
                for c in &classes {
                    if !(c.count.is_finite() && c.count > 0.0) {
                        return Err(ModelError::Plugin(PluginError::BadValue {
                            plugin: t.kind().to_string(),
                            what: format!("link count of class `{}`", c.name),
                            value: c.count,
                        }));
                    }
                }
                (t, classes)
            }
        };
        Ok(Network {
            levels: levels.to_vec(),
            topology,
            classes,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The topology's registered kind.
    pub fn topology(&self) -> &str {
        self.topology.kind()
    }

    /// One collective of `bytes` over `group`, checked: finite and non-negative time and
    /// loads on known link classes.
    fn cost(
        &self,
        group: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, ModelError> {
        if group.ranks() <= 1 || bytes.0 <= 0.0 || self.levels.is_empty() {
            return Ok(CollectiveCost::default());
        }
        let t = &*self.topology;
        let c = t
            .collective(&self.levels, group, kind, bytes)
            .map_err(|e| placement_error(t, group, kind, e))?;
        let what = || {
            format!(
                "{} time of {} B over {} ranks",
                kind.name(),
                bytes.0,
                group.ranks()
            )
        };
        if !(c.time.0.is_finite() && c.time.0 >= 0.0) {
            return Err(ModelError::Plugin(PluginError::BadValue {
                plugin: t.kind().to_string(),
                what: what(),
                value: c.time.0,
            }));
        }
        for l in c.loads.as_slice() {
            if l.class as usize >= self.classes.len() {
                return Err(ModelError::Plugin(PluginError::BadValue {
                    plugin: t.kind().to_string(),
                    what: format!(
                        "link class index of a load ({} link classes)",
                        self.classes.len()
                    ),
                    value: l.class as f64,
                }));
            }
            for (name, v) in [("links", l.links), ("busy time", l.busy.0)] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(ModelError::Plugin(PluginError::BadValue {
                        plugin: t.kind().to_string(),
                        what: format!("{name} of a load of the {}", what()),
                        value: v,
                    }));
                }
            }
        }
        Ok(c)
    }

    /// Time of one collective of `bytes` (full buffer) over the group `set` of `mesh`.
    pub fn time(
        &self,
        mesh: &Mesh,
        set: AxisSet,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<Seconds, ModelError> {
        if mesh.ranks(set) <= 1 || bytes.0 <= 0.0 || self.levels.is_empty() {
            return Ok(Seconds::ZERO);
        }
        Ok(self.cost(&mesh.placement(set)?, kind, bytes)?.time)
    }

    /// The time of every collective of `comms` (times its `count`) on `mesh`, with the
    /// concurrency of the [module docs](self); `map` turns a collective's logical axes into
    /// the mesh slots it is laid out on.
    pub(crate) fn time_comms(
        &self,
        mesh: &Mesh,
        comms: &CommList,
        map: impl Fn(AxisSet) -> AxisSet,
        out: &mut [f64; CommList::CAPACITY],
    ) -> Result<(), ModelError> {
        let timed = |c: &perfcast_core::parallel::CommOp, t: f64| -> Result<f64, ModelError> {
            let tt = t * c.count;
            if !(tt.is_finite() && tt >= 0.0) {
                return Err(ModelError::NonFinite {
                    what: format!("{} {} time", c.class.name(), c.kind.name()),
                    value: tt,
                });
            }
            Ok(tt)
        };
        if self.classes.is_empty() {
            // No link classes (the hierarchical default): nothing is shared, each collective
            // is its own time.
            for (i, c) in comms.iter().enumerate() {
                let t = self.time(mesh, map(c.group), c.kind, c.bytes)?;
                out[i] = timed(c, t.0)?;
            }
            return Ok(());
        }
        let mut costs = [CollectiveCost::default(); CommList::CAPACITY];
        let mut groups = [1u64; CommList::CAPACITY];
        for (i, c) in comms.iter().enumerate() {
            let set = map(c.group);
            if mesh.ranks(set) <= 1 || c.bytes.0 <= 0.0 || self.levels.is_empty() {
                continue;
            }
            let g = mesh.placement(set)?;
            groups[i] = g.groups();
            costs[i] = self.cost(&g, c.kind, c.bytes)?;
        }
        self.share_with_handoff(comms, &groups, &mut costs);
        for (i, c) in comms.iter().enumerate() {
            out[i] = timed(c, costs[i].time.0)?;
        }
        Ok(())
    }

    /// Concurrency (2) of the module docs: the step's reductions hidden behind the last
    /// backward share their link classes with the backward hand-off.
    fn share_with_handoff(
        &self,
        comms: &CommList,
        groups: &[u64; CommList::CAPACITY],
        costs: &mut [CollectiveCost; CommList::CAPACITY],
    ) {
        let demand = |costs: &[CollectiveCost], i: usize, class: u32| -> f64 {
            costs[i]
                .loads
                .as_slice()
                .iter()
                .filter(|l| l.class == class)
                .map(|l| groups[i] as f64 * l.links * l.busy.0)
                .sum::<f64>()
                / self.classes[class as usize].count
        };
        for (i, c) in comms.iter().enumerate() {
            let behind_last = matches!(
                c.overlap,
                Overlap::Behind {
                    window: Window::LastBackward,
                    ..
                }
            );
            if c.phase != Phase::Step || !behind_last {
                continue;
            }
            let mut t = costs[i].time.0;
            for l in costs[i].loads.as_slice() {
                let mut d = demand(&costs[..], i, l.class);
                for (j, h) in comms.iter().enumerate() {
                    if h.phase == Phase::Boundary {
                        d += demand(&costs[..], j, l.class);
                    }
                }
                t = t.max(d);
            }
            costs[i].time = Seconds(t);
        }
    }
}

/// A topology's failure in `check` or `links`, naming it.
fn topology_error(t: &dyn Topology, e: PluginError) -> ModelError {
    ModelError::Plugin(match e {
        PluginError::Params { path, message } => PluginError::Failed {
            plugin: t.kind().to_string(),
            message: format!("{path}: {message}"),
        },
        other => other,
    })
}

/// A topology's failure for one group: which group (its axes) and which collective.
fn placement_error(
    t: &dyn Topology,
    g: &GroupPlacement,
    kind: CollectiveKind,
    e: PluginError,
) -> ModelError {
    let axes: Vec<String> = g
        .axes()
        .iter()
        .map(|a| format!("{}x stride {}", a.degree, a.stride))
        .collect();
    let at = format!(
        "{} over the group [{}] of {} devices",
        kind.name(),
        axes.join(", "),
        g.devices()
    );
    ModelError::Plugin(match e {
        PluginError::Failed { plugin, message } => PluginError::Failed {
            plugin,
            message: format!("{message} ({at})"),
        },
        PluginError::Params { path, message } => PluginError::Failed {
            plugin: t.kind().to_string(),
            message: format!("{path}: {message} ({at})"),
        },
        bad @ PluginError::BadValue { .. } => bad,
    })
}

/// A network level's failure, with the level's index (`system.network[i]`) added.
pub(crate) fn level_error(level: usize, e: PluginError) -> ModelError {
    ModelError::Plugin(perfcast_core::topology::at_level(level, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_testkit::systems::link;
    use serde_json::json;

    /// NVLink at 300 GB/s per direction, InfiniBand at 25 GB/s, both at line rate with no
    /// latency (the built-in plugins).
    fn nvlink() -> Arc<dyn Interconnect> {
        link(
            "nvlink",
            json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8, "efficiency": 1.0,
                   "latency_us": 0.0, "base_latency_us": 0.0}),
        )
    }
    fn ib() -> Arc<dyn Interconnect> {
        link(
            "infiniband",
            json!({"bandwidth_gbps": 200.0, "efficiency": 1.0, "latency_us": 0.0,
                   "base_latency_us": 0.0}),
        )
    }

    fn net() -> Network {
        Network::new(&[nvlink(), ib()]).unwrap()
    }

    #[test]
    fn placement_table() {
        let m = Mesh {
            tp: 8,
            cp: 1,
            pp: 16,
            dp: 8,
        };
        // (set, ranks, members in an 8-device domain)
        let table = [
            (AxisSet::TENSOR, 8, 8),
            (AxisSet::PIPELINE, 16, 1),
            (AxisSet::DATA, 8, 1),
            (AxisSet::DATA_CONTEXT, 8, 1),
        ];
        for (set, r, inside) in table {
            assert_eq!(m.ranks(set), r);
            assert_eq!(m.members_in_domain(set, 8), inside);
        }
        let m2 = Mesh {
            tp: 2,
            cp: 2,
            pp: 1,
            dp: 8,
        };
        assert_eq!(m2.members_in_domain(AxisSet::DATA_CONTEXT, 8), 4);
        assert_eq!(m2.ranks(AxisSet::DATA_CONTEXT), 16);
        assert_eq!(m.ranks(AxisSet::PIPELINE_ENDS), 2);
        assert_eq!(m.members_in_domain(AxisSet::PIPELINE_ENDS, 8), 1);
        assert_eq!(m2.ranks(AxisSet::PIPELINE_ENDS), 1);
    }

    /// Ring volumes: TP all-reduce on NVLink 2(p-1)/p·S/B; DP across nodes on IB; a DP group
    /// with 4 members per node runs hierarchically.
    #[test]
    fn collective_times() {
        let n = net();
        let s = Bytes(1e9);
        let m = Mesh {
            tp: 8,
            cp: 1,
            pp: 16,
            dp: 8,
        };
        let tp = n
            .time(&m, AxisSet::TENSOR, CollectiveKind::AllReduce, s)
            .unwrap()
            .0;
        assert!((tp - 1.75 * 1e9 / 300e9).abs() < 1e-12);
        let dp = n
            .time(&m, AxisSet::DATA, CollectiveKind::AllReduce, s)
            .unwrap()
            .0;
        assert!((dp - 1.75 * 1e9 / 25e9).abs() < 1e-12);
        let m2 = Mesh {
            tp: 2,
            cp: 1,
            pp: 1,
            dp: 16,
        };
        let h = n
            .time(&m2, AxisSet::DATA, CollectiveKind::AllReduce, s)
            .unwrap()
            .0;
        let want = 2.0 * 0.75 * 1e9 / 300e9 + 2.0 * 3.0 / 4.0 * 0.25e9 / 25e9;
        assert!((h - want).abs() < 1e-12, "{h} vs {want}");
        assert_eq!(
            n.time(&m, AxisSet::CONTEXT, CollectiveKind::AllReduce, s)
                .unwrap()
                .0,
            0.0
        );
    }

    #[test]
    fn bad_levels() {
        let e = Network::new(&[ib(), nvlink()]);
        assert!(e.is_err());
        // A level without bandwidth, as a dynamic plugin might answer (the built-ins refuse).
        struct Dead;
        impl Interconnect for Dead {
            fn kind(&self) -> &str {
                "dead"
            }
            fn domain_size(&self) -> u32 {
                8
            }
            fn bandwidth(&self) -> perfcast_core::Bandwidth {
                perfcast_core::Bandwidth(0.0)
            }
            fn latency(&self) -> Seconds {
                Seconds::ZERO
            }
        }
        let e = Network::new(&[Arc::new(Dead) as Arc<dyn Interconnect>]);
        assert!(e.is_err());
    }
}

#[cfg(test)]
mod topology_tests {
    use super::*;
    use perfcast_core::parallel::{CommClass, CommOp};
    use perfcast_core::topology::{LinkLoad, LinkLoads};
    use perfcast_testkit::systems::link;
    use serde_json::json;

    fn levels() -> Vec<Arc<dyn Interconnect>> {
        vec![
            link(
                "nvlink",
                json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8}),
            ),
            link("infiniband", json!({"bandwidth_gbps": 200.0})),
        ]
    }

    /// A topology answering a fixed time (which may be invalid) and a load of that time on
    /// one class of `count` links, per group of `ranks` links.
    struct Fixed {
        time: f64,
        count: f64,
    }
    impl Topology for Fixed {
        fn kind(&self) -> &str {
            "test/fixed"
        }
        fn links(
            &self,
            _: &[Arc<dyn Interconnect>],
            _: u64,
        ) -> Result<Vec<LinkClass>, PluginError> {
            Ok(vec![LinkClass {
                name: "uplink".into(),
                count: self.count,
                bandwidth: perfcast_core::Bandwidth(1e9),
            }])
        }
        fn collective(
            &self,
            _: &[Arc<dyn Interconnect>],
            g: &GroupPlacement,
            _: CollectiveKind,
            _: Bytes,
        ) -> Result<CollectiveCost, PluginError> {
            let mut loads = LinkLoads::default();
            loads.push(LinkLoad {
                class: 0,
                links: g.ranks() as f64,
                busy: Seconds(self.time.abs()),
            })?;
            Ok(CollectiveCost {
                time: Seconds(self.time),
                loads,
            })
        }
    }

    fn fixed(time: f64) -> Network {
        let t: Arc<dyn Topology> = Arc::new(Fixed {
            time,
            count: 1024.0,
        });
        Network::with_topology(&levels(), Some(t), 1024).unwrap()
    }

    const MESH: Mesh = Mesh {
        tp: 8,
        cp: 1,
        pp: 16,
        dp: 8,
    };

    /// The default network is the hierarchical topology of core, bit for bit.
    #[test]
    fn default_is_hierarchical() {
        let a = Network::new(&levels()).unwrap();
        assert_eq!(a.topology(), "hierarchical");
        let g = MESH.placement(AxisSet::DATA).unwrap();
        let want = Hierarchical
            .collective(&levels(), &g, CollectiveKind::AllReduce, Bytes(1e9))
            .unwrap()
            .time;
        let got = a
            .time(&MESH, AxisSet::DATA, CollectiveKind::AllReduce, Bytes(1e9))
            .unwrap();
        assert_eq!(got, want);
    }

    /// A topology that answers NaN or a negative time is an error naming it, never a number.
    #[test]
    fn invalid_topology_answers_are_errors() {
        for bad in [f64::NAN, -1.0, f64::INFINITY] {
            let e = fixed(bad)
                .time(&MESH, AxisSet::DATA, CollectiveKind::AllReduce, Bytes(1e9))
                .unwrap_err()
                .to_string();
            assert!(e.contains("test/fixed") && e.contains("all_reduce"), "{e}");
        }
    }

    /// A group naming an axis the mesh does not lay out is an error naming the bits.
    #[test]
    fn unknown_axis_is_an_error() {
        let e = MESH.placement(AxisSet(64)).unwrap_err().to_string();
        assert!(
            e.contains("0b1000000") && e.contains("does not lay out"),
            "{e}"
        );
    }

    fn op(phase: Phase, overlap: Overlap, group: AxisSet) -> CommOp {
        CommOp {
            class: CommClass::Data,
            phase,
            kind: CollectiveKind::ReduceScatter,
            bytes: Bytes(1e9),
            group,
            count: 1.0,
            overlap,
            with_recompute: false,
        }
    }

    /// Concurrency (2): the DP reduction hidden behind the last backward shares its links
    /// with the pipeline hand-off; an exposed one does not.
    #[test]
    fn hidden_reduction_shares_links_with_the_handoff() {
        let n = fixed(1.0);
        let behind = Overlap::Behind {
            window: Window::LastBackward,
            efficiency: 1.0,
        };
        for (overlap, want) in [(behind, 2.0), (Overlap::Exposed, 1.0)] {
            let mut comms = CommList::default();
            comms.push(op(Phase::Step, overlap, AxisSet::DATA)).unwrap();
            comms
                .push(op(Phase::Boundary, Overlap::Exposed, AxisSet::PIPELINE))
                .unwrap();
            let mut out = [0.0; CommList::CAPACITY];
            n.time_comms(&MESH, &comms, |g| g, &mut out).unwrap();
            // Each group loads its ranks' links for 1 s; all 128 DP groups (8 ranks) and
            // 64 PP groups (16 ranks) cover the 1024 links once each: 1 s + 1 s.
            assert_eq!(out[0], want, "{overlap:?}");
            assert_eq!(out[1], 1.0);
        }
    }

    /// A topology that cannot hold the system is refused when the network is built.
    #[test]
    fn bad_link_count_is_refused() {
        let t: Arc<dyn Topology> = Arc::new(Fixed {
            time: 1.0,
            count: 0.0,
        });
        let e = Network::with_topology(&levels(), Some(t), 1024)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("test/fixed") && e.contains("uplink"), "{e}");
    }
}
