//! `technology-nodes`: a device derived from each process node (12 nm .. 1 nm) under the
//! reference die's area and power by the `tech/*` plugins, with the memory and network
//! generation of its time; a large model trained (best plan per node) and a model served at
//! each node; how the shares of compute, memory and network time shift.

use crate::common::{caption, model_err, pct, summary, StudyContext};
use crate::csv::{num, Csv};
use crate::error::StudyError;
use crate::plans::{describe, resolve};
use crate::svg::{Axis, Bar, BarGroup, Figure, Panel, PanelKind};
use crate::StudyOutput;
use perfcast_core::{
    DType, Engine, Interconnect, MemoryHierarchy, MemoryTier, Registry, System, TimeBound,
};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan, InferenceReport};
use perfcast_engine::training::{Training, TrainingPlan, TrainingReport};
use perfcast_plugin_technology::node::{NodeScaling, OperatingLimits, OperatingPoint};
use perfcast_plugin_technology::{derive_gpu, NodeGpuParams, ReferenceGpu};
use perfcast_search::SearchConfig;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    #[serde(default)]
    reference: ReferenceGpu,
    #[serde(default)]
    limits: OperatingLimits,
    nodes: Vec<NodeRow>,
    training: TrainingJob,
    inference: InferenceJob,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRow {
    label: String,
    node: NodeScaling,
    memory: MemoryGen,
    scale_up: String,
    scale_out: String,
    #[serde(default)]
    extra_formats: BTreeMap<DType, f64>,
}

#[derive(Debug, Deserialize, serde::Serialize)]
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
    /// Derived clock, GHz.
    pub clock_ghz: f64,
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
    let net = b.tp_comm.0 + b.cp_comm.0 + b.pp_comm.0 + b.dp_comm.0 + b.zero_comm.0;
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
    let gpu_params = json!({
        "name": format!("{} GPU", n.label),
        "node": n.node,
        "reference": cfg.reference,
        "limits": cfg.limits,
        "extra_formats": n.extra_formats,
    });
    let p: NodeGpuParams =
        perfcast_core::params::parse(&gpu_params).map_err(|e| bad("node", e.to_string()))?;
    let (_, point) = derive_gpu(&p).map_err(|e| bad("node", e.to_string()))?;
    let compute = registry
        .compute_unit("tech/node-scaled-gpu", &gpu_params)
        .map_err(|e| bad("node", e.to_string()))?;
    let sram: Arc<dyn MemoryTier> = registry
        .memory_tier(
            "tech/node-sram",
            &json!({"node": n.node, "limits": cfg.limits}),
        )
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
    let registry = crate::common::registry()?;
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
            clock_ghz: cfg.reference.clock_ghz * point.clock,
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

fn shares(v: &[f64; 4]) -> Vec<f64> {
    let t: f64 = v.iter().sum();
    v.iter()
        .map(|x| if t > 0.0 { 100.0 * x / t } else { 0.0 })
        .collect()
}

fn s0(r: &NodeResult) -> String {
    format!(
        "{:.0}",
        r.system
            .compute
            .peak(Engine::Matrix, DType::Bf16)
            .map(|p| p.tflops())
            .unwrap_or(0.0)
    )
}

pub fn run(ctx: &StudyContext) -> Result<StudyOutput, StudyError> {
    let res = evaluate(ctx)?;
    let mut csv = Csv::new(&[
        "node",
        "limit",
        "voltage_v",
        "clock_ghz",
        "mac_units_rel",
        "bf16_tflops",
        "sram_mb",
        "hbm_tbs",
        "hbm_gb",
        "scale_up_gbs",
        "scale_out_gbs",
        "train_plan",
        "train_iteration_s",
        "train_mfu",
        "train_compute_s",
        "train_memory_s",
        "train_network_s",
        "train_bubble_s",
        "ttft_ms",
        "tpot_ms",
        "prefill_compute_ms",
        "prefill_memory_ms",
        "prefill_network_ms",
        "prefill_overhead_ms",
        "decode_compute_ms",
        "decode_memory_ms",
        "decode_network_ms",
        "decode_overhead_ms",
    ]);
    for r in &res {
        let s = &r.system;
        let dev = s.memory.device();
        let sram = s
            .memory
            .tiers
            .iter()
            .find(|t| t.level() == perfcast_core::TierLevel::OnChip);
        let mut row = vec![
            r.label.clone(),
            r.point.limit.name().to_string(),
            num(r.point.voltage),
            num(r.clock_ghz),
            num(r.point.mac_units),
            num(s
                .compute
                .peak(Engine::Matrix, DType::Bf16)
                .map(|p| p.tflops())
                .unwrap_or(0.0)),
            num(sram.map(|t| t.capacity().0 / 1e6).unwrap_or(0.0)),
            num(dev.map(|t| t.bandwidth().0 / 1e12).unwrap_or(0.0)),
            num(dev.map(|t| t.capacity().gb()).unwrap_or(0.0)),
            num(s.network[0].bandwidth().gbs()),
            num(s.network[1].bandwidth().gbs()),
            describe(&r.plan),
            num(r.training.iteration_time.0),
            num(r.training.mfu),
        ];
        for v in r.train_shares {
            row.push(num(v));
        }
        row.push(num(r.inference.ttft.millis()));
        row.push(num(r.inference.tpot.millis()));
        for v in r.prefill_shares.iter().chain(&r.decode_shares) {
            row.push(num(v * 1e3));
        }
        csv.row(row);
    }
    let bars = |f: &dyn Fn(&NodeResult) -> ([f64; 4], String)| -> Vec<BarGroup> {
        vec![BarGroup {
            label: String::new(),
            bars: res
                .iter()
                .map(|r| {
                    let (v, note) = f(r);
                    Bar {
                        label: r.label.clone(),
                        segments: shares(&v),
                        note,
                    }
                })
                .collect(),
        }]
    };
    let series: Vec<String> = CATEGORIES.iter().map(|s| s.to_string()).collect();
    let panel = |title: String, groups: Vec<BarGroup>| Panel {
        title,
        y: Axis {
            label: "share of time (%)".into(),
            scale: crate::svg::Scale::Linear,
            range: Some((0.0, 112.0)),
        },
        kind: PanelKind::StackedBars {
            series: series.clone(),
            groups,
            reference: None,
        },
    };
    let tm = res.first().map(|r| r.training.devices).unwrap_or(0);
    let fig = Figure {
        title: ctx.info.title.to_string(),
        width: 1100.0,
        panel_height: 400.0,
        panels: vec![
            panel(
                format!("Training GPT-3 175B, best plan per node ({tm} GPUs)\nbar note: iteration time; compute-bound = GEMMs and attention, memory-bound = vector ops and optimizer"),
                bars(&|r| {
                    (
                        r.train_shares,
                        format!("{:.2} s", r.training.iteration_time.0),
                    )
                }),
            ),
            panel(
                "Serving Llama-2 70B (TP 8): prefill\nbar note: TTFT; GEMM time split by each GEMM's roofline bound".into(),
                bars(&|r| {
                    (
                        r.prefill_shares,
                        format!("{:.0} ms", r.inference.ttft.millis()),
                    )
                }),
            ),
            panel(
                "Serving Llama-2 70B (TP 8): one decode step\nbar note: TPOT; fixed overheads = kernel/graph launch and per-collective costs".into(),
                bars(&|r| {
                    (
                        r.decode_shares,
                        format!("{:.1} ms", r.inference.tpot.millis()),
                    )
                }),
            ),
        ],
        caption: caption(ctx),
    };
    let svg = fig.render()?;

    let (first, last) = match (res.first(), res.last()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(ctx.bad("nodes", "needs at least one node")),
    };
    let frac = |v: &[f64; 4], i: usize| v[i] / v.iter().sum::<f64>().max(1e-300);
    let limits: Vec<String> = res
        .iter()
        .map(|r| format!("{}: {}", r.label, r.point.limit.name()))
        .collect();
    let bw = |r: &NodeResult| {
        r.system
            .memory
            .device()
            .map(|t| t.bandwidth().0)
            .unwrap_or(1.0)
    };
    let top = (0..4)
        .max_by(|a, b| last.decode_shares[*a].total_cmp(&last.decode_shares[*b]))
        .unwrap_or(0);
    let finding = format!(
        "From {} to {} the derived GPU's bf16 peak grows x{:.1} ({} -> {} TFLOP/s: x{:.1} more MACs in the same area, clock x{:.2} under the same power; {}), device-memory bandwidth x{:.1} and NVLink x{:.1}. Training GPT-3 175B speeds up x{:.1} ({:.1} -> {:.1} s per step, best plan at {}: {}); the compute-bound share goes {} -> {}, memory-bound ops {} -> {}, exposed network {} -> {}, bubble {} -> {}. Serving speeds up x{:.1} in prefill (TTFT {:.0} -> {:.0} ms) but x{:.1} in decode (TPOT {:.1} -> {:.1} ms; decode memory-bound share {} -> {}, fixed overheads {} -> {}); at {} the largest part of a decode step is {} ({}).",
        first.label,
        last.label,
        last.point.throughput / first.point.throughput,
        s0(first),
        s0(last),
        last.point.mac_units / first.point.mac_units,
        last.point.clock / first.point.clock,
        limits.join(", "),
        bw(last) / bw(first),
        last.system.network[0].bandwidth().0 / first.system.network[0].bandwidth().0,
        first.training.iteration_time.0 / last.training.iteration_time.0,
        first.training.iteration_time.0,
        last.training.iteration_time.0,
        last.label,
        describe(&last.plan),
        pct(frac(&first.train_shares, 0)),
        pct(frac(&last.train_shares, 0)),
        pct(frac(&first.train_shares, 1)),
        pct(frac(&last.train_shares, 1)),
        pct(frac(&first.train_shares, 2)),
        pct(frac(&last.train_shares, 2)),
        pct(frac(&first.train_shares, 3)),
        pct(frac(&last.train_shares, 3)),
        first.inference.ttft.0 / last.inference.ttft.0,
        first.inference.ttft.millis(),
        last.inference.ttft.millis(),
        first.inference.tpot.0 / last.inference.tpot.0,
        first.inference.tpot.millis(),
        last.inference.tpot.millis(),
        pct(frac(&first.decode_shares, 1)),
        pct(frac(&last.decode_shares, 1)),
        pct(frac(&first.decode_shares, 3)),
        pct(frac(&last.decode_shares, 3)),
        last.label,
        CATEGORIES[top],
        pct(frac(&last.decode_shares, top)),
    );
    Ok(StudyOutput {
        name: ctx.info.name.to_string(),
        csv: csv.render(),
        svg,
        summary: summary(ctx, &finding),
        finding,
    })
}
