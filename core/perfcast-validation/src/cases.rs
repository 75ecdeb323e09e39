//! The validation cases file, schema `perfcast-validation/1` (`configs/validation/SCHEMA.md`).
//!
//! Parsing is strict, as the schema's own checker (`check_schema.py`) is: unknown keys, missing
//! required fields, bad enum values, inconsistent degrees and metrics that do not belong to the
//! case's kind are errors that name the file, the case id and the key path. A file with any
//! error is rejected as a whole (the CLI exits non-zero): a validation run on a file that
//! silently lost a case would report a MAPE over a different set than the user thinks.

use perfcast_core::workload::{FfnAct, MoeSpec};
use perfcast_core::DType;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use thiserror::Error;

/// The schema name this parser reads.
pub const SCHEMA: &str = "perfcast-validation/1";

/// A rejected cases file.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CasesError {
    #[error("{file}: cannot read: {message}")]
    Io { file: String, message: String },
    #[error("{file}: not valid TOML: {message}")]
    Toml { file: String, message: String },
    /// One or more schema errors, each naming the case and key.
    #[error("{file}: {} schema error(s):\n  {}", errors.len(), errors.join("\n  "))]
    Schema { file: String, errors: Vec<String> },
}

/// `kind` of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Training,
    Inference,
}

impl Kind {
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Training => "training",
            Kind::Inference => "inference",
        }
    }
}

/// `model.attention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionType {
    Mha,
    Gqa,
    Mqa,
    Mla,
}

/// `[case.model.mla]` (multi-head latent attention, DeepSeek-V2/V3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    pub q_lora_rank: u64,
    pub kv_lora_rank: u64,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

/// `[case.model]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseModel {
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    #[serde(default)]
    pub head_dim: Option<u64>,
    pub ffn_hidden: u64,
    pub ffn_act: FfnAct,
    pub vocab: u64,
    #[serde(default)]
    pub seq_len: Option<u64>,
    #[serde(default)]
    pub tied_embeddings: Option<bool>,
    #[serde(default)]
    pub attention: Option<AttentionType>,
    #[serde(default)]
    pub params_b: Option<f64>,
    #[serde(default)]
    pub moe: Option<MoeSpec>,
    #[serde(default)]
    pub mla: Option<MlaSpec>,
}

/// `[case.system]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSystem {
    /// An `id` of the accelerator catalog (`configs/validation/accelerators.toml`).
    pub gpu: String,
    pub num_gpus: u64,
    pub gpus_per_node: u64,
    #[serde(default)]
    pub scaleout_gbps_per_gpu: Option<f64>,
}

/// `[case.parallel]`: every field optional here; which are required depends on the kind
/// (checked after parsing, with an error naming the missing key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseParallel {
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub dp: Option<u64>,
    pub cp: Option<u64>,
    pub ep: Option<u64>,
    pub sp: Option<bool>,
    pub vpp: Option<u64>,
    pub zero_stage: Option<u64>,
    pub micro_batch: Option<u64>,
    pub global_batch: Option<u64>,
}

/// `training.recompute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    Selective,
    Full,
    /// Not published.
    Unknown,
}

/// `training.precision` / `inference.precision` / `inference.kv_precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp16,
    Bf16,
    Fp8,
    Int8,
    Int4,
    Fp4,
}

impl Precision {
    pub const fn dtype(self) -> DType {
        match self {
            Precision::Fp16 => DType::Fp16,
            Precision::Bf16 => DType::Bf16,
            Precision::Fp8 => DType::Fp8,
            Precision::Int8 => DType::Int8,
            Precision::Int4 => DType::Int4,
            Precision::Fp4 => DType::Fp4,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fp8Recipe {
    Delayed,
    Current,
    Mx,
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    Adam,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    #[default]
    Pretrain,
    Sft,
    Lora,
}

/// `[case.training]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseTraining {
    pub recompute: Recompute,
    #[serde(default)]
    pub recompute_layers: Option<u64>,
    pub precision: Precision,
    #[serde(default)]
    pub fp8_recipe: Option<Fp8Recipe>,
    pub optimizer: Optimizer,
    #[serde(default)]
    pub task: Task,
}

/// `inference.batch`: a count or `"max"` (engine-chosen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Batch {
    Fixed(u64),
    Max,
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Batch;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive integer or \"max\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Batch, E> {
                if v >= 1 {
                    Ok(Batch::Fixed(v as u64))
                } else {
                    Err(E::custom(format!(
                        "invalid batch {v}: expected a positive integer or \"max\""
                    )))
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Batch, E> {
                self.visit_i64(v.min(i64::MAX as u64) as i64)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Batch, E> {
                if v == "max" {
                    Ok(Batch::Max)
                } else {
                    Err(E::custom(format!(
                        "invalid batch \"{v}\": expected a positive integer or \"max\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `inference.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Static,
    OfflineMaxThroughput,
    Server,
    Latency,
}

impl Mode {
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::OfflineMaxThroughput => "offline-max-throughput",
            Mode::Server => "server",
            Mode::Latency => "latency",
        }
    }
}

/// `[case.inference]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseInference {
    pub batch: Batch,
    pub input_len: u64,
    pub output_len: u64,
    pub precision: Precision,
    #[serde(default)]
    pub kv_precision: Option<Precision>,
    pub mode: Mode,
}

/// `measured.flops_convention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlopsConvention {
    /// Useful FLOPs; recompute not counted.
    Model,
    /// Recomputed forward counted.
    Hardware,
}

/// `measured.attention_flops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionFlops {
    /// Full s x s score/context GEMMs counted (the schema's default formulas).
    #[default]
    Noncausal,
    /// Halved.
    Causal,
}

/// `[case.measured]`: published metrics plus the metadata that says how they were counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    pub iteration_time_s: Option<f64>,
    pub tokens_per_s_per_gpu: Option<f64>,
    pub tokens_per_s: Option<f64>,
    pub tflops_per_gpu: Option<f64>,
    pub mfu: Option<f64>,
    pub hfu: Option<f64>,
    pub memory_gib_per_gpu: Option<f64>,
    pub layer_fwd_ms: Option<f64>,
    pub layer_bwd_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub latency_s: Option<f64>,
    pub time_to_train_min: Option<f64>,
    pub flops_convention: Option<FlopsConvention>,
    pub peak_tflops_basis: Option<f64>,
    pub attention_flops: Option<AttentionFlops>,
}

/// A metric of the schema (the names of `[case.measured]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    IterationTimeS,
    TokensPerSPerGpu,
    TokensPerS,
    TflopsPerGpu,
    Mfu,
    Hfu,
    MemoryGibPerGpu,
    LayerFwdMs,
    LayerBwdMs,
    TtftMs,
    TpotMs,
    LatencyS,
    TimeToTrainMin,
}

impl Metric {
    pub const ALL: [Metric; 13] = [
        Metric::IterationTimeS,
        Metric::TokensPerSPerGpu,
        Metric::TokensPerS,
        Metric::TflopsPerGpu,
        Metric::Mfu,
        Metric::Hfu,
        Metric::MemoryGibPerGpu,
        Metric::LayerFwdMs,
        Metric::LayerBwdMs,
        Metric::TtftMs,
        Metric::TpotMs,
        Metric::LatencyS,
        Metric::TimeToTrainMin,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Metric::IterationTimeS => "iteration_time_s",
            Metric::TokensPerSPerGpu => "tokens_per_s_per_gpu",
            Metric::TokensPerS => "tokens_per_s",
            Metric::TflopsPerGpu => "tflops_per_gpu",
            Metric::Mfu => "mfu",
            Metric::Hfu => "hfu",
            Metric::MemoryGibPerGpu => "memory_gib_per_gpu",
            Metric::LayerFwdMs => "layer_fwd_ms",
            Metric::LayerBwdMs => "layer_bwd_ms",
            Metric::TtftMs => "ttft_ms",
            Metric::TpotMs => "tpot_ms",
            Metric::LatencyS => "latency_s",
            Metric::TimeToTrainMin => "time_to_train_min",
        }
    }

    /// Metrics the schema allows for a kind (`check_schema.py` TRAIN_METRICS / INFER_METRICS).
    pub fn allowed(self, kind: Kind) -> bool {
        use Metric::*;
        match kind {
            Kind::Training => !matches!(self, TtftMs | TpotMs | LatencyS),
            Kind::Inference => matches!(
                self,
                TokensPerS
                    | TokensPerSPerGpu
                    | TtftMs
                    | TpotMs
                    | LatencyS
                    | MemoryGibPerGpu
                    | TflopsPerGpu
                    | Mfu
            ),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Measured {
    pub fn get(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::IterationTimeS => self.iteration_time_s,
            Metric::TokensPerSPerGpu => self.tokens_per_s_per_gpu,
            Metric::TokensPerS => self.tokens_per_s,
            Metric::TflopsPerGpu => self.tflops_per_gpu,
            Metric::Mfu => self.mfu,
            Metric::Hfu => self.hfu,
            Metric::MemoryGibPerGpu => self.memory_gib_per_gpu,
            Metric::LayerFwdMs => self.layer_fwd_ms,
            Metric::LayerBwdMs => self.layer_bwd_ms,
            Metric::TtftMs => self.ttft_ms,
            Metric::TpotMs => self.tpot_ms,
            Metric::LatencyS => self.latency_s,
            Metric::TimeToTrainMin => self.time_to_train_min,
        }
    }

    /// Published metrics, in the schema's order.
    pub fn metrics(&self) -> impl Iterator<Item = (Metric, f64)> + '_ {
        Metric::ALL
            .into_iter()
            .filter_map(|m| self.get(m).map(|v| (m, v)))
    }
}

/// `[case.reference]`: a step time derived from published values. Not a measurement: shown,
/// never scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub iteration_time_s: f64,
    pub derived_from: String,
}

/// One `[[case]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    pub kind: Kind,
    pub group: String,
    pub source: String,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub derived: Vec<String>,
    #[serde(default)]
    pub assumed: Vec<String>,
    #[serde(default)]
    pub source_inconsistency: Option<String>,
    pub model: CaseModel,
    pub system: CaseSystem,
    pub parallel: CaseParallel,
    #[serde(default)]
    pub training: Option<CaseTraining>,
    #[serde(default)]
    pub inference: Option<CaseInference>,
    pub measured: Measured,
    #[serde(default)]
    pub reference: Option<Reference>,
}

/// The training plan of a case, all degrees present (after [`CasesFile::parse`] checked them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainingParallel {
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    pub cp: u64,
    pub ep: u64,
    pub sp: bool,
    pub vpp: u64,
    pub zero_stage: u64,
    pub micro_batch: u64,
    pub global_batch: u64,
}

/// The inference plan of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferenceParallel {
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    pub ep: u64,
}

impl Case {
    /// The training degrees (`None` for an inference case).
    pub fn training_parallel(&self) -> Option<TrainingParallel> {
        let p = &self.parallel;
        Some(TrainingParallel {
            tp: p.tp?,
            pp: p.pp?,
            dp: p.dp?,
            cp: p.cp?,
            ep: p.ep?,
            sp: p.sp?,
            vpp: p.vpp?,
            zero_stage: p.zero_stage?,
            micro_batch: p.micro_batch?,
            global_batch: p.global_batch?,
        })
        .filter(|_| self.kind == Kind::Training)
    }

    /// The inference degrees (`None` for a training case).
    pub fn inference_parallel(&self) -> Option<InferenceParallel> {
        let p = &self.parallel;
        Some(InferenceParallel {
            tp: p.tp?,
            pp: p.pp?,
            dp: p.dp?,
            ep: p.ep.unwrap_or(1),
        })
        .filter(|_| self.kind == Kind::Inference)
    }

    /// Tokens processed per training step (`global_batch x seq_len`).
    pub fn tokens_per_step(&self) -> Option<f64> {
        Some(self.parallel.global_batch? as f64 * self.model.seq_len? as f64)
    }
}

/// A parsed cases file.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesFile {
    /// Where it came from (for messages).
    pub file: String,
    pub cases: Vec<Case>,
}

impl CasesFile {
    /// Read and check a cases file.
    pub fn load(path: &Path) -> Result<CasesFile, CasesError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| CasesError::Io {
            file: file.clone(),
            message: e.to_string(),
        })?;
        CasesFile::parse(&text, &file)
    }

    /// Parse and check the text of a cases file; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<CasesFile, CasesError> {
        let root: toml::Table = toml::from_str(text).map_err(|e| CasesError::Toml {
            file: file.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let mut errors = Vec::new();
        for k in root.keys() {
            if k != "meta" && k != "case" {
                errors.push(format!(
                    "unknown top-level key `{k}` (allowed: `meta`, `case`)"
                ));
            }
        }
        match root.get("meta").and_then(|m| m.get("schema")) {
            Some(toml::Value::String(s)) if s == SCHEMA => {}
            Some(v) => errors.push(format!("meta.schema = {v}: expected \"{SCHEMA}\"")),
            None => errors.push(format!(
                "meta.schema missing: a cases file starts with [meta] schema = \"{SCHEMA}\""
            )),
        }
        if let Some(meta) = root.get("meta").and_then(|m| m.as_table()) {
            for k in meta.keys().filter(|k| *k != "schema") {
                errors.push(format!("unknown key `meta.{k}` (allowed: `schema`)"));
            }
        }
        let raw_cases = match root.get("case") {
            Some(toml::Value::Array(a)) if !a.is_empty() => a.clone(),
            Some(toml::Value::Array(_)) | None => {
                errors.push("no [[case]] entries".to_string());
                Vec::new()
            }
            Some(_) => {
                errors.push("`case` must be an array of tables ([[case]])".to_string());
                Vec::new()
            }
        };
        let mut cases = Vec::new();
        let mut ids = BTreeSet::new();
        for (i, raw) in raw_cases.into_iter().enumerate() {
            let label = match raw.get("id").and_then(|v| v.as_str()) {
                Some(id) => format!("case `{id}`"),
                None => format!("case #{} (no id)", i + 1),
            };
            let parsed: Result<Case, _> = serde_path_to_error::deserialize(raw);
            match parsed {
                Ok(c) => {
                    if !ids.insert(c.id.clone()) {
                        errors.push(format!("{label}: duplicate id"));
                    }
                    for e in check_case(&c) {
                        errors.push(format!("{label}: {e}"));
                    }
                    cases.push(c);
                }
                Err(e) => {
                    let path = e.path().to_string();
                    let msg = e.into_inner().to_string();
                    let msg = msg.trim_end();
                    if path == "." || path.is_empty() {
                        errors.push(format!("{label}: {msg}"));
                    } else {
                        errors.push(format!("{label}: key `{path}`: {msg}"));
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(CasesFile {
                file: file.to_string(),
                cases,
            })
        } else {
            Err(CasesError::Schema {
                file: file.to_string(),
                errors,
            })
        }
    }

    /// Cases of one group (all when `group` is `None`).
    pub fn group<'a>(&'a self, group: Option<&'a str>) -> impl Iterator<Item = &'a Case> + 'a {
        self.cases
            .iter()
            .filter(move |c| group.is_none_or(|g| c.group == g))
    }

    /// Group names in file order, each once.
    pub fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in &self.cases {
            if !out.contains(&c.group) {
                out.push(c.group.clone());
            }
        }
        out
    }
}

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The semantic rules of the schema that serde cannot express; each message names the key.
fn check_case(c: &Case) -> Vec<String> {
    let mut e = Vec::new();
    if !valid_id(&c.id) {
        e.push(format!(
            "id = \"{}\": expected [a-z0-9][a-z0-9_-]* (lowercase, digits, '_' or '-')",
            c.id
        ));
    }
    for (k, v) in [("group", &c.group), ("source", &c.source)] {
        if v.trim().is_empty() {
            e.push(format!("{k} is empty"));
        }
    }
    // Model.
    let m = &c.model;
    for (k, v) in [
        ("layers", m.layers),
        ("hidden", m.hidden),
        ("heads", m.heads),
        ("kv_heads", m.kv_heads),
        ("ffn_hidden", m.ffn_hidden),
        ("vocab", m.vocab),
    ] {
        if v == 0 {
            e.push(format!("model.{k} = 0: expected a positive integer"));
        }
    }
    if m.head_dim == Some(0) {
        e.push("model.head_dim = 0: expected a positive integer".into());
    }
    if m.seq_len == Some(0) {
        e.push("model.seq_len = 0: expected a positive integer".into());
    }
    if c.kind == Kind::Training && m.seq_len.is_none() {
        e.push("model.seq_len missing (required for a training case)".into());
    }
    if m.kv_heads > 0 && !m.heads.is_multiple_of(m.kv_heads) {
        e.push(format!(
            "model.heads ({}) not divisible by model.kv_heads ({})",
            m.heads, m.kv_heads
        ));
    }
    match m.attention {
        Some(AttentionType::Mha) if m.kv_heads != m.heads => {
            e.push("model.attention = \"mha\" but kv_heads != heads".into())
        }
        Some(AttentionType::Mqa) if m.kv_heads != 1 => {
            e.push("model.attention = \"mqa\" but kv_heads != 1".into())
        }
        Some(AttentionType::Gqa) if !(1 < m.kv_heads && m.kv_heads < m.heads) => {
            e.push("model.attention = \"gqa\" but kv_heads is not in (1, heads)".into())
        }
        _ => {}
    }
    if let Some(p) = m.params_b {
        if !(p.is_finite() && p > 0.0) {
            e.push(format!("model.params_b = {p}: expected a positive number"));
        }
    }
    if let Some(moe) = &m.moe {
        if moe.experts == 0 || moe.top_k == 0 || moe.expert_ffn_hidden == 0 {
            e.push("model.moe: experts, top_k and expert_ffn_hidden must be positive".into());
        }
        if moe.top_k > moe.experts {
            e.push("model.moe.top_k > model.moe.experts".into());
        }
        if moe.dense_layers >= m.layers {
            e.push("model.moe.dense_layers >= model.layers".into());
        }
        if moe.moe_layer_freq == 0 {
            e.push("model.moe.moe_layer_freq = 0: expected a positive integer".into());
        }
    }
    // System.
    let s = &c.system;
    if s.num_gpus == 0 {
        e.push("system.num_gpus = 0: expected a positive integer".into());
    }
    if s.gpus_per_node == 0 {
        e.push("system.gpus_per_node = 0: expected a positive integer".into());
    }
    if let Some(g) = s.scaleout_gbps_per_gpu {
        if !(g.is_finite() && g > 0.0) {
            e.push(format!(
                "system.scaleout_gbps_per_gpu = {g}: expected a positive number"
            ));
        }
    }
    let inconsistent = c.source_inconsistency.is_some();
    // Parallel and the kind's own table.
    let p = &c.parallel;
    match c.kind {
        Kind::Training => {
            if c.inference.is_some() {
                e.push("[case.inference] present in a training case".into());
            }
            if c.training.is_none() {
                e.push("[case.training] missing (required for kind = \"training\")".into());
            }
            let req: [(&str, Option<u64>); 9] = [
                ("tp", p.tp),
                ("pp", p.pp),
                ("dp", p.dp),
                ("cp", p.cp),
                ("ep", p.ep),
                ("vpp", p.vpp),
                ("zero_stage", p.zero_stage),
                ("micro_batch", p.micro_batch),
                ("global_batch", p.global_batch),
            ];
            for (k, v) in req {
                match v {
                    None => e.push(format!(
                        "parallel.{k} missing (required for a training case)"
                    )),
                    Some(0) if k != "zero_stage" => {
                        e.push(format!("parallel.{k} = 0: expected a positive integer"))
                    }
                    _ => {}
                }
            }
            if p.sp.is_none() {
                e.push("parallel.sp missing (required for a training case)".into());
            }
            if let Some(z) = p.zero_stage {
                if z > 3 {
                    e.push(format!("parallel.zero_stage = {z}: expected 0, 1, 2 or 3"));
                }
            }
            if let Some(t) = c.training_parallel().filter(|t| {
                t.tp > 0 && t.pp > 0 && t.dp > 0 && t.cp > 0 && t.ep > 0 && t.micro_batch > 0
            }) {
                let prod = t.tp * t.pp * t.dp * t.cp;
                if prod != s.num_gpus && !inconsistent {
                    e.push(format!(
                        "parallel: tp*pp*dp*cp = {prod} != system.num_gpus = {}",
                        s.num_gpus
                    ));
                }
                if (t.tp * t.dp * t.cp) % t.ep != 0 {
                    e.push(format!(
                        "parallel.ep = {} does not divide tp*dp*cp = {}",
                        t.ep,
                        t.tp * t.dp * t.cp
                    ));
                }
                if t.global_batch % (t.dp * t.micro_batch) != 0 && !inconsistent {
                    e.push(format!(
                        "parallel.global_batch = {} is not a multiple of dp*micro_batch = {}",
                        t.global_batch,
                        t.dp * t.micro_batch
                    ));
                }
                if t.vpp > 1 && t.pp == 1 {
                    e.push("parallel.vpp > 1 requires parallel.pp > 1".into());
                }
                if t.ep > 1 && m.moe.is_none() {
                    e.push("parallel.ep > 1 for a dense model".into());
                }
            }
            if let Some(t) = &c.training {
                if t.fp8_recipe.is_some() && t.precision != Precision::Fp8 {
                    e.push(
                        "training.fp8_recipe given but training.precision is not \"fp8\"".into(),
                    );
                }
                if !matches!(
                    t.precision,
                    Precision::Fp16 | Precision::Bf16 | Precision::Fp8
                ) {
                    e.push(format!(
                        "training.precision = {:?}: expected one of fp16, bf16, fp8",
                        t.precision
                    ));
                }
                if let Some(n) = t.recompute_layers {
                    if n == 0 {
                        e.push("training.recompute_layers = 0: expected a positive integer".into());
                    }
                    if t.recompute != Recompute::Full {
                        e.push("training.recompute_layers requires recompute = \"full\"".into());
                    }
                }
            }
        }
        Kind::Inference => {
            if c.training.is_some() {
                e.push("[case.training] present in an inference case".into());
            }
            if c.inference.is_none() {
                e.push("[case.inference] missing (required for kind = \"inference\")".into());
            }
            if c.reference.is_some() {
                e.push("[case.reference] is only defined for training cases".into());
            }
            for (k, v) in [
                ("cp", p.cp),
                ("vpp", p.vpp),
                ("zero_stage", p.zero_stage),
                ("micro_batch", p.micro_batch),
                ("global_batch", p.global_batch),
            ] {
                if v.is_some() {
                    e.push(format!(
                        "unknown key `parallel.{k}` for an inference case (allowed: tp, pp, dp, ep)"
                    ));
                }
            }
            if p.sp.is_some() {
                e.push(
                    "unknown key `parallel.sp` for an inference case (allowed: tp, pp, dp, ep)"
                        .into(),
                );
            }
            for (k, v) in [("tp", p.tp), ("pp", p.pp), ("dp", p.dp)] {
                match v {
                    None => e.push(format!(
                        "parallel.{k} missing (required for an inference case)"
                    )),
                    Some(0) => e.push(format!("parallel.{k} = 0: expected a positive integer")),
                    _ => {}
                }
            }
            if p.ep == Some(0) {
                e.push("parallel.ep = 0: expected a positive integer".into());
            }
            if let (Some(tp), Some(pp), Some(dp)) = (p.tp, p.pp, p.dp) {
                if tp * pp * dp != s.num_gpus && !inconsistent {
                    e.push(format!(
                        "parallel: tp*pp*dp = {} != system.num_gpus = {}",
                        tp * pp * dp,
                        s.num_gpus
                    ));
                }
            }
            if let Some(i) = &c.inference {
                if i.input_len == 0 || i.output_len == 0 {
                    e.push("inference.input_len and inference.output_len must be positive".into());
                }
                if i.batch == Batch::Max
                    && !matches!(i.mode, Mode::OfflineMaxThroughput | Mode::Server)
                {
                    e.push(
                        "inference.batch = \"max\" requires mode \"offline-max-throughput\" or \"server\""
                            .into(),
                    );
                }
            }
        }
    }
    // Measured.
    let me = &c.measured;
    let mut any = false;
    for (metric, v) in me.metrics() {
        any = true;
        if !metric.allowed(c.kind) {
            e.push(format!(
                "measured.{metric} is not a metric of a {} case",
                c.kind.name()
            ));
        }
        if !(v.is_finite() && v > 0.0) {
            e.push(format!(
                "measured.{metric} = {v}: expected a positive number"
            ));
        }
        if matches!(metric, Metric::Mfu | Metric::Hfu) && v > 1.0 {
            e.push(format!(
                "measured.{metric} = {v}: expected a fraction in (0, 1]"
            ));
        }
    }
    if !any {
        e.push("[case.measured] has no published metric".into());
    }
    let flop_metric = me.tflops_per_gpu.is_some() || me.mfu.is_some() || me.hfu.is_some();
    if flop_metric && me.flops_convention.is_none() {
        e.push(
            "measured.flops_convention missing (required with tflops_per_gpu, mfu or hfu): expected \"model\" or \"hardware\""
                .into(),
        );
    }
    if !flop_metric && me.flops_convention.is_some() {
        e.push("measured.flops_convention given without tflops_per_gpu, mfu or hfu".into());
    }
    if (me.mfu.is_some() || me.hfu.is_some()) && me.peak_tflops_basis.is_none() {
        e.push("measured.peak_tflops_basis missing (required with mfu or hfu)".into());
    }
    if let Some(b) = me.peak_tflops_basis {
        if !(b.is_finite() && b > 0.0) {
            e.push(format!(
                "measured.peak_tflops_basis = {b}: expected a positive number"
            ));
        }
    }
    if let Some(r) = &c.reference {
        if !(r.iteration_time_s.is_finite() && r.iteration_time_s > 0.0) {
            e.push("reference.iteration_time_s: expected a positive number".into());
        }
        if me.iteration_time_s.is_some() {
            e.push(
                "reference.iteration_time_s given although measured.iteration_time_s exists".into(),
            );
        }
    }
    e
}
