//! What `perfcast serve` writes of a serving simulation: the CSV/Parquet table (one row per
//! offered load), the terminal text (the deployment, then one run as metric rows or a sweep
//! as one row per load with where TTFT explodes) and the latency-vs-throughput chart.

use perfcast_render::figure::{Axis, Figure, Marker, Panel, PanelKind, PlotError, Series};
use perfcast_render::{num, Table};
use perfcast_serving::{ttft_knee, Deployment, ServingReport, Stats};

/// A deployment's runs (one per offered load) as `perfcast serve` writes them.
#[derive(Debug, Clone, Copy)]
pub struct ServeOutput<'a> {
    /// The model's name.
    pub model: &'a str,
    /// The system's name.
    pub system: &'a str,
    /// The deployment simulated.
    pub deployment: &'a Deployment,
    /// Its runs.
    pub runs: &'a [ServingReport],
}

impl ServeOutput<'_> {
    /// The CSV and Parquet table: one row per run.
    pub fn rows(&self) -> Table {
        runs_table(self.runs)
    }

    /// The terminal text.
    pub fn text(&self) -> String {
        render(self.model, self.system, self.deployment, self.runs)
    }

    /// TTFT and TPOT (mean and p90) against output throughput, one point per run, as SVG.
    pub fn svg(&self) -> Result<String, PlotError> {
        curve_svg(self.model, self.system, self.runs)
    }
}

/// Mean, p50, p90 and p99 in milliseconds, for people.
fn ms(s: &Stats) -> [String; 4] {
    [s.mean, s.p50, s.p90, s.p99].map(|t| num(t.millis()))
}

/// Mean, p50, p90 and p99 in seconds, full precision (as JSON has them).
fn seconds(s: &Stats) -> [String; 4] {
    [s.mean, s.p50, s.p90, s.p99].map(|t| t.0.to_string())
}

/// One row per run: full precision, times in seconds, as in JSON (the terminal text shows
/// milliseconds, rounded).
fn runs_table(runs: &[ServingReport]) -> Table {
    let mut t = Table::new(&[
        ("load", false),
        ("offered_rps", true),
        ("requests_per_s", true),
        ("output_tok_s", true),
        ("tok_s_per_gpu", true),
        ("tok_s_per_user", true),
        ("ttft_mean_s", true),
        ("ttft_p50_s", true),
        ("ttft_p90_s", true),
        ("ttft_p99_s", true),
        ("tpot_mean_s", true),
        ("tpot_p50_s", true),
        ("tpot_p90_s", true),
        ("tpot_p99_s", true),
        ("itl_mean_s", true),
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
            r.offered_rate.map(|x| x.to_string()).unwrap_or_default(),
            r.requests_per_s.to_string(),
            r.output_tokens_per_s.to_string(),
            r.output_tokens_per_s_per_gpu.to_string(),
            r.tokens_per_s_per_user.to_string(),
        ];
        row.extend(seconds(&r.ttft));
        row.extend(seconds(&r.tpot));
        row.push(r.itl_mean.0.to_string());
        row.push(r.e2e.mean.0.to_string());
        row.push(r.e2e.p99.0.to_string());
        row.push(
            r.slo
                .first()
                .map(|s| s.goodput_requests_per_s.to_string())
                .unwrap_or_default(),
        );
        row.push(
            r.slo
                .first()
                .map(|s| s.attainment.to_string())
                .unwrap_or_default(),
        );
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
        row.push(occ.to_string());
        row.push(peak.to_string());
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
            // The experts' and the attention's layouts over the tp ranks, where they are not
            // plain tensor parallelism.
            let mut layout = String::new();
            if p.plan.ep > 1 {
                layout += &format!(" ep{}", p.plan.ep);
            }
            if p.plan.attention_dp {
                let groups = p.plan.attention_ranks();
                layout += &format!(" (attention dp{groups} x tp{})", p.plan.tp / groups.max(1));
            }
            format!(
                "{} {}x tp{} pp{}{layout} (max_batch {}, max_num_tokens {})",
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
        "{}; weights {}, KV cache {}; chunked prefill {}; KV cache {} of the free memory in blocks of {} tokens, {}; CUDA graphs {}; {}",
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
        {
            let mut a = match d.kv_admission {
                perfcast_serving::KvAdmission::Guaranteed => "guaranteed admission".to_string(),
                perfcast_serving::KvAdmission::OnDemand => "on-demand admission".to_string(),
            };
            if d.admission_reserve > 0.0 {
                a += &format!(" (keeping {} of the running outputs free)", d.admission_reserve);
            }
            if d.batching == perfcast_serving::Batching::PrefillFirst {
                a += "; prefill-first batching";
            }
            a
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
        if let Some(knee) = ttft_knee(runs) {
            out.push_str(&format!(
                "TTFT explodes (mean > 5x its value at the lowest load) from {} req/s offered\n",
                num(knee)
            ));
        }
    }
    out
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
fn curve_svg(model: &str, system: &str, runs: &[ServingReport]) -> Result<String, PlotError> {
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
    fig.render()
}
