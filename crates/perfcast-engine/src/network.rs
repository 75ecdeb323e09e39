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
//! The MoE layers' expert mesh (ETP innermost, then EP, then expert data parallelism) fills a
//! stage's non-pipeline devices innermost first: an expert group is a run of the flattened
//! TP, CP, DP positions, decomposed here into pieces of those axes with their strides. An MoE
//! token dispatch or combine (an all-to-all tagged with its [`Dispatch`]) over a group
//! spanning scale-up domains sends the rows for the own domain inside it and the rest across
//! domains at the same time (NCCL's peer-to-peer all-to-all drives NVLink and the NICs
//! concurrently): the slower of the two, each timed by the topology on its sub-group. A
//! hierarchical token dispatch (DeepEP) sends a token once per destination domain
//! ([`Network::time_dispatch`]).
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
use perfcast_core::parallel::{
    AxisSet, CommList, Dispatch, Overlap, Phase, Window, MAX_DECLARED_AXES,
};
use perfcast_core::topology::{
    CollectiveCost, GroupAxis, GroupPlacement, Hierarchical, LinkClass, MAX_GROUP_AXES,
};
use perfcast_core::{
    Bytes, Interconnect, Key, ModelError, PluginError, Seconds, Section, Topology,
};
use std::sync::Arc;

/// Axes a group may span: the dense mesh's five, the expert mesh's pieces, and the declared
/// ones.
const GROUP_AXES: usize = DENSE_GROUP_AXES + MAX_DECLARED_AXES;

/// The dense and expert meshes' part of [`GROUP_AXES`].
const DENSE_GROUP_AXES: usize = 5 + EXPERT_PIECES;

/// Pieces the expert mesh's three axes take together: each of the [`EXPERT_DIGITS`] axes
/// they are carved out of is cut at most once between two of them, so at most
/// `EXPERT_DIGITS + 2` are not of degree 1 (kept apart from the declared axes' slots, with
/// room to spare: the room the fixed three-by-three layout had).
const EXPERT_PIECES: usize = 9;

/// The mesh axes the expert mesh is carved out of: tensor, context, data and at most one
/// declared axis that splits the batch (the engine refuses more with expert parallelism).
const EXPERT_DIGITS: usize = 4;

/// Degrees of the mesh axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mesh {
    pub tp: u32,
    pub cp: u32,
    pub pp: u32,
    pub dp: u32,
    /// Expert-parallel degree of the MoE layers (1: none).
    pub ep: u32,
    /// Expert tensor-parallel degree (1: none).
    pub etp: u32,
    /// The declared axes ([`AxisSet::declared`]`(k)` is `declared[k]`), the first
    /// `declared_len` of them in use ([`Mesh::declare`]).
    declared: [DeclaredDim; MAX_DECLARED_AXES],
    declared_len: u8,
}

/// A declared axis as the mesh lays it out: its degree, next to which of the four dense
/// positions (0..4, innermost first: where `tp`, `cp`, `pp`, `dp` sit), and on which side.
/// Several declared axes on the same side of the same position are laid out in their order,
/// innermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredDim {
    pub degree: u32,
    pub slot: u8,
    pub outside: bool,
    /// It splits the batch ([`perfcast_core::parallel::Divides::batch`]): the expert mesh is
    /// carved out of it as out of `data`.
    pub batch: bool,
}

impl DeclaredDim {
    /// Degree 1: takes no place.
    pub const NONE: DeclaredDim = DeclaredDim {
        degree: 1,
        slot: 0,
        outside: false,
        batch: false,
    };
}

impl Mesh {
    /// A mesh of `tp x cp x pp x dp` without expert parallelism or declared axes.
    pub const fn new(tp: u32, cp: u32, pp: u32, dp: u32) -> Mesh {
        Mesh {
            tp,
            cp,
            pp,
            dp,
            ep: 1,
            etp: 1,
            declared: [DeclaredDim::NONE; MAX_DECLARED_AXES],
            declared_len: 0,
        }
    }

    /// Lay out the run's `k`-th declared axis as `dim` (`k < MAX_DECLARED_AXES`; beyond, the
    /// axis is ignored: the engine declares no more).
    pub fn declare(&mut self, k: usize, dim: DeclaredDim) {
        if let Some(d) = self.declared.get_mut(k) {
            *d = dim;
            self.declared_len = self.declared_len.max(k as u8 + 1);
        }
    }

    /// Strides of the four dense positions and of the declared axes: each axis steps over
    /// every rank of the axes inside it.
    fn strides(&self) -> ([u64; 4], [u64; MAX_DECLARED_AXES]) {
        let deg = [self.tp, self.cp, self.pp, self.dp].map(|d| d.max(1) as u64);
        let mut dense = [1u64; 4];
        let mut declared = [1u64; MAX_DECLARED_AXES];
        let mut run = 1u64;
        for slot in 0..4u8 {
            for outside in [false, true] {
                if outside {
                    dense[slot as usize] = run;
                    run *= deg[slot as usize];
                }
                for (k, d) in self.declared[..self.declared_len as usize]
                    .iter()
                    .enumerate()
                {
                    if d.degree > 1 && d.slot == slot && d.outside == outside {
                        declared[k] = run;
                        run *= d.degree as u64;
                    }
                }
            }
        }
        (dense, declared)
    }

    /// `(degree, stride)` of the axes the expert mesh is carved out of, innermost first: TP,
    /// CP, DP and a declared axis that splits the batch (Megatron-Core's expert mesh over a
    /// stage's TP x CP x DP ranks, the declared axis's ranks counted as data-parallel ones).
    fn expert_digits(&self) -> [(u64, u64); EXPERT_DIGITS] {
        let tp = self.tp.max(1) as u64;
        let cp = self.cp.max(1) as u64;
        let pp = self.pp.max(1) as u64;
        let dp = self.dp.max(1) as u64;
        if self.declared_len == 0 {
            return [(tp, 1), (cp, tp), (dp, tp * cp * pp), (1, 1)];
        }
        let (dense, declared) = self.strides();
        let mut digits = [(tp, dense[0]), (cp, dense[1]), (dp, dense[3]), (1, 1)];
        let batch = self.declared[..self.declared_len as usize]
            .iter()
            .zip(declared)
            .find(|(d, _)| d.batch && d.degree > 1);
        if let Some((d, stride)) = batch {
            digits[3] = (d.degree as u64, stride);
            digits.sort_by_key(|&(deg, stride)| if deg > 1 { stride } else { u64::MAX });
        }
        digits
    }

    /// `(degree, stride)` pieces of the expert-mesh axis of `size` ranks that starts after
    /// `inner` ranks (the axes inside it), over the flattened [`Mesh::expert_digits`].
    fn expert_pieces(&self, inner: u64, size: u64) -> [(u64, u64); EXPERT_DIGITS] {
        let digits = self.expert_digits();
        let mut out = [(1, 1); EXPERT_DIGITS];
        let (mut inner, mut size) = (inner.max(1), size.max(1));
        for (i, &(deg, stride)) in digits.iter().enumerate() {
            if size <= 1 {
                break;
            }
            if inner >= deg {
                inner = inner.div_ceil(deg);
                continue;
            }
            let take = (deg / inner).max(1).min(size);
            out[i] = (take, stride * inner);
            size = size.div_ceil(take);
            inner = 1;
        }
        out
    }

    /// `(degree, stride)` of each axis in `set` (axes of degree 1 omitted).
    fn axes(&self, set: AxisSet) -> [(u64, u64); DENSE_GROUP_AXES] {
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
        let mut out = [(1, 1); DENSE_GROUP_AXES];
        let [s_tp, s_cp, s_pp, s_dp] = if self.declared_len > 0 {
            self.strides().0
        } else {
            [1, tp, tp * cp, tp * cp * pp]
        };
        out[..5].copy_from_slice(&[
            pick(AxisSet::TENSOR, tp, s_tp),
            pick(AxisSet::CONTEXT, cp, s_cp),
            pick(AxisSet::PIPELINE, pp, s_pp),
            pick(AxisSet::DATA, dp, s_dp),
            pick(AxisSet::PIPELINE_ENDS, pp.min(2), s_pp * (pp - 1).max(1)),
        ]);
        if set.intersects(AxisSet::EXPERT_MESH) {
            out[5..].copy_from_slice(&self.expert_axes(set));
        }
        out
    }

    /// The pieces of the expert-mesh axes in `set`, those of degree 1 left out (out of the
    /// hot path's way: only a mixture-of-experts model's groups have them).
    #[inline(never)]
    fn expert_axes(&self, set: AxisSet) -> [(u64, u64); EXPERT_PIECES] {
        let mut out = [(1, 1); EXPERT_PIECES];
        let tp = self.tp.max(1) as u64;
        let cp = self.cp.max(1) as u64;
        let dp = self.dp.max(1) as u64;
        let etp = self.etp.max(1) as u64;
        let ep = self.ep.max(1) as u64;
        let batch: u64 = self.declared[..self.declared_len as usize]
            .iter()
            .filter(|d| d.batch)
            .map(|d| d.degree.max(1) as u64)
            .product();
        let edp = (tp * cp * dp * batch / (ep * etp)).max(1);
        let axes = [
            (AxisSet::EXPERT_TENSOR, 1, etp),
            (AxisSet::EXPERT, etp, ep),
            (AxisSet::EXPERT_DATA, etp * ep, edp),
        ];
        let mut at = 0;
        for (a, inner, size) in axes {
            if set.contains(a) {
                let pieces = self.expert_pieces(inner, size);
                for piece in pieces.into_iter().filter(|p| p.0 > 1) {
                    // (Never past the end: see EXPERT_PIECES.)
                    if let Some(slot) = out.get_mut(at) {
                        *slot = piece;
                        at += 1;
                    }
                }
            }
        }
        out
    }

    /// `(degree, stride)` of each declared axis in `set` (the others `(1, 1)`).
    fn declared_axes(&self, set: AxisSet) -> [(u64, u64); MAX_DECLARED_AXES] {
        let mut out = [(1, 1); MAX_DECLARED_AXES];
        if set.declared_bits() != 0 {
            let strides = self.strides().1;
            let declared = &self.declared[..self.declared_len as usize];
            for (k, d) in declared.iter().enumerate() {
                if set.contains(AxisSet::declared(k)) {
                    out[k] = (d.degree.max(1) as u64, strides[k]);
                }
            }
        }
        out
    }

    /// Devices of the mesh.
    pub fn devices(&self) -> u64 {
        let declared = &self.declared[..self.declared_len as usize];
        [self.tp, self.cp, self.pp, self.dp]
            .iter()
            .map(|&d| d.max(1) as u64)
            .chain(declared.iter().map(|d| d.degree.max(1) as u64))
            .product()
    }

    /// Ranks in a group over `set`.
    pub fn ranks(&self, set: AxisSet) -> u64 {
        let dense: u64 = self.axes(set).iter().map(|a| a.0).product();
        if set.declared_bits() == 0 {
            return dense;
        }
        dense * self.declared_axes(set).iter().map(|a| a.0).product::<u64>()
    }

    /// Members of a group over `set` inside one domain of `domain` consecutive devices.
    pub fn members_in_domain(&self, set: AxisSet, domain: u64) -> u64 {
        let within = |&(deg, stride): &(u64, u64)| (domain / stride).clamp(1, deg);
        let dense: u64 = self.axes(set).iter().map(within).product();
        if set.declared_bits() == 0 {
            return dense;
        }
        dense * self.declared_axes(set).iter().map(within).product::<u64>()
    }

    /// The group over `set` as a lattice of device numbers (every bit of an [`AxisSet`] is
    /// an axis the mesh lays out: the dense mesh's and the expert mesh's).
    pub fn placement(&self, set: AxisSet) -> Result<GroupPlacement, ModelError> {
        let mut axes = [GroupAxis::default(); GROUP_AXES];
        for (a, (degree, stride)) in axes.iter_mut().zip(self.axes(set)) {
            *a = GroupAxis { degree, stride };
        }
        let mut used = DENSE_GROUP_AXES;
        if set.declared_bits() != 0 {
            for (a, (degree, stride)) in axes[used..].iter_mut().zip(self.declared_axes(set)) {
                *a = GroupAxis { degree, stride };
            }
            used = GROUP_AXES;
        }
        GroupPlacement::new(&axes[..used], self.devices()).map_err(ModelError::Plugin)
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
        self.time_dispatch(mesh, set, kind, bytes, None)
    }

    /// [`Network::time`], for an MoE token dispatch or combine (`dispatch`; `None`: any other
    /// collective, timed as [`Network::time`] does).
    pub fn time_dispatch(
        &self,
        mesh: &Mesh,
        set: AxisSet,
        kind: CollectiveKind,
        bytes: Bytes,
        dispatch: Option<&Dispatch>,
    ) -> Result<Seconds, ModelError> {
        if mesh.ranks(set) <= 1 || bytes.0 <= 0.0 || self.levels.is_empty() {
            return Ok(Seconds::ZERO);
        }
        let g = mesh.placement(set)?;
        Ok(self.dispatch_cost(&g, kind, bytes, dispatch)?.time)
    }

    /// One collective over `group`; an MoE all-to-all (`dispatch`) over a group that spans
    /// scale-up domains is split (module docs): the rows for the own domain over the
    /// group's members inside the domain (`S / r_out` of the buffer, `r_out` domains), the
    /// rest over one member per domain (the full buffer, as each device sends `S (r_out - 1)
    /// / r_out` across), at the same time; the slower sets the time and both load their
    /// links. A hierarchical dispatch sends each token once per destination rank (across
    /// domains: once per destination domain, forwarded inside it): the buffer of `top_k`
    /// copies per token shrinks to the expected distinct destinations ([`distinct_domains`]).
    fn dispatch_cost(
        &self,
        group: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
        dispatch: Option<&Dispatch>,
    ) -> Result<CollectiveCost, ModelError> {
        let Some(d) = dispatch.filter(|_| kind == CollectiveKind::AllToAll) else {
            return self.cost(group, kind, bytes);
        };
        let ranks = group.ranks();
        if ranks <= 1 || bytes.0 <= 0.0 || self.levels.is_empty() {
            return Ok(CollectiveCost::default());
        }
        let s = bytes.0;
        let dedup = |parts: u64| {
            if d.hierarchical && d.top_k > 0 {
                s * distinct_domains(d, parts) / d.top_k as f64
            } else {
                s
            }
        };
        let domain = self.levels[0].domain_size().max(1) as u64;
        let r_in = group.members_within(domain);
        if r_in >= ranks || r_in <= 1 {
            return self.cost(group, kind, Bytes(dedup(ranks)));
        }
        let r_out = ranks.div_ceil(r_in);
        // Split each axis at the domain boundary: the part inside one domain and the part
        // across (mesh strides divide the domain or are multiples of it).
        let one = GroupAxis {
            degree: 1,
            stride: 1,
        };
        let mut inner = [one; MAX_GROUP_AXES];
        let mut outer = [one; MAX_GROUP_AXES];
        for (i, a) in group.axes().iter().enumerate() {
            let d_in = (domain / a.stride).clamp(1, a.degree);
            inner[i] = GroupAxis {
                degree: d_in,
                stride: a.stride,
            };
            outer[i] = GroupAxis {
                degree: a.degree.div_ceil(d_in),
                stride: a.stride * d_in,
            };
        }
        let devices = group.devices();
        let inner = GroupPlacement::new(&inner, devices).map_err(ModelError::Plugin)?;
        let outer = GroupPlacement::new(&outer, devices).map_err(ModelError::Plugin)?;
        let (b_in, b_out) = if d.hierarchical && d.top_k > 0 {
            (dedup(ranks), dedup(r_out))
        } else {
            (s / r_out as f64, s)
        };
        let ci = self.cost(&inner, kind, Bytes(b_in))?;
        let co = self.cost(&outer, kind, Bytes(b_out))?;
        let mut c = CollectiveCost {
            time: Seconds(ci.time.0.max(co.time.0)),
            loads: ci.loads,
        };
        for l in co.loads.as_slice() {
            c.loads.push(*l).map_err(ModelError::Plugin)?;
        }
        Ok(c)
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
                let t =
                    self.time_dispatch(mesh, map(c.group), c.kind, c.bytes, c.dispatch.as_ref())?;
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
            costs[i] = self.dispatch_cost(&g, c.kind, c.bytes, c.dispatch.as_ref())?;
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
        other => other,
    })
}

/// Expected number of the `domains` (equal shares of the experts: ranks or scale-up domains)
/// that a token's `top_k` experts fall in, each expert chosen uniformly without replacement
/// (hypergeometric: a domain holding `E/D` of the `E` experts gets none with probability
/// `C(E - E/D, k) / C(E, k)`). Group-limited routing (DeepSeek-V2/V3) with whole groups inside
/// a domain picks `group_top_k` of the `expert_groups` groups, so the same count over groups
/// (DeepSeek-V3: a token reaches at most 4 of 8 nodes, DeepSeek 2024 §2.1.2).
pub fn distinct_domains(d: &Dispatch, domains: u64) -> f64 {
    let parts = domains.max(1);
    let (e, k) = (d.experts.max(1) as u64, d.top_k.max(1) as u64);
    let groups = d.expert_groups as u64;
    let g = d.group_top_k as u64;
    let hit = if groups > 1 && g > 0 && e.is_multiple_of(groups) {
        if groups >= parts {
            // Whole groups inside a part: `g` of the groups, spread over the parts.
            parts as f64 * (1.0 - miss(groups, g, parts))
        } else {
            // A group spans `parts / groups` parts: the token's `k / g` picks inside each of
            // its `g` groups spread over those.
            let span = parts.div_ceil(groups);
            let picks = (k / g).max(1);
            g as f64 * span as f64 * (1.0 - miss(e / groups, picks, span))
        }
    } else {
        parts as f64 * (1.0 - miss(e, k, parts))
    };
    hit.clamp(1.0, k as f64)
}

/// Probability that a given one of `parts` equal shares of `total` items gets none of
/// `picks` draws without replacement.
fn miss(total: u64, picks: u64, parts: u64) -> f64 {
    let t = total as f64;
    let per = t / parts.max(1) as f64;
    let mut p = 1.0;
    for i in 0..picks {
        let i = i as f64;
        if t - i <= 0.0 {
            return 0.0;
        }
        p *= ((t - per - i) / (t - i)).max(0.0);
    }
    p
}

/// A network level's failure, with the level's index (`system.network[i]`) added.
pub fn level_error(level: usize, e: PluginError) -> ModelError {
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
        let m = Mesh::new(8, 1, 16, 8);
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
        let m2 = Mesh::new(2, 2, 1, 8);
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
        let m = Mesh::new(8, 1, 16, 8);
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
        let m2 = Mesh::new(2, 1, 1, 16);
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

    /// Expected distinct destinations of a token: 8 of 256 experts over 8 nodes hit 5.3 nodes
    /// (1 - C(224,8)/C(256,8) = 0.662 each); DeepSeek-V3's group-limited routing (4 of 8
    /// groups, a group per node) 4; contiguous experts (AutoModel's balanced gate: groups of
    /// `top_k`) one node and two ranks of 4 experts; top-2 of 8 over 8 ranks 2.
    #[test]
    fn distinct_destinations() {
        let d = |experts, top_k, groups, gk| Dispatch {
            top_k,
            experts,
            expert_groups: groups,
            group_top_k: gk,
            hierarchical: true,
        };
        let close = |a: f64, b: f64| (a - b).abs() < 0.01;
        assert!(close(distinct_domains(&d(256, 8, 0, 0), 8), 5.295));
        assert!(close(distinct_domains(&d(256, 8, 8, 4), 8), 4.0));
        assert!(close(distinct_domains(&d(256, 8, 32, 1), 8), 1.0));
        assert!(close(distinct_domains(&d(256, 8, 32, 1), 64), 2.0));
        assert!(close(distinct_domains(&d(8, 2, 0, 0), 8), 2.0));
        assert!(distinct_domains(&d(32, 8, 0, 0), 8) < 8.0);
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

    const MESH: Mesh = Mesh::new(8, 1, 16, 8);

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

    /// The expert mesh's groups: EP 8 inside the TP x DP ranks of a stage; without EP a
    /// single-rank group.
    #[test]
    fn expert_groups_are_laid_out() {
        assert_eq!(MESH.placement(AxisSet::EXPERT).unwrap().ranks(), 1);
        let m = Mesh {
            tp: 2,
            dp: 8,
            ep: 8,
            ..MESH
        };
        let g = m.placement(AxisSet::EXPERT).unwrap();
        assert_eq!(g.ranks(), 8);
        // ETP 1: the group takes the 2 TP positions (stride 1), then 4 DP steps of
        // tp x cp x pp = 32 devices: 2 members in an 8-device domain.
        assert_eq!(g.members_within(8), 2);
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
            dispatch: None,
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
