//! Validation of the collective model against published collective benchmarks:
//! `configs/validation/collectives.toml` (schema `perfcast-collectives/1`, described in
//! `configs/validation/SCHEMA.md`): nccl-tests sweeps on NVSwitch nodes and InfiniBand/EFA
//! clusters, DeepEP all-to-all dispatch/combine.
//!
//! * [`CollectivesFile`]: the file, parsed strictly (unknown keys are errors naming the
//!   entry and the key) and checked;
//! * [`predict`]: each entry's system composed by perfcast-config (the accelerator's hardware
//!   preset, its device count and NIC), a topology component for its fabric and algorithm,
//!   and the collective timed through the engine's network ([`perfcast_engine::network`]);
//! * [`report`]: per entry and per group, the error on each published metric.
//!
//! `perfcast validate configs/validation/collectives.toml` runs it (the file's `schema` key
//! selects this mode).

pub mod predict;
pub mod report;

use crate::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::Path;

/// The schema name this parser reads.
pub const SCHEMA: &str = "perfcast-collectives/1";

/// The collective benchmarks file used by `perfcast validate` when named.
pub const DEFAULT_COLLECTIVES: &str = "configs/validation/collectives.toml";

/// One `[[collective]]` measurement (fields as `SCHEMA.md` defines them).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Unique id.
    pub id: String,
    /// Source group.
    pub group: String,
    /// Citation.
    pub source: String,
    /// Benchmark program and library versions.
    pub software: String,
    /// Machine as the source describes it.
    pub system: String,
    /// Accelerator id of `accelerators.toml`.
    pub gpu: String,
    /// Ranks.
    pub gpus: u32,
    /// Ranks per node.
    pub gpus_per_node: u32,
    /// Nodes.
    pub nodes: u32,
    /// NIC Gb/s per device.
    #[serde(default)]
    pub scaleout_gbps_per_gpu: Option<f64>,
    /// Scale-up domain and fabric, as the source says.
    pub topology: String,
    /// `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast`, `send_recv`.
    pub collective: String,
    /// NCCL algorithm when forced or reported.
    #[serde(default)]
    pub algorithm: Option<String>,
    /// NCCL protocol when reported.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Environment that selected the algorithm.
    #[serde(default)]
    pub nccl_config: Option<String>,
    /// Element type.
    pub dtype: String,
    /// nccl-tests size column, bytes.
    #[serde(default)]
    pub message_bytes: Option<u64>,
    /// In-place columns.
    #[serde(default)]
    pub inplace: Option<bool>,
    /// DeepEP phase: `dispatch` or `combine`.
    #[serde(default)]
    pub ep_phase: Option<String>,
    /// DeepEP tokens per rank.
    #[serde(default)]
    pub tokens_per_rank: Option<u64>,
    /// DeepEP hidden size.
    #[serde(default)]
    pub hidden: Option<u64>,
    /// DeepEP experts per token.
    #[serde(default)]
    pub top_k: Option<u64>,
    /// SMs given to the communication kernels.
    #[serde(default)]
    pub sms_used: Option<u32>,
    /// Measured bus bandwidth, GB/s.
    #[serde(default)]
    pub busbw_gbs: Option<f64>,
    /// Measured algorithm bandwidth, GB/s.
    #[serde(default)]
    pub algbw_gbs: Option<f64>,
    /// Measured time, microseconds.
    #[serde(default)]
    pub time_us: Option<f64>,
    /// DeepEP bandwidth on `ep_bw_link`, GB/s.
    #[serde(default)]
    pub ep_bw_gbs: Option<f64>,
    /// `nvlink` or `rdma`.
    #[serde(default)]
    pub ep_bw_link: Option<String>,
    /// Caveats.
    #[serde(default)]
    pub notes: Option<String>,
    /// Derived values.
    #[serde(default)]
    pub derived: Vec<String>,
    /// Assumed values.
    #[serde(default)]
    pub assumed: Vec<String>,
    /// The source contradicts itself.
    #[serde(default)]
    pub source_inconsistency: Option<String>,
}

/// A parsed collectives file.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectivesFile {
    /// Where it came from.
    pub file: String,
    /// The measurements, in file order.
    pub entries: Vec<Entry>,
}

const COLLECTIVES: [&str; 6] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send_recv",
];
const ALGORITHMS: [&str; 8] = [
    "ring",
    "tree",
    "nvls",
    "nvls_tree",
    "collnet",
    "collnet_direct",
    "collnet_chain",
    "pat",
];

/// Whether `text` (a TOML document) declares this schema at its top level.
pub fn is_collectives(text: &str) -> bool {
    toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| {
            t.get("schema")
                .and_then(|s| s.as_str())
                .map(|s| s == SCHEMA)
        })
        .unwrap_or(false)
}

impl CollectivesFile {
    /// Read and check a file.
    pub fn load(path: &Path) -> Result<CollectivesFile> {
        let file = path.display().to_string();
        let text = crate::error::read(path, &file)?;
        CollectivesFile::parse(&text, &file)
    }

    /// Parse and check the text of a file; `file` names it in messages. Every error of the
    /// file is reported together, each naming the entry and the key.
    pub fn parse(text: &str, file: &str) -> Result<CollectivesFile> {
        let root: toml::Table = crate::error::parse_toml(text, file)?;
        let mut errors = Vec::new();
        for k in root.keys() {
            if k != "schema" && k != "collective" {
                errors.push(format!(
                    "unknown top-level key `{k}` (allowed: `schema`, `collective`)"
                ));
            }
        }
        match root.get("schema") {
            Some(toml::Value::String(s)) if s == SCHEMA => {}
            Some(v) => errors.push(format!("schema = {v}: expected \"{SCHEMA}\"")),
            None => errors.push(format!("missing `schema = \"{SCHEMA}\"`")),
        }
        let mut entries = Vec::new();
        let list = root
            .get("collective")
            .and_then(|c| c.as_array())
            .cloned()
            .unwrap_or_default();
        let mut ids = BTreeSet::new();
        for (i, v) in list.into_iter().enumerate() {
            let id = v
                .get("id")
                .and_then(|s| s.as_str())
                .unwrap_or("?")
                .to_string();
            match serde_path_to_error::deserialize::<_, Entry>(v) {
                Err(e) => errors.push(format!(
                    "collective[{i}] (id `{id}`): {}: {}",
                    e.path(),
                    e.inner()
                )),
                Ok(entry) => {
                    if !ids.insert(entry.id.clone()) {
                        errors.push(format!("collective[{i}]: id `{id}` is not unique"));
                    }
                    errors.extend(check(&entry).into_iter().map(|e| format!("`{id}`: {e}")));
                    entries.push(entry);
                }
            }
        }
        if entries.is_empty() && errors.is_empty() {
            errors.push("no [[collective]] entry".into());
        }
        if errors.is_empty() {
            Ok(CollectivesFile {
                file: file.to_string(),
                entries,
            })
        } else {
            Err(Error::Schema {
                file: file.to_string(),
                errors,
            })
        }
    }

    /// The groups, in order of first appearance.
    pub fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in &self.entries {
            if !out.contains(&e.group) {
                out.push(e.group.clone());
            }
        }
        out
    }
}

/// The checks of one entry beyond its types.
fn check(e: &Entry) -> Vec<String> {
    let mut errs = Vec::new();
    if !COLLECTIVES.contains(&e.collective.as_str()) {
        errs.push(format!(
            "collective = \"{}\": expected one of {}",
            e.collective,
            COLLECTIVES.join(", ")
        ));
    }
    if let Some(a) = &e.algorithm {
        if !ALGORITHMS.contains(&a.as_str()) {
            errs.push(format!(
                "algorithm = \"{a}\": expected one of {}",
                ALGORITHMS.join(", ")
            ));
        }
    }
    if let Some(p) = &e.protocol {
        if !["LL", "LL128", "SIMPLE"].contains(&p.as_str()) {
            errs.push(format!("protocol = \"{p}\": expected LL, LL128 or SIMPLE"));
        }
    }
    if e.gpus == 0 || e.gpus_per_node == 0 || e.nodes == 0 {
        errs.push("gpus, gpus_per_node and nodes must be at least 1".into());
    } else if e.gpus_per_node as u64 * e.nodes as u64 != e.gpus as u64 {
        errs.push(format!(
            "gpus = {} is not gpus_per_node x nodes = {} x {}",
            e.gpus, e.gpus_per_node, e.nodes
        ));
    }
    let deepep = e.ep_phase.is_some();
    if deepep {
        for (k, v) in [
            ("tokens_per_rank", e.tokens_per_rank),
            ("hidden", e.hidden),
            ("top_k", e.top_k),
        ] {
            if v.unwrap_or(0) == 0 {
                errs.push(format!("{k}: a DeepEP entry needs it (>= 1)"));
            }
        }
    } else if e.message_bytes.unwrap_or(0) == 0 {
        errs.push("message_bytes: needed (>= 1) for an nccl-tests entry".into());
    }
    let measured = [e.busbw_gbs, e.algbw_gbs, e.time_us, e.ep_bw_gbs];
    if measured.iter().all(Option::is_none) {
        errs.push("no measured value (busbw_gbs, algbw_gbs, time_us or ep_bw_gbs)".into());
    }
    for (k, v) in [
        ("busbw_gbs", e.busbw_gbs),
        ("algbw_gbs", e.algbw_gbs),
        ("time_us", e.time_us),
        ("ep_bw_gbs", e.ep_bw_gbs),
        ("scaleout_gbps_per_gpu", e.scaleout_gbps_per_gpu),
    ] {
        if let Some(v) = v {
            if !(v.is_finite() && v > 0.0) {
                errs.push(format!("{k} = {v}: must be a finite number > 0"));
            }
        }
    }
    if e.ep_bw_gbs.is_some() && !matches!(e.ep_bw_link.as_deref(), Some("nvlink" | "rdma")) {
        errs.push("ep_bw_link: `nvlink` or `rdma` is needed with ep_bw_gbs".into());
    }
    errs
}
