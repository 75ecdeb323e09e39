//! `technology-nodes`: a device derived from each process node (12 nm .. 1 nm) under the
//! reference die's area and power by the `tech/*` plugins, with the memory and network
//! generation of its time; a large model trained (best plan per node) and a model served at
//! each node; how the shares of compute, memory and network time shift.

use crate::common::{model_err, StudyContext};
use crate::error::StudyError;
use crate::plans::resolve;
use perfcast_core::{
    DType, Interconnect, MemoryHierarchy, MemoryTier, Registry, System, TimeBound,
};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan, InferenceReport};
use perfcast_engine::training::{Training, TrainingPlan, TrainingReport};
use perfcast_search::SearchConfig;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

pub mod node;
mod output;

pub use output::run;

use node::OperatingPoint;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    #[serde(default)]
    reference: Reference,
    /// Operating-point limits of the derivation (the `tech/*` plugins' `limits`; their
    /// defaults when absent).
    #[serde(default)]
    limits: Option<serde_json::Value>,
    nodes: Vec<NodeRow>,
    training: TrainingJob,
    inference: InferenceJob,
}

/// The device the scaling starts from, passed to the `tech/node-scaled-gpu` plugin as its
/// `reference`: a field left out takes the plugin's default (A100-SXM4 on TSMC N7).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Dense matrix peaks per format, TFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    matrix_tflops: Option<BTreeMap<DType, f64>>,
    /// Vector peaks per format, TFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vector_tflops: Option<BTreeMap<DType, f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sm_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clock_ghz: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRow {
    label: String,
    /// The node row relative to the reference node (the `tech/*` plugins' `node`).
    node: serde_json::Value,
    memory: MemoryGen,
    scale_up: String,
    scale_out: String,
    #[serde(default)]
    extra_formats: BTreeMap<DType, f64>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MemoryGen {
    generation: String,
    units: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainingJob {
    model: String,
    gpus: u32,
    global_batch: u32,
    /// GPUs per NVLink domain.
    domain_size: u32,
    /// The plan search (perfcast-search's `[search]` section).
    #[serde(default)]
    search: SearchConfig,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InferenceJob {
    model: String,
    tp: u32,
    batch: u32,
    input_len: u32,
    output_len: u32,
    /// Replay decode steps as captured CUDA graphs (no host launch cost per kernel).
    #[serde(default)]
    graph_capture: bool,
}

/// Time-share categories (the stacked segments).
pub const CATEGORIES: [&str; 4] = [
    "compute-bound",
    "memory-bound",
    "network (exposed)",
    "bubble / fixed overheads",
];

/// One node's results.
pub struct NodeResult {
    pub label: String,
    pub point: OperatingPoint,
    pub system: System,
    pub plan: TrainingPlan,
    pub training: TrainingReport,
    pub inference: InferenceReport,
    /// Seconds per category: training step, prefill pass, mean decode step.
    pub train_shares: [f64; 4],
    pub prefill_shares: [f64; 4],
    pub decode_shares: [f64; 4],
}

/// Training step split into the categories; sums to the iteration time.
pub fn training_split(r: &TrainingReport) -> [f64; 4] {
    let b = &r.breakdown;
    let c = &b.compute;
    let matrix = c.gemm + c.attention;
    let other = b.compute.total() - matrix + b.optimizer.0;
    let net = b.exposed_comm().0;
    [matrix, other, net, b.bubble.0]
}

/// Inference phase split; matrix time divided between compute- and memory-bound by the
/// GEMM roofline's per-op bounds (weighted by count x time). Sums to the phase time.
fn inference_split(
    inf: &Inference,
    plan: &InferencePlan,
    r: &InferenceReport,
) -> Result<([f64; 4], [f64; 4]), perfcast_core::ModelError> {
    let points = inf.gemm_roofline(plan)?;
    let mut out = [[0.0; 4]; 2];
    for (k, phase) in [(0, &r.prefill), (1, &r.decode)] {
        let want = if k == 0 { "prefill" } else { "decode" };
        let (mut c, mut m) = (0.0, 0.0);
        for p in points.iter().filter(|p| p.phase.name() == want) {
            let w = p.count as f64 * p.time.0;
            if p.bound == TimeBound::Compute {
                c += w;
            } else {
                m += w;
            }
        }
        let steps = phase.steps.max(1) as f64;
        let matrix = (phase.gemm.0 + phase.attention.0) / steps;
        let fc = if c + m > 0.0 { c / (c + m) } else { 0.0 };
        out[k] = [
            matrix * fc,
            matrix * (1.0 - fc) + phase.other_ops.0 / steps,
            phase.communication.0 / steps,
            phase.overheads.0 / steps,
        ];
    }
    Ok((out[0], out[1]))
}

fn build_system(
    ctx: &StudyContext,
    registry: &Registry,
    cfg: &Config,
    i: usize,
    devices: u32,
    domain: u32,
) -> Result<(System, OperatingPoint), StudyError> {
    let n = &cfg.nodes[i];
    let key = format!("nodes[{i}]");
    let bad = |k: &str, e: String| ctx.bad(&format!("{key}.{k}"), e);
    // The node and, when the config sets them, the limits: what every tech/* plugin takes.
    let with_node = |mut v: serde_json::Value| {
        v["node"] = n.node.clone();
        if let Some(l) = &cfg.limits {
            v["limits"] = l.clone();
        }
        v
    };
    let gpu_params = with_node(json!({
        "name": format!("{} GPU", n.label),
        "reference": cfg.reference,
        "extra_formats": n.extra_formats,
    }));
    let compute = registry
        .compute_unit("tech/node-scaled-gpu", &gpu_params)
        .map_err(|e| bad("node", e.to_string()))?;
    let point = OperatingPoint::of(compute.as_ref()).map_err(|e| bad("node", e))?;
    let sram: Arc<dyn MemoryTier> = registry
        .memory_tier("tech/node-sram", &with_node(json!({})))
        .map_err(|e| bad("node", e.to_string()))?;
    let dram = registry
        .memory_tier(
            "tech/dram-generation",
            &serde_json::to_value(&n.memory).unwrap_or_default(),
        )
        .map_err(|e| bad("memory", e.to_string()))?;
    let up: Arc<dyn Interconnect> = registry
        .interconnect(
            "tech/link-generation",
            &json!({"generation": n.scale_up, "domain_size": domain}),
        )
        .map_err(|e| bad("scale_up", e.to_string()))?;
    let out = registry
        .interconnect("tech/link-generation", &json!({"generation": n.scale_out}))
        .map_err(|e| bad("scale_out", e.to_string()))?;
    Ok((
        System {
            name: n.label.clone(),
            compute,
            memory: MemoryHierarchy::new(vec![sram, dram]),
            network: vec![up, out],
            topology: None,
            devices,
        },
        point,
    ))
}

/// Evaluate every node.
pub fn evaluate(ctx: &StudyContext) -> Result<Vec<NodeResult>, StudyError> {
    let cfg: Config = ctx.parse()?;
    if cfg.nodes.is_empty() {
        return Err(ctx.bad("nodes", "needs at least one [[nodes]] entry"));
    }
    let search = resolve(ctx, "training.search", &cfg.training.search)?;
    let t = &cfg.training;
    if t.gpus == 0 || t.global_batch == 0 || t.domain_size == 0 {
        return Err(ctx.bad(
            "training",
            "gpus, global_batch and domain_size must be >= 1",
        ));
    }
    let inf = &cfg.inference;
    if inf.tp == 0 || inf.batch == 0 || inf.input_len == 0 || inf.output_len < 2 {
        return Err(ctx.bad(
            "inference",
            "tp, batch and input_len must be >= 1 and output_len >= 2 (decode steps)",
        ));
    }
    let registry = crate::common::registry(&ctx.plugins)?;
    let tmodel = ctx.model("training.model", &t.model)?;
    let imodel = ctx.model("inference.model", &inf.model)?;
    let mut out = Vec::new();
    for i in 0..cfg.nodes.len() {
        let label = cfg.nodes[i].label.clone();
        let (tsys, point) = build_system(ctx, &registry, &cfg, i, t.gpus, t.domain_size)?;
        let training = Training::new(tmodel.clone(), tsys.clone(), &registry)
            .map_err(model_err(format!("training at {label}")))?;
        let best = search.best(
            ctx,
            "training.search",
            &format!("training at {label}"),
            &training,
            t.global_batch,
            &[DType::Bf16, DType::Fp16, DType::Fp8],
        )?;
        let (isys, _) = build_system(ctx, &registry, &cfg, i, inf.tp, t.domain_size)?;
        let inference = Inference::new(imodel.clone(), isys, InferenceOptions::default())
            .map_err(model_err(format!("inference at {label}")))?;
        let plan = InferencePlan {
            tp: inf.tp,
            graph_capture: inf.graph_capture,
            ..InferencePlan::new(inf.batch, inf.input_len, inf.output_len)
        };
        let ir = inference
            .evaluate(&plan)
            .map_err(model_err(format!("inference at {label}")))?;
        let (pre, dec) = inference_split(&inference, &plan, &ir)
            .map_err(model_err(format!("GEMM roofline at {label}")))?;
        out.push(NodeResult {
            label,
            point,
            system: tsys,
            train_shares: training_split(&best.report),
            plan: best.plan,
            training: best.report,
            inference: ir,
            prefill_shares: pre,
            decode_shares: dec,
        });
    }
    Ok(out)
}
