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

use perfcast_core::op::{Collective, CollectiveKind};
use perfcast_core::parallel::AxisSet;
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
}

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
