//! `perfcast search CONFIG... [--set k=v]... [--top N] [--objective time|memory|cost]
//! [--format table|json|csv] [--bench]`: the best plans for the config's model and system
//! (the `[search]` section gives the space and constraints), the Pareto front of step time vs
//! memory per GPU, and how many plans were enumerated, pruned and evaluated. With a
//! `[serving_search]` section it is the deployment search for serving instead
//! (`cmd_search_serving`).

use crate::common::{print, ConfigArgs, Format};
use crate::error_bars::IntervalArgs;
use anyhow::Context as _;
use perfcast_config::Config;
use perfcast_report::search::{Published, SearchOutput};
use perfcast_search::{load_scenario, Objective};
use perfcast_validation::cases::Kind;

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
        if a.objective.is_some() {
            anyhow::bail!("--objective applies to training plan searches; a deployment search ([serving_search]) ranks by tokens/s per GPU under each SLO");
        }
        // The training search's section would be read by nothing: refuse it (its `axes`,
        // a strategy's declared axes, are training's only).
        if cfg.contains("search") {
            let from = cfg
                .origin_of("search")
                .map_or(String::new(), |o| format!(" (from {o})"));
            anyhow::bail!(
                "invalid `search`{from}: the training plan search's section; a deployment \
                 search reads `[serving_search]` (tp, pp, ep, ...), and a strategy's declared \
                 axes (`search.axes.NAME`) are for training only"
            );
        }
        return crate::cmd_search_serving::run(&cfg, a.top, a.bench, a.format, a.out.as_deref());
    }
    let resolved = perfcast_scenario::Scenario::training(&cfg);
    let sc = load(&a, &resolved)?;
    if a.bench {
        return bench(&sc);
    }
    if let Some(t) = sc.trainings.first() {
        crate::common::warn_hardware(&*t.system().compute, &t.system().memory);
    }
    let working = crate::common::working("searching plans");
    let r = sc.search()?;
    drop(working);
    let iv = a.intervals.for_scenario(&resolved, Kind::Training)?;
    let published = sc.plan.as_ref().map(|p| {
        let t = sc
            .trainings
            .iter()
            .find(|t| t.system().devices as u64 == p.devices());
        match t.map(|t| t.evaluate(p)) {
            Some(Ok(rep)) => Published::new(p, Ok(&rep)),
            Some(Err(e)) => Published::new(p, Err(e.to_string())),
            None => Published::new(
                p,
                Err(format!(
                    "uses {} devices, not a searched device count",
                    p.devices()
                )),
            ),
        }
    });
    let output = SearchOutput {
        result: &r,
        published: published.as_ref(),
        global_batch: sc.constraints.global_batch,
        price_per_gpu_hour: sc.price_per_gpu_hour,
        interval: iv.as_ref(),
    };
    crate::common::write_rows(
        a.format,
        || Ok(&output),
        || output.text(),
        || output.rows(),
        a.out.as_deref(),
        "search",
        "search",
    )
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
