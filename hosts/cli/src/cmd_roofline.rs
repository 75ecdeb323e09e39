//! `perfcast roofline`: each `[[ops]]` entry on the config's device.

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use anyhow::Context as _;
use perfcast_host::roofline::{self, RooflineReport};

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
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = a.config.load()?;
    let device = cfg.device()?;
    let ops = cfg.ops()?;
    if ops.is_empty() {
        anyhow::bail!(
            "no ops to time: the configuration has no `[[ops]]` entries (README.md, \"Configuration\", shows their fields)"
        );
    }
    let report = roofline::analyze(&device, &ops)?;
    if let Some(path) = &a.plot {
        std::fs::write(path, crate::plot::roofline_svg(&report))
            .with_context(|| format!("cannot write the plot to `{}`", path.display()))?;
    }
    let text = match a.format {
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
