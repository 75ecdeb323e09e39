//! The study's outputs: every number per node (CSV), the time shares per node as stacked
//! bars (training step, prefill, decode step), and the finding.

use super::{evaluate, NodeResult, CATEGORIES};
use crate::common::{caption, StudyContext};
use crate::error::StudyError;
use crate::StudyOutput;
use perfcast_core::{DType, Engine, TierLevel};
use perfcast_render::figure::{Axis, Bar, BarGroup, Figure, Panel, PanelKind, Scale};
use perfcast_render::{num6, pct, plan_label, PlanStyle, Table};

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

/// Run the study: the CSV, the figure and the finding.
pub fn run(ctx: &StudyContext) -> Result<StudyOutput, StudyError> {
    let res = evaluate(ctx)?;
    StudyOutput::new(ctx, table(&res), figure(ctx, &res), finding(ctx, &res)?)
}

/// Every number: one row per node.
fn table(res: &[NodeResult]) -> Table {
    let mut csv = Table::with_headers(&[
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
    for r in res {
        let s = &r.system;
        let dev = s.memory.device();
        let sram = s
            .memory
            .tiers
            .iter()
            .find(|t| t.level() == TierLevel::OnChip);
        let mut row = vec![
            r.label.clone(),
            r.point.limit.clone(),
            num6(r.point.voltage),
            num6(r.point.clock_ghz),
            num6(r.point.mac_units),
            num6(
                s.compute
                    .peak(Engine::Matrix, DType::Bf16)
                    .map(|p| p.tflops())
                    .unwrap_or(0.0),
            ),
            num6(sram.map(|t| t.capacity().0 / 1e6).unwrap_or(0.0)),
            num6(dev.map(|t| t.bandwidth().0 / 1e12).unwrap_or(0.0)),
            num6(dev.map(|t| t.capacity().gb()).unwrap_or(0.0)),
            num6(s.network[0].bandwidth().gbs()),
            num6(s.network[1].bandwidth().gbs()),
            plan_label(&r.plan, PlanStyle::Brief),
            num6(r.training.iteration_time.0),
            num6(r.training.mfu),
        ];
        for v in r.train_shares {
            row.push(num6(v));
        }
        row.push(num6(r.inference.ttft.millis()));
        row.push(num6(r.inference.tpot.millis()));
        for v in r.prefill_shares.iter().chain(&r.decode_shares) {
            row.push(num6(v * 1e3));
        }
        csv.push(row);
    }
    csv
}

/// Three panels of time shares per node: the training step, prefill, one decode step.
fn figure(ctx: &StudyContext, res: &[NodeResult]) -> Figure {
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
            scale: Scale::Linear,
            range: Some((0.0, 112.0)),
        },
        kind: PanelKind::StackedBars {
            series: series.clone(),
            groups,
            reference: None,
        },
    };
    let tm = res.first().map(|r| r.training.devices).unwrap_or(0);
    Figure {
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
    }
}

/// The finding: how the derived device, the training step and serving change from the first
/// node to the last, and what bounds a decode step at the last.
fn finding(ctx: &StudyContext, res: &[NodeResult]) -> Result<String, StudyError> {
    let (first, last) = match (res.first(), res.last()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(ctx.bad("nodes", "needs at least one node")),
    };
    let frac = |v: &[f64; 4], i: usize| v[i] / v.iter().sum::<f64>().max(1e-300);
    let limits: Vec<String> = res
        .iter()
        .map(|r| format!("{}: {}", r.label, r.point.limit))
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
    Ok(format!(
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
        plan_label(&last.plan, PlanStyle::Brief),
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
    ))
}
