//! `perfcast predict`: one training step of the config's `[model]` on its `[device]` /
//! `[system]` under its `[plan]` (engine options from `[options]`), read through
//! `perfcast-scenario` (which reconciles `plan.dp` with `system.devices`).

use crate::common::{print, to_json_of, ConfigArgs, Format};
use crate::error_bars::IntervalArgs;
use perfcast_config::{Config, SECTIONS};
use perfcast_engine::training::{KernelPaths, StageMemory};
use perfcast_engine::{TrainingPlan, TrainingReport};
use perfcast_report::charts::training_svg;
use perfcast_report::error_bars::{self, ErrorBars, Row};
use perfcast_report::predict;
use perfcast_scenario::network::NetworkUsed;
use perfcast_scenario::{engine_error, TrainingScenario};
use perfcast_validation::cases::Kind;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Also draw the time breakdown (stacked bar) and the memory of every pipeline stage
    /// (stacked bars) to this SVG file.
    #[arg(long, value_name = "FILE.svg|FILE.png", value_parser = crate::common::plot_path)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub intervals: IntervalArgs,
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
    reference: Option<perfcast_report::reference::ReferenceOut<'a>>,
    /// Each predicted time and rate's interval, and where they come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_bars: Option<ErrorBars<'a>>,
    /// The software stack the step ran on, and what timed each op class (`measured` and
    /// `interpolated`: a kernel table; `analytical`: the compute unit's model), in seconds of
    /// one layer, the embedding, the head and the optimizer, one micro-batch each.
    software: &'a predict::Software,
    kernel_paths: &'a [KernelPaths],
    /// The network the step ran on (levels, topology, its links and price) and the parallel
    /// strategies in mesh order.
    network: &'a NetworkUsed,
    /// The configuration that produced the report (feed it back as a `.json` config).
    config: serde_json::Value,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load(&a.config)?;
    // Without a [plan], the fastest plan of a search (said so in the notes).
    let (cfg, chosen) = match perfcast_search::default_plan::with_default_plan(&cfg)? {
        Some((chosen, plan)) => (chosen, Some(plan)),
        None => (cfg, None),
    };
    let resolved = perfcast_scenario::Scenario::training(&cfg);
    let scenario = TrainingScenario::of(&resolved)?;
    let TrainingScenario { training, plan } = &scenario;
    let system_name = training.system().name.clone();
    let report = training.evaluate(plan).map_err(|e| engine_error(&cfg, e))?;
    let stages = training
        .memory_per_stage(plan)
        .map_err(|e| engine_error(&cfg, e))?;
    let model_name = training.model().name.clone();
    let sequence = predict::sequence_label(training.model());
    let system = training.system();
    let mut warnings =
        perfcast_scenario::plausible::hardware_warnings(&*system.compute, &system.memory);
    if let Some(c) = &chosen {
        warnings.insert(0, c.note(training.model().seq_len));
    }
    let published = perfcast_scenario::reference::reference(&cfg)?;
    let reference = published.as_ref().map(|r| {
        perfcast_report::reference::compare(r, |key| match key {
            "iteration_time_s" => Some(report.iteration_time.0),
            "tokens_per_s" => Some(report.tokens_per_s),
            "tflops_per_gpu" => Some(report.tflops_per_gpu_model),
            "tflops_per_gpu_hardware" => Some(report.tflops_per_gpu_hardware),
            "mfu" => Some(report.mfu),
            "hfu" => Some(report.hfu),
            _ => None,
        })
    });
    let software = predict::Software {
        stack: cfg.extract_opt::<String>("stack").ok().flatten(),
        description: resolved.stack()?.description.clone(),
    };
    let paths = training
        .kernel_paths(plan)
        .map_err(|e| engine_error(&cfg, e))?;
    let network = NetworkUsed::of_training(&resolved, &scenario)?;
    let interval = a.intervals.for_scenario(&resolved, Kind::Training)?;
    let rows = predict::interval_rows(&report);
    let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();

    if let Some(path) = &a.plot {
        crate::common::write_plot(
            path,
            training_svg(&model_name, &system_name, &report, &stages),
        )?;
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json_of(
            "predict",
            &Output {
                model: &model_name,
                system: &system_name,
                plan,
                report: &report,
                memory_per_stage: &stages,
                notes: perfcast_report::training::notes(&report)
                    .into_iter()
                    .chain(warnings)
                    .collect(),
                reference,
                error_bars: interval.as_ref().map(|iv| error_bars::json(iv, &plain)),
                software: &software,
                kernel_paths: &paths,
                network: &network,
                config: perfcast_scenario::reproducible_config(&cfg, training.model())?,
            },
        )?,
        Format::Csv => {
            let mut s = predict::csv(plan, &report, &stages, &warnings);
            s.push_str(&predict::kernel_paths_csv(&software, &paths));
            s.push_str(&perfcast_report::network::csv(&network));
            if let Some(iv) = &interval {
                s.push_str(&error_bars::csv_rows(iv, &rows));
            }
            if let Some(r) = &reference {
                s.push_str(&perfcast_report::reference::csv(r));
            }
            s
        }
        Format::Table => {
            let t = predict::table(
                &format!("{model_name} ({sequence})"),
                &system_name,
                plan,
                &network,
                &report,
                &stages,
                &warnings,
            );
            let mut s = match &interval {
                Some(iv) => error_bars::annotate(&t, iv, &plain, "  devices, micro-batches"),
                None => t,
            };
            s.push_str(&predict::kernel_paths_table(&software, &paths));
            s.push_str(&perfcast_report::network::table(&network));
            if let Some(r) = &reference {
                s.push_str(&perfcast_report::reference::table(r));
            }
            s
        }
    };
    print(&text)?;
    if !report.memory.fits {
        return Err(anyhow::Error::new(crate::common::Infeasible(
            predict::does_not_fit(&report, &stages),
        )));
    }
    Ok(())
}
