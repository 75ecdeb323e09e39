//! `perfcast infer`: serving the config's `[model]` on its `[device]` / `[system]` with the
//! `[inference]` plan (static batching; serving-stack options from `[options]`), read through
//! `perfcast-scenario`.

use crate::cmd_predict::load;
use crate::common::{print, to_json_of, ConfigArgs, Format};
use crate::error_bars::IntervalArgs;
use perfcast_engine::inference::{InferencePlan, InferenceReport};
use perfcast_report::error_bars::{self, ErrorBars, Row};
use perfcast_report::infer;
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
    reference: Option<&'a perfcast_report::reference::ReferenceOut<'a>>,
    /// Each predicted time and rate's interval, and where they come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_bars: Option<ErrorBars<'a>>,
    config: serde_json::Value,
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
        let out = infer::MaxBatch {
            model: &inference.model().name,
            system: &inference.system().name,
            max_batch: n,
            input_len: plan.input_len,
            output_len: plan.output_len,
            memory: &report.memory,
        };
        let text = match a.format {
            Format::Parquet => return Err(crate::common::no_parquet()),
            Format::Json => to_json_of("infer-max-batch", &out)?,
            Format::Csv | Format::Table => infer::max_batch_table(&out, a.format == Format::Csv),
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
        perfcast_report::reference::compare(r, |key| match key {
            "ttft_ms" => Some(report.ttft.millis()),
            "tpot_ms" => Some(report.tpot.millis()),
            "latency_s" => Some(report.latency.0),
            "output_tokens_per_s" => Some(report.tokens_per_s),
            _ => None,
        })
    });
    let interval = a.intervals.for_scenario(&resolved, Kind::Inference)?;
    let rows = infer::interval_rows(&report);
    let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json_of(
            "infer",
            &WithConfig {
                report: &report,
                notes: &notes,
                reference: reference.as_ref(),
                error_bars: interval.as_ref().map(|iv| error_bars::json(iv, &plain)),
                config: perfcast_scenario::reproducible_config(&cfg, inference.model())?,
            },
        )?,
        Format::Csv => {
            let mut s = perfcast_report::inference::csv(&report, &warnings);
            if let Some(iv) = &interval {
                s.push_str(&error_bars::csv_rows(iv, &rows));
            }
            if let Some(r) = &reference {
                s.push_str(&perfcast_report::reference::csv(r));
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
                s.push_str(&perfcast_report::reference::table(r));
            }
            s
        }
    };
    print(&text)?;
    if !report.memory.fits {
        return Err(anyhow::Error::new(crate::common::Infeasible(
            infer::does_not_fit(&plan, &report, inference.max_batch(&plan).ok()),
        )));
    }
    Ok(())
}
