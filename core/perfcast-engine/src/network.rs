//! Placement of communication groups on the network levels and hierarchical collectives.
//!
//! The mesh is laid out TP innermost, then CP, PP, DP outermost (Megatron-LM's rank order):
//! consecutive TP ranks are neighbours, a CP step is `tp` ranks, a PP step `tp·cp`, a DP step
//! `tp·cp·pp`; the first and last pipeline stage (the embedding group) are `tp·cp·(pp-1)`
//! apart. A group of several axes has, inside a domain of `D` devices, the product over
//! its axes of `clamp(D / stride, 1, degree)` members. A collective runs on the innermost
//! level whose domain holds the whole group; when the level below already holds `r_in > 1`
//! members, it runs hierarchically (the two-level scheme of NCCL's CollNet/tree and of
//! Horovod's hierarchical all-reduce): reduce-scatter inside the inner domain, the reduced
//! shard (`S / r_in`) across domains, all-gather inside again.
//!
//! The MoE layers' expert mesh (ETP innermost, then EP, then expert data parallelism) fills a
//! stage's non-pipeline devices innermost first: an expert group is a run of the flattened
//! TP, CP, DP positions, decomposed here into pieces of those axes with their strides. An
//! all-to-all over a group spanning domains sends the rows for the own domain over the inner
//! level and the rest over the outer one at the same time (NCCL's peer-to-peer all-to-all
//! drives NVLink and the NICs concurrently): the slower of the two. A hierarchical token
//! dispatch (DeepEP) sends a token once per destination domain ([`Network::time_dispatch`]).

use perfcast_core::op::{Collective, CollectiveKind};
use perfcast_core::parallel::{AxisSet, Dispatch};
use perfcast_core::{
    Bytes, CollectiveAlgorithm, Interconnect, Key, ModelError, PluginError, Seconds, Section,
};
use std::sync::Arc;

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
}

impl Mesh {
    /// A mesh of `tp x cp x pp x dp` without expert parallelism.
    pub fn new(tp: u32, cp: u32, pp: u32, dp: u32) -> Mesh {
        Mesh {
            tp,
            cp,
            pp,
            dp,
            ep: 1,
            etp: 1,
        }
    }

    /// `(degree, stride)` pieces of the expert-mesh axis of `size` ranks that starts after
    /// `inner` ranks (the axes inside it), over the flattened TP, CP, DP positions.
    fn expert_pieces(&self, inner: u64, size: u64) -> [(u64, u64); 3] {
        let tp = self.tp.max(1) as u64;
        let cp = self.cp.max(1) as u64;
        let pp = self.pp.max(1) as u64;
        let digits = [(tp, 1), (cp, tp), (self.dp.max(1) as u64, tp * cp * pp)];
        let mut out = [(1, 1); 3];
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
    fn axes(&self, set: AxisSet) -> [(u64, u64); 14] {
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
        let mut out = [(1, 1); 14];
        out[..5].copy_from_slice(&[
            pick(AxisSet::TENSOR, tp, 1),
            pick(AxisSet::CONTEXT, cp, tp),
            pick(AxisSet::PIPELINE, pp, tp * cp),
            pick(AxisSet::DATA, dp, tp * cp * pp),
            pick(AxisSet::PIPELINE_ENDS, pp.min(2), tp * cp * (pp - 1).max(1)),
        ]);
        if set.intersects(AxisSet::EXPERT_MESH) {
            let etp = self.etp.max(1) as u64;
            let ep = self.ep.max(1) as u64;
            let edp = (tp * cp * dp / (ep * etp)).max(1);
            let axes = [
                (AxisSet::EXPERT_TENSOR, 1, etp),
                (AxisSet::EXPERT, etp, ep),
                (AxisSet::EXPERT_DATA, etp * ep, edp),
            ];
            for (j, (a, inner, size)) in axes.into_iter().enumerate() {
                if set.contains(a) {
                    let pieces = self.expert_pieces(inner, size);
                    out[5 + 3 * j..8 + 3 * j].copy_from_slice(&pieces);
                }
            }
        }
        out
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
}

/// The network levels of a system, innermost first.
#[derive(Clone)]
pub struct Network {
    levels: Vec<Arc<dyn Interconnect>>,
    domains: Vec<u64>,
    pub algorithm: CollectiveAlgorithm,
}

impl Network {
    pub fn new(levels: &[Arc<dyn Interconnect>]) -> Result<Self, ModelError> {
        let mut domains = Vec::with_capacity(levels.len());
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
            if let Some(&prev) = domains.last() {
                if (d as u64) < prev {
                    return Err(ModelError::invalid(
                        Key::owned(Section::System, format!("network[{i}].domain_size")),
                        d,
                        "network levels must be listed innermost (smallest domain) first",
                    ));
                }
            }
            domains.push(d as u64);
        }
        Ok(Network {
            levels: levels.to_vec(),
            domains,
            algorithm: CollectiveAlgorithm::Auto,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// One collective on one level; a level that cannot answer (a dynamic plugin's error or
    /// invalid value) is an error naming the level and the plugin.
    fn flat(
        &self,
        level: usize,
        kind: CollectiveKind,
        bytes: f64,
        ranks: u64,
    ) -> Result<f64, ModelError> {
        if ranks <= 1 || bytes <= 0.0 {
            return Ok(0.0);
        }
        let c = Collective {
            kind,
            bytes: Bytes(bytes),
            ranks: ranks.min(u32::MAX as u64) as u32,
        };
        self.levels[level]
            .try_collective_time(&c, self.algorithm)
            .map(|t| t.0)
            .map_err(|e| level_error(level, e))
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

    /// [`Network::time`], for an MoE token dispatch (`dispatch`) placed as one: over a group
    /// spanning domains, the rows for the own domain go over the inner level and the others
    /// over the outer one concurrently; a hierarchical dispatch sends a token once per
    /// destination domain (the expected number of distinct domains its experts are in,
    /// [`distinct_domains`]) and forwards it inside the domain.
    pub fn time_dispatch(
        &self,
        mesh: &Mesh,
        set: AxisSet,
        kind: CollectiveKind,
        bytes: Bytes,
        dispatch: Option<&Dispatch>,
    ) -> Result<Seconds, ModelError> {
        let ranks = mesh.ranks(set);
        if ranks <= 1 || bytes.0 <= 0.0 || self.levels.is_empty() {
            return Ok(Seconds::ZERO);
        }
        // Innermost level whose domain holds the group; the outermost level otherwise.
        let last = self.levels.len() - 1;
        let j = (0..self.levels.len())
            .find(|&i| mesh.members_in_domain(set, self.domains[i]) >= ranks)
            .unwrap_or(last);
        let r_in = if j == 0 {
            ranks
        } else {
            mesh.members_in_domain(set, self.domains[j - 1])
        };
        let s = bytes.0;
        use CollectiveKind::*;
        // A hierarchical dispatch sends each token once per destination rank (and, across
        // domains, once per destination domain, forwarded inside it): the buffer of `top_k`
        // copies per token shrinks to the expected distinct ranks (domains) per token.
        let dedup = |parts: u64| match dispatch {
            Some(d) if d.hierarchical && d.top_k > 0 => {
                s * distinct_domains(d, parts) / d.top_k as f64
            }
            _ => s,
        };
        if kind == AllToAll && (j == 0 || r_in <= 1) {
            return self.flat(j, kind, dedup(ranks), ranks).map(Seconds);
        }
        if kind == AllToAll && j > 0 && r_in > 1 {
            let r_out = ranks.div_ceil(r_in);
            let (inner, outer) = match dispatch {
                Some(d) if d.hierarchical && d.top_k > 0 => (
                    self.flat(j - 1, AllToAll, dedup(ranks), r_in)?,
                    self.flat(j, AllToAll, dedup(r_out), r_out)?,
                ),
                _ => (
                    self.flat(j - 1, AllToAll, s / r_out as f64, r_in)?,
                    self.flat(j, AllToAll, s, r_out)?,
                ),
            };
            return Ok(Seconds(inner.max(outer)));
        }
        if j == 0 || r_in <= 1 || matches!(kind, SendRecv | AllToAll | Broadcast) {
            return self.flat(j, kind, s, ranks).map(Seconds);
        }
        let r_out = ranks.div_ceil(r_in);
        let (inner, outer) = (j - 1, j);
        let t = match kind {
            AllReduce => {
                self.flat(inner, ReduceScatter, s, r_in)?
                    + self.flat(outer, AllReduce, s / r_in as f64, r_out)?
                    + self.flat(inner, AllGather, s, r_in)?
            }
            AllGather => {
                self.flat(outer, AllGather, s / r_in as f64, r_out)?
                    + self.flat(inner, AllGather, s, r_in)?
            }
            ReduceScatter => {
                self.flat(inner, ReduceScatter, s, r_in)?
                    + self.flat(outer, ReduceScatter, s / r_in as f64, r_out)?
            }
            SendRecv | AllToAll | Broadcast => self.flat(j, kind, s, ranks)?,
        };
        Ok(Seconds(t))
    }
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
pub(crate) fn level_error(level: usize, e: PluginError) -> ModelError {
    let at = format!("system.network[{level}]");
    ModelError::Plugin(match e {
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
    })
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
