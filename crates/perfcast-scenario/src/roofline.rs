//! The roofline table of a device: for each op, its FLOPs, its bytes at the device-memory
//! tier, its arithmetic intensity, the device's ridge point for it, its time and what bounds
//! it (Williams, Waterman & Patterson 2009, "Roofline: an insightful visual performance model
//! for multicore architectures"; several memory levels as in `perfcast_core::roofline`).
//!
//! The time comes from the compute unit's own `op_time`, so a plugin with a model of its own
//! is reported as it computes; every number is checked to be finite before it leaves here.

use perfcast_config::{Device, HostError, NamedOp};
use perfcast_core::hardware::TierLevel;
use perfcast_core::units::ensure_finite;
use perfcast_core::{Engine, Key, ModelError, TimeBound};
use perfcast_engine::inference::GemmPoint;
use serde::Serialize;

/// One memory tier of the device.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TierRow {
    /// Component name.
    pub name: String,
    /// Plugin kind.
    pub kind: String,
    pub level: TierLevel,
    pub capacity_bytes: f64,
    pub bandwidth_bytes_per_s: f64,
    /// Bandwidth times the tier's efficiency.
    pub effective_bandwidth_bytes_per_s: f64,
}

/// One op of the table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RooflineRow {
    pub name: String,
    /// `gemm`, `attention`, or the vector op's kind.
    pub op: String,
    /// `m x n x k` (`x batch`), or the element count.
    pub shape: String,
    pub dtype: String,
    pub engine: String,
    pub flops: f64,
    /// Bytes moved at the device-memory tier.
    pub bytes: f64,
    /// FLOP per byte of device-memory traffic.
    pub intensity: f64,
    /// Intensity at which this op's achievable throughput (peak x efficiency) meets the
    /// device tier's achievable bandwidth.
    pub ridge: f64,
    /// Peak of the engine and dtype the op runs in, FLOP/s.
    pub peak_flops_per_s: f64,
    /// Peak x efficiency for this op, FLOP/s.
    pub attainable_flops_per_s: f64,
    pub time_s: f64,
    pub compute_s: f64,
    pub memory_s: f64,
    pub overhead_s: f64,
    /// `flops / time_s`.
    pub achieved_flops_per_s: f64,
    /// `compute`, `overhead`, or the component name of the bounding memory tier.
    pub bound: String,
}

/// The roofline table of one device.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RooflineReport {
    /// Component name of the compute unit.
    pub device: String,
    /// Its plugin kind.
    pub compute_kind: String,
    /// Component name of the tier whose bytes and bandwidth the intensity and ridge use.
    pub device_tier: String,
    pub memory: Vec<TierRow>,
    pub ops: Vec<RooflineRow>,
}

/// Time every op on `device`.
pub fn analyze(device: &Device, ops: &[NamedOp]) -> Result<RooflineReport, HostError> {
    let unit = device.compute.as_ref();
    let memory = tier_rows(device)?;
    let dev_i = device.device_tier();
    let dev_bw = memory
        .get(dev_i)
        .map(|t| t.effective_bandwidth_bytes_per_s)
        .ok_or_else(|| HostError::Invalid {
            key: "device.memory".into(),
            origin: None,
            message: "needs at least one memory-tier component".into(),
        })?;
    if dev_bw <= 0.0 {
        return Err(HostError::Model {
            context: format!("memory tier `{}`", tier_name(device, dev_i)),
            source: ModelError::NonFinite {
                what: "effective bandwidth".into(),
                value: dev_bw,
            },
        });
    }

    let rows = ops
        .iter()
        .map(|o| op_row(device, o, dev_bw))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RooflineReport {
        device: device.compute_name.clone(),
        compute_kind: unit.kind().to_string(),
        device_tier: tier_name(device, dev_i),
        memory,
        ops: rows,
    })
}

/// The device's memory tiers, every number checked finite.
fn tier_rows(device: &Device) -> Result<Vec<TierRow>, HostError> {
    let tiers = &device.memory.tiers;
    let mut memory = Vec::with_capacity(tiers.len());
    for (i, t) in tiers.iter().enumerate() {
        let name = tier_name(device, i);
        let ctx = format!("memory tier `{name}`");
        let check = |what: &str, v: f64| {
            ensure_finite(what, v).map_err(|source| HostError::Model {
                context: ctx.clone(),
                source,
            })
        };
        memory.push(TierRow {
            name,
            kind: t.kind().to_string(),
            level: t.level(),
            capacity_bytes: check("capacity", t.capacity().0)?,
            bandwidth_bytes_per_s: check("bandwidth", t.bandwidth().0)?,
            effective_bandwidth_bytes_per_s: check(
                "effective bandwidth",
                t.effective_bandwidth().0,
            )?,
        });
    }
    Ok(memory)
}

/// One op's row: the compute unit's own time and bound, its intensity and the ridge point
/// against `dev_bw`, the device tier's achievable bandwidth.
fn op_row(device: &Device, o: &NamedOp, dev_bw: f64) -> Result<RooflineRow, HostError> {
    let unit = device.compute.as_ref();
    let tiers = &device.memory.tiers;
    let ctx = format!("op `{}` ({}) on `{}`", o.name, o.key, device.compute_name);
    let model = |source: ModelError| HostError::Model {
        context: ctx.clone(),
        source,
    };
    let check = |what: &str, v: f64| ensure_finite(what, v).map_err(model);
    let t = unit.op_time(&o.op, &device.memory).map_err(model)?;
    let engine = Engine::of(&o.op);
    let dtype = o.op.dtype();
    let peak = unit.peak(engine, dtype).ok_or_else(|| {
        model(ModelError::UnsupportedDType {
            device: unit.kind().to_string(),
            engine: engine.name().to_string(),
            dtype: dtype.name().to_string(),
        })
    })?;
    let eff = unit.efficiency(&o.op);
    if !(eff > 0.0 && eff <= 1.0) {
        return Err(model(ModelError::NonFinite {
            what: "efficiency (must be in (0, 1])".into(),
            value: eff,
        }));
    }
    let attainable = check("peak x efficiency", peak.0 * eff)?;
    let flops = check("FLOPs", t.flops.0)?;
    let bytes = check("device bytes", t.device_bytes.0)?;
    let time = check("time", t.time.0)?;
    if bytes <= 0.0 || time <= 0.0 {
        return Err(model(ModelError::NonFinite {
            what: if bytes <= 0.0 { "device bytes" } else { "time" }.into(),
            value: if bytes <= 0.0 { bytes } else { time },
        }));
    }
    let bound = match t.bound {
        TimeBound::Compute => "compute".to_string(),
        TimeBound::Overhead => "overhead".to_string(),
        TimeBound::Memory(i) => device
            .memory_names
            .get(i as usize)
            .cloned()
            .ok_or_else(|| {
                model(ModelError::invalid(
                    Key::other("bound"),
                    format!("memory tier {i}"),
                    format!("the device has {} tiers", tiers.len()),
                ))
            })?,
    };
    Ok(RooflineRow {
        name: o.name.clone(),
        op: o.op.class().to_string(),
        shape: shape(&o.op),
        dtype: dtype.name().to_string(),
        engine: engine.name().to_string(),
        flops,
        bytes,
        intensity: check("intensity", flops / bytes)?,
        ridge: check("ridge point", attainable / dev_bw)?,
        peak_flops_per_s: check("peak", peak.0)?,
        attainable_flops_per_s: attainable,
        time_s: time,
        compute_s: check("compute time", t.compute.0)?,
        memory_s: check("memory time", t.memory.0)?,
        overhead_s: check("overhead", t.overhead.0)?,
        achieved_flops_per_s: check("achieved throughput", flops / time)?,
        bound,
    })
}

/// Component name of tier `i` (a `Device` built by hand may lack names).
fn tier_name(device: &Device, i: usize) -> String {
    device
        .memory_names
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("tier {i}"))
}

fn shape(op: &perfcast_core::ComputeOp) -> String {
    use perfcast_core::ComputeOp;
    match op {
        ComputeOp::Gemm(g) if g.batch > 1 => format!("{}x{}x{} x{}", g.m, g.n, g.k, g.batch),
        ComputeOp::Gemm(g) => format!("{}x{}x{}", g.m, g.n, g.k),
        ComputeOp::Attention(a) => format!(
            "b{} h{}/{} q{} kv{} d{}",
            a.batch, a.heads, a.kv_heads, a.q_len, a.kv_len, a.head_dim
        ),
        ComputeOp::Vector(v) => format!("{} el", v.elements),
    }
}

/// A model's GEMMs (`Inference::gemm_roofline`) as a roofline report on `device`, for the
/// chart of `roofline --plot`: each GEMM at its intensity, its attainable throughput on the
/// datasheet ridge times the device tier's peak bandwidth.
pub fn of_gemms(device: &Device, points: &[GemmPoint]) -> RooflineReport {
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
