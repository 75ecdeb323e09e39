//! One collective benchmark mapped to a system and a topology, and predicted.
//!
//! The mapping, the same for every entry (nothing keys on a group or an id):
//!
//! * **Hardware**: the accelerator's hardware preset (or its catalog entry), as the training
//!   harness composes it (`presets::Hardware`): its NVLink level and NIC with the plugins'
//!   documented efficiencies; `system.devices` = the entry's ranks; the entry's NIC rate
//!   (`scaleout_gbps_per_gpu`) when it states one.
//! * **Topology**: one node is its scale-up domain (kind `fat-tree`: nothing leaves the
//!   domain); several nodes are `rail-optimized` (NVIDIA's DGX SuperPOD reference design:
//!   64-port leaves, one per rail and scalable unit, a spine above). The switches reduce as
//!   the hardware can: NVLS where the catalog's scale-up is an NVSwitch of NVLink 4 or later
//!   (NVLink SHARP needs NVSwitch 3, Hopper and later); IB SHARP when the entry's algorithm
//!   is a CollNet one (NCCL uses SHARP only when `NCCL_COLLNET_ENABLE` turns it on). A
//!   scale-up described as fully connected (AMD Infinity Fabric) is a mesh: a group of `r`
//!   GPUs uses `r - 1` of the `domain - 1` links of each.
//! * **Algorithm and protocol**: the entry's, when it names them (`collnet*` is `sharp`);
//!   otherwise NCCL's choice (`auto`).
//! * **Collective**: nccl-tests' size column is perfcast's full buffer `S` (all-gather: the
//!   output, reduce-scatter: the input, send/recv: the per-rank buffer); the group is every
//!   rank. bus bandwidth = factor x S / t with nccl-tests' factors (all-reduce `2(p-1)/p`,
//!   all-gather, reduce-scatter `(p-1)/p`, others 1); algorithm bandwidth = S / t.
//! * **DeepEP**: an all-to-all of `S = tokens x top_k x token bytes` per rank (FP8 tokens
//!   carry one FP32 scale per 128 channels, DeepEP's format; BF16 two bytes per channel); the
//!   bandwidth on a link type is the bytes that cross it over the time (NVLink: to the other
//!   ranks of the node; RDMA: to other nodes, or every byte sent when the run has one node).
//!   DeepEP V2 reports a logical bandwidth that counts the traffic to local ranks too (its
//!   README, 'Performance'), so for `software` "DeepEP V2 ..." it is every byte sent.

use super::Entry;
use crate::presets::{Hardware, ACCELERATORS};
use crate::{Error, Result};
use perfcast_config::Plugins;
use perfcast_core::parallel::AxisSet;
use perfcast_core::{Bytes, CollectiveKind};
use perfcast_engine::network::{Mesh, Network};
use serde::Serialize;

/// Component name of the topology added for an entry.
pub const FABRIC: &str = "collective_fabric";

/// Which regime an entry measures, and so which target applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// Messages of 256 MiB and more, DeepEP's throughput kernels: bus bandwidth within 15%.
    Bandwidth,
    /// Messages between 1 MiB and 256 MiB: within 2x.
    Mid,
    /// Messages of 1 MiB and less, DeepEP's low-latency kernels: within 2x.
    Latency,
}

impl Regime {
    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Regime::Bandwidth => "bandwidth",
            Regime::Mid => "mid",
            Regime::Latency => "latency",
        }
    }
    /// Whether `ratio` (predicted / measured) meets the regime's target.
    pub fn passes(self, ratio: f64) -> bool {
        match self {
            Regime::Bandwidth => (ratio - 1.0).abs() <= 0.15,
            Regime::Mid | Regime::Latency => (0.5..=2.0).contains(&ratio),
        }
    }
}

/// One metric predicted beside its measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    /// Field name in the file (`busbw_gbs`, ...).
    pub name: &'static str,
    /// Predicted value, in the field's unit.
    pub predicted: f64,
    /// Measured value.
    pub measured: f64,
}

impl Metric {
    /// Predicted / measured.
    pub fn ratio(&self) -> f64 {
        self.predicted / self.measured
    }
}

/// An entry's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// The regime (and target).
    pub regime: Regime,
    /// The topology kind used.
    pub topology: String,
    /// Every published metric, the scored one first.
    pub metrics: Vec<Metric>,
}

fn kind_of(name: &str) -> Result<CollectiveKind> {
    Ok(match name {
        "all_reduce" => CollectiveKind::AllReduce,
        "all_gather" => CollectiveKind::AllGather,
        "reduce_scatter" => CollectiveKind::ReduceScatter,
        "all_to_all" => CollectiveKind::AllToAll,
        "broadcast" => CollectiveKind::Broadcast,
        "send_recv" => CollectiveKind::SendRecv,
        other => {
            return Err(Error::Collective(format!(
                "collective `{other}` is not modelled"
            )))
        }
    })
}

/// nccl-tests' bus bandwidth factor for `p` ranks.
pub fn busbw_factor(kind: CollectiveKind, p: u32) -> f64 {
    let p = p.max(1) as f64;
    match kind {
        CollectiveKind::AllReduce => 2.0 * (p - 1.0) / p,
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllToAll => {
            (p - 1.0) / p
        }
        CollectiveKind::SendRecv | CollectiveKind::Broadcast => 1.0,
    }
}

/// The catalog's scale-up description of `gpu` (empty when it has none).
fn scaleup(gpu: &str) -> String {
    let cat: toml::Table = toml::from_str(ACCELERATORS).unwrap_or_default();
    cat.get("gpu")
        .and_then(|g| g.as_array())
        .and_then(|a| {
            a.iter()
                .find(|g| g.get("id").and_then(|i| i.as_str()) == Some(gpu))
        })
        .and_then(|g| g.get("scaleup"))
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string()
}

/// NVLink SHARP: an NVSwitch of NVLink 4 or later (NVSwitch 3, Hopper), or an NVLink Switch.
fn has_nvls(scaleup: &str) -> bool {
    let nvswitch = scaleup.contains("NVSwitch") || scaleup.contains("NVLink Switch");
    nvswitch && (scaleup.contains("NVLink 4") || scaleup.contains("NVLink 5"))
}

/// A scale-up domain whose GPUs are wired pairwise (no switch).
fn is_mesh(scaleup: &str) -> bool {
    scaleup.contains("fully connected") || scaleup.contains("full mesh")
}

/// The perfcast algorithm and protocol of an entry's NCCL names.
fn algorithm(e: &Entry) -> (&'static str, &'static str) {
    let a = match e.algorithm.as_deref() {
        Some("ring") => "ring",
        Some("tree") => "tree",
        Some("nvls") => "nvls",
        Some("nvls_tree") => "nvls_tree",
        Some("collnet" | "collnet_direct" | "collnet_chain") => "sharp",
        _ => "auto",
    };
    let p = match e.protocol.as_deref() {
        Some("LL") => "ll",
        Some("LL128") => "ll128",
        Some("SIMPLE") => "simple",
        _ => "auto",
    };
    (a, p)
}

/// The hardware and topology of an entry as perfcast-config sources.
pub fn hardware(e: &Entry) -> Result<(Hardware, &'static str)> {
    let mut hw = Hardware::of(&e.gpu)?;
    hw.set("system.devices", e.gpus as i64);
    if let Some(g) = e.scaleout_gbps_per_gpu {
        hw.set_scaleout_nic(g)?;
    }
    let up = scaleup(&e.gpu);
    let (alg, proto) = algorithm(e);
    let kind = if e.nodes > 1 {
        "rail-optimized"
    } else {
        "fat-tree"
    };
    let c = format!("components.{FABRIC}");
    hw.set(&format!("{c}.kind"), kind);
    hw.set(&format!("{c}.nvls"), has_nvls(&up));
    hw.set(&format!("{c}.sharp"), alg == "sharp");
    if is_mesh(&up) {
        hw.set(&format!("{c}.scale_up"), "mesh");
    }
    hw.set(&format!("{c}.collectives.algorithm"), alg);
    hw.set(&format!("{c}.collectives.protocol"), proto);
    hw.set("system.topology", FABRIC);
    Ok((hw, kind))
}

/// DeepEP's bytes per token of `dtype` (FP8 with one FP32 scale per 128 channels).
fn token_bytes(dtype: &str, hidden: u64) -> Result<f64> {
    match dtype {
        "fp8" => Ok(hidden as f64 + 4.0 * hidden.div_ceil(128) as f64),
        "bf16" => Ok(2.0 * hidden as f64),
        other => Err(Error::Collective(format!(
            "DeepEP payload dtype `{other}` is not modelled"
        ))),
    }
}

/// Predict every published metric of `e`.
pub fn predict(e: &Entry, plugins: &Plugins) -> Result<Prediction> {
    let kind = kind_of(&e.collective)?;
    let (hw, topology) = hardware(e)?;
    let sys = hw.system(plugins)?;
    let net = Network::with_topology(&sys.network, sys.topology.clone(), e.gpus as u64)?;
    let mesh = Mesh::new(e.gpus, 1, 1, 1);
    let deepep = e.ep_phase.is_some();
    let bytes = if deepep {
        let per_token = token_bytes(&e.dtype, e.hidden.unwrap_or(0))?;
        e.tokens_per_rank.unwrap_or(0) as f64 * e.top_k.unwrap_or(0) as f64 * per_token
    } else {
        e.message_bytes.unwrap_or(0) as f64
    };
    let t = net.time(&mesh, AxisSet::TENSOR, kind, Bytes(bytes))?.0;
    if !(t.is_finite() && t > 0.0) {
        return Err(Error::Collective(format!(
            "the model gives a time of {t} s"
        )));
    }
    let regime = if deepep {
        if e.time_us.is_some() {
            Regime::Latency
        } else {
            Regime::Bandwidth
        }
    } else if bytes <= 1048576.0 {
        Regime::Latency
    } else if bytes >= 268435456.0 {
        Regime::Bandwidth
    } else {
        Regime::Mid
    };
    let mut metrics = Vec::new();
    let mut push = |name: &'static str, measured: Option<f64>, predicted: f64| {
        if let Some(m) = measured {
            metrics.push(Metric {
                name,
                predicted,
                measured: m,
            });
        }
    };
    let time_first = regime == Regime::Latency && e.time_us.is_some();
    if time_first {
        push("time_us", e.time_us, t * 1e6);
    }
    push(
        "busbw_gbs",
        e.busbw_gbs,
        busbw_factor(kind, e.gpus) * bytes / t / 1e9,
    );
    if deepep {
        let p = e.gpus as f64;
        let r = e.gpus.min(e.gpus_per_node) as f64;
        let logical = e.software.starts_with("DeepEP V2");
        let link_bytes = match e.ep_bw_link.as_deref() {
            _ if logical => bytes * (p - 1.0) / p,
            Some("nvlink") => bytes * (r - 1.0) / p,
            _ if r < p => bytes * (p - r) / p,
            _ => bytes * (p - 1.0) / p,
        };
        push("ep_bw_gbs", e.ep_bw_gbs, link_bytes / t / 1e9);
    }
    push("algbw_gbs", e.algbw_gbs, bytes / t / 1e9);
    if !time_first {
        push("time_us", e.time_us, t * 1e6);
    }
    Ok(Prediction {
        regime,
        topology: topology.to_string(),
        metrics,
    })
}
