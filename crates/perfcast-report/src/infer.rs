//! What `perfcast infer` writes beside the inference report: the rows that carry error bars,
//! the largest batch that fits (`--max-batch`), and why a plan does not fit.

use crate::error_bars::Row;
use perfcast_engine::inference::{InferencePlan, InferenceReport, MemoryReport};
use perfcast_render::Table;
use serde::Serialize;

/// The rows of an inference report that get an interval (times in ms, as the report shows).
pub fn interval_rows(r: &InferenceReport) -> Vec<(Row<'static>, &'static str)> {
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

/// What `--max-batch` reports.
#[derive(Debug, Serialize)]
pub struct MaxBatch<'a> {
    /// The model's name.
    pub model: &'a str,
    /// The system's name.
    pub system: &'a str,
    /// The largest batch that fits.
    pub max_batch: u32,
    /// Prompt tokens per sequence.
    pub input_len: u32,
    /// Generated tokens per sequence.
    pub output_len: u32,
    /// Device memory at that batch.
    pub memory: &'a MemoryReport,
}

/// Why a plan does not fit: the device memory by part against what is usable, and the largest
/// batch that would fit (`max_batch`: `None` when not even one sequence does).
pub fn does_not_fit(plan: &InferencePlan, r: &InferenceReport, max_batch: Option<u32>) -> String {
    let m = &r.memory;
    let hint = match max_batch {
        Some(n) => format!("the largest batch that fits these lengths is {n} (inference.batch)"),
        None => "not even a batch of 1 fits: raise inference.tp or inference.pp, or narrow inference.weight_dtype / inference.kv_dtype".into(),
    };
    format!(
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
    )
}

/// `--max-batch` as a table, or as CSV when `csv`.
pub fn max_batch_table(o: &MaxBatch, csv: bool) -> String {
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
    if csv {
        t.csv()
    } else {
        format!(
            "{} on {}: largest batch that fits\n{}",
            o.model,
            o.system,
            t.render()
        )
    }
}
