//! `topologies`: one training plan of a large model on the same GPUs and NICs wired as
//! different networks (full-bisection, 2:1 and 4:1 fat-trees, rail-optimised, rail-only,
//! a torus): step time, exposed communication, network cost; and an expert-parallel
//! all-to-all on each. Checks the claim of Wang et al. 2023 ("Rail-only", arXiv 2307.12169)
//! that LLM training loses little on a rail-only network that costs far less.

use crate::common::{caption, model_err, StudyContext};
use crate::error::StudyError;
use crate::StudyOutput;
use perfcast_core::parallel::AxisSet;
use perfcast_core::topology::NetworkCost;
use perfcast_core::{Bytes, CollectiveKind};
use perfcast_engine::network::{Mesh, Network};
use perfcast_engine::training::TrainingReport;
use perfcast_render::figure::{Axis, Bar, BarGroup, Figure, Panel, PanelKind};
use perfcast_render::{num6, Table};
use perfcast_scenario::TrainingScenario;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    /// Model file.
    model: String,
    /// System file (device, NVLink domain, NIC).
    system: String,
    /// The software stack, as a config's `stack = "NAME"` names it (default: the `generic`
    /// stack, as for `perfcast predict`).
    #[serde(default)]
    stack: Option<String>,
    /// GPUs.
    gpus: u32,
    /// The training plan: a config's `[plan]`, read as `perfcast predict` reads it (the
    /// stack fills the fields it leaves out).
    plan: toml::Table,
    /// The expert-parallel all-to-all timed on each topology: ranks (consecutive GPUs) and
    /// bytes each rank sends (full buffer).
    all_to_all: AllToAll,
    /// The rail-only paper's figures, stated beside ours (optional).
    #[serde(default)]
    paper: Option<Paper>,
    topologies: Vec<TopologyRun>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllToAll {
    ranks: u32,
    bytes: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Paper {
    /// Network cost reduction of rail-only against a rail-optimised Clos, percent (low, high).
    cost_reduction_pct: [f64; 2],
    /// Network power reduction, percent (low, high).
    power_reduction_pct: [f64; 2],
    /// All-to-all completion time overhead of rail-only (forwarding), percent (low, high).
    all_to_all_overhead_pct: [f64; 2],
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyRun {
    label: String,
    /// A topology component: `kind` and its parameters.
    component: toml::Table,
}

/// One topology evaluated.
#[derive(Debug, Clone)]
pub struct Row {
    /// The topology's label.
    pub label: String,
    /// Its kind.
    pub kind: String,
    /// The training step.
    pub report: TrainingReport,
    /// The all-to-all time, seconds.
    pub all_to_all: f64,
    /// The network's cost, when the topology prices it.
    pub cost: Option<NetworkCost>,
}

impl Row {
    /// Exposed communication of the step, seconds.
    pub fn exposed_comm(&self) -> f64 {
        let b = &self.report.breakdown;
        b.exposed_comm().0
    }
}

/// Everything the study computes, with the paper's figures.
pub struct Results {
    /// One row per topology, in config order (the first is the reference).
    pub rows: Vec<Row>,
    paper: Option<Paper>,
    what: String,
}

/// The name the study gives the topology component it adds to the scenario.
const COMPONENT: &str = "study_topology";

/// The configuration of the study's scenario on topology `t`: `base` with `t`'s component
/// added and named as `system.topology`, exactly as a config of `perfcast predict` wires it.
fn on_topology(
    ctx: &StudyContext,
    base: &perfcast_config::Config,
    i: usize,
    t: &TopologyRun,
) -> Result<(String, TrainingScenario), StudyError> {
    let key = format!("topologies[{i}].component");
    let kind = match t.component.get("kind") {
        Some(toml::Value::String(k)) => k.clone(),
        _ => return Err(ctx.bad(&format!("{key}.kind"), "needs the topology kind (a string)")),
    };
    let component = format!("components.{COMPONENT}");
    let cfg = base
        .with_values(&[
            ("system.topology", &toml::Value::String(COMPONENT.into())),
            (&component, &toml::Value::Table(t.component.clone())),
        ])
        .map_err(|e| ctx.bad(&key, e.to_string()))?;
    let sc = TrainingScenario::from_config(&cfg).map_err(|e| ctx.bad(&key, e.to_string()))?;
    Ok((kind, sc))
}

/// Evaluate the plan on every topology: each one a scenario as `perfcast predict` runs it
/// (the model and system files merged, `system.devices = gpus`, the stack, the `[plan]`,
/// the topology as `system.topology`), so the study's step times are `predict`'s.
pub fn evaluate(ctx: &StudyContext) -> Result<Results, StudyError> {
    let cfg: Config = ctx.parse()?;
    if cfg.topologies.is_empty() {
        return Err(ctx.bad("topologies", "needs at least one [[topologies]] entry"));
    }
    if cfg.all_to_all.ranks < 2 || cfg.all_to_all.ranks > cfg.gpus {
        return Err(ctx.bad(
            "all_to_all.ranks",
            format!("must be 2 to gpus = {}", cfg.gpus),
        ));
    }
    if !(cfg.all_to_all.bytes.is_finite() && cfg.all_to_all.bytes > 0.0) {
        return Err(ctx.bad("all_to_all.bytes", "must be a finite number > 0"));
    }
    if cfg.gpus == 0 {
        return Err(ctx.bad("gpus", "needs at least one device"));
    }
    let mut sets = vec![format!("system.devices={}", cfg.gpus)];
    if let Some(stack) = &cfg.stack {
        sets.push(format!(
            "stack={}",
            serde_json::to_string(stack).unwrap_or_default()
        ));
    }
    let base = ctx.scenario_config(&[("model", &cfg.model), ("system", &cfg.system)], &sets)?;
    let base = base
        .with_values(&[("plan", &toml::Value::Table(cfg.plan.clone()))])
        .map_err(|e| ctx.bad("plan", e.to_string()))?;
    // The plan on the levels alone: what does not depend on the topology fails here,
    // named as the study config's key.
    let reference =
        TrainingScenario::from_config(&base).map_err(|e| ctx.bad("plan", e.to_string()))?;
    let model = reference.training.model().name.clone();
    let mut rows = Vec::new();
    for (i, t) in cfg.topologies.iter().enumerate() {
        let (kind, sc) = on_topology(ctx, &base, i, t)?;
        let system = sc.training.system();
        let what = format!("{model} on {}", t.label);
        let topo = system.topology.clone();
        let cost = match &topo {
            Some(topo) => topo
                .cost(&system.network, cfg.gpus as u64)
                .map_err(|e| model_err(what.clone())(perfcast_core::ModelError::Plugin(e)))?,
            None => None,
        };
        let net = Network::with_topology(&system.network, topo, cfg.gpus as u64)
            .map_err(model_err(what.clone()))?;
        let a2a_mesh = Mesh::new(cfg.all_to_all.ranks, 1, 1, cfg.gpus / cfg.all_to_all.ranks);
        let a2a = net
            .time(
                &a2a_mesh,
                AxisSet::TENSOR,
                CollectiveKind::AllToAll,
                Bytes(cfg.all_to_all.bytes),
            )
            .map_err(model_err(format!("all-to-all on {}", t.label)))?;
        let report = sc.training.evaluate(&sc.plan).map_err(model_err(&what))?;
        rows.push(Row {
            label: t.label.clone(),
            kind,
            report,
            all_to_all: a2a.0,
            cost,
        });
    }
    let p = &reference.plan;
    Ok(Results {
        rows,
        paper: cfg.paper,
        what: format!(
            "{model} on {} GPUs ({}, {} stack), TP {} PP {} DP {}, micro-batch {}, global batch {}, {} recompute",
            cfg.gpus,
            cfg.system,
            cfg.stack.as_deref().unwrap_or(perfcast_config::stacks::DEFAULT_STACK),
            p.tp,
            p.pp,
            p.dp,
            p.micro_batch,
            p.global_batch,
            p.recompute
        ),
    })
}

/// Run the study: the CSV, the figure and the finding.
pub fn run(ctx: &StudyContext) -> Result<StudyOutput, StudyError> {
    let r = evaluate(ctx)?;
    StudyOutput::new(ctx, table(&r.rows), figure(ctx, &r.rows), finding(&r))
}

fn cost_usd(r: &Row) -> Option<f64> {
    r.cost.as_ref().map(NetworkCost::total_usd)
}

/// Every number: one row per topology.
fn table(rows: &[Row]) -> Table {
    let base = &rows[0];
    let mut t = Table::with_headers(&[
        "topology",
        "kind",
        "iteration_time_s",
        "time_vs_first",
        "mfu",
        "compute_s",
        "exposed_tp_s",
        "exposed_pp_s",
        "exposed_dp_s",
        "exposed_zero_s",
        "exposed_comm_s",
        "bubble_s",
        "all_to_all_ms",
        "all_to_all_vs_first",
        "switches",
        "switch_ports",
        "optics",
        "network_cost_usd",
        "cost_vs_first",
    ]);
    for r in rows {
        let b = &r.report.breakdown;
        let c = r.cost.as_ref();
        let f = |v: Option<f64>| v.map(num6).unwrap_or_default();
        t.push(vec![
            r.label.clone(),
            r.kind.clone(),
            num6(r.report.iteration_time.0),
            num6(r.report.iteration_time.0 / base.report.iteration_time.0),
            num6(r.report.mfu),
            num6(b.compute_total().0),
            num6(b.tp_comm.0),
            num6(b.pp_comm.0),
            num6(b.dp_comm.0),
            num6(b.zero_comm.0),
            num6(r.exposed_comm()),
            num6(b.bubble.0),
            num6(r.all_to_all * 1e3),
            num6(r.all_to_all / base.all_to_all),
            f(c.map(|c| c.switches)),
            f(c.map(|c| c.switch_ports)),
            f(c.map(|c| c.optics)),
            f(cost_usd(r)),
            f(cost_usd(r).zip(cost_usd(base)).map(|(a, b)| a / b)),
        ]);
    }
    t
}

const PARTS: [&str; 6] = [
    "compute",
    "exposed TP",
    "exposed PP",
    "exposed DP + ZeRO",
    "bubble",
    "optimizer + CP",
];

fn parts(r: &Row) -> Vec<f64> {
    let b = &r.report.breakdown;
    vec![
        b.compute_total().0,
        b.tp_comm.0,
        b.pp_comm.0,
        (b.dp_comm + b.zero_comm).0,
        b.bubble.0,
        (b.optimizer + b.cp_comm).0,
    ]
}

/// The step by part per topology; the network cost; the all-to-all time.
fn figure(ctx: &StudyContext, rows: &[Row]) -> Figure {
    let base = &rows[0];
    let one = |f: &dyn Fn(&Row) -> (f64, String)| BarGroup {
        label: String::new(),
        bars: rows
            .iter()
            .map(|r| {
                let (v, note) = f(r);
                Bar {
                    label: r.label.clone(),
                    segments: vec![v],
                    note,
                }
            })
            .collect(),
    };
    let step = BarGroup {
        label: String::new(),
        bars: rows
            .iter()
            .map(|r| Bar {
                label: r.label.clone(),
                segments: parts(r),
                note: format!(
                    "x{:.3}",
                    r.report.iteration_time.0 / base.report.iteration_time.0
                ),
            })
            .collect(),
    };
    let cost = one(&|r| match (cost_usd(r), cost_usd(base)) {
        (Some(c), Some(b)) => (c / 1e6, format!("x{:.2}", c / b)),
        _ => (0.0, "n/a".into()),
    });
    let a2a = one(&|r| {
        (
            r.all_to_all * 1e3,
            format!("x{:.2}", r.all_to_all / base.all_to_all),
        )
    });
    let bars = |title: &str, y: &str, series: Vec<String>, g: BarGroup| Panel {
        title: title.into(),
        y: Axis::linear(y),
        kind: PanelKind::StackedBars {
            series,
            groups: vec![g],
            reference: None,
        },
    };
    Figure {
        title: ctx.info.title.to_string(),
        width: 1100.0,
        panel_height: 400.0,
        panels: vec![
            bars(
                "Training step by part (critical stage)\nnote: step time relative to the first topology",
                "step time (s)",
                PARTS.iter().map(|s| s.to_string()).collect(),
                step,
            ),
            bars(
                "Network cost (switches, optics, fibres; the topologies' price table)",
                "network cost (million USD)",
                vec!["network cost".into()],
                cost,
            ),
            bars(
                "Expert-parallel all-to-all across nodes",
                "all-to-all time (ms)",
                vec!["all-to-all".into()],
                a2a,
            ),
        ],
        caption: caption(ctx),
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", 100.0 * (x - 1.0))
}

/// The finding, from the numbers, with the paper's figures beside ours.
fn finding(r: &Results) -> String {
    let rows = &r.rows;
    let base = &rows[0];
    let rel = |x: &Row| x.report.iteration_time.0 / base.report.iteration_time.0;
    let steps: Vec<String> = rows[1..]
        .iter()
        .map(|x| format!("{} {}", x.label, pct(rel(x))))
        .collect();
    let find = |kind: &str| rows.iter().find(|x| x.kind == kind);
    let rail = match (find("rail-only"), find("rail-optimized")) {
        (Some(only), Some(opt)) => {
            let step = only.report.iteration_time.0 / opt.report.iteration_time.0;
            let cost = match (cost_usd(only), cost_usd(opt)) {
                (Some(a), Some(b)) => format!("{:.0}%", 100.0 * (1.0 - a / b)),
                _ => "n/a".into(),
            };
            let a2a = only.all_to_all / opt.all_to_all;
            match &r.paper {
                Some(p) => format!(
                    " Rail-only against the rail-optimised Clos: step time {} (the paper: the \
                     same training performance), network cost {cost} lower (the paper: {:.0}% \
                     to {:.0}% lower, and {:.0}% to {:.0}% less network power, not modelled \
                     here), all-to-all {} through NVLink forwarding (the paper: {:.1}% to \
                     {:.1}% overhead).",
                    pct(step),
                    p.cost_reduction_pct[0],
                    p.cost_reduction_pct[1],
                    p.power_reduction_pct[0],
                    p.power_reduction_pct[1],
                    pct(a2a),
                    p.all_to_all_overhead_pct[0],
                    p.all_to_all_overhead_pct[1],
                ),
                None => format!(
                    " Rail-only against the rail-optimised Clos: step time {}, network cost \
                     {cost} lower, all-to-all {} through NVLink forwarding.",
                    pct(step),
                    pct(a2a),
                ),
            }
        }
        _ => String::new(),
    };
    let worst = rows
        .iter()
        .max_by(|a, b| rel(a).total_cmp(&rel(b)))
        .map(|w| {
            let b = &w.report.breakdown;
            format!(
                " The slowest is {} ({}): its exposed DP communication is {:.3} s against {:.3} s, PP {:.3} s against {:.3} s.",
                w.label,
                pct(rel(w)),
                b.dp_comm.0,
                base.report.breakdown.dp_comm.0,
                b.pp_comm.0,
                base.report.breakdown.pp_comm.0
            )
        })
        .unwrap_or_default();
    format!(
        "{}: step time {:.3} s on {} with {:.3} s of exposed communication; relative to it: {}.{}{} The NVLink domain carries the tensor-parallel traffic on every topology; the data-parallel and pipeline groups go over the scale-out network, rail-aligned (one GPU per node, same local rank), which is why a rail-optimised or rail-only fabric keeps their rings on one rail's switches.",
        r.what,
        base.report.iteration_time.0,
        base.label,
        base.exposed_comm(),
        steps.join(", "),
        worst,
        rail
    )
}
