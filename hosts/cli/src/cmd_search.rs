//! `perfcast search CONFIG... [--set k=v]... [--top N] [--objective time|memory|cost]
//! [--format table|json|csv] [--bench]`: the best plans for the config's model and system
//! (the `[search]` section gives the space and constraints), the Pareto front of step time vs
//! memory per GPU, and how many plans were enumerated, pruned and evaluated.

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use crate::error_bars::{self, IntervalArgs};
use anyhow::Context as _;
use perfcast_engine::training::{TrainingPlan, TrainingReport};
use perfcast_host::Config;
use perfcast_output::{placed_plan_label, plan_label, PlanStyle};
use perfcast_search::{load_scenario, Objective, SearchResult};
use perfcast_validation::cases::Kind;
use perfcast_validation::intervals::{Direction, Interval};
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Plans to report (default: search.top, else 10).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// What to minimise (default: search.objective, else time).
    #[arg(long, value_parser = ["time", "memory", "cost"])]
    pub objective: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Run the search several times and report its speed (plans per second).
    #[arg(long)]
    pub bench: bool,
    #[command(flatten)]
    pub intervals: IntervalArgs,
}

/// A ranked plan with its step time's interval (JSON).
#[derive(Debug, Serialize)]
struct PlanOut<'a> {
    #[serde(flatten)]
    plan: &'a perfcast_search::RankedPlan,
    /// The step time's interval, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<[f64; 2]>,
}

/// The config's own `[plan]`, evaluated for comparison.
#[derive(Debug, Serialize)]
struct Published {
    plan: TrainingPlan,
    time_s: Option<f64>,
    mfu: Option<f64>,
    memory_gib: Option<f64>,
    fits: Option<bool>,
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct Output<'a> {
    plans: Vec<PlanOut<'a>>,
    /// Where the plans' intervals come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_bars: Option<&'a Interval>,
    pareto: &'a [perfcast_search::ParetoPoint],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pareto_devices: &'a [perfcast_search::ParetoPoint],
    #[serde(skip_serializing_if = "one_or_none")]
    fastest: &'a [perfcast_search::ParetoPoint],
    summary: &'a perfcast_search::Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    published: Option<&'a Published>,
}

fn one_or_none(v: &&[perfcast_search::ParetoPoint]) -> bool {
    v.len() <= 1
}

fn report_cells(r: &TrainingReport) -> Vec<String> {
    let b = &r.breakdown;
    vec![
        num(r.iteration_time.0),
        format!("{:.1}%", r.mfu * 100.0),
        num(r.memory.peak.gib()),
        num(b.compute.total()),
        num(b.tp_comm.0 + b.cp_comm.0 + b.pp_comm.0 + b.dp_comm.0 + b.zero_comm.0),
        num(b.bubble.0),
        r.bottleneck.describe().to_string(),
    ]
}

fn load(a: &Args) -> anyhow::Result<(Config, perfcast_search::Scenario)> {
    let mut sources = a.config.sources();
    sources.sections.push(perfcast_search::config::SECTION);
    let cfg = crate::common::load_config(&sources)?;
    let mut sc = load_scenario(&cfg)?;
    if let Some(n) = a.top {
        if n == 0 {
            anyhow::bail!("invalid `--top 0`: must be at least 1");
        }
        sc.top = n;
    }
    if let Some(o) = &a.objective {
        sc.objective = Objective::parse(o).context("--objective")?;
    }
    Ok((cfg, sc))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (cfg, sc) = load(&a)?;
    if a.bench {
        return bench(&sc);
    }
    let r = sc.search()?;
    let iv = a.intervals.for_config(&cfg, Kind::Training)?;
    let time = |t: f64| iv.as_ref().map(|iv| iv.around(t, Direction::Time));
    let published = sc.plan.as_ref().map(|p| {
        let t = sc
            .trainings
            .iter()
            .find(|t| t.system().devices as u64 == p.devices());
        match t.map(|t| t.evaluate(p)) {
            Some(Ok(rep)) => Published {
                plan: p.clone(),
                time_s: Some(rep.iteration_time.0),
                mfu: Some(rep.mfu),
                memory_gib: Some(rep.memory.peak.gib()),
                fits: Some(rep.memory.fits),
                error: None,
            },
            Some(Err(e)) => Published {
                plan: p.clone(),
                time_s: None,
                mfu: None,
                memory_gib: None,
                fits: None,
                error: Some(e.to_string()),
            },
            None => Published {
                plan: p.clone(),
                time_s: None,
                mfu: None,
                memory_gib: None,
                fits: None,
                error: Some(format!(
                    "uses {} devices, not a searched device count",
                    p.devices()
                )),
            },
        }
    });
    match a.format {
        Format::Json => print(&to_json(&Output {
            plans: r
                .plans
                .iter()
                .map(|p| PlanOut {
                    plan: p,
                    interval: time(p.report.iteration_time.0),
                })
                .collect(),
            error_bars: iv.as_ref(),
            pareto: &r.pareto,
            pareto_devices: &r.pareto_devices,
            fastest: &r.fastest,
            summary: &r.summary,
            published: published.as_ref(),
        })?),
        Format::Csv => print(&csv_table(&r, iv.as_ref()).csv()),
        Format::Table => print(&render(
            &r,
            published.as_ref(),
            sc.constraints.global_batch,
            iv.as_ref(),
        )),
    }
}

fn plans_table(r: &SearchResult, iv: Option<&Interval>) -> Table {
    let header = iv.map(|iv| format!("time {}%", error_bars::percent(iv)));
    let mut cols = vec![
        ("rank", true),
        ("devices", true),
        ("plan", false),
        ("time_s", true),
    ];
    if let Some(h) = &header {
        cols.push((h.as_str(), true));
    }
    cols.extend([
        ("mfu", true),
        ("memory_gib", true),
        ("compute_s", true),
        ("comm_s", true),
        ("bubble_s", true),
        ("bottleneck", false),
    ]);
    let mut t = Table::new(&cols);
    for p in &r.plans {
        let mut row = vec![
            p.rank.to_string(),
            p.report.devices.to_string(),
            placed_plan_label(&p.plan, &p.placement),
        ];
        let mut cells = report_cells(&p.report);
        if let Some(iv) = iv {
            let [lo, hi] = iv.around(p.report.iteration_time.0, Direction::Time);
            cells.insert(1, format!("{}–{}", num(lo), num(hi)));
        }
        row.extend(cells);
        t.push(row);
    }
    t
}

/// The top plans with one column per plan field (for spreadsheets), full precision.
fn csv_table(r: &SearchResult, iv: Option<&Interval>) -> Table {
    let mut cols = vec![("rank", true), ("devices", true)];
    cols.extend(perfcast_search::PLAN_COLUMNS);
    cols.extend([
        ("overlap_grad_reduce", false),
        ("overlap_param_gather", false),
        ("placement", false),
        ("time_s", true),
        ("mfu", true),
        ("memory_gib", true),
        ("compute_s", true),
        ("comm_s", true),
        ("bubble_s", true),
        ("bottleneck", false),
    ]);
    if iv.is_some() {
        cols.extend([("time_s_lo", true), ("time_s_hi", true)]);
    }
    let mut t = Table::new(&cols);
    for rp in &r.plans {
        let p = &rp.plan;
        let rep = &rp.report;
        let b = &rep.breakdown;
        let mut row = vec![rp.rank.to_string(), rep.devices.to_string()];
        row.extend(perfcast_search::plan_cells(p));
        row.extend([
            p.overlap_grad_reduce.to_string(),
            p.overlap_param_gather.to_string(),
            rp.placement.clone(),
            rep.iteration_time.0.to_string(),
            rep.mfu.to_string(),
            rep.memory.peak.gib().to_string(),
            b.compute.total().to_string(),
            (b.tp_comm.0 + b.cp_comm.0 + b.pp_comm.0 + b.dp_comm.0 + b.zero_comm.0).to_string(),
            b.bubble.0.to_string(),
            format!("{:?}", rep.bottleneck),
        ]);
        if let Some(iv) = iv {
            let [lo, hi] = iv.around(rep.iteration_time.0, Direction::Time);
            row.extend([lo.to_string(), hi.to_string()]);
        }
        t.push(row);
    }
    t
}

/// The table output; `global_batch` is the searched plans' (the `[plan]` may differ: then the
/// comparison is per sequence).
fn render(
    r: &SearchResult,
    published: Option<&Published>,
    global_batch: u32,
    iv: Option<&Interval>,
) -> String {
    let s = &r.summary;
    let mut out = format!(
        "top {} plans by {}:\n{}",
        r.plans.len(),
        s.objective.name(),
        plans_table(r, iv).render()
    );
    if let Some(iv) = iv {
        out.push_str(&format!("error bars: {}\n", iv.describe()));
    }
    if let Some(p) = published {
        out.push_str(&format!(
            "\nthe config's [plan] ({}): ",
            plan_label(&p.plan, PlanStyle::Compact)
        ));
        match (p.time_s, p.mfu, p.memory_gib, &p.error) {
            (Some(t), Some(m), Some(g), _) => {
                out.push_str(&format!(
                    "{} s, MFU {:.1}%, {} GiB{}",
                    num(t),
                    m * 100.0,
                    num(g),
                    if p.fits == Some(false) {
                        " (does not fit)"
                    } else {
                        ""
                    }
                ));
                let same = r
                    .fastest
                    .iter()
                    .find(|f| f.devices as u64 == p.plan.devices());
                if let Some(best) = same {
                    let (gp, gs) = (p.plan.global_batch, global_batch);
                    let speedup = (t / gp as f64) / (best.time_s / gs as f64);
                    out.push_str(&format!(
                        "; the fastest plan found on {} devices is {:.2}x as fast{}",
                        best.devices,
                        speedup,
                        if gp == gs {
                            String::new()
                        } else {
                            format!(" per sequence (global batch {gs}; the [plan]'s is {gp})")
                        }
                    ));
                }
                out.push('\n');
            }
            (_, _, _, e) => out.push_str(&format!(
                "not evaluated: {}\n",
                e.as_deref().unwrap_or("unknown")
            )),
        }
    }
    let mut pt = Table::new(&[
        ("devices", true),
        ("time_s", true),
        ("memory_gib", true),
        ("plan", false),
    ]);
    for p in &r.pareto {
        pt.push(vec![
            p.devices.to_string(),
            num(p.time_s),
            num(p.memory_gib),
            placed_plan_label(&p.plan, &p.placement),
        ]);
    }
    out.push_str(&format!(
        "\nPareto front, step time vs memory per GPU ({} plans):\n{}",
        r.pareto.len(),
        pt.render()
    ));
    if !r.pareto_devices.is_empty() {
        let mut dt = Table::new(&[("devices", true), ("time_s", true), ("plan", false)]);
        for p in &r.pareto_devices {
            dt.push(vec![
                p.devices.to_string(),
                num(p.time_s),
                placed_plan_label(&p.plan, &p.placement),
            ]);
        }
        out.push_str(&format!(
            "\nPareto front, step time vs GPU count:\n{}",
            dt.render()
        ));
    }
    out.push_str(&format!(
        "\n{} plans enumerated, {} pruned ({} refused, {} over memory, {} by the time bound), \
         {} evaluated in {:.3} s on {} threads ({:.0} plans/s, {:.0} evaluations/s)\n",
        s.enumerated,
        s.pruned,
        s.pruned_invalid,
        s.pruned_memory,
        s.pruned_bound,
        s.evaluated,
        s.seconds,
        s.threads,
        s.plans_per_s,
        s.evaluations_per_s
    ));
    out
}

fn bench(sc: &perfcast_search::Scenario) -> anyhow::Result<()> {
    let runs = 5;
    let mut secs = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let r = sc.search()?;
        secs.push(r.summary.seconds);
        last = Some(r.summary);
    }
    secs.sort_by(f64::total_cmp);
    let s = last.context("no run")?;
    let med = secs[runs / 2];
    print(&format!(
        "{runs} runs on {} threads: median {:.3} s (min {:.3}, max {:.3})\n\
         {} plans enumerated, {} pruned ({} refused, {} over memory, {} by the time bound), {} evaluated\n\
         {:.0} plans/s enumerated, {:.0} evaluations/s (median run)\n",
        s.threads,
        med,
        secs[0],
        secs[runs - 1],
        s.enumerated,
        s.pruned,
        s.pruned_invalid,
        s.pruned_memory,
        s.pruned_bound,
        s.evaluated,
        s.enumerated as f64 / med,
        s.evaluated as f64 / med,
    ))
}
