//! `perfcast serve CONFIG... [--rate R | --rates R1,R2,... | --concurrency N | --trace FILE]
//! [--requests N] [--seed S] [--format table|json|csv] [--plot FILE.svg]`: serving under
//! load, simulated (`perfcast_serving`) for the `[serving]` deployment of the
//! config's model on its system, read through `perfcast-scenario`; one run per load, a
//! latency-throughput curve with several rates. Deterministic for a seed.

use crate::common::{ConfigArgs, Format};
use perfcast_report::serve::ServeOutput;
use perfcast_scenario::serving::{read_trace, Requests};
use perfcast_scenario::{serving_error, ServingScenario};
use perfcast_serving::{ArrivalProcess, Deployment, Load, ServingReport, Simulator};
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
    #[arg(long, value_name = "FILE.svg|FILE.png", value_parser = crate::common::plot_path)]
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
    let output = ServeOutput {
        model,
        system,
        deployment: &d,
        runs: &runs,
    };
    crate::common::write_rows(
        a.format,
        || {
            Ok(Output {
                model,
                system,
                deployment: &d,
                runs: &runs,
                config: perfcast_scenario::reproducible_config(&cfg, sc.inference.model())?,
            })
        },
        || output.text(),
        || output.rows(),
        a.out.as_deref(),
        "serve",
        "serve",
    )?;
    if let Some(path) = &a.plot {
        let svg = output.svg().map_err(|e| anyhow::anyhow!("{e}"))?;
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
        if let Load::Concurrency(c) = w.load {
            if c > w.requests {
                let from = |flag: bool, cli: &str, key: &str| {
                    if flag {
                        cli.to_string()
                    } else {
                        format!("`{key}`")
                    }
                };
                anyhow::bail!(
                    "invalid concurrency {c} (from {}): above the {} requests simulated (from {}); a closed loop of more clients than requests never has them all in flight: lower the concurrency or raise the requests",
                    from(a.concurrency.is_some(), "--concurrency", "serving.concurrency"),
                    w.requests,
                    from(a.requests.is_some(), "--requests", "serving.requests"),
                );
            }
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
