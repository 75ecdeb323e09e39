//! `memory-vs-recompute`: memory per GPU by component for the Korthikanti et al. 2022 models
//! on A100-80GB with their published plans, under each recompute policy; which fit; the time
//! each policy costs.

use crate::common::{caption, model_err, StudyContext};
use crate::error::StudyError;
use crate::StudyOutput;
use perfcast_core::{AttentionKind, DType};
use perfcast_engine::training::{StageMemory, Training, TrainingPlan, TrainingReport};
use perfcast_render::figure::{Axis, Bar, BarGroup, Figure, Panel, PanelKind, RefLine};
use perfcast_render::{num6, Table};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    /// System file (device, network); the device count is each model's tp x pp x dp.
    system: String,
    /// Attention kernel of the runs (Korthikanti 2022 predates FlashAttention: `plain`).
    #[serde(default = "plain")]
    attention: AttentionKind,
    #[serde(default = "fp16")]
    precision: DType,
    policies: Vec<Policy>,
    models: Vec<ModelRun>,
}

fn plain() -> AttentionKind {
    AttentionKind::Plain
}
fn fp16() -> DType {
    DType::Fp16
}
fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Policy {
    label: String,
    recompute: String,
    sp: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelRun {
    label: String,
    model: String,
    tp: u32,
    pp: u32,
    #[serde(default = "one")]
    dp: u32,
    #[serde(default = "one")]
    vpp: u32,
    micro_batch: u32,
    global_batch: u32,
    /// The validation case this plan comes from (documentation).
    #[serde(default)]
    #[allow(dead_code)]
    case: String,
}

/// One evaluated (model, policy).
#[derive(Debug, Clone)]
pub struct Row {
    pub model: String,
    pub policy: String,
    pub plan: TrainingPlan,
    pub report: TrainingReport,
    /// The stage with the largest memory (what must fit).
    pub stage: StageMemory,
}

/// Memory components of a stage, GB: weights, gradients, optimizer, activations, other
/// (transient buffers and the runtime reserve). They sum to the stage total.
pub fn components(s: &StageMemory) -> [f64; 5] {
    [
        s.weights.gb(),
        s.grads.gb(),
        s.optimizer.gb(),
        s.activations.gb(),
        (s.temp + s.reserved).gb(),
    ]
}

pub const COMPONENTS: [&str; 5] = [
    "weights",
    "gradients",
    "optimizer state",
    "activations",
    "other (temp + reserve)",
];

/// Evaluate every (model, policy) of the config.
pub fn evaluate(ctx: &StudyContext) -> Result<Vec<Row>, StudyError> {
    let cfg: Config = ctx.parse()?;
    if cfg.policies.is_empty() {
        return Err(ctx.bad("policies", "needs at least one [[policies]] entry"));
    }
    if cfg.models.is_empty() {
        return Err(ctx.bad("models", "needs at least one [[models]] entry"));
    }
    for (i, p) in cfg.policies.iter().enumerate() {
        if !matches!(p.recompute.as_str(), "none" | "selective" | "full") {
            return Err(ctx.bad(
                &format!("policies[{i}].recompute"),
                format!("`{}`: allowed are none, selective, full", p.recompute),
            ));
        }
    }
    let registry = crate::common::registry(&ctx.plugins)?;
    let mut rows = Vec::new();
    for (i, m) in cfg.models.iter().enumerate() {
        let key = format!("models[{i}]");
        for (k, v) in [
            ("tp", m.tp),
            ("pp", m.pp),
            ("dp", m.dp),
            ("vpp", m.vpp),
            ("micro_batch", m.micro_batch),
            ("global_batch", m.global_batch),
        ] {
            if v == 0 {
                return Err(ctx.bad(&format!("{key}.{k}"), "must be an integer >= 1"));
            }
        }
        let spec = ctx.model(&format!("{key}.model"), &m.model)?;
        let devices = m.tp * m.pp * m.dp;
        let system = ctx.system("system", &cfg.system, devices)?;
        let training = Training::new(spec, system, &registry)
            .map_err(model_err(format!("{}: {}", key, m.label)))?;
        for p in &cfg.policies {
            let plan = TrainingPlan {
                tp: m.tp,
                pp: m.pp,
                dp: m.dp,
                vpp: m.vpp,
                sp: p.sp,
                micro_batch: m.micro_batch,
                global_batch: m.global_batch,
                recompute: p.recompute.clone(),
                precision: cfg.precision,
                attention: cfg.attention,
                ..TrainingPlan::default()
            };
            let report = training
                .evaluate(&plan)
                .map_err(model_err(format!("{} under `{}`", m.label, p.label)))?;
            let mem = &report.memory;
            let stage = if mem.last_stage.total.0 > mem.first_stage.total.0 {
                mem.last_stage
            } else {
                mem.first_stage
            };
            rows.push(Row {
                model: m.label.clone(),
                policy: p.label.clone(),
                plan,
                report,
                stage,
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

/// The distinct values of `f` over `rows`, in order of appearance (models, policies).
fn distinct(rows: &[Row], f: impl Fn(&Row) -> &String) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(f(r)) {
            out.push(f(r).clone());
        }
    }
    out
}

/// The iteration time of `model` under the first policy (what the others are relative to).
fn first_time(rows: &[Row], model: &str) -> f64 {
    rows.iter()
        .find(|r| r.model == model)
        .map(|r| r.report.iteration_time.0)
        .unwrap_or(1.0)
}

/// Every number: one row per (model, policy).
fn table(rows: &[Row]) -> Table {
    let mut csv = Table::with_headers(&[
        "model",
        "policy",
        "recompute",
        "sp",
        "tp",
        "pp",
        "vpp",
        "micro_batch",
        "stage",
        "weights_gb",
        "gradients_gb",
        "optimizer_gb",
        "activations_gb",
        "other_gb",
        "total_gb",
        "capacity_gb",
        "fits",
        "iteration_time_s",
        "time_vs_first_policy",
        "recompute_time_s",
        "mfu",
        "hfu",
    ]);
    for r in rows {
        let c = components(&r.stage);
        let rep = &r.report;
        let p = &r.plan;
        csv.push(vec![
            r.model.clone(),
            r.policy.clone(),
            p.recompute.clone(),
            p.sp.to_string(),
            p.tp.to_string(),
            p.pp.to_string(),
            p.vpp.to_string(),
            p.micro_batch.to_string(),
            r.stage.stage.to_string(),
            num6(c[0]),
            num6(c[1]),
            num6(c[2]),
            num6(c[3]),
            num6(c[4]),
            num6(r.stage.total.gb()),
            num6(rep.memory.capacity.gb()),
            rep.memory.fits.to_string(),
            num6(rep.iteration_time.0),
            num6(rep.iteration_time.0 / first_time(rows, &r.model)),
            num6(rep.breakdown.recompute.0),
            num6(rep.mfu),
            num6(rep.hfu),
        ]);
    }
    csv
}

/// Memory per GPU by component (with the capacity line) and the relative iteration time,
/// one bar per policy, grouped by model.
fn figure(ctx: &StudyContext, rows: &[Row]) -> Figure {
    let models = distinct(rows, |r| &r.model);
    let policies = distinct(rows, |r| &r.policy);
    let capacity = capacity_gb(rows);
    let groups: Vec<BarGroup> = models
        .iter()
        .map(|m| BarGroup {
            label: m.clone(),
            bars: rows
                .iter()
                .filter(|r| &r.model == m)
                .map(|r| Bar {
                    label: r.policy.clone(),
                    segments: components(&r.stage).to_vec(),
                    note: if r.report.memory.fits {
                        "fits".into()
                    } else {
                        "OOM".into()
                    },
                })
                .collect(),
        })
        .collect();
    let time_groups: Vec<BarGroup> = models
        .iter()
        .map(|m| BarGroup {
            label: m.clone(),
            bars: rows
                .iter()
                .filter(|r| &r.model == m)
                .map(|r| {
                    let rel = r.report.iteration_time.0 / first_time(rows, m);
                    Bar {
                        label: r.policy.clone(),
                        segments: vec![rel],
                        note: format!("{rel:.2}"),
                    }
                })
                .collect(),
        })
        .collect();
    Figure {
        title: ctx.info.title.to_string(),
        width: 1100.0,
        panel_height: 470.0,
        panels: vec![
            Panel {
                title: "Memory per GPU of the most loaded pipeline stage".into(),
                y: Axis::linear("memory per GPU (GB)"),
                kind: PanelKind::StackedBars {
                    series: COMPONENTS.iter().map(|s| s.to_string()).collect(),
                    groups,
                    reference: Some(RefLine {
                        value: capacity,
                        label: format!("device capacity {capacity:.1} GB"),
                    }),
                },
            },
            Panel {
                title: format!(
                    "Iteration time relative to `{}`",
                    policies.first().cloned().unwrap_or_default()
                ),
                y: Axis::linear("iteration time (x first policy)"),
                kind: PanelKind::StackedBars {
                    series: vec!["iteration time".into()],
                    groups: time_groups,
                    reference: None,
                },
            },
        ],
        caption: caption(ctx),
    }
}

/// The device capacity, GB (decimal, as vendors quote it).
fn capacity_gb(rows: &[Row]) -> f64 {
    rows.first()
        .map(|r| r.report.memory.capacity.gb())
        .unwrap_or(0.0)
}

/// The finding, from the numbers: which models fit under each policy, what each costs in
/// time, and the fastest policy that fits.
fn finding(rows: &[Row]) -> String {
    let models = distinct(rows, |r| &r.model);
    let policies = distinct(rows, |r| &r.policy);
    let capacity = capacity_gb(rows);
    let range = |v: &[f64], digits: usize| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if (hi - lo).abs() < 0.5 * 10f64.powi(-(digits as i32)) {
            format!("{lo:.digits$}")
        } else {
            format!("{lo:.digits$}-{hi:.digits$}")
        }
    };
    let mut fits = Vec::new();
    let mut costs = Vec::new();
    for p in &policies {
        let rs: Vec<&Row> = rows.iter().filter(|r| &r.policy == p).collect();
        let n_fit = rs.iter().filter(|r| r.report.memory.fits).count();
        let peaks: Vec<f64> = rs.iter().map(|r| r.stage.total.gb()).collect();
        let rel: Vec<f64> = rs
            .iter()
            .map(|r| r.report.iteration_time.0 / first_time(rows, &r.model))
            .collect();
        fits.push(format!(
            "{p} {n_fit} of {} ({} GB)",
            rs.len(),
            range(&peaks, 0)
        ));
        costs.push(format!("{p} x{}", range(&rel, 2)));
    }
    let mut best_names = Vec::new();
    let mut savings = Vec::new();
    for m in &models {
        let best = rows
            .iter()
            .filter(|r| &r.model == m && r.report.memory.fits)
            .min_by(|a, b| {
                a.report
                    .iteration_time
                    .0
                    .total_cmp(&b.report.iteration_time.0)
            });
        let full = rows
            .iter()
            .find(|r| &r.model == m && r.plan.recompute == "full");
        match best {
            Some(b) => {
                if !best_names.contains(&b.policy) {
                    best_names.push(b.policy.clone());
                }
                if let Some(f) = full {
                    savings.push(1.0 - b.report.iteration_time.0 / f.report.iteration_time.0);
                }
            }
            None => best_names.push(format!("nothing for {m}")),
        }
    }
    let cap_gib = rows
        .first()
        .map(|r| r.report.memory.capacity.gib())
        .unwrap_or(0.0);
    format!(
        "With the published plans on {capacity:.1} GB ({cap_gib:.0} GiB) per GPU, the models that fit (peak memory of the most loaded stage) are: {}. Iteration time relative to `{}`: {}. The fastest policy that fits is {} for every model, {} faster than full recompute (components: weights, gradients, optimizer state, activations per the Korthikanti et al. 2022 formulas, transient buffers and runtime reserve; times are the training engine's predictions).",
        fits.join("; "),
        policies.first().cloned().unwrap_or_default(),
        costs.join(", "),
        best_names
            .iter()
            .map(|b| format!("`{b}`"))
            .collect::<Vec<_>>()
            .join(" or "),
        if savings.is_empty() {
            "n/a".to_string()
        } else {
            format!(
                "{}%",
                range(&savings.iter().map(|x| 100.0 * x).collect::<Vec<_>>(), 0)
            )
        }
    )
}
