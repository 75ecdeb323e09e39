//! `perfcast predict`: one training step of the config's `[model]` on its `[device]` /
//! `[system]` under its `[plan]` (engine options from `[options]`), read through
//! `perfcast-scenario` (which reconciles `plan.dp` with `system.devices`).

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use anyhow::Context as _;
use perfcast_engine::training::StageMemory;
use perfcast_engine::{TrainingPlan, TrainingReport};
use perfcast_host::{Config, SECTIONS};
use perfcast_scenario::{engine_error, TrainingScenario};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Also draw the time breakdown (stacked bar) and the memory of every pipeline stage
    /// (stacked bars) to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Top-level sections `predict` and `infer` accept: the host's, plus `search` (the plan
/// search's section, which experiment files share with `predict`).
pub(crate) fn load(args: &ConfigArgs) -> anyhow::Result<Config> {
    let mut sources = args.sources();
    let mut sections = SECTIONS.to_vec();
    sections.push("search");
    sources.sections = sections;
    crate::common::load_config(&sources)
}

/// What `predict --format json` prints.
#[derive(Serialize)]
struct Output<'a> {
    model: &'a str,
    system: &'a str,
    plan: &'a TrainingPlan,
    report: &'a TrainingReport,
    /// Every pipeline stage's device memory (the report keeps the first, second and last).
    memory_per_stage: &'a [StageMemory],
    notes: Vec<String>,
    /// The configuration that produced the report (feed it back as a `.json` config).
    config: serde_json::Value,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load(&a.config)?;
    let TrainingScenario { training, plan } = TrainingScenario::from_config(&cfg)?;
    let system_name = training.system().name.clone();
    let report = training
        .evaluate(&plan)
        .map_err(|e| engine_error(&cfg, e))?;
    let stages = training
        .memory_per_stage(&plan)
        .map_err(|e| engine_error(&cfg, e))?;
    let model_name = training.model().name.clone();

    if let Some(path) = &a.plot {
        std::fs::write(path, svg(&model_name, &system_name, &report, &stages))
            .with_context(|| format!("cannot write the plot to `{}`", path.display()))?;
    }
    let text = match a.format {
        Format::Json => to_json(&Output {
            model: &model_name,
            system: &system_name,
            plan: &plan,
            report: &report,
            memory_per_stage: &stages,
            notes: report.notes(),
            config: perfcast_scenario::reproducible_config(&cfg, training.model())?,
        })?,
        Format::Csv => csv(&plan, &report, &stages),
        Format::Table => table(&model_name, &system_name, &plan, &report, &stages),
    };
    print(&text)?;
    if !report.memory.fits {
        return Err(does_not_fit(&report, &stages));
    }
    Ok(())
}

/// The error of a plan whose largest stage exceeds the device memory.
fn does_not_fit(r: &TrainingReport, stages: &[StageMemory]) -> anyhow::Error {
    let worst = stages.iter().copied().fold(r.memory.first_stage, |a, s| {
        if s.total.0 > a.total.0 {
            s
        } else {
            a
        }
    });
    anyhow::anyhow!(
        "the plan does not fit in device memory: pipeline stage {} needs {:.2} GiB per device (weights {:.2}, gradients {:.2}, optimizer {:.2}, activations {:.2}, temporary {:.2}, reserved {:.2}) but the device has {:.2} GiB: short by {:.2} GiB; raise plan.tp or plan.pp, use plan.zero_stage, or plan.recompute = \"selective\" / \"full\"",
        worst.stage,
        worst.total.gib(),
        worst.weights.gib(),
        worst.grads.gib(),
        worst.optimizer.gib(),
        worst.activations.gib(),
        worst.temp.gib(),
        worst.reserved.gib(),
        r.memory.capacity.gib(),
        (worst.total.0 - r.memory.capacity.0).max(r.memory.shortfall.0) / (1u64 << 30) as f64,
    )
}

fn plan_line(p: &TrainingPlan) -> String {
    format!(
        "tp={} pp={} dp={} cp={} vpp={} sp={} zero={} micro_batch={} global_batch={} recompute={} schedule={} precision={}",
        p.tp,
        p.pp,
        p.dp,
        p.cp,
        p.vpp,
        p.sp,
        p.zero_stage,
        p.micro_batch,
        p.global_batch,
        p.recompute,
        p.schedule_name(),
        p.precision
    ) + &if p.cp > 1 {
        format!(" cp_comm={}", p.cp_comm.name())
    } else {
        String::new()
    }
}

fn table(
    model: &str,
    system: &str,
    plan: &TrainingPlan,
    r: &TrainingReport,
    stages: &[StageMemory],
) -> String {
    let mut s = format!(
        "{model} on {system}, {} devices\n  {}\n",
        r.devices,
        plan_line(plan)
    );
    s.push_str(&r.to_table());
    if stages.len() > 3 {
        let _ = writeln!(s, "Memory of every pipeline stage (GiB per device)");
        let mut t = Table::new(&[
            ("stage", true),
            ("in flight", true),
            ("weights", true),
            ("gradients", true),
            ("optimizer", true),
            ("activations", true),
            ("temporary", true),
            ("reserved", true),
            ("total", true),
        ]);
        for st in stages {
            t.push(vec![
                st.stage.to_string(),
                num(st.in_flight),
                format!("{:.2}", st.weights.gib()),
                format!("{:.2}", st.grads.gib()),
                format!("{:.2}", st.optimizer.gib()),
                format!("{:.2}", st.activations.gib()),
                format!("{:.2}", st.temp.gib()),
                format!("{:.2}", st.reserved.gib()),
                format!("{:.2}", st.total.gib()),
            ]);
        }
        for line in t.render().lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

fn csv(plan: &TrainingPlan, r: &TrainingReport, stages: &[StageMemory]) -> String {
    let mut s = r.to_csv();
    for (k, v) in [
        ("plan.tp", plan.tp),
        ("plan.pp", plan.pp),
        ("plan.dp", plan.dp),
        ("plan.cp", plan.cp),
        ("plan.vpp", plan.vpp),
        ("plan.micro_batch", plan.micro_batch),
        ("plan.global_batch", plan.global_batch),
    ] {
        let _ = writeln!(s, "{k},{v},");
    }
    for st in stages {
        for (k, v, u) in [
            ("in_flight", st.in_flight, ""),
            ("weights", st.weights.0, "B"),
            ("grads", st.grads.0, "B"),
            ("optimizer", st.optimizer.0, "B"),
            ("activations", st.activations.0, "B"),
            ("temp", st.temp.0, "B"),
            ("reserved", st.reserved.0, "B"),
            ("total", st.total.0, "B"),
        ] {
            let _ = writeln!(s, "memory.stage{}.{k},{v},{u}", st.stage);
        }
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Distinct colours for the up to 16 parts of the time bar (tab10, then darker tab20b hues).
const PALETTE: [&str; 16] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
];

/// Two panels: the step time as one stacked bar (compute per op class, exposed
/// communication, bubble, optimizer; parts sum to the iteration time), and one stacked bar
/// of device memory per pipeline stage against the capacity line.
fn svg(model: &str, system: &str, r: &TrainingReport, stages: &[StageMemory]) -> String {
    let b = &r.breakdown;
    let mut parts: Vec<(String, f64)> = r
        .breakdown
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
        ("pipeline bubble".to_string(), b.bubble.0),
        ("optimizer".to_string(), b.optimizer.0),
    ]);
    parts.retain(|(_, v)| v.is_finite() && *v > 0.0);
    let total: f64 = parts.iter().map(|p| p.1).sum();
    let (w, h) = (900.0, 480.0);
    let (top, bottom) = (60.0, 60.0);
    let plot_h = h - top - bottom;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"20\" y=\"22\" font-size=\"14\">{} on {}: {:.3} s per step, MFU {:.1}%</text>",
        esc(model),
        esc(system),
        r.iteration_time.0,
        100.0 * r.mfu
    );
    // Panel 1: the time bar with its legend.
    let _ = writeln!(
        s,
        "<text x=\"20\" y=\"44\">Time per step (critical stage), s</text>"
    );
    let (bx, bw) = (40.0, 60.0);
    let mut y = top + plot_h;
    for (i, (name, v)) in parts.iter().enumerate() {
        let hh = if total > 0.0 { plot_h * v / total } else { 0.0 };
        y -= hh;
        let c = PALETTE[i % PALETTE.len()];
        let ly = top + 16.0 * i as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{bx}\" y=\"{y:.1}\" width=\"{bw}\" height=\"{hh:.1}\" fill=\"{c}\"><title>{} {:.4} s</title></rect>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{c}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{} {:.4} s ({:.1}%)</text>",
            esc(name),
            v,
            bx + bw + 15.0,
            ly,
            bx + bw + 30.0,
            ly + 9.0,
            esc(name),
            v,
            if total > 0.0 { 100.0 * v / total } else { 0.0 }
        );
    }
    // Panel 2: memory per stage.
    type Part = (&'static str, fn(&StageMemory) -> f64);
    let kinds: [Part; 6] = [
        ("weights", |x| x.weights.gib()),
        ("gradients", |x| x.grads.gib()),
        ("optimizer", |x| x.optimizer.gib()),
        ("activations", |x| x.activations.gib()),
        ("temporary", |x| x.temp.gib()),
        ("reserved", |x| x.reserved.gib()),
    ];
    let cap = r.memory.capacity.gib();
    let peak = stages.iter().map(|st| st.total.gib()).fold(cap, f64::max);
    let (px0, px1) = (380.0, w - 150.0);
    let _ = writeln!(
        s,
        "<text x=\"{px0}\" y=\"44\">Memory per device by pipeline stage, GiB (line: capacity {cap:.1})</text>"
    );
    let n = stages.len().max(1) as f64;
    let slot = (px1 - px0) / n;
    let bar = (slot * 0.7).max(1.0);
    let scale = |g: f64| if peak > 0.0 { plot_h * g / peak } else { 0.0 };
    for (i, st) in stages.iter().enumerate() {
        let x = px0 + slot * i as f64;
        let mut y = top + plot_h;
        for (k, (name, f)) in kinds.iter().enumerate() {
            let v = f(st);
            if !(v.is_finite() && v > 0.0) {
                continue;
            }
            let hh = scale(v);
            y -= hh;
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{hh:.1}\" fill=\"{}\"><title>stage {} {name} {v:.2} GiB</title></rect>",
                PALETTE[k],
                st.stage
            );
        }
        if stages.len() <= 32 || i % 4 == 0 {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                top + plot_h + 14.0,
                st.stage
            );
        }
    }
    let cy = top + plot_h - scale(cap);
    let _ = writeln!(
        s,
        "<line x1=\"{px0}\" y1=\"{cy:.1}\" x2=\"{px1}\" y2=\"{cy:.1}\" stroke=\"#000\" stroke-dasharray=\"5 3\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">pipeline stage</text>",
        (px0 + px1) / 2.0,
        top + plot_h + 32.0
    );
    for (k, (name, _)) in kinds.iter().enumerate() {
        let ly = top + 16.0 * k as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{ly:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{name}</text>",
            px1 + 20.0,
            PALETTE[k],
            px1 + 35.0,
            ly + 9.0
        );
    }
    s.push_str("</svg>\n");
    s
}
