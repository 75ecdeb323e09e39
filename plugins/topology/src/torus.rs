//! `torus`: the scale-up domains (`system.network[0]`; a domain of one device makes every
//! chip a torus node, as TPU ICI) on a k-dimensional torus of point-to-point links, each
//! node two links (`+` and `-`) per dimension (TPU v4: 3D torus; Jouppi et al. 2023, §2).
//!
//! Torus nodes are numbered `x` fastest. A group's axes that step between nodes move along
//! the dimension whose place value divides their stride, `c` coordinates per step. A
//! collective runs dimension by dimension (the bucket algorithm of Sack & Gropp 2012 and of
//! TPU all-reduce): a reduce-scatter along each dimension in turn, on a bidirectional ring
//! when the group covers the whole dimension (both directions, `2 B`) and on a line
//! otherwise (`B`), the shard shrinking by each dimension's extent, then the all-gathers in
//! reverse. A step of `c` coordinates crosses `c` links shared with the `c - 1` sibling
//! groups in between, so it takes `c` times the time and `c` hops. All-to-all is limited by
//! the links: uniform traffic on a ring of `e` nodes loads each link direction with
//! `S e / 8` (`S e / 4` on a line), dimension-ordered. Sibling groups on other rows use
//! other links; the torus reports no shared link loads.

use crate::algo::{CollectiveParams, Model, Shape, NO_PATHS};
use crate::cost::{Bill, Prices};
use crate::links::Tech;
use perfcast_core::op::CollectiveKind;
use perfcast_core::params::{fraction, non_negative, physical, BANDWIDTH_GBS};
use perfcast_core::topology::{CollectiveCost, GroupPlacement, NetworkCost};
use perfcast_core::{Bytes, Interconnect, PluginError, Seconds, Topology};
use serde::Deserialize;
use std::sync::Arc;

/// Most torus dimensions.
const MAX_DIMS: usize = 4;

/// Parameters of `torus`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorusParams {
    /// Torus nodes along each dimension, `x` first (their product times the domain size
    /// must be the devices).
    pub dims: Vec<u64>,
    /// Bandwidth of one link, one direction, GB/s.
    pub link_bandwidth_gbs: f64,
    /// Achievable fraction of the link bandwidth.
    #[serde(default = "d_eff")]
    pub efficiency: f64,
    /// Latency of one hop (link and router), microseconds.
    #[serde(default = "d_hop")]
    pub hop_latency_us: f64,
    /// The algorithm model (its ring base latency and protocol are used).
    #[serde(default)]
    pub collectives: CollectiveParams,
    /// The price table (links are optical: a transceiver at each end).
    #[serde(default)]
    pub prices: Prices,
}

// Achievable fraction of a point-to-point link's rate after framing and protocol overhead,
// the same default as the `torus` interconnect level of perfcast-plugin-network.
fn d_eff() -> f64 {
    0.9
}
// Modelling default: a hop through a torus router and link is of the order of a microsecond
// (NCCL's NVLink ring Simple step is 3.4 us with software; a hardware hop is less).
fn d_hop() -> f64 {
    1.0
}

/// A torus.
#[derive(Debug, Clone)]
pub struct Torus {
    dims: [u64; MAX_DIMS],
    k: usize,
    link: f64,
    hop: f64,
    collectives: CollectiveParams,
    prices: Prices,
}

/// One dimension a group spans: extent, coordinate step, whether it closes the ring.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    extent: u64,
    step: u64,
    ring: bool,
}

impl Torus {
    /// Build from the parameters (errors name the key).
    pub fn new(p: TorusParams) -> Result<Torus, PluginError> {
        if p.dims.is_empty() || p.dims.len() > MAX_DIMS || p.dims.contains(&0) {
            return Err(PluginError::Params {
                path: "dims".into(),
                message: format!(
                    "needs 1 to {MAX_DIMS} sizes of at least 1, got {:?}",
                    p.dims
                ),
            });
        }
        let mut dims = [1u64; MAX_DIMS];
        dims[..p.dims.len()].copy_from_slice(&p.dims);
        p.collectives.check()?;
        p.prices.check()?;
        Ok(Torus {
            dims,
            k: p.dims.len(),
            link: physical("link_bandwidth_gbs", p.link_bandwidth_gbs, BANDWIDTH_GBS)?
                * 1e9
                * fraction("efficiency", p.efficiency)?,
            hop: non_negative("hop_latency_us", p.hop_latency_us)? * 1e-6,
            collectives: p.collectives,
            prices: p.prices,
        })
    }

    fn nodes(&self) -> u64 {
        self.dims[..self.k].iter().product()
    }

    fn domain(&self, network: &[Arc<dyn Interconnect>]) -> u64 {
        network.first().map_or(1, |l| l.domain_size() as u64).max(1)
    }

    /// The dimensions a group's node-level axes span.
    fn spans(&self, g: &GroupPlacement, u: u64) -> [Span; MAX_DIMS] {
        let mut out = [Span::default(); MAX_DIMS];
        for a in g.axes() {
            if a.stride < u && (a.degree - 1) * a.stride < u {
                continue; // inside one domain
            }
            let s = (a.stride / u).max(1);
            // The dimension the stride falls in: the highest whose place value is <= it.
            let mut place = 1;
            let mut dim = self.k - 1;
            for j in 0..self.k {
                if s < place * self.dims[j] || j == self.k - 1 {
                    dim = j;
                    break;
                }
                place *= self.dims[j];
            }
            let step = (s / place).max(1);
            let o = &mut out[dim];
            o.extent = o.extent.max(1) * a.degree;
            o.step = o.step.max(step);
            o.ring = o.extent * o.step >= self.dims[dim];
        }
        out
    }

    fn time(&self, kind: CollectiveKind, bytes: f64, g: &GroupPlacement, up: Tech, u: u64) -> f64 {
        let spans = self.spans(g, u);
        let base = self.collectives.ring_base_us[2] * 1e-6 + up.overhead;
        let r = g.members_within(u) as f64;
        // Inside the domain first (reduce-scatter) and last (all-gather), on its links.
        let intra = if r > 1.0 {
            (r - 1.0) / r * bytes / up.bw
        } else {
            0.0
        };
        use CollectiveKind::*;
        match kind {
            AllToAll => {
                let mut t: f64 = 0.0;
                for s in spans.iter().filter(|s| s.extent > 1) {
                    let share = if s.ring { 8.0 } else { 4.0 };
                    t += bytes * s.extent as f64 * s.step as f64 / (share * self.link)
                        + s.extent as f64 / 2.0 * s.step as f64 * self.hop;
                }
                base + t.max(intra)
            }
            SendRecv => {
                let step = spans.iter().map(|s| s.step).max().unwrap_or(1) as f64;
                base + step * self.hop + bytes * step / self.link
            }
            _ => {
                let phases = if kind == AllReduce { 2.0 } else { 1.0 };
                let mut shard = bytes;
                let mut t = 0.0;
                for s in spans.iter().filter(|s| s.extent > 1) {
                    let e = s.extent as f64;
                    let links = if s.ring { 2.0 } else { 1.0 };
                    t += (e - 1.0) * s.step as f64 * self.hop
                        + (e - 1.0) / e * shard * s.step as f64 / (links * self.link);
                    shard /= e;
                }
                base + phases * (t + intra)
            }
        }
    }
}

impl Topology for Torus {
    fn kind(&self) -> &str {
        "torus"
    }

    fn check(&self, network: &[Arc<dyn Interconnect>], devices: u64) -> Result<(), PluginError> {
        let u = self.domain(network);
        if self.nodes() * u != devices {
            return Err(PluginError::Params {
                path: "dims".into(),
                message: format!(
                    "{:?} is {} torus nodes of {u} device(s) (system.network[0]'s domain) = \
                     {} devices, but the system has {devices}",
                    &self.dims[..self.k],
                    self.nodes(),
                    self.nodes() * u
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
        let u = self.domain(network);
        if self.nodes() * u != g.devices() {
            return Err(PluginError::Failed {
                plugin: "torus".into(),
                message: format!(
                    "cannot place a group of {} devices on a torus of {} devices",
                    g.devices(),
                    self.nodes() * u
                ),
            });
        }
        let up = network.first().map_or(
            Tech {
                bw: self.link,
                overhead: 0.0,
                hop: self.hop,
            },
            |l| Tech {
                bw: l.bandwidth().0,
                overhead: l.collective_overhead().0,
                hop: l.latency().0,
            },
        );
        let t = if g.blocks(u) <= 1 {
            let links = crate::links::Links {
                domain: u,
                up,
                nic: None,
            };
            let m = Model {
                params: &self.collectives,
                links: &links,
                caps: Default::default(),
            };
            let shape = Shape {
                p: g.ranks(),
                r: g.ranks(),
                n: 1,
            };
            m.eval(kind, bytes.0, &shape, &NO_PATHS).time
        } else {
            self.time(kind, bytes.0, g, up, u)
        };
        Ok(CollectiveCost {
            time: Seconds(t),
            loads: Default::default(),
        })
    }

    fn cost(
        &self,
        _network: &[Arc<dyn Interconnect>],
        _devices: u64,
    ) -> Result<Option<NetworkCost>, PluginError> {
        let n = self.nodes();
        // A ring of d >= 3 nodes has d cables, of 2 nodes one: n (or n / 2) per dimension.
        let cables: u64 = self.dims[..self.k]
            .iter()
            .map(|&d| match d {
                1 => 0,
                2 => n / 2,
                _ => n,
            })
            .sum();
        let mut b = Bill::default();
        b.links(&self.prices, cables);
        Ok(Some(b.finish()))
    }

    fn describe(&self, _network: &[Arc<dyn Interconnect>], _devices: u64) -> serde_json::Value {
        serde_json::json!({ "dims": &self.dims[..self.k], "nodes": self.nodes() })
    }
}
