//! What `perfcast roofline` writes: the roofline of a device's `[[ops]]`
//! (`perfcast_scenario::roofline`) or of a model's GEMMs under an inference plan
//! (`Inference::gemm_roofline`), as text, CSV and the log-log chart ([`roofline_svg`]).

mod chart;

pub use chart::roofline_svg;

use perfcast_engine::inference::{GemmPoint, InferencePlan};
use perfcast_render::{num, Table};
use perfcast_scenario::roofline::RooflineReport;

/// The terminal text of a roofline report: the device's memory tiers, then one row per op.
pub fn table(r: &RooflineReport) -> String {
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

/// The CSV of a roofline report: one row per op, full precision.
pub fn csv(r: &RooflineReport) -> String {
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

/// `roofline --format csv` of a model's GEMMs.
pub fn model_csv(model: &str, system: &str, points: &[GemmPoint]) -> String {
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
pub fn model_table(
    model: &str,
    system: &str,
    plan: &InferencePlan,
    points: &[GemmPoint],
) -> String {
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
