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
        (Row::new("ttft", "ttft", r.ttft.millis(), Time), "ms"),
        (Row::new("tpot", "tpot", r.tpot.millis(), Time), "ms"),
        (
            Row::new("latency", "latency", r.latency.millis(), Time),
            "ms",
        ),
        (
            Row::new("tokens_per_s", "tokens_per_s", r.tokens_per_s, Rate),
            "tok/s",
        ),
        (
            Row::new(
                "tokens_per_s_per_gpu",
                "tokens_per_s_per_gpu",
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
    let InferenceScenario { inference, plan } = InferenceScenario::from_config(&cfg)?;
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
            Format::Json => to_json(&out)?,
            Format::Csv | Format::Table => max_batch_table(&out, a.format),
        };
        return print(&text);
    }
    let report = inference.evaluate(&plan).map_err(err)?;
    let interval = a.intervals.for_config(&cfg, Kind::Inference)?;
    let rows = inference_rows(&report);
    let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();
    let text = match a.format {
        Format::Json => to_json(&WithConfig {
            report: &report,
            error_bars: interval.as_ref().map(|iv| error_bars::json(iv, &plain)),
            config: perfcast_scenario::reproducible_config(&cfg, inference.model())?,
        })?,
        Format::Csv => {
            let mut s = report.to_csv();
            if let Some(iv) = &interval {
                s.push_str(&error_bars::csv_rows(iv, &rows));
            }
            s
        }
        Format::Table => {
            let t = report.to_table();
            match &interval {
                Some(iv) => error_bars::annotate(&t, iv, &plain, "  tokens_per_s_per_gpu"),
                None => t,
            }
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
    anyhow::anyhow!(
        "the plan does not fit in device memory: weights {:.2} GB + KV cache {:.2} GB ({} sequences x {} tokens x {:.1} KB per token) + workspace {:.2} GB + reserve {:.2} GB = {:.2} GB per device, but {:.2} GB is usable: short by {:.2} GB; {hint}",
        m.weights.gb(),
        m.kv_cache.gb(),
        plan.batch,
        plan.input_len as u64 + plan.output_len as u64,
        m.kv_per_token.0 / 1e3,
        m.workspace.gb(),
        m.reserve.gb(),
        m.total.gb(),
        m.capacity.gb(),
        m.shortfall.gb(),
    )
}

fn max_batch_table(o: &MaxBatch, format: Format) -> String {
    let m = o.memory;
    let rows: Vec<(&str, String, &str)> = vec![
        ("max_batch", o.max_batch.to_string(), "sequences"),
        ("input_len", o.input_len.to_string(), "tokens"),
        ("output_len", o.output_len.to_string(), "tokens"),
        ("memory.weights", format!("{:.2}", m.weights.gb()), "GB"),
        ("memory.kv_cache", format!("{:.2}", m.kv_cache.gb()), "GB"),
        ("memory.workspace", format!("{:.2}", m.workspace.gb()), "GB"),
        ("memory.reserve", format!("{:.2}", m.reserve.gb()), "GB"),
        ("memory.total", format!("{:.2}", m.total.gb()), "GB"),
        ("memory.capacity", format!("{:.2}", m.capacity.gb()), "GB"),
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
