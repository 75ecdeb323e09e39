//! `moe-ep-placement`: one mixture-of-experts training job on systems whose NVLink domains
//! differ (DGX H100 and DGX B200: 8 GPUs; GB200 NVL72: 72), its best plan at every
//! expert-parallel degree. Where the EP group stays inside one NVLink domain its all-to-all
//! runs on NVLink; past the domain it crosses the scale-out network. The study shows what that
//! crossing costs per system, against what a wider EP saves (expert weights and optimizer state
//! spread thinner, so less recompute or a shallower pipeline fits).

use crate::common::{caption, model_err, StudyContext};
use crate::error::StudyError;
use crate::plans::{resolve, Best};
use crate::StudyOutput;
use perfcast_core::parallel::AxisSet;
use perfcast_core::DType;
use perfcast_engine::network::Mesh;
use perfcast_engine::training::{Training, TrainingPlan};
use perfcast_render::figure::{Axis, Figure, Marker, Panel, PanelKind, Scale, Series};
use perfcast_render::{num6, plan_label, PlanStyle, Table};
use perfcast_search::SearchConfig;
use rayon::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    /// A mixture-of-experts model file.
    model: String,
    /// GPUs of every system (a multiple of every system's NVLink domain keeps whole domains).
    gpus: u32,
    /// Sequences per step.
    global_batch: u32,
    /// The expert-parallel degrees walked (each divides the model's experts).
    ep: Vec<u32>,
    /// Pipeline schedules, each point searched under each (default `1f1b`): e.g.
    /// `combined-1f1b`, which hides the expert all-to-all behind another micro-batch.
    #[serde(default = "one_f_one_b")]
    schedules: Vec<String>,
    systems: Vec<SystemRun>,
    /// The plan search at each point (perfcast-search's `[search]`; `ep`, `etp` and
    /// `schedule` are the study's).
    #[serde(default)]
    search: SearchConfig,
}

fn one_f_one_b() -> Vec<String> {
    vec!["1f1b".into()]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SystemRun {
    label: String,
    /// A system file.
    system: String,
}

/// One (system, EP degree) point.
#[derive(Debug, Clone)]
pub struct Point {
    /// The system's label.
    pub system: String,
    /// GPUs per NVLink domain.
    pub domain: u32,
    /// The pipeline schedule searched.
    pub schedule: String,
    pub ep: u32,
    /// The best plan, or why none fits.
    pub best: Result<Best, String>,
}

impl Point {
    /// EP ranks of one group inside one NVLink domain, and the domains a group spans, under
    /// the best plan's mesh (`None` when no plan fits).
    pub fn span(&self) -> Option<(u64, u64)> {
        let b = self.best.as_ref().ok()?;
        let inside = mesh(&b.plan).members_in_domain(AxisSet::EXPERT, self.domain as u64);
        Some((inside, (self.ep as u64).div_ceil(inside.max(1))))
    }

    /// The EP group stays inside one NVLink domain.
    pub fn inside(&self) -> bool {
        self.span().is_some_and(|(_, d)| d == 1)
    }

    fn time(&self) -> Option<f64> {
        self.best.as_ref().ok().map(|b| b.report.iteration_time.0)
    }

    /// Exposed EP (dispatch and combine) communication as a share of the step.
    fn ep_share(&self) -> Option<f64> {
        let b = self.best.as_ref().ok()?;
        Some(b.report.breakdown.ep_comm.0 / b.report.iteration_time.0.max(f64::MIN_POSITIVE))
    }
}

fn mesh(p: &TrainingPlan) -> Mesh {
    let mut m = Mesh::new(p.tp, p.cp, p.pp, p.dp);
    m.ep = p.ep;
    m.etp = p.etp;
    m
}

/// Everything the study computes.
pub struct Results {
    /// Per system in config order, per EP degree in config order.
    pub points: Vec<Point>,
    what: String,
}

/// Evaluate every system at every EP degree (each point searches its own best plan).
pub fn evaluate(ctx: &StudyContext) -> Result<Results, StudyError> {
    let cfg: Config = ctx.parse()?;
    if cfg.systems.is_empty() {
        return Err(ctx.bad("systems", "needs at least one [[systems]] entry"));
    }
    for (field, v) in [("gpus", cfg.gpus), ("global_batch", cfg.global_batch)] {
        if v == 0 {
            return Err(ctx.bad(field, "must be an integer >= 1"));
        }
    }
    for (field, set) in [
        ("ep", cfg.search.ep.is_some()),
        ("etp", cfg.search.etp.is_some()),
        ("schedule", cfg.search.schedule.is_some()),
    ] {
        if set {
            return Err(ctx.bad(
                &format!("search.{field}"),
                "is set by the study (the top-level `ep` and `schedules` lists; an expert \
                 whole on each GPU)",
            ));
        }
    }
    if cfg.schedules.is_empty() {
        return Err(ctx.bad("schedules", "needs one or more pipeline schedules"));
    }
    let model = ctx.model("model", &cfg.model)?;
    let Some(moe) = &model.moe else {
        return Err(ctx.bad(
            "model",
            format!("{} is dense: the study needs a [model.moe]", model.name),
        ));
    };
    if cfg.ep.is_empty() {
        return Err(ctx.bad("ep", "needs one or more expert-parallel degrees"));
    }
    if let Some(e) = cfg
        .ep
        .iter()
        .find(|&&e| e == 0 || !moe.experts.is_multiple_of(e as u64) || !cfg.gpus.is_multiple_of(e))
    {
        return Err(ctx.bad(
            "ep",
            format!(
                "{e}: each degree must divide the model's {} experts and the {} GPUs",
                moe.experts, cfg.gpus
            ),
        ));
    }
    let search = resolve(ctx, "search", &cfg.search)?;
    let registry = crate::common::registry(&ctx.plugins)?;
    let precisions: Vec<DType> = search.space.precision.clone().unwrap_or_default();
    let mut points = Vec::new();
    for (i, s) in cfg.systems.iter().enumerate() {
        let key = format!("systems[{i}].system");
        let system = ctx.system(&key, &s.system, cfg.gpus)?;
        let domain = system.network.first().map_or(1, |l| l.domain_size());
        let training = Training::new(model.clone(), system, &registry)
            .map_err(model_err(format!("{} on {}", model.name, s.label)))?;
        let grid: Vec<(&String, u32)> = cfg
            .schedules
            .iter()
            .flat_map(|sc| cfg.ep.iter().map(move |&ep| (sc, ep)))
            .collect();
        let found: Vec<Result<Point, StudyError>> = grid
            .par_iter()
            .map(|&(schedule, ep)| {
                let mut at = search.clone();
                at.space.ep = Some(vec![ep]);
                at.space.etp = Some(vec![1]);
                at.space.schedule = Some(vec![schedule.clone()]);
                let what = format!(
                    "{} on {} GPUs of {}, EP {ep}, {schedule}",
                    model.name, cfg.gpus, s.label
                );
                let best =
                    at.best_fitting(ctx, &key, &what, &training, cfg.global_batch, &precisions)?;
                Ok(Point {
                    system: s.label.clone(),
                    domain,
                    schedule: schedule.clone(),
                    ep,
                    best,
                })
            })
            .collect();
        for p in found {
            points.push(p?);
        }
    }
    Ok(Results {
        points,
        what: format!(
            "{} ({} experts, top-{}) on {} GPUs, {} sequences of {} tokens per step",
            model.name, moe.experts, moe.top_k, cfg.gpus, cfg.global_batch, model.seq_len
        ),
    })
}

/// Run the study: the CSV, the figure and the finding.
pub fn run(ctx: &StudyContext) -> Result<StudyOutput, StudyError> {
    let r = evaluate(ctx)?;
    StudyOutput::new(ctx, table(&r.points), figure(ctx, &r.points), finding(&r))
}

/// Every number: one row per (system, EP degree).
fn table(points: &[Point]) -> Table {
    let mut t = Table::with_headers(&[
        "system",
        "nvlink_domain",
        "schedule",
        "ep",
        "ep_ranks_per_domain",
        "domains_per_ep_group",
        "plan",
        "iteration_time_s",
        "tokens_per_s_per_gpu",
        "mfu",
        "exposed_ep_comm_s",
        "hidden_comm_s",
        "moe_block_fwd_bwd_ms",
        "peak_memory_gib",
        "valid_plans",
        "fitting_plans",
        "no_fit_reason",
    ]);
    for p in points {
        let mut row = vec![
            p.system.clone(),
            p.domain.to_string(),
            p.schedule.clone(),
            p.ep.to_string(),
        ];
        match (&p.best, p.span()) {
            (Ok(b), Some((inside, domains))) => {
                let r = &b.report;
                let moe = r
                    .layer
                    .moe_block_forward
                    .zip(r.layer.moe_block_backward)
                    .map_or(String::new(), |(f, w)| num6((f.0 + w.0) * 1e3));
                row.extend([
                    inside.to_string(),
                    domains.to_string(),
                    plan_label(&b.plan, PlanStyle::Brief),
                    num6(r.iteration_time.0),
                    num6(r.tokens_per_s_per_gpu),
                    num6(r.mfu),
                    num6(r.breakdown.ep_comm.0),
                    num6(r.breakdown.hidden_comm.0),
                    moe,
                    num6(r.memory.peak.0 / f64::from(1u32 << 30)),
                    b.valid.to_string(),
                    b.fit.to_string(),
                    String::new(),
                ]);
            }
            (best, _) => {
                row.extend(std::iter::repeat_n(String::new(), 12));
                row.push(best.as_ref().err().cloned().unwrap_or_default());
            }
        }
        t.push(row);
    }
    t
}

/// The distinct values of `key` over `points`, in config order.
fn distinct<'a, T: PartialEq>(points: &'a [Point], key: impl Fn(&'a Point) -> T) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for p in points {
        let k = key(p);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// The systems in config order.
fn systems(points: &[Point]) -> Vec<&str> {
    distinct(points, |p| p.system.as_str())
}

/// The (system, schedule) runs in config order.
fn runs(points: &[Point]) -> Vec<(&str, &str)> {
    distinct(points, |p| (p.system.as_str(), p.schedule.as_str()))
}

/// Two panels over the EP degree: each system's step time against its own fastest point,
/// and the exposed EP communication's share of the step; one line per system and schedule
/// (a system's colour and marker, dashed for its second and later schedules).
fn figure(ctx: &StudyContext, points: &[Point]) -> Figure {
    let markers = [Marker::Circle, Marker::Triangle, Marker::Square];
    let names = systems(points);
    let first_schedule = points.first().map(|p| p.schedule.as_str());
    let lines = |y: &dyn Fn(&Point, f64) -> Option<f64>| -> Vec<Series> {
        runs(points)
            .iter()
            .map(|&(name, schedule)| {
                let i = names.iter().position(|n| *n == name).unwrap_or(0);
                let best = points
                    .iter()
                    .filter(|p| p.system == name)
                    .filter_map(|p| p.time())
                    .fold(f64::INFINITY, f64::min);
                let mine: Vec<&Point> = points
                    .iter()
                    .filter(|p| p.system == name && p.schedule == schedule)
                    .collect();
                let domain = mine.first().map_or(1, |p| p.domain);
                Series {
                    name: format!("{name} (NVLink domain {domain}), {schedule}"),
                    points: mine
                        .iter()
                        .filter_map(|p| y(p, best).map(|v| (p.ep as f64, v)))
                        .collect(),
                    line: true,
                    marker: Some(markers[i % markers.len()]),
                    color: i,
                    dashed: Some(schedule) != first_schedule,
                }
            })
            .collect()
    };
    let x = || Axis {
        label: "expert-parallel degree (log)".into(),
        scale: Scale::Log10,
        range: None,
    };
    Figure {
        title: ctx.info.title.to_string(),
        width: 1100.0,
        panel_height: 420.0,
        panels: vec![
            Panel {
                title: "Step time of the best plan at each EP degree\nrelative to the system's fastest point (1 = best)".into(),
                y: Axis::linear("step time / fastest"),
                kind: PanelKind::XY {
                    x: x(),
                    series: lines(&|p, best| p.time().map(|t| t / best)),
                },
            },
            Panel {
                title: "Exposed expert-parallel all-to-all (dispatch + combine)\nshare of the step".into(),
                y: Axis::linear("exposed EP communication (% of step)"),
                kind: PanelKind::XY {
                    x: x(),
                    series: lines(&|p, _| p.ep_share().map(|s| 100.0 * s)),
                },
            },
        ],
        caption: caption(ctx),
    }
}

/// The finding, per system: the fastest EP degree, whether its group stays inside the NVLink
/// domain, and the largest degree inside against the smallest one across.
fn finding(r: &Results) -> String {
    let mut parts = Vec::new();
    for (name, schedule) in runs(&r.points) {
        let mine: Vec<&Point> = r
            .points
            .iter()
            .filter(|p| p.system == name && p.schedule == schedule)
            .collect();
        let fits: Vec<&&Point> = mine.iter().filter(|p| p.best.is_ok()).collect();
        let Some(best) = fits.iter().min_by(|a, b| {
            a.time()
                .unwrap_or(f64::MAX)
                .total_cmp(&b.time().unwrap_or(f64::MAX))
        }) else {
            parts.push(format!("{name}, {schedule}: no EP degree fits"));
            continue;
        };
        let t0 = best.time().unwrap_or(1.0);
        let describe = |p: &Point| {
            let (inside, domains) = p.span().unwrap_or((0, 0));
            format!(
                "EP {} ({}, {:.2} s{}, exposed EP communication {:.1}% of the step)",
                p.ep,
                if domains == 1 {
                    "inside one NVLink domain".to_string()
                } else {
                    format!("{inside} ranks per domain over {domains} domains")
                },
                p.time().unwrap_or(0.0),
                if p.ep == best.ep {
                    String::new()
                } else {
                    format!(", x{:.2} the fastest", p.time().unwrap_or(0.0) / t0)
                },
                100.0 * p.ep_share().unwrap_or(0.0)
            )
        };
        let last_inside = fits.iter().filter(|p| p.inside()).max_by_key(|p| p.ep);
        let first_across = fits.iter().filter(|p| !p.inside()).min_by_key(|p| p.ep);
        let mut s = format!(
            "{name} (NVLink domain {}), {schedule}: fastest at {} with {}",
            best.domain,
            describe(best),
            best.best
                .as_ref()
                .map(|b| plan_label(&b.plan, PlanStyle::Brief))
                .unwrap_or_default()
        );
        match last_inside {
            Some(a) if a.ep == best.ep => s.push_str(", the widest group inside the domain"),
            Some(a) => s.push_str(&format!("; widest inside the domain {}", describe(a))),
            None => s.push_str("; no fitting degree stays inside the domain"),
        }
        match first_across {
            Some(b) if b.ep == best.ep => {}
            Some(b) => s.push_str(&format!("; narrowest across domains {}", describe(b))),
            None => s.push_str("; every fitting degree stays inside the domain"),
        }
        let no_fit: Vec<String> = mine
            .iter()
            .filter(|p| p.best.is_err())
            .map(|p| p.ep.to_string())
            .collect();
        if !no_fit.is_empty() {
            s.push_str(&format!(
                "; no plan fits at EP {} (expert weights and optimizer state too large per GPU)",
                no_fit.join(", ")
            ));
        }
        parts.push(s);
    }
    format!(
        "{}, the best plan of the search at each expert-parallel degree (an expert whole on each GPU). {}. EP's all-to-all moves every routed token's hidden vector twice per layer per pass (dispatch and combine); inside an NVLink domain it runs at NVLink bandwidth, across domains at the scale-out NIC's, so a system whose domain holds the whole EP group can widen EP (less expert memory per GPU, a shallower pipeline) without paying the slower network; a schedule that overlaps two micro-batches (combined 1F1B, DualPipe) hides the all-to-all behind the other's compute up to the expert strategy's overlap efficiency, which is what lets EP cross the scale-out network, as DeepSeek-V3's EP 64 over 8 nodes does.",
        r.what,
        parts.join("; ")
    )
}
