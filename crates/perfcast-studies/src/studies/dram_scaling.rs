//! `dram-scaling`: one inference job on one GPU whose device memory moves through DRAM
//! generations (HBM2e .. HBM4e, and GDDR7 / LPDDR5X for contrast), bandwidth and capacity
//! together and each alone; which latency falls (TPOT) and which does not (TTFT).

use crate::common::{caption, device_tier, model_err, MixedTier, StudyContext};
use crate::error::StudyError;
use crate::StudyOutput;
use perfcast_core::{MemoryHierarchy, MemoryTier, System};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan, InferenceReport};
use perfcast_render::figure::{Axis, Figure, Panel, PanelKind};
use perfcast_render::{num6, Table};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    /// Hardware/system file whose compute unit, on-chip memory and network are kept.
    compute_system: String,
    model: String,
    tp: u32,
    batch: u32,
    input_len: u32,
    output_len: u32,
    /// Largest batch tried for the throughput at the largest batch that fits.
    max_batch_limit: u32,
    /// Replay decode steps as captured CUDA graphs.
    #[serde(default)]
    graph_capture: bool,
    /// Label of the memory the one-property variants hold the other property at.
    baseline: String,
    memories: Vec<Memory>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Memory {
    label: String,
    generation: String,
    units: u32,
    #[serde(default)]
    unit_bandwidth_gbs: Option<f64>,
    #[serde(default)]
    unit_capacity_gb: Option<f64>,
    /// Not HBM: plotted for contrast, excluded from the generation trend.
    #[serde(default)]
    contrast: bool,
}

/// How a memory was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Bandwidth and capacity of the generation.
    Both,
    /// The generation's bandwidth, the baseline's capacity.
    BandwidthOnly,
    /// The generation's capacity, the baseline's bandwidth.
    CapacityOnly,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Both, Variant::BandwidthOnly, Variant::CapacityOnly];
    pub const fn name(self) -> &'static str {
        match self {
            Variant::Both => "bandwidth + capacity",
            Variant::BandwidthOnly => "bandwidth only",
            Variant::CapacityOnly => "capacity only",
        }
    }
}

/// One evaluated (memory, variant).
#[derive(Debug, Clone)]
pub struct Row {
    pub memory: String,
    pub contrast: bool,
    pub variant: Variant,
    pub bandwidth_tbs: f64,
    pub capacity_gb: f64,
    pub at_batch: InferenceReport,
    /// Largest batch that fits (capped), and the report there; `None` if one sequence does not fit.
    pub max_batch: Option<(u32, InferenceReport)>,
}

/// Evaluate every memory under every variant.
pub fn evaluate(ctx: &StudyContext) -> Result<Vec<Row>, StudyError> {
    let cfg: Config = ctx.parse()?;
    if cfg.tp == 0 || cfg.batch == 0 || cfg.input_len == 0 || cfg.max_batch_limit == 0 {
        return Err(ctx.bad(
            "tp",
            "tp, batch, input_len and max_batch_limit must be >= 1",
        ));
    }
    if cfg.output_len < 2 {
        return Err(ctx.bad("output_len", "must be >= 2 (at least one decode step)"));
    }
    if cfg.memories.is_empty() {
        return Err(ctx.bad("memories", "needs at least one [[memories]] entry"));
    }
    let model = ctx.model("model", &cfg.model)?;
    let base_sys = ctx.system("compute_system", &cfg.compute_system, cfg.tp)?;
    let (dev_i, _) = device_tier(&base_sys)
        .ok_or_else(|| ctx.bad("compute_system", "the system has no device-memory tier"))?;
    let registry = crate::common::registry(&ctx.plugins)?;
    let mut tiers: Vec<Arc<dyn MemoryTier>> = Vec::new();
    for (i, m) in cfg.memories.iter().enumerate() {
        // The technology plugin's DRAM generation; every memory at the same achievable
        // fraction and latency, so that only the generation's bandwidth and capacity differ.
        let params = json!({
            "generation": m.generation,
            "units": m.units,
            "unit_bandwidth_gbs": m.unit_bandwidth_gbs,
            "unit_capacity_gb": m.unit_capacity_gb,
            "efficiency": 0.9,
            "latency_ns": 500.0,
        });
        let t = registry
            .memory_tier("tech/dram-generation", &params)
            .map_err(|e| ctx.bad(&format!("memories[{i}]"), e.to_string()))?;
        tiers.push(t);
    }
    let base = cfg
        .memories
        .iter()
        .position(|m| m.label == cfg.baseline)
        .ok_or_else(|| {
            ctx.bad(
                "baseline",
                format!(
                    "`{}` is not the label of a [[memories]] entry; labels: {}",
                    cfg.baseline,
                    cfg.memories
                        .iter()
                        .map(|m| m.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
    let plan = InferencePlan {
        tp: cfg.tp,
        graph_capture: cfg.graph_capture,
        ..InferencePlan::new(cfg.batch, cfg.input_len, cfg.output_len)
    };
    let mut rows = Vec::new();
    for (i, m) in cfg.memories.iter().enumerate() {
        for v in Variant::ALL {
            let (speed, cap) = match v {
                Variant::Both => (&tiers[i], &tiers[i]),
                Variant::BandwidthOnly => (&tiers[i], &tiers[base]),
                Variant::CapacityOnly => (&tiers[base], &tiers[i]),
            };
            let mut mem: Vec<Arc<dyn MemoryTier>> = base_sys
                .memory
                .tiers
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != dev_i)
                .map(|(_, t)| t.clone())
                .collect();
            mem.push(Arc::new(MixedTier {
                speed: speed.clone(),
                capacity: cap.capacity(),
            }));
            let sys = System {
                name: format!("{} with {} ({})", base_sys.name, m.label, v.name()),
                memory: MemoryHierarchy::new(mem),
                ..base_sys.clone()
            };
            let what = format!("{} ({})", m.label, v.name());
            let inf = Inference::new(model.clone(), sys, InferenceOptions::default())
                .map_err(model_err(what.clone()))?;
            let at_batch = inf.evaluate(&plan).map_err(model_err(what.clone()))?;
            let max_batch = match inf.max_batch(&plan) {
                Ok(b) => {
                    let b = b.min(cfg.max_batch_limit);
                    let r = inf
                        .evaluate(&InferencePlan {
                            batch: b,
                            ..plan.clone()
                        })
                        .map_err(model_err(what.clone()))?;
                    Some((b, r))
                }
                Err(_) => None,
            };
            rows.push(Row {
                memory: m.label.clone(),
                contrast: m.contrast,
                variant: v,
                bandwidth_tbs: speed.bandwidth().0 / 1e12,
                capacity_gb: cap.capacity().gb(),
                at_batch,
                max_batch,
            });
        }
    }
    Ok(rows)
}

/// Run the study: the CSV, the figure and the finding.
pub fn run(ctx: &StudyContext) -> Result<StudyOutput, StudyError> {
    let rows = evaluate(ctx)?;
    StudyOutput::new(ctx, table(&rows), figure(ctx, &rows), finding(&rows))
}

/// Every number: one row per (memory, variant).
fn table(rows: &[Row]) -> Table {
    let mut csv = Table::with_headers(&[
        "memory",
        "variant",
        "contrast",
        "bandwidth_tbs",
        "capacity_gb",
        "batch",
        "ttft_ms",
        "tpot_ms",
        "latency_ms",
        "tokens_per_s",
        "fits_at_batch",
        "decode_memory_bytes_per_step",
        "max_batch",
        "tokens_per_s_at_max_batch",
        "tpot_ms_at_max_batch",
    ]);
    for r in rows {
        let a = &r.at_batch;
        csv.push(vec![
            r.memory.clone(),
            r.variant.name().into(),
            r.contrast.to_string(),
            num6(r.bandwidth_tbs),
            num6(r.capacity_gb),
            a.plan.batch.to_string(),
            num6(a.ttft.millis()),
            num6(a.tpot.millis()),
            num6(a.latency.millis()),
            num6(a.tokens_per_s),
            a.memory.fits.to_string(),
            num6(a.decode.device_bytes / a.decode.steps.max(1) as f64),
            r.max_batch
                .as_ref()
                .map(|m| m.0.to_string())
                .unwrap_or_else(|| "0".into()),
            num6(
                r.max_batch
                    .as_ref()
                    .map(|m| m.1.tokens_per_s)
                    .unwrap_or(0.0),
            ),
            num6(
                r.max_batch
                    .as_ref()
                    .map(|m| m.1.tpot.millis())
                    .unwrap_or(0.0),
            ),
        ]);
    }
    csv
}

/// Latency at the configured batch and throughput at the largest batch, per memory.
fn figure(ctx: &StudyContext, rows: &[Row]) -> Figure {
    let labels: Vec<String> = rows
        .iter()
        .filter(|r| r.variant == Variant::Both)
        .map(|r| r.memory.clone())
        .collect();
    let get = |v: Variant, f: &dyn Fn(&Row) -> f64| -> Vec<f64> {
        rows.iter().filter(|r| r.variant == v).map(f).collect()
    };
    let batch = rows.first().map(|r| r.at_batch.plan.batch).unwrap_or(0);
    Figure {
        title: ctx.info.title.to_string(),
        width: 1100.0,
        panel_height: 430.0,
        panels: vec![
            Panel {
                title: format!("Latency at batch {batch}\neach memory's bandwidth and capacity (capacity alone leaves latency unchanged: see the CSV)"),
                y: Axis::log("latency (ms, log)"),
                kind: PanelKind::CategoryLines {
                    categories: labels.clone(),
                    series: vec![
                        (
                            "TTFT (prefill)".into(),
                            get(Variant::Both, &|r| r.at_batch.ttft.millis()),
                        ),
                        (
                            "TPOT (decode step)".into(),
                            get(Variant::Both, &|r| r.at_batch.tpot.millis()),
                        ),
                    ],
                },
            },
            Panel {
                title: "Throughput at the largest batch that fits (capacity sets the batch)".into(),
                y: Axis::log("output tokens/s per replica (log)"),
                kind: PanelKind::CategoryLines {
                    categories: labels.clone(),
                    series: Variant::ALL
                        .iter()
                        .map(|v| {
                            (
                                v.name().to_string(),
                                get(*v, &|r| {
                                    r.max_batch
                                        .as_ref()
                                        .map(|m| m.1.tokens_per_s)
                                        .unwrap_or(0.0)
                                        .max(1e-3)
                                }),
                            )
                        })
                        .collect(),
                },
            },
        ],
        caption: caption(ctx),
    }
}

/// The finding: how TPOT and TTFT move with bandwidth, where TPOT saturates, what capacity
/// does, and the contrast memories.
fn finding(rows: &[Row]) -> String {
    let trend: Vec<&Row> = rows
        .iter()
        .filter(|r| r.variant == Variant::Both && !r.contrast)
        .collect();
    match (trend.first(), trend.last()) {
        (Some(a), Some(b)) => {
            let bw = b.bandwidth_tbs / a.bandwidth_tbs;
            let tpot = a.at_batch.tpot.0 / b.at_batch.tpot.0;
            let ttft = a.at_batch.ttft.0 / b.at_batch.ttft.0;
            let thr = |r: &Row| r.max_batch.as_ref().map(|m| (m.0, m.1.tokens_per_s));
            let contrast: Vec<String> = rows
                .iter()
                .filter(|r| r.variant == Variant::Both && r.contrast)
                .map(|r| {
                    format!(
                        "{} ({:.2} TB/s, {:.0} GB): TPOT {:.1} ms, TTFT {:.0} ms",
                        r.memory,
                        r.bandwidth_tbs,
                        r.capacity_gb,
                        r.at_batch.tpot.millis(),
                        r.at_batch.ttft.millis()
                    )
                })
                .collect();
            let sat = trend
                .windows(2)
                .find(|w| w[0].at_batch.tpot.0 / w[1].at_batch.tpot.0 < 1.02)
                .map(|w| {
                    let d = &w[1].at_batch.decode;
                    let st = d.steps.max(1) as f64 * 1e-3;
                    format!(
                        " TPOT stops falling at {} (x{:.2} more bandwidth gains <2%): a decode step there is {:.2} ms GEMMs, {:.2} ms attention, {:.2} ms other ops, {:.2} ms communication and {:.2} ms fixed overheads, so memory is no longer what bounds it.",
                        w[1].memory,
                        w[1].bandwidth_tbs / w[0].bandwidth_tbs,
                        d.gemm.0 / st,
                        d.attention.0 / st,
                        d.other_ops.0 / st,
                        d.communication.0 / st,
                        d.overheads.0 / st,
                    )
                })
                .unwrap_or_default();
            format!(
                "From {} to {} device-memory bandwidth grows x{bw:.1}: TPOT (decode) falls x{tpot:.2} ({:.1} -> {:.1} ms) and TTFT (prefill) x{ttft:.2} ({:.0} -> {:.0} ms).{sat} Capacity leaves latency at a fixed batch unchanged but sets the largest batch: throughput at the largest batch that fits goes {} -> {}. For contrast: {}.",
                a.memory,
                b.memory,
                a.at_batch.tpot.millis(),
                b.at_batch.tpot.millis(),
                a.at_batch.ttft.millis(),
                b.at_batch.ttft.millis(),
                thr(a)
                    .map(|(n, t)| format!("{t:.0} tok/s at batch {n}"))
                    .unwrap_or_else(|| "none (does not fit)".into()),
                thr(b)
                    .map(|(n, t)| format!("{t:.0} tok/s at batch {n}"))
                    .unwrap_or_else(|| "none (does not fit)".into()),
                if contrast.is_empty() {
                    "none configured".into()
                } else {
                    contrast.join("; ")
                }
            )
        }
        _ => "No HBM generation configured.".into(),
    }
}
