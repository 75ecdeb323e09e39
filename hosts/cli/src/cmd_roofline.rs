//! `perfcast roofline`: each `[[ops]]` entry on the config's device.

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use perfcast_engine::inference::{GemmPoint, InferencePlan};
use perfcast_scenario::roofline::{self, RooflineReport};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Also draw the roofline chart (log-log, roofs per tier and peak, one point per op) to
    /// this SVG file.
    #[arg(long, value_name = "FILE.svg")]
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
            "no ops to time: the configuration has no `[[ops]]` entries (README.md, \"Configuration\", shows their fields)"
        );
    }
    let report = roofline::analyze(&device, &ops)?;
    crate::common::warn_hardware(&*device.compute, &device.memory);
    if let Some(path) = &a.plot {
        crate::common::write_plot(path, crate::plot::roofline_svg(&report))?;
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json(&report)?,
        Format::Csv => csv(&report),
        Format::Table => table(&report),
    };
    print(&text)
}

fn table(r: &RooflineReport) -> String {
    let mut out = format!("device: {} ({})\nmemory:", r.device, r.compute_kind);
    for t in &r.memory {
        out.push_str(&format!(
            "\n  {} ({}, {}): {} GB, {} GB/s peak, {} GB/s achievable",
            t.name,
            t.kind,
            level(t.level),
            num(t.capacity_bytes / 1e9),
            num(t.bandwidth_bytes_per_s / 1e9),
            num(t.effective_bandwidth_bytes_per_s / 1e9),
        ));
    }
    out.push_str(&format!(
        "\nbytes, intensity and ridge at the device tier `{}`\n\n",
        r.device_tier
    ));
    let mut t = Table::new(&[
        ("op", false),
        ("kind", false),
        ("shape", false),
        ("dtype", false),
        ("GFLOP", true),
        ("MB", true),
        ("FLOP/B", true),
        ("ridge", true),
        ("time us", true),
        ("TFLOP/s", true),
        ("bound", false),
    ]);
    for o in &r.ops {
        t.push(vec![
            o.name.clone(),
            o.op.clone(),
            o.shape.clone(),
            o.dtype.clone(),
            num(o.flops / 1e9),
            num(o.bytes / 1e6),
            num(o.intensity),
            num(o.ridge),
            num(o.time_s * 1e6),
            num(o.achieved_flops_per_s / 1e12),
            o.bound.clone(),
        ]);
    }
    out.push_str(&t.render());
    out
}

fn csv(r: &RooflineReport) -> String {
    let mut t = Table::new(&[
        ("device", false),
        ("op", false),
        ("kind", false),
        ("shape", false),
        ("dtype", false),
        ("engine", false),
        ("flops", true),
        ("bytes", true),
        ("intensity_flop_per_byte", true),
        ("ridge_flop_per_byte", true),
        ("attainable_flops_per_s", true),
        ("time_s", true),
        ("compute_s", true),
        ("memory_s", true),
        ("overhead_s", true),
        ("achieved_flops_per_s", true),
        ("bound", false),
    ]);
    for o in &r.ops {
        t.push(vec![
            r.device.clone(),
            o.name.clone(),
            o.op.clone(),
            o.shape.clone(),
            o.dtype.clone(),
            o.engine.clone(),
            o.flops.to_string(),
            o.bytes.to_string(),
            o.intensity.to_string(),
            o.ridge.to_string(),
            o.attainable_flops_per_s.to_string(),
            o.time_s.to_string(),
            o.compute_s.to_string(),
            o.memory_s.to_string(),
            o.overhead_s.to_string(),
            o.achieved_flops_per_s.to_string(),
            o.bound.clone(),
        ]);
    }
    t.csv()
}

fn level(l: perfcast_core::hardware::TierLevel) -> &'static str {
    use perfcast_core::hardware::TierLevel;
    match l {
        TierLevel::OnChip => "on-chip",
        TierLevel::Device => "device",
        TierLevel::Host => "host",
    }
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
        crate::common::write_plot(
            path,
            crate::plot::roofline_svg(&model_report(&device, &points)),
        )?;
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json(&serde_json::json!({
            "model": model,
            "system": system,
            "plan": plan,
            "gemms": points,
        }))?,
        Format::Csv => model_csv(model, system, &points),
        Format::Table => model_table(model, system, &plan, &points),
    };
    print(&text)
}

/// `roofline --format csv` of a model's GEMMs.
fn model_csv(model: &str, system: &str, points: &[GemmPoint]) -> String {
    let mut t = Table::new(&[
        ("model", false),
        ("system", false),
        ("phase", false),
        ("gemm", false),
        ("m", true),
        ("n", true),
        ("k", true),
        ("count", true),
        ("dtype", false),
        ("weight_dtype", false),
        ("flops", true),
        ("bytes", true),
        ("intensity_flop_per_byte", true),
        ("ridge_flop_per_byte", true),
        ("time_s", true),
        ("share_of_phase_time", true),
        ("bound", false),
    ]);
    for p in points {
        t.push(vec![
            model.to_string(),
            system.to_string(),
            p.phase.name().to_string(),
            p.name.to_string(),
            p.m.to_string(),
            p.n.to_string(),
            p.k.to_string(),
            p.count.to_string(),
            p.dtype.name().to_string(),
            p.weight_dtype.name().to_string(),
            p.flops.to_string(),
            p.bytes.to_string(),
            p.intensity.to_string(),
            p.ridge.to_string(),
            p.time.0.to_string(),
            p.share_of_phase_time.to_string(),
            p.limiter.clone(),
        ]);
    }
    t.csv()
}

/// `roofline` of a model's GEMMs as a table, under a line naming the plan.
fn model_table(model: &str, system: &str, plan: &InferencePlan, points: &[GemmPoint]) -> String {
    let mut out = format!(
        "{model} on {system}: tp={} pp={} batch={} input={} output={}\n\
         per device; decode at the mean context; intensity per device-memory byte; \
         ridge = matrix peak / peak device bandwidth; share = count x time / pass time\n\n",
        plan.tp, plan.pp, plan.batch, plan.input_len, plan.output_len
    );
    let mut t = Table::new(&[
        ("phase", false),
        ("gemm", false),
        ("m", true),
        ("n", true),
        ("k", true),
        ("count", true),
        ("dtype", false),
        ("GFLOP", true),
        ("MB", true),
        ("FLOP/B", true),
        ("ridge", true),
        ("time us", true),
        ("share %", true),
        ("bound", false),
    ]);
    for p in points {
        t.push(vec![
            p.phase.name().to_string(),
            p.name.to_string(),
            p.m.to_string(),
            p.n.to_string(),
            p.k.to_string(),
            p.count.to_string(),
            p.dtype.name().to_string(),
            num(p.flops / 1e9),
            num(p.bytes / 1e6),
            num(p.intensity),
            num(p.ridge),
            num(p.time.0 * 1e6),
            num(100.0 * p.share_of_phase_time),
            p.limiter.clone(),
        ]);
    }
    out.push_str(&t.render());
    out
}

/// The model's GEMMs as a roofline report, for the chart of `--plot`.
fn model_report(
    device: &perfcast_config::Device,
    points: &[perfcast_engine::inference::GemmPoint],
) -> RooflineReport {
    use perfcast_scenario::roofline::{RooflineRow, TierRow};
    let tier = device.device_tier();
    let memory: Vec<TierRow> = device
        .memory
        .tiers
        .iter()
        .zip(&device.memory_names)
        .map(|(t, n)| TierRow {
            name: n.clone(),
            kind: t.kind().to_string(),
            level: t.level(),
            capacity_bytes: t.capacity().0,
            bandwidth_bytes_per_s: t.bandwidth().0,
            effective_bandwidth_bytes_per_s: t.bandwidth().0 * t.efficiency(),
        })
        .collect();
    let bw = memory.get(tier).map_or(0.0, |t| t.bandwidth_bytes_per_s);
    let ops = points
        .iter()
        .map(|p| {
            let time = p.time.0;
            RooflineRow {
                name: format!("{}.{}", p.phase.name(), p.name),
                op: "gemm".into(),
                shape: format!("{} x {} x {}", p.m, p.n, p.k),
                dtype: p.dtype.name().to_string(),
                engine: "matrix".into(),
                flops: p.flops,
                bytes: p.bytes,
                intensity: p.intensity,
                ridge: p.ridge,
                peak_flops_per_s: p.ridge * bw,
                attainable_flops_per_s: p.ridge * bw,
                time_s: time,
                compute_s: 0.0,
                memory_s: 0.0,
                overhead_s: 0.0,
                achieved_flops_per_s: if time > 0.0 { p.flops / time } else { 0.0 },
                bound: p.limiter.clone(),
            }
        })
        .collect();
    RooflineReport {
        device: device.compute_name.clone(),
        compute_kind: device.compute.kind().to_string(),
        device_tier: device.memory_names.get(tier).cloned().unwrap_or_default(),
        memory,
        ops,
    }
}
