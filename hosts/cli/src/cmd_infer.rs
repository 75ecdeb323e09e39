//! `perfcast infer`: serving the config's `[model]` on its `[device]` / `[system]` with the
//! `[inference]` plan (static batching; serving-stack options from `[options]`), read through
//! `perfcast-scenario`.

use crate::cmd_predict::load;
use crate::common::{print, to_json, ConfigArgs, Format, Table};
use crate::error_bars::{self, ErrorBars, IntervalArgs, Row};
use perfcast_engine::inference::{Inference, InferencePlan, InferenceReport, MemoryReport};
use perfcast_scenario::{engine_error, InferenceScenario};
use perfcast_validation::cases::Kind;
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Print the largest batch whose weights, KV cache (input_len + output_len tokens per
    /// sequence) and workspace fit on every device, instead of the report.
    #[arg(long)]
    pub max_batch: bool,
    #[command(flatten)]
    pub intervals: IntervalArgs,
}

/// The rows of an inference report that get an interval (times in ms, as the report shows).
fn inference_rows(r: &InferenceReport) -> Vec<(Row<'static>, &'static str)> {
    use perfcast_validation::intervals::Direction::{Rate, Time};
    vec![
        (
            Row::new("ttft", "time to first token", r.ttft.millis(), Time),
            "ms",
        ),
        (
            Row::new("tpot", "time per output token", r.tpot.millis(), Time),
            "ms",
        ),
        (
            Row::new("latency", "end-to-end latency", r.latency.millis(), Time),
            "ms",
        ),
        (
            // In JSON and CSV only: the table's tokens/s line ends with the per-GPU rate.
            Row::new("tokens_per_s", "", r.tokens_per_s, Rate),
            "tok/s",
        ),
        (
            Row::new(
                "tokens_per_s_per_gpu",
                "output tokens/s",
                r.tokens_per_s_per_gpu,
                Rate,
            ),
            "tok/s",
        ),
    ]
}

/// What `infer --format json` prints: the report's fields and the configuration that
/// produced it (feed it back as a `.json` config).
#[derive(Serialize)]
struct WithConfig<'a> {
    #[serde(flatten)]
    report: &'a InferenceReport,
    /// What limits each phase, memory, and any suspicious hardware.
    notes: &'a [String],
    /// The config's published figures beside the prediction, if it has `[reference]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reference: Option<&'a crate::reference::ReferenceOut<'a>>,
    /// Each predicted time and rate's interval, and where they come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_bars: Option<ErrorBars<'a>>,
    config: serde_json::Value,
}

/// What `--max-batch` reports.
#[derive(Serialize)]
struct MaxBatch<'a> {
    model: &'a str,
    system: &'a str,
    max_batch: u32,
    input_len: u32,
    output_len: u32,
    /// Device memory at that batch.
    memory: &'a MemoryReport,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load(&a.config)?;
    let resolved = perfcast_scenario::Scenario::inference(&cfg);
    let InferenceScenario { inference, plan } = InferenceScenario::of(&resolved)?;
    let err = |e| engine_error(&cfg, e);
    if a.max_batch {
        let n = inference.max_batch(&plan).map_err(err)?;
        let at = InferencePlan {
            batch: n,
            ..plan.clone()
        };
        let report = inference.evaluate(&at).map_err(err)?;
        let out = MaxBatch {
            model: &inference.model().name,
            system: &inference.system().name,
            max_batch: n,
            input_len: plan.input_len,
            output_len: plan.output_len,
            memory: &report.memory,
        };
        let text = match a.format {
            Format::Parquet => return Err(crate::common::no_parquet()),
            Format::Json => to_json(&out)?,
            Format::Csv | Format::Table => max_batch_table(&out, a.format),
        };
        return print(&text);
    }
    let report = inference.evaluate(&plan).map_err(err)?;
    let system = inference.system();
    let warnings =
        perfcast_scenario::plausible::hardware_warnings(&*system.compute, &system.memory);
    let mut notes = perfcast_report::inference::notes(&report);
    notes.extend(warnings.iter().cloned());
    let published = perfcast_scenario::reference::reference(&cfg)?;
    let reference = published.as_ref().map(|r| {
        crate::reference::compare(r, |key| match key {
            "ttft_ms" => Some(report.ttft.millis()),
            "tpot_ms" => Some(report.tpot.millis()),
            "latency_s" => Some(report.latency.0),
            "output_tokens_per_s" => Some(report.tokens_per_s),
            _ => None,
        })
    });
    let interval = a.intervals.for_scenario(&resolved, Kind::Inference)?;
    let rows = inference_rows(&report);
    let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json(&WithConfig {
            report: &report,
            notes: &notes,
            reference: reference.as_ref(),
            error_bars: interval.as_ref().map(|iv| error_bars::json(iv, &plain)),
            config: perfcast_scenario::reproducible_config(&cfg, inference.model())?,
        })?,
        Format::Csv => {
            let mut s = perfcast_report::inference::csv(&report, &warnings);
            if let Some(iv) = &interval {
                s.push_str(&error_bars::csv_rows(iv, &rows));
            }
            if let Some(r) = &reference {
                s.push_str(&crate::reference::csv(r));
            }
            s
        }
        Format::Table => {
            let t = perfcast_report::inference::table(&report, &notes);
            let mut s = match &interval {
                Some(iv) => error_bars::annotate(&t, iv, &plain, "  output tokens/s"),
                None => t,
            };
            if let Some(r) = &reference {
                s.push_str(&crate::reference::table(r));
            }
            s
        }
    };
    print(&text)?;
    if !report.memory.fits {
        return Err(does_not_fit(&inference, &plan, &report));
    }
    Ok(())
}

fn does_not_fit(inf: &Inference, plan: &InferencePlan, r: &InferenceReport) -> anyhow::Error {
    let m = &r.memory;
    let hint = match inf.max_batch(plan) {
        Ok(n) => format!("the largest batch that fits these lengths is {n} (inference.batch)"),
        Err(_) => "not even a batch of 1 fits: raise inference.tp or inference.pp, or narrow inference.weight_dtype / inference.kv_dtype".into(),
    };
    anyhow::Error::new(crate::common::Infeasible(format!(
        "the plan does not fit in device memory: weights {:.2} GiB + KV cache {:.2} GiB ({} sequences x {} tokens x {:.1} KiB per token) + workspace {:.2} GiB + reserve {:.2} GiB = {:.2} GiB per device, but {:.2} GiB is usable: short by {:.2} GiB; {hint}",
        m.weights.gib(),
        m.kv_cache.gib(),
        plan.batch,
        plan.input_len as u64 + plan.output_len as u64,
        m.kv_per_token.0 / 1024.0,
        m.workspace.gib(),
        m.reserve.gib(),
        m.total.gib(),
        m.capacity.gib(),
        m.shortfall.gib(),
    )))
}

fn max_batch_table(o: &MaxBatch, format: Format) -> String {
    let m = o.memory;
    let rows: Vec<(&str, String, &str)> = vec![
        ("max_batch", o.max_batch.to_string(), "sequences"),
        ("input_len", o.input_len.to_string(), "tokens"),
        ("output_len", o.output_len.to_string(), "tokens"),
        ("memory.weights", format!("{:.2}", m.weights.gib()), "GiB"),
        ("memory.kv_cache", format!("{:.2}", m.kv_cache.gib()), "GiB"),
        (
            "memory.workspace",
            format!("{:.2}", m.workspace.gib()),
            "GiB",
        ),
        ("memory.reserve", format!("{:.2}", m.reserve.gib()), "GiB"),
        ("memory.total", format!("{:.2}", m.total.gib()), "GiB"),
        ("memory.capacity", format!("{:.2}", m.capacity.gib()), "GiB"),
    ];
    let mut t = Table::new(&[("metric", false), ("value", true), ("unit", false)]);
    for (k, v, u) in rows {
        t.push(vec![k.to_string(), v, u.to_string()]);
    }
    match format {
        Format::Csv => t.csv(),
        _ => format!(
            "{} on {}: largest batch that fits\n{}",
            o.model,
            o.system,
            t.render()
        ),
    }
}
