//! `perfcast roofline`: each `[[ops]]` entry on the config's device.

use crate::common::{print, to_json_of, ConfigArgs, Format};
use perfcast_report::roofline::{self as report, roofline_svg};
use perfcast_scenario::roofline;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Also draw the roofline chart (log-log, roofs per tier and peak, one point per op) to
    /// this SVG file.
    #[arg(long, value_name = "FILE.svg|FILE.png", value_parser = crate::common::plot_path)]
    pub plot: Option<std::path::PathBuf>,
    /// List the GEMMs of the config's `[model]` under its `[inference]` plan for this phase
    /// (the default when the config has those and no `[[ops]]`: both).
    #[arg(long, value_enum)]
    pub phase: Option<ModelPhase>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = a.config.load()?;
    if a.phase.is_some() || (cfg.contains("model") && !cfg.contains("ops")) {
        return run_model(&a, &cfg);
    }
    let device = cfg.device()?;
    let ops = cfg.ops()?;
    if ops.is_empty() {
        anyhow::bail!(
            "no ops to time: the configuration has no `[[ops]]` entries (docs/configuration.md, \"The file format\", shows their fields)"
        );
    }
    let report = roofline::analyze(&device, &ops)?;
    crate::common::warn_hardware(&*device.compute, &device.memory);
    if let Some(path) = &a.plot {
        crate::common::write_plot(path, roofline_svg(&report))?;
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json_of("roofline", &report)?,
        Format::Csv => report::csv(&report),
        Format::Table => report::table(&report),
    };
    print(&text)
}

/// Which phases of a model's inference `--phase` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelPhase {
    Prefill,
    Decode,
    Both,
}

/// `perfcast roofline` of a model: every GEMM (and the attention core) of one prefill pass and
/// of the mean decode step of the `[inference]` plan, per device, on the device's roofline
/// (`Inference::gemm_roofline`: the ridge is the datasheet one, matrix peak over peak device
/// bandwidth; the bound comes from the timing model, efficiencies and launch costs included).
fn run_model(a: &Args, cfg: &perfcast_config::Config) -> anyhow::Result<()> {
    use perfcast_engine::inference::Phase;
    use perfcast_scenario::{engine_error, InferenceScenario};
    if cfg.contains("model") && !cfg.contains("inference") {
        anyhow::bail!(
            "the roofline of a model needs an `[inference]` plan for its GEMM shapes (batch, input_len, output_len; tp, pp, dtypes optional: see configs/experiments/roofline-llama2-70b.toml), or `[[ops]]` entries to time instead"
        );
    }
    let InferenceScenario { inference, plan } = InferenceScenario::from_config(cfg)?;
    let phase = a.phase.unwrap_or(ModelPhase::Both);
    let points: Vec<_> = inference
        .gemm_roofline(&plan)
        .map_err(|e| engine_error(cfg, e))?
        .into_iter()
        .filter(|p| match phase {
            ModelPhase::Both => true,
            ModelPhase::Prefill => p.phase == Phase::Prefill,
            ModelPhase::Decode => p.phase == Phase::Decode,
        })
        .collect();
    let (model, system) = (&inference.model().name, &inference.system().name);
    let sys = inference.system();
    crate::common::warn_hardware(&*sys.compute, &sys.memory);
    if let Some(path) = &a.plot {
        let device = cfg.device()?;
        crate::common::write_plot(path, roofline_svg(&roofline::of_gemms(&device, &points)))?;
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json_of(
            "roofline-gemms",
            &serde_json::json!({
                "model": model,
                "system": system,
                "plan": plan,
                "gemms": points,
            }),
        )?,
        Format::Csv => report::model_csv(model, system, &points),
        Format::Table => report::model_table(model, system, &plan, &points),
    };
    print(&text)
}
