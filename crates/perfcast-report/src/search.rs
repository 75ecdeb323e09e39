//! What `perfcast search` writes of a training-plan search: the JSON document, the CSV (one
//! column per plan field, full precision; also the Parquet table) and the terminal text (the
//! top plans with identical results collapsed, the Pareto fronts, the config's own `[plan]`
//! beside the fastest plan, the walk's counts).

use crate::error_bars;
use perfcast_engine::training::{TrainingPlan, TrainingReport};
use perfcast_render::{num, placed_plan_label, plan_label, PlanStyle, Table};
use perfcast_search::{Objective, SearchResult};
use perfcast_validation::intervals::{Direction, Interval};
use serde::{Serialize, Serializer};

/// A search's result with what its output shows beside it.
#[derive(Debug, Clone, Copy)]
pub struct SearchOutput<'a> {
    /// The result.
    pub result: &'a SearchResult,
    /// The config's own `[plan]`, evaluated.
    pub published: Option<&'a Published>,
    /// The searched plans' global batch (the `[plan]`'s may differ: then the comparison is per
    /// sequence).
    pub global_batch: u32,
    /// USD per GPU-hour, for the cost objective.
    pub price_per_gpu_hour: f64,
    /// The step time's error bars.
    pub interval: Option<&'a Interval>,
}

impl SearchOutput<'_> {
    /// The CSV and Parquet table: the ranked plans, one column per plan field.
    pub fn rows(&self) -> Table {
        csv_table(self.result, self.price_per_gpu_hour, self.interval)
    }

    /// The terminal text.
    pub fn text(&self) -> String {
        render(
            self.result,
            self.published,
            self.global_batch,
            self.price_per_gpu_hour,
            self.interval,
        )
    }
}

impl Serialize for SearchOutput<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.result;
        let time = |t: f64| self.interval.map(|iv| iv.around(t, Direction::Time));
        Output {
            plans: r
                .plans
                .iter()
                .map(|p| PlanOut {
                    plan: p,
                    interval: time(p.report.iteration_time.0),
                })
                .collect(),
            error_bars: self.interval,
            pareto: &r.pareto,
            pareto_devices: &r.pareto_devices,
            fastest: &r.fastest,
            summary: &r.summary,
            published: self.published,
            cost: cost_of(r, self.price_per_gpu_hour),
        }
        .serialize(s)
    }
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
pub struct Published {
    /// The plan.
    pub plan: TrainingPlan,
    /// Its step time, s (`None`: not evaluated, see `error`).
    pub time_s: Option<f64>,
    /// Its model FLOPs utilisation.
    pub mfu: Option<f64>,
    /// Its peak memory per device, GiB.
    pub memory_gib: Option<f64>,
    /// Whether it fits the device's memory.
    pub fits: Option<bool>,
    /// Why it was not evaluated.
    pub error: Option<String>,
}

impl Published {
    /// `plan` with its evaluation: the report, or why there is none.
    pub fn new(plan: &TrainingPlan, evaluated: Result<&TrainingReport, String>) -> Published {
        let (time_s, mfu, memory_gib, fits, error) = match evaluated {
            Ok(r) => (
                Some(r.iteration_time.0),
                Some(r.mfu),
                Some(r.memory.peak.gib()),
                Some(r.memory.fits),
                None,
            ),
            Err(e) => (None, None, None, None, Some(e)),
        };
        Published {
            plan: plan.clone(),
            time_s,
            mfu,
            memory_gib,
            fits,
            error,
        }
    }
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
        num(b.exposed_comm().0),
        num(b.hidden_comm.0),
        num(b.bubble.0),
        r.bottleneck.describe().to_string(),
    ]
}

/// The top plans, plans with identical results (same devices, time, memory and breakdown:
/// they differ only in a choice that changes nothing here, such as a placement that lays
/// this mesh out alike) collapsed into one row with their count; with the cost objective,
/// GPU-hours and the price per step; with error bars, the step time's interval.
fn plans_table(r: &SearchResult, price: f64, iv: Option<&Interval>) -> Table {
    let cost = r.summary.objective == Objective::Cost;
    let header = iv.map(|iv| format!("time {}%", error_bars::level(iv.level)));
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
                b.exposed_comm().0,
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
    // The declared axes' degrees (`shard=8;...`), when a plan has one.
    let axes = r.plans.iter().any(|p| !p.plan.axes.is_empty());
    if axes {
        cols.push(("axes", false));
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
            b.exposed_comm().0.to_string(),
            b.hidden_comm.0.to_string(),
            b.bubble.0.to_string(),
            rep.bottleneck.name().to_string(),
        ]);
        if cost {
            let h = gpu_hours(rep);
            row.extend([h.to_string(), (h * price).to_string()]);
        }
        if let Some(iv) = iv {
            let [lo, hi] = iv.around(rep.iteration_time.0, Direction::Time);
            row.extend([lo.to_string(), hi.to_string()]);
        }
        if axes {
            let cells: Vec<String> = p.axes.iter().map(|(k, v)| format!("{k}={v}")).collect();
            row.push(cells.join(";"));
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
        out.push_str(&format!("error bars: {}\n", error_bars::describe(iv)));
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
