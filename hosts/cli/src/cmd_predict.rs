//! `perfcast predict`: one training step of the config's `[model]` on its `[device]` /
//! `[system]` under its `[plan]` (engine options from `[options]`), read through
//! `perfcast-scenario` (which reconciles `plan.dp` with `system.devices`).

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use crate::error_bars::{self, ErrorBars, IntervalArgs, Row};
use perfcast_config::{Config, SECTIONS};
use perfcast_engine::training::StageMemory;
use perfcast_engine::{TrainingPlan, TrainingReport};
use perfcast_render::{plan_label, PlanStyle, GIB};
use perfcast_report::charts::training_svg;
use perfcast_scenario::{engine_error, TrainingScenario};
use perfcast_validation::cases::Kind;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Also draw the time breakdown (stacked bar) and the memory of every pipeline stage
    /// (stacked bars) to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub intervals: IntervalArgs,
}

/// The rows of a training report that get an interval.
pub(crate) fn training_rows(r: &TrainingReport) -> Vec<(Row<'static>, &'static str)> {
    use perfcast_validation::intervals::Direction::{Rate, Time};
    vec![
        (
            Row::new("iteration_time", "iteration time", r.iteration_time.0, Time),
            "s",
        ),
        (
            Row::new("tokens_per_s", "tokens/s", r.tokens_per_s, Rate),
            "tokens/s",
        ),
        (
            Row::new(
                "tokens_per_s_per_gpu",
                "tokens/s per GPU",
                r.tokens_per_s_per_gpu,
                Rate,
            ),
            "tokens/s",
        ),
        (
            // In JSON and CSV only: its table row carries two values.
            Row::new("tflops_per_gpu_model", "", r.tflops_per_gpu_model, Rate),
            "TFLOP/s",
        ),
        (
            Row {
                show: |v| format!("{:.1}%", 100.0 * v),
                ..Row::new("mfu", "MFU / HFU", r.mfu, Rate)
            },
            "",
        ),
    ]
}

/// Top-level sections `predict` and `infer` accept: the host's, plus those of `search` and
/// `serve` (`search`, `serving`, `slo`, `serving_search`), which experiment files share.
pub(crate) fn load(args: &ConfigArgs) -> anyhow::Result<Config> {
    crate::common::load_config(&sources(args)?)
}

/// The sources of [`load`].
pub(crate) fn sources(args: &ConfigArgs) -> anyhow::Result<perfcast_config::Sources> {
    let mut sources = args.sources()?;
    let mut sections = SECTIONS.to_vec();
    // Experiment files may carry the sections of `search` and `serve` too.
    sections.extend(["search", "serving", "slo", "serving_search"]);
    sources.sections = sections;
    Ok(sources)
}

/// What `predict --format json` prints.
#[derive(Serialize)]
struct Output<'a> {
    model: &'a str,
    system: &'a str,
    plan: &'a TrainingPlan,
    report: &'a TrainingReport,
    /// Every pipeline stage's device memory (the report keeps the first, second and last).
    memory_per_stage: &'a [StageMemory],
    notes: Vec<String>,
    /// The config's published figures beside the prediction, if it has `[reference]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reference: Option<crate::reference::ReferenceOut<'a>>,
    /// Each predicted time and rate's interval, and where they come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_bars: Option<ErrorBars<'a>>,
    /// The configuration that produced the report (feed it back as a `.json` config).
    config: serde_json::Value,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load(&a.config)?;
    let resolved = perfcast_scenario::Scenario::training(&cfg);
    let TrainingScenario { training, plan } = TrainingScenario::of(&resolved)?;
    let system_name = training.system().name.clone();
    let report = training
        .evaluate(&plan)
        .map_err(|e| engine_error(&cfg, e))?;
    let stages = training
        .memory_per_stage(&plan)
        .map_err(|e| engine_error(&cfg, e))?;
    let model_name = training.model().name.clone();
    let sequence = sequence_label(training.model());
    let system = training.system();
    let warnings =
        perfcast_scenario::plausible::hardware_warnings(&*system.compute, &system.memory);
    let published = perfcast_scenario::reference::reference(&cfg)?;
    let reference = published.as_ref().map(|r| {
        crate::reference::compare(r, |key| match key {
            "iteration_time_s" => Some(report.iteration_time.0),
            "tokens_per_s" => Some(report.tokens_per_s),
            "tflops_per_gpu" => Some(report.tflops_per_gpu_model),
            "tflops_per_gpu_hardware" => Some(report.tflops_per_gpu_hardware),
            "mfu" => Some(report.mfu),
            "hfu" => Some(report.hfu),
            _ => None,
        })
    });
    let interval = a.intervals.for_scenario(&resolved, Kind::Training)?;
    let rows = training_rows(&report);
    let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();

    if let Some(path) = &a.plot {
        crate::common::write_plot(
            path,
            training_svg(&model_name, &system_name, &report, &stages),
        )?;
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json(&Output {
            model: &model_name,
            system: &system_name,
            plan: &plan,
            report: &report,
            memory_per_stage: &stages,
            notes: perfcast_report::training::notes(&report)
                .into_iter()
                .chain(warnings)
                .collect(),
            reference,
            error_bars: interval.as_ref().map(|iv| error_bars::json(iv, &plain)),
            config: perfcast_scenario::reproducible_config(&cfg, training.model())?,
        })?,
        Format::Csv => {
            let mut s = csv(&plan, &report, &stages, &warnings);
            if let Some(iv) = &interval {
                s.push_str(&error_bars::csv_rows(iv, &rows));
            }
            if let Some(r) = &reference {
                s.push_str(&crate::reference::csv(r));
            }
            s
        }
        Format::Table => {
            let t = table(
                &format!("{model_name} ({sequence})"),
                &system_name,
                &plan,
                &report,
                &stages,
                &warnings,
            );
            let mut s = match &interval {
                Some(iv) => error_bars::annotate(&t, iv, &plain, "  devices, micro-batches"),
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
        return Err(does_not_fit(&report, &stages));
    }
    Ok(())
}

/// The error of a plan whose largest stage exceeds the device memory.
fn does_not_fit(r: &TrainingReport, stages: &[StageMemory]) -> anyhow::Error {
    let worst = stages.iter().copied().fold(r.memory.first_stage, |a, s| {
        if s.total.0 > a.total.0 {
            s
        } else {
            a
        }
    });
    anyhow::Error::new(crate::common::Infeasible(format!(
        "the plan does not fit in device memory: pipeline stage {} needs {:.2} GiB per device (weights {:.2}, gradients {:.2}, optimizer {:.2}, activations {:.2}, temporary {:.2}, reserved {:.2}) but the device has {:.2} GiB: short by {:.2} GiB; raise plan.tp or plan.pp, use plan.zero_stage, or plan.recompute = \"selective\" / \"full\"",
        worst.stage,
        worst.total.gib(),
        worst.weights.gib(),
        worst.grads.gib(),
        worst.optimizer.gib(),
        worst.activations.gib(),
        worst.temp.gib(),
        worst.reserved.gib(),
        r.memory.capacity.gib(),
        (worst.total.0 - r.memory.capacity.0).max(r.memory.shortfall.0) / GIB,
    )))
}

/// The training sequence length, and the model's context where it is longer.
fn sequence_label(m: &perfcast_core::workload::ModelSpec) -> String {
    if m.context_limit() > m.seq_len {
        format!(
            "sequences of {} tokens; context {}",
            m.seq_len,
            m.context_limit()
        )
    } else {
        format!("sequences of {} tokens", m.seq_len)
    }
}

fn table(
    model: &str,
    system: &str,
    plan: &TrainingPlan,
    r: &TrainingReport,
    stages: &[StageMemory],
    warnings: &[String],
) -> String {
    let mut s = format!(
        "{model} on {system}, {} devices\n  {}\n",
        r.devices,
        plan_label(plan, PlanStyle::Fields)
    );
    s.push_str(&perfcast_report::training::table(r));
    // The report's table ends with its notes: the hardware warnings continue the list.
    for w in warnings {
        let _ = writeln!(s, "  - {w}");
    }
    if stages.len() > 3 {
        let _ = writeln!(s, "Memory of every pipeline stage (GiB per device)");
        let mut headers = vec![("stage", true)];
        headers.extend(StageMemory::FIELDS.iter().map(|f| (f.label, true)));
        let mut t = Table::new(&headers);
        for st in stages {
            let mut row = vec![st.stage.to_string()];
            row.extend(StageMemory::FIELDS.iter().map(|f| {
                if f.unit == "B" {
                    format!("{:.2}", f.display_value(st))
                } else {
                    num((f.get)(st))
                }
            }));
            t.push(row);
        }
        for line in t.render().lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

fn csv(
    plan: &TrainingPlan,
    r: &TrainingReport,
    stages: &[StageMemory],
    warnings: &[String],
) -> String {
    let mut s = perfcast_report::training::csv(r);
    for (k, v) in [
        ("plan.tp", plan.tp),
        ("plan.pp", plan.pp),
        ("plan.dp", plan.dp),
        ("plan.cp", plan.cp),
        ("plan.vpp", plan.vpp),
        ("plan.micro_batch", plan.micro_batch),
        ("plan.global_batch", plan.global_batch),
    ] {
        let _ = writeln!(s, "{k},{v},");
    }
    for st in stages {
        for f in &StageMemory::FIELDS {
            let _ = writeln!(
                s,
                "memory.stage{}.{},{},{}",
                st.stage,
                f.name,
                (f.get)(st),
                f.unit
            );
        }
    }
    for w in warnings {
        let _ = writeln!(s, "warning,{},", perfcast_render::csv_cell(w));
    }
    s
}
