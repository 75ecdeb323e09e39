//! `perfcast serve CONFIG... [--rate R | --rates R1,R2,... | --concurrency N | --trace FILE]
//! [--requests N] [--seed S] [--format table|json|csv] [--plot FILE.svg]`: serving under
//! load, simulated (`perfcast_serving`) for the `[serving]` deployment of the
//! config's model on its system, read through `perfcast-scenario`; one run per load, a
//! latency-throughput curve with several rates. Deterministic for a seed.

use crate::common::{num, to_json, ConfigArgs, Format, Table};
use perfcast_render::figure::{Axis, Figure, Marker, Panel, PanelKind, Series};
use perfcast_scenario::serving::{read_trace, Requests};
use perfcast_scenario::{serving_error, ServingScenario};
use perfcast_serving::{ArrivalProcess, Deployment, Load, ServingReport, Simulator, Stats};
use serde::Serialize;
use std::io::IsTerminal as _;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Offered load, requests/s (`inf`: every request at once, the maximum throughput).
    #[arg(long, value_name = "R", value_parser = parse_rate, allow_hyphen_values = true,
          conflicts_with_all = ["rates", "concurrency", "trace"])]
    pub rate: Option<f64>,
    /// Several offered loads, one run each (a latency-throughput curve).
    #[arg(long, value_name = "R1,R2,...", value_delimiter = ',', value_parser = parse_rate,
          allow_hyphen_values = true, conflicts_with_all = ["concurrency", "trace"])]
    pub rates: Vec<f64>,
    /// A closed loop of N clients.
    #[arg(long, value_name = "N", conflicts_with = "trace")]
    pub concurrency: Option<u32>,
    /// Requests from a trace (CSV with a header, or JSON lines: arrival_s, input_len,
    /// output_len).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Requests simulated (default: serving.requests, else 1000).
    #[arg(long, value_name = "N")]
    pub requests: Option<u32>,
    /// Seed of the random draws (default: serving.seed, else 0).
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    #[arg(long, value_parser = Format::parser(&crate::common::ROW_FORMATS), default_value_t)]
    pub format: Format,
    /// Write the output to this file (whole or not at all) instead of standard output;
    /// needed by `--format parquet`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Draw TTFT and TPOT against output throughput (one point per load) to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// `inf` (or `infinity`) for a burst; otherwise a finite number > 0.
fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    if t == "inf" || t == "infinity" {
        return Ok(f64::INFINITY);
    }
    let v: f64 = t
        .parse()
        .map_err(|_| format!("`{s}` is not a number of requests per second (or `inf`)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!(
            "`{s}`: a rate must be a finite number of requests per second > 0 (or `inf` for all requests at once)"
        ));
    }
    if v < perfcast_serving::MIN_RATE {
        return Err(format!("`{s}`: a rate {}", perfcast_serving::MIN_RATE_RULE));
    }
    Ok(v)
}

/// What `serve --format json` prints.
#[derive(Serialize)]
struct Output<'a> {
    model: &'a str,
    system: &'a str,
    deployment: &'a Deployment,
    runs: &'a [ServingReport],
    /// The configuration that produced the runs (feed it back as a `.json` config).
    config: serde_json::Value,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    // The sections of `predict` and `infer`, which include the serving ones.
    let cfg = crate::cmd_predict::load(&a.config)?;
    let mut sc = ServingScenario::from_config(&cfg)?;
    apply_overrides(&mut sc, &a)?;
    let loads = loads(&sc, &a);
    let traffic0 = traffic_for(&sc, loads[0]);
    let d = sc
        .deployment(&traffic0)
        .map_err(|e| serving_error(&cfg, e))?;
    let total: u64 = loads.len() as u64 * traffic0.requests().len() as u64;
    let bar = progress_bar(total);
    let slos: Vec<_> = sc.slo.into_iter().collect();
    let mut sim = Simulator::new(&sc.inference).with_draft(sc.draft.as_ref());
    let mut runs = Vec::with_capacity(loads.len());
    for (i, load) in loads.iter().enumerate() {
        let traffic = traffic_for(&sc, *load);
        let base = i as u64 * traffic.requests().len() as u64;
        let mut tick = |done: u32, _n: u32| {
            if let Some(b) = &bar {
                b.set_position(base + done as u64);
            }
        };
        let mut r = sim
            .run_with_progress(&d, &traffic, sc.seed(), &slos, &mut tick)
            .map_err(|e| serving_error(&cfg, e))?;
        label_load(&mut r, *load, &sc);
        runs.push(r);
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let model = &sc.inference.model().name;
    let system = &sc.inference.system().name;
    let text = match a.format {
        Format::Json => to_json(&Output {
            model,
            system,
            deployment: &d,
            runs: &runs,
            config: perfcast_scenario::reproducible_config(&cfg, sc.inference.model())?,
        })?,
        Format::Csv => runs_table(&runs).csv(),
        Format::Parquet => String::new(),
        Format::Table => render(model, system, &d, &runs),
    };
    if a.format == Format::Parquet {
        crate::common::write_parquet(&runs_table(&runs), a.out.as_deref(), "serve")?;
    } else {
        crate::common::emit(&text, a.out.as_deref())?;
    }
    if let Some(path) = &a.plot {
        let svg = curve_svg(model, system, &runs)?;
        crate::common::write_plot(path, svg)?;
    }
    Ok(())
}

/// A progress bar on a terminal (stderr) for long runs.
fn progress_bar(total: u64) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || total < 20_000 {
        return None;
    }
    let b = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "[{bar:30}] {pos}/{len} requests, {elapsed} elapsed, eta {eta}",
    ) {
        b.set_style(style.progress_chars("#>-"));
    }
    Some(b)
}

fn apply_overrides(sc: &mut ServingScenario, a: &Args) -> anyhow::Result<()> {
    if let Some(path) = &a.trace {
        let requests = read_trace(path).map_err(|e| anyhow::anyhow!("--trace {e}"))?;
        sc.requests = Requests::Trace {
            path: path.clone(),
            requests,
        };
    }
    if let Some(c) = a.concurrency {
        if c == 0 {
            anyhow::bail!("invalid `--concurrency 0`: must be at least 1 client");
        }
    }
    if let Requests::Generated(w) = &mut sc.requests {
        if let Some(n) = a.requests {
            if n == 0 {
                anyhow::bail!("invalid `--requests 0`: must be at least 1");
            }
            if n > perfcast_serving::MAX_REQUESTS {
                anyhow::bail!(
                    "invalid `--requests {n}`: {}",
                    perfcast_serving::MAX_REQUESTS_RULE
                );
            }
            w.requests = n;
        }
        if let Some(s) = a.seed {
            w.seed = s;
        }
        if let Some(c) = a.concurrency {
            w.load = Load::Concurrency(c);
        }
    } else if a.requests.is_some() || a.concurrency.is_some() {
        anyhow::bail!("--requests and --concurrency do not apply to a trace (its requests arrive at their own times)");
    }
    if let Some(s) = a.seed {
        sc.config.seed = s;
    }
    Ok(())
}

/// The loads to run: `--rates`, else `--rate`, else the scenario's own.
fn loads(sc: &ServingScenario, a: &Args) -> Vec<Option<f64>> {
    let rates: Vec<f64> = if !a.rates.is_empty() {
        a.rates.clone()
    } else {
        a.rate.into_iter().collect()
    };
    if rates.is_empty() || !matches!(sc.requests, Requests::Generated(_)) {
        return vec![None];
    }
    rates.into_iter().map(Some).collect()
}

fn traffic_for(sc: &ServingScenario, rate: Option<f64>) -> perfcast_serving::Traffic {
    match (&sc.requests, rate) {
        (Requests::Generated(w), Some(r)) => {
            let mut w = w.clone();
            w.load = if r.is_finite() {
                Load::Rate {
                    rate: r,
                    process: match w.load {
                        Load::Rate { process, .. } => process,
                        _ => ArrivalProcess::Poisson,
                    },
                }
            } else {
                Load::Burst
            };
            w.traffic()
        }
        _ => sc.traffic(),
    }
}

fn label_load(r: &mut ServingReport, rate: Option<f64>, sc: &ServingScenario) {
    let load = match (&sc.requests, rate) {
        (Requests::Trace { .. }, _) => Load::Burst,
        (Requests::Generated(w), None) => w.load,
        (Requests::Generated(_), Some(r)) if r.is_finite() => Load::Rate {
            rate: r,
            process: ArrivalProcess::Poisson,
        },
        _ => Load::Burst,
    };
    r.load = match (&sc.requests, load) {
        (Requests::Trace { .. }, _) => "trace".into(),
        (_, Load::Burst) => "burst".into(),
        (_, Load::Rate { rate, .. }) => {
            r.offered_rate = Some(rate);
            "rate".into()
        }
        (_, Load::Concurrency(_)) => "concurrency".into(),
    };
}

fn ms(s: &Stats) -> [String; 4] {
    [
        num(s.mean.millis()),
        num(s.p50.millis()),
        num(s.p90.millis()),
        num(s.p99.millis()),
    ]
}

/// One row per run.
fn runs_table(runs: &[ServingReport]) -> Table {
    let mut t = Table::new(&[
        ("load", false),
        ("offered_rps", true),
        ("requests_per_s", true),
        ("output_tok_s", true),
        ("tok_s_per_gpu", true),
        ("tok_s_per_user", true),
        ("ttft_mean_ms", true),
        ("ttft_p50_ms", true),
        ("ttft_p90_ms", true),
        ("ttft_p99_ms", true),
        ("tpot_mean_ms", true),
        ("tpot_p50_ms", true),
        ("tpot_p90_ms", true),
        ("tpot_p99_ms", true),
        ("itl_mean_ms", true),
        ("e2e_mean_s", true),
        ("e2e_p99_s", true),
        ("goodput_rps", true),
        ("slo_attainment", true),
        ("kv_occupancy", true),
        ("kv_peak", true),
        ("preemptions", true),
    ]);
    for r in runs {
        let load = match (r.offered_rate, r.concurrency) {
            (Some(x), _) => format!("rate {}", num(x)),
            (_, Some(c)) => format!("concurrency {c}"),
            _ => r.load.clone(),
        };
        let mut row = vec![
            load,
            r.offered_rate.map(num).unwrap_or_default(),
            num(r.requests_per_s),
            num(r.output_tokens_per_s),
            num(r.output_tokens_per_s_per_gpu),
            num(r.tokens_per_s_per_user),
        ];
        row.extend(ms(&r.ttft));
        row.extend(ms(&r.tpot));
        row.push(num(r.itl_mean.millis()));
        row.push(num(r.e2e.mean.0));
        row.push(num(r.e2e.p99.0));
        row.push(
            r.slo
                .first()
                .map(|s| num(s.goodput_requests_per_s))
                .unwrap_or_default(),
        );
        row.push(r.slo.first().map(|s| num(s.attainment)).unwrap_or_default());
        let occ = r
            .pools
            .iter()
            .map(|p| p.kv_mean_occupancy)
            .fold(0.0, f64::max);
        let peak = r
            .pools
            .iter()
            .map(|p| p.kv_peak_occupancy)
            .fold(0.0, f64::max);
        row.push(num(occ));
        row.push(num(peak));
        row.push(r.preemptions.to_string());
        t.push(row);
    }
    t
}

fn deployment_line(d: &Deployment) -> String {
    let pools: Vec<String> = d
        .pools
        .iter()
        .map(|p| {
            format!(
                "{} {}x tp{} pp{} (max_batch {}, max_num_tokens {})",
                p.role.name(),
                p.instances,
                p.plan.tp,
                p.plan.pp,
                p.max_batch,
                p.max_num_tokens
            )
        })
        .collect();
    format!(
        "{}; weights {}, KV cache {}; chunked prefill {}; KV cache {} of the free memory in blocks of {} tokens, {} admission; CUDA graphs {}; {}",
        pools.join(" + "),
        d.pools[0].plan.weight_dtype,
        d.pools[0].plan.kv_dtype,
        if d.chunked_prefill {
            format!("on (chunks of {})", d.chunk_size)
        } else {
            "off".into()
        },
        d.kv_memory_fraction,
        d.kv_block_size,
        match d.kv_admission {
            perfcast_serving::KvAdmission::Guaranteed => "guaranteed",
            perfcast_serving::KvAdmission::OnDemand => "on-demand",
        },
        if d.cuda_graphs { "on" } else { "off" },
        match d.speculative {
            Some(s) => format!(
                "speculative k={} a={} ({})",
                s.draft_len,
                s.acceptance_rate,
                match s.method {
                    perfcast_serving::DraftMethod::Ratio => format!("draft cost {}", s.draft_cost),
                    m => format!("{} draft timed", m.name()),
                }
            ),
            None => "no speculation".into(),
        }
    )
}

/// The table output: one run as metric rows, several as one row each.
fn render(model: &str, system: &str, d: &Deployment, runs: &[ServingReport]) -> String {
    let mut out = format!(
        "{model} on {system}: {} GPUs\n  {}\n",
        d.gpus(),
        deployment_line(d)
    );
    if let [r] = runs {
        out.push_str(&single(r).render());
    } else {
        let t = runs_table(runs);
        out.push_str(&t.render());
        if let Some(knee) = knee(runs) {
            out.push_str(&format!(
                "TTFT explodes (mean > 5x its value at the lowest load) from {} req/s offered\n",
                num(knee)
            ));
        }
    }
    out
}

/// The first offered rate whose mean TTFT exceeds five times the lowest rate's.
fn knee(runs: &[ServingReport]) -> Option<f64> {
    let mut rated: Vec<&ServingReport> = runs.iter().filter(|r| r.offered_rate.is_some()).collect();
    rated.sort_by(|a, b| {
        a.offered_rate
            .partial_cmp(&b.offered_rate)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let base = rated.first()?.ttft.mean.0;
    rated
        .iter()
        .find(|r| r.ttft.mean.0 > 5.0 * base)
        .and_then(|r| r.offered_rate)
}

fn single(r: &ServingReport) -> Table {
    let mut t = Table::new(&[("metric", false), ("value", true), ("unit", false)]);
    let mut row = |k: &str, v: String, u: &str| t.push(vec![k.into(), v, u.into()]);
    row("load", r.load.clone(), "");
    if let Some(x) = r.offered_rate {
        row("offered_rate", num(x), "req/s");
    }
    if let Some(c) = r.concurrency {
        row("concurrency", c.to_string(), "clients");
    }
    row(
        "requests",
        format!("{}/{}", r.completed, r.requests),
        "completed",
    );
    row("duration", num(r.duration.0), "s");
    row("requests_per_s", num(r.requests_per_s), "req/s");
    row("output_tokens_per_s", num(r.output_tokens_per_s), "tok/s");
    row(
        "output_tokens_per_s_per_gpu",
        num(r.output_tokens_per_s_per_gpu),
        "tok/s",
    );
    row(
        "tokens_per_s_per_user",
        num(r.tokens_per_s_per_user),
        "tok/s",
    );
    for (name, s) in [("ttft", &r.ttft), ("tpot", &r.tpot)] {
        let [m, p50, p90, p99] = ms(s);
        row(&format!("{name}.mean"), m, "ms");
        row(&format!("{name}.p50"), p50, "ms");
        row(&format!("{name}.p90"), p90, "ms");
        row(&format!("{name}.p99"), p99, "ms");
    }
    row("itl_mean", num(r.itl_mean.millis()), "ms");
    row("e2e.mean", num(r.e2e.mean.0), "s");
    row("e2e.p99", num(r.e2e.p99.0), "s");
    if let Some(k) = &r.kv_transfer {
        row("kv_transfer.mean", num(k.mean.millis()), "ms");
    }
    if let Some(s) = r.slo.first() {
        row("slo.attainment", num(s.attainment), "");
        row("slo.goodput", num(s.goodput_requests_per_s), "req/s");
        row("slo.met", s.met.to_string(), "");
    }
    row("preemptions", r.preemptions.to_string(), "");
    for p in &r.pools {
        let n = p.role.name();
        row(
            &format!("{n}.kv_blocks"),
            p.kv_blocks.to_string(),
            "per instance",
        );
        row(
            &format!("{n}.kv_mean_occupancy"),
            num(p.kv_mean_occupancy),
            "",
        );
        row(
            &format!("{n}.kv_peak_occupancy"),
            num(p.kv_peak_occupancy),
            "",
        );
        row(&format!("{n}.mean_batch"), num(p.mean_batch), "sequences");
        row(
            &format!("{n}.mean_step_tokens"),
            num(p.mean_step_tokens),
            "tokens",
        );
        row(&format!("{n}.busy_fraction"), num(p.busy_fraction), "");
    }
    t
}

/// TTFT and TPOT (mean and p90) against output throughput, one point per run.
fn curve_svg(model: &str, system: &str, runs: &[ServingReport]) -> anyhow::Result<String> {
    let mut sorted: Vec<&ServingReport> = runs.iter().collect();
    sorted.sort_by(|a, b| a.output_tokens_per_s.total_cmp(&b.output_tokens_per_s));
    let pts = |f: &dyn Fn(&ServingReport) -> f64| -> Vec<(f64, f64)> {
        sorted
            .iter()
            .map(|r| (r.output_tokens_per_s, f(r)))
            .collect()
    };
    let series = |name: &str, points, color, marker, dashed| Series {
        name: name.into(),
        points,
        line: true,
        marker: Some(marker),
        color,
        dashed,
    };
    let x = Axis::linear("output throughput (tokens/s)");
    let fig = Figure {
        title: format!("{model} on {system}: latency vs throughput"),
        width: 760.0,
        panel_height: 300.0,
        panels: vec![
            Panel {
                title: "time to first token".into(),
                y: Axis::log("TTFT (ms)"),
                kind: PanelKind::XY {
                    x: x.clone(),
                    series: vec![
                        series(
                            "mean",
                            pts(&|r| r.ttft.mean.millis().max(1e-3)),
                            0,
                            Marker::Circle,
                            false,
                        ),
                        series(
                            "p90",
                            pts(&|r| r.ttft.p90.millis().max(1e-3)),
                            1,
                            Marker::Triangle,
                            true,
                        ),
                    ],
                },
            },
            Panel {
                title: "time per output token".into(),
                y: Axis::linear("TPOT (ms)"),
                kind: PanelKind::XY {
                    x,
                    series: vec![
                        series(
                            "mean",
                            pts(&|r| r.tpot.mean.millis()),
                            0,
                            Marker::Circle,
                            false,
                        ),
                        series(
                            "p90",
                            pts(&|r| r.tpot.p90.millis()),
                            1,
                            Marker::Triangle,
                            true,
                        ),
                    ],
                },
            },
        ],
        caption: "perfcast serve --plot: one point per offered load".into(),
    };
    fig.render().map_err(|e| anyhow::anyhow!("{e}"))
}
