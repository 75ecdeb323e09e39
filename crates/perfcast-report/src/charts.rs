//! Charts of engine reports for the CLI's `--plot` (texts inherit the root's font).

use perfcast_engine::training::{StageField, StageMemory, TrainingReport};
use perfcast_render::axis::{linear_ticks, tick_label};
use perfcast_render::marks::{stack, Legend};
use perfcast_render::palette::{pick, TAB16};
use perfcast_render::svg::{Px, Svg};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 480.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 60.0;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

/// `predict --plot`: two panels, the step time as one stacked bar (compute per op class,
/// exposed communication, bubble, optimizer; the parts sum to the iteration time) and one
/// stacked bar of device memory per pipeline stage against the capacity line.
pub fn training_svg(
    model: &str,
    system: &str,
    r: &TrainingReport,
    stages: &[StageMemory],
) -> String {
    let mut s = Svg::plain(WIDTH, HEIGHT);
    s.el("text")
        .attr("x", 20)
        .attr("y", 22)
        .attr("font-size", 14)
        .text(&format!(
            "{model} on {system}: {:.3} s per step, MFU {:.1}%",
            r.iteration_time.0,
            100.0 * r.mfu
        ))
        .nl();
    time_bar(&mut s, r);
    memory_bars(&mut s, r, stages);
    s.finish()
}

/// A legend row: a 10 px swatch at (x, y) and `label` beside it.
fn swatch_row(s: &mut Svg, x: f64, y: f64, color: &str, label: &str) {
    s.el("rect")
        .attr("x", Px(x))
        .attr("y", Px(y))
        .attr("width", 10)
        .attr("height", 10)
        .attr("fill", color)
        .end();
    s.el("text")
        .attr("x", Px(x + 15.0))
        .attr("y", Px(y + 9.0))
        .text(label);
}

/// A vertical value axis at `x` from 0 (at `bottom`) to `max` (at `TOP`): the axis line, and
/// "nice" ticks with their labels to its left.
fn y_axis(s: &mut Svg, x: f64, bottom: f64, max: f64) {
    s.el("line")
        .attr("x1", Px(x))
        .attr("y1", Px(bottom))
        .attr("x2", Px(x))
        .attr("y2", Px(TOP))
        .attr("stroke", "#333")
        .end();
    if !(max > 0.0 && max.is_finite()) {
        return;
    }
    for t in linear_ticks(0.0, max) {
        let y = bottom - PLOT_H * t / max;
        s.el("line")
            .attr("x1", Px(x - 4.0))
            .attr("y1", Px(y))
            .attr("x2", Px(x))
            .attr("y2", Px(y))
            .attr("stroke", "#333")
            .end();
        s.el("text")
            .attr("x", Px(x - 6.0))
            .attr("y", Px(y + 4.0))
            .attr("text-anchor", "end")
            .text(&tick_label(t))
            .nl();
    }
}

/// The parts of the step time, in stacking order (positive and finite ones only); they add
/// up to the iteration time.
fn time_parts(r: &TrainingReport) -> Vec<(String, f64)> {
    let b = &r.breakdown;
    let mut parts: Vec<(String, f64)> = b
        .compute
        .fields()
        .into_iter()
        .map(|(n, v)| (format!("compute {n}"), v))
        .collect();
    parts.extend([
        ("exposed TP comm".to_string(), b.tp_comm.0),
        ("exposed CP comm".to_string(), b.cp_comm.0),
        ("pipeline p2p".to_string(), b.pp_comm.0),
        ("exposed DP comm".to_string(), b.dp_comm.0),
        ("exposed ZeRO comm".to_string(), b.zero_comm.0),
        ("exposed EP comm".to_string(), b.ep_comm.0),
    ]);
    parts.extend(
        b.axes
            .iter()
            .map(|(n, t)| (format!("exposed {n} comm"), t.0)),
    );
    parts.extend([
        ("pipeline bubble".to_string(), b.bubble.0),
        ("optimizer".to_string(), b.optimizer.0),
    ]);
    parts.retain(|(_, v)| v.is_finite() && *v > 0.0);
    parts
}

/// Panel 1: the time bar, its parts named in the legend beside it.
fn time_bar(s: &mut Svg, r: &TrainingReport) {
    s.el("text")
        .attr("x", 20)
        .attr("y", 44)
        .text("Time per step (critical stage), s")
        .nl();
    let parts = time_parts(r);
    let total: f64 = parts.iter().map(|p| p.1).sum();
    let (bx, bw) = (50.0, 60.0);
    y_axis(s, bx - 4.0, TOP + PLOT_H, total);
    let percent = |v: f64| if total > 0.0 { 100.0 * v / total } else { 0.0 };
    let heights: Vec<f64> = parts
        .iter()
        .map(|p| {
            if total > 0.0 {
                PLOT_H * p.1 / total
            } else {
                0.0
            }
        })
        .collect();
    let legend = Legend {
        x: bx + bw + 15.0,
        y: TOP,
        row: 16.0,
    };
    let segments = stack(TOP + PLOT_H, heights.iter().map(|h| -h));
    for (i, ((name, v), (_, y))) in parts.iter().zip(segments).enumerate() {
        let c = pick(&TAB16, i);
        s.el("rect")
            .attr("x", bx)
            .attr("y", Px(y))
            .attr("width", bw)
            .attr("height", Px(heights[i]))
            .attr("fill", c)
            .titled(&format!("{name} {v:.4} s"));
        let label = format!("{name} {v:.4} s ({:.1}%)", percent(*v));
        swatch_row(s, legend.x, legend.y(i), c, &label);
        s.nl();
    }
}

/// Panel 2: one stacked bar of memory per pipeline stage, the capacity as a dashed line.
fn memory_bars(s: &mut Svg, r: &TrainingReport, stages: &[StageMemory]) {
    let kinds: Vec<(&str, &StageField)> = StageMemory::FIELDS
        .iter()
        .filter(|f| f.part)
        .map(|f| (f.label, f))
        .collect();
    let cap = r.memory.capacity.gib();
    let peak = stages.iter().map(|st| st.total.gib()).fold(cap, f64::max);
    let (px0, px1) = (410.0, WIDTH - 150.0);
    let bottom = TOP + PLOT_H;
    y_axis(s, px0 - 6.0, bottom, peak);
    s.el("text")
        .attr("x", px0)
        .attr("y", 44)
        .text(&format!(
            "Memory per device by pipeline stage, GiB (line: capacity {cap:.1})"
        ))
        .nl();
    let n = stages.len().max(1) as f64;
    let slot = (px1 - px0) / n;
    let bar = (slot * 0.7).max(1.0);
    let scale = |g: f64| if peak > 0.0 { PLOT_H * g / peak } else { 0.0 };
    for (i, st) in stages.iter().enumerate() {
        let x = px0 + slot * i as f64;
        // (kind, GiB, pixels) of the parts present.
        let parts: Vec<(usize, f64, f64)> = kinds
            .iter()
            .enumerate()
            .map(|(k, (_, f))| (k, f.display_value(st)))
            .filter(|(_, v)| v.is_finite() && *v > 0.0)
            .map(|(k, v)| (k, v, scale(v)))
            .collect();
        let segments = stack(bottom, parts.iter().map(|p| -p.2));
        for ((k, v, h), (_, y)) in parts.into_iter().zip(segments) {
            let name = kinds[k].0;
            s.el("rect")
                .attr("x", Px(x))
                .attr("y", Px(y))
                .attr("width", Px(bar))
                .attr("height", Px(h))
                .attr("fill", TAB16[k])
                .titled(&format!("stage {} {name} {v:.2} GiB", st.stage))
                .nl();
        }
        if stages.len() <= 32 || i % 4 == 0 {
            s.el("text")
                .attr("x", Px(x + bar / 2.0))
                .attr("y", Px(bottom + 14.0))
                .attr("text-anchor", "middle")
                .text(&st.stage.to_string())
                .nl();
        }
    }
    let cy = bottom - scale(cap);
    s.el("line")
        .attr("x1", px0)
        .attr("y1", Px(cy))
        .attr("x2", px1)
        .attr("y2", Px(cy))
        .attr("stroke", "#000")
        .attr("stroke-dasharray", "5 3")
        .end();
    s.el("text")
        .attr("x", Px((px0 + px1) / 2.0))
        .attr("y", Px(bottom + 32.0))
        .attr("text-anchor", "middle")
        .text("pipeline stage")
        .nl();
    let legend = Legend {
        x: px1 + 20.0,
        y: TOP,
        row: 16.0,
    };
    for (k, (name, _)) in kinds.iter().enumerate() {
        swatch_row(s, legend.x, legend.y(k), TAB16[k], name);
        s.nl();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_engine::training::{Training, TrainingPlan};

    /// The bar's parts add up to the step: every ledger of the breakdown is drawn (an MoE
    /// model's expert dispatch too).
    #[test]
    fn the_time_bar_adds_up_to_the_step() {
        let registry = perfcast_testkit::registry();
        let moe = perfcast_core::workload::ModelSpec {
            moe: Some(perfcast_core::workload::MoeSpec::new(8, 2, 4096)),
            ..perfcast_testkit::gpt(4, 2048, 16)
        };
        let t = Training::new(moe, perfcast_testkit::a100_system(16), &registry).unwrap();
        let plan = TrainingPlan {
            tp: 2,
            sp: true,
            dp: 8,
            ep: 4,
            micro_batch: 1,
            global_batch: 32,
            ..TrainingPlan::default()
        };
        let r = t.evaluate(&plan).unwrap();
        assert!(r.breakdown.ep_comm.0 > 0.0, "{:?}", r.breakdown);
        let drawn: f64 = time_parts(&r).iter().map(|p| p.1).sum();
        let step = r.iteration_time.0;
        assert!((drawn - step).abs() <= 1e-9 * step, "{drawn} vs {step}");
    }
}
