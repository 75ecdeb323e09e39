//! `perfcast search CONFIG... [--set k=v]... [--top N] [--objective time|memory|cost]
//! [--format table|json|csv] [--bench]`: the best plans for the config's model and system
//! (the `[search]` section gives the space and constraints), the Pareto front of step time vs
//! memory per GPU, and how many plans were enumerated, pruned and evaluated. With a
//! `[serving_search]` section it is the deployment search for serving instead
//! (`cmd_search_serving`).

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use crate::error_bars::{self, IntervalArgs};
use anyhow::Context as _;
use perfcast_config::Config;
use perfcast_engine::training::{TrainingPlan, TrainingReport};
use perfcast_report::{placed_plan_label, plan_label, PlanStyle};
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
    #[arg(long, value_parser = Format::parser(&crate::common::ROW_FORMATS), default_value_t)]
    pub format: Format,
    /// Write the output to this file (whole or not at all) instead of standard output;
    /// needed by `--format parquet`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Run the search several times and report its speed (plans per second).
    #[arg(long)]
    pub bench: bool,
    /// Price of one GPU-hour for the cost objective's USD column (default:
    /// search.price_per_gpu_hour, else perfcast_search::space::DEFAULT_PRICE_PER_GPU_HOUR).
    #[arg(long, value_name = "USD")]
    pub price_per_gpu_hour: Option<f64>,
    /// Stop walking after this many seconds and report the best plans found so far and what
    /// was not visited (default: search.max_seconds, else 300, as a sweep's max_seconds).
    #[arg(long, value_name = "SECONDS")]
    pub max_seconds: Option<f64>,
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
    /// With the cost objective: the price used and each ranked plan's cost per step.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<Cost>,
}

/// The cost objective's figures.
#[derive(Debug, Serialize)]
struct Cost {
    price_per_gpu_hour: f64,
    /// Per ranked plan, in rank order: `(gpu_hours_per_step, usd_per_step)`.
    per_step: Vec<CostRow>,
}

#[derive(Debug, Serialize)]
struct CostRow {
    rank: usize,
    gpu_hours: f64,
    usd: f64,
}

fn cost_of(r: &SearchResult, price: f64) -> Option<Cost> {
    (r.summary.objective == Objective::Cost).then(|| Cost {
        price_per_gpu_hour: price,
        per_step: r
            .plans
            .iter()
            .map(|p| CostRow {
                rank: p.rank,
                gpu_hours: gpu_hours(&p.report),
                usd: gpu_hours(&p.report) * price,
            })
            .collect(),
    })
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
        num(b.hidden_comm.0),
        num(b.bubble.0),
        r.bottleneck.describe().to_string(),
    ]
}

fn load_config(a: &Args) -> anyhow::Result<Config> {
    let mut sources = a.config.sources()?;
    sources.sections.push(perfcast_search::config::SECTION);
    sources.sections.extend(crate::cmd_search_serving::SECTIONS);
    crate::common::load_config(&sources)
}

fn load(
    a: &Args,
    resolved: &perfcast_scenario::Scenario,
) -> anyhow::Result<perfcast_search::Scenario> {
    let mut sc = load_scenario(resolved)?;
    if let Some(n) = a.top {
        if n == 0 {
            anyhow::bail!("invalid `--top 0`: must be at least 1");
        }
        sc.top = n;
    }
    if let Some(o) = &a.objective {
        sc.objective = Objective::parse(o).context("--objective")?;
    }
    if let Some(p) = a.price_per_gpu_hour {
        if !(p.is_finite() && p > 0.0) {
            anyhow::bail!("invalid `--price-per-gpu-hour {p}`: a positive price");
        }
        sc.price_per_gpu_hour = p;
    }
    if let Some(s) = a.max_seconds {
        if !(s.is_finite() && s > 0.0) {
            anyhow::bail!("invalid `--max-seconds {s}`: a positive number of seconds");
        }
        sc.budget.max_seconds = Some(s);
    }
    Ok(sc)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load_config(&a)?;
    // A deployment search for serving (issue 12) when the config has [serving_search].
    if cfg.contains(perfcast_search::serving::SECTION) {
        return crate::cmd_search_serving::run(&a, &cfg);
    }
    let resolved = perfcast_scenario::Scenario::training(&cfg);
    let sc = load(&a, &resolved)?;
    if a.bench {
        return bench(&sc);
    }
    if let Some(t) = sc.trainings.first() {
        crate::common::warn_hardware(&*t.system().compute, &t.system().memory);
    }
    let r = sc.search()?;
    let iv = a.intervals.for_scenario(&resolved, Kind::Training)?;
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
    let out = a.out.as_deref();
    match a.format {
        Format::Json => crate::common::emit(
            &to_json(&Output {
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
                cost: cost_of(&r, sc.price_per_gpu_hour),
            })?,
            out,
        ),
        Format::Csv => crate::common::emit(
            &csv_table(&r, sc.price_per_gpu_hour, iv.as_ref()).csv(),
            out,
        ),
        Format::Parquet => crate::common::write_parquet(
            &csv_table(&r, sc.price_per_gpu_hour, iv.as_ref()),
            out,
            "search",
        ),
        Format::Table => crate::common::emit(
            &render(
                &r,
                published.as_ref(),
                sc.constraints.global_batch,
                sc.price_per_gpu_hour,
                iv.as_ref(),
            ),
            out,
        ),
    }
}

/// The top plans, plans with identical results (same devices, time, memory and breakdown:
/// they differ only in a choice that changes nothing here, such as a placement that lays
/// this mesh out alike) collapsed into one row with their count; with the cost objective,
/// GPU-hours and the price per step; with error bars, the step time's interval.
fn plans_table(r: &SearchResult, price: f64, iv: Option<&Interval>) -> Table {
    let cost = r.summary.objective == Objective::Cost;
    let header = iv.map(|iv| format!("time {}%", error_bars::percent(iv)));
    let mut cols = vec![
        ("rank", true),
        ("plans", true),
        ("devices", true),
        ("plan", false),
        ("time_s", true),
    ];
    if let Some(h) = &header {
        cols.push((h.as_str(), true));
    }
    if cost {
        cols.extend([("gpu_h_step", true), ("usd_step", true)]);
    }
    cols.extend([
        ("mfu", true),
        ("memory_gib", true),
        ("compute_s", true),
        ("comm_s", true),
        ("hidden_s", true),
        ("bubble_s", true),
        ("bottleneck", false),
    ]);
    let mut t = Table::new(&cols);
    let same = |a: &TrainingReport, b: &TrainingReport| {
        let bd = |r: &TrainingReport| {
            let b = &r.breakdown;
            [
                r.iteration_time.0,
                r.memory.peak.0,
                b.compute.total(),
                b.tp_comm.0 + b.cp_comm.0 + b.pp_comm.0 + b.dp_comm.0 + b.zero_comm.0,
                b.bubble.0,
            ]
        };
        a.devices == b.devices && bd(a) == bd(b)
    };
    let mut i = 0;
    while i < r.plans.len() {
        let p = &r.plans[i];
        let n = r.plans[i..]
            .iter()
            .take_while(|q| same(&q.report, &p.report))
            .count();
        let mut row = vec![
            if n > 1 {
                format!("{}-{}", p.rank, p.rank + n - 1)
            } else {
                p.rank.to_string()
            },
            n.to_string(),
            p.report.devices.to_string(),
            placed_plan_label(&p.plan, &p.placement),
        ];
        let cells = report_cells(&p.report);
        row.push(cells[0].clone());
        if let Some(iv) = iv {
            let [lo, hi] = iv.around(p.report.iteration_time.0, Direction::Time);
            row.push(format!("{}–{}", num(lo), num(hi)));
        }
        if cost {
            let gpu_h = gpu_hours(&p.report);
            row.extend([num(gpu_h), num(gpu_h * price)]);
        }
        row.extend(cells[1..].iter().cloned());
        t.push(row);
        i += n;
    }
    t
}

/// GPU-hours of one optimizer step: step time x devices.
fn gpu_hours(r: &TrainingReport) -> f64 {
    r.iteration_time.0 * r.devices as f64 / 3600.0
}

/// What the compact plan labels and the columns abbreviate.
const LEGEND: &str = "\
legend: tpN/ppN/dpN/cpN tensor/pipeline/data/context-parallel degrees; epN/etpN expert and
  expert tensor-parallel degrees (when > 1); vN virtual pipeline stages per device
  (interleaving); mbN micro-batch size; sp sequence parallelism; zeroN ZeRO
  stage; none/selective/full recompute, full(N) full recompute of N layers per stage; the
  pipeline schedule (1f1b, interleaved-1f1b, ...); the GEMM precision; tpo TP communication
  overlapped with GEMMs; [a-b-c-d] the order of the mesh axes on the devices, innermost first,
  when not Megatron-LM's tp-cp-pp-dp. plans: how many ranked plans share the row's results
  (they differ only in choices that change nothing here, e.g. a placement or an overlap
  switch); comm_s exposed communication, hidden_s communication hidden behind compute by
  overlap (the time that rests on overlap), bubble_s pipeline bubble, per step.
";

/// The top plans with one column per plan field (for spreadsheets), full precision.
fn csv_table(r: &SearchResult, price: f64, iv: Option<&Interval>) -> Table {
    let cost = r.summary.objective == Objective::Cost;
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
        ("hidden_s", true),
        ("bubble_s", true),
        ("bottleneck", false),
    ]);
    if cost {
        cols.extend([("gpu_hours_per_step", true), ("usd_per_step", true)]);
    }
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
            b.hidden_comm.0.to_string(),
            b.bubble.0.to_string(),
            format!("{:?}", rep.bottleneck),
        ]);
        if cost {
            let h = gpu_hours(rep);
            row.extend([h.to_string(), (h * price).to_string()]);
        }
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
    price: f64,
    iv: Option<&Interval>,
) -> String {
    let s = &r.summary;
    let mut out = format!(
        "top {} plans by {}:\n{}",
        r.plans.len(),
        s.objective.name(),
        plans_table(r, price, iv).render()
    );
    if let Some(iv) = iv {
        out.push_str(&format!("error bars: {}\n", iv.describe()));
    }
    if let Some(p) = published {
        out.push_str(&published_line(r, p, global_batch));
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
    if s.objective == Objective::Cost {
        out.push_str(&format!(
            "\ncost: gpu_h_step = step time x devices / 3600; usd_step at {} USD per GPU-hour \
             (search.price_per_gpu_hour / --price-per-gpu-hour; default: {})\n",
            num(price),
            perfcast_search::space::PRICE_SOURCE
        ));
    }
    out.push('\n');
    out.push_str(LEGEND);
    out.push_str(&walk_note(s));
    out.push_str(&format!(
        "\n{} plans enumerated, {} pruned ({} refused, {} over the memory limit of {:.2} GiB \
         per device: capacity x (1 - search.memory_headroom = {}), {} by the time bound), \
         {} evaluated in {:.3} s on {} threads ({:.0} plans/s, {:.0} evaluations/s)\n",
        s.enumerated,
        s.pruned,
        s.pruned_invalid,
        s.pruned_memory,
        s.memory_limit_gib,
        s.memory_headroom,
        s.pruned_bound,
        s.evaluated,
        s.seconds,
        s.threads,
        s.plans_per_s,
        s.evaluations_per_s
    ));
    out
}

/// The line on the config's own `[plan]`: its time, MFU and memory, and how the fastest plan
/// found on as many devices compares.
fn published_line(r: &SearchResult, p: &Published, global_batch: u32) -> String {
    let mut out = String::new();
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
    out
}

/// The size of the space as estimated before the walk and, when the time limit stopped it,
/// what was not visited.
fn walk_note(s: &perfcast_search::Summary) -> String {
    let mut out = format!("\nspace: {} plans (counted before the walk)", s.estimated);
    if s.complete {
        out.push_str(", all visited\n");
        return out;
    }
    out.push_str(&format!(
        "; STOPPED at the time limit of {} s (--max-seconds): the plans above are the best \
         found so far; not visited: {} plans in {} of the (tp, pp, dp, cp) tuples",
        s.max_seconds.unwrap_or(0.0),
        s.not_visited,
        s.not_visited_tuple_count
    ));
    for t in &s.not_visited_tuples {
        out.push_str(&format!("\n  {t}"));
    }
    if s.not_visited_tuple_count > s.not_visited_tuples.len() {
        out.push_str(&format!(
            "\n  ... and {} more",
            s.not_visited_tuple_count - s.not_visited_tuples.len()
        ));
    }
    out.push('\n');
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
