//! Warnings for hardware that looks mistyped: a device without an on-chip memory tier, a
//! matrix peak or a device-memory bandwidth outside the range of every known accelerator, a
//! ridge point (matrix peak over device bandwidth) far from any known device. A warning never
//! changes a number; hosts print each one once, in the report's notes.
//!
//! "Known" is the accelerator catalog, `configs/validation/accelerators.toml` (every value
//! there cites its datasheet), embedded at build time. The plausible range of a quantity is
//! the catalog's range widened by [`MARGIN`] on both sides.

use perfcast_core::{ComputeUnit, DType, Engine, MemoryHierarchy, TierLevel};
use std::sync::OnceLock;

/// How far beyond the catalog's range a value may lie before it is suspicious: a factor of
/// 4, more than the largest step between two successive generations in the catalog (NVIDIA
/// A100 -> H100 dense BF16, 312 -> 989.4 TFLOP/s, x3.2; H100 -> B200 HBM, 3.35 -> 8 TB/s,
/// x2.4; both from the catalog's datasheet values). A device one generation beyond the
/// newest (or older than the oldest) passes; a value off by a unit prefix (x1000) does not.
pub const MARGIN: f64 = 4.0;

/// The accelerator catalog (`configs/validation/accelerators.toml`).
const CATALOG: &str = perfcast_assets::validation::ACCELERATORS;

/// One catalog device: its id, dense BF16 (else FP16) matrix peak in FLOP/s, and device
/// memory bandwidth in bytes/s, where the catalog has them.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    /// The catalog id (`H100-SXM5-80GB`).
    pub id: String,
    /// Dense BF16 (else FP16) matrix peak, FLOP/s.
    pub matrix: Option<f64>,
    /// Device-memory bandwidth, bytes/s.
    pub bandwidth: Option<f64>,
}

impl Known {
    /// Datasheet ridge point, FLOP per byte.
    fn ridge(&self) -> Option<f64> {
        Some(self.matrix? / self.bandwidth?)
    }
}

/// The catalog's devices (parsed once). An unreadable catalog (a build-time mistake, caught
/// by this module's tests) gives no devices, hence no range warnings.
pub fn known_devices() -> &'static [Known] {
    static K: OnceLock<Vec<Known>> = OnceLock::new();
    K.get_or_init(|| parse_catalog(CATALOG))
}

fn parse_catalog(text: &str) -> Vec<Known> {
    let Ok(root) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(gpus) = root.get("gpu").and_then(|g| g.as_array()) else {
        return Vec::new();
    };
    let num = |v: Option<&toml::Value>| {
        v.and_then(|x| x.as_float().or_else(|| x.as_integer().map(|i| i as f64)))
    };
    gpus.iter()
        .filter_map(|g| {
            let peaks = g.get("peak_tflops_dense");
            let matrix = num(peaks.and_then(|p| p.get("bf16")))
                .or_else(|| num(peaks.and_then(|p| p.get("fp16"))))
                .map(|t| t * 1e12);
            Some(Known {
                id: g.get("id")?.as_str()?.to_string(),
                matrix,
                bandwidth: num(g.get("hbm_bw_tbs")).map(|t| t * 1e12),
            })
        })
        .collect()
}

/// The catalog's range of `f` as (min, max, id of min, id of max).
fn range(known: &[Known], f: impl Fn(&Known) -> Option<f64>) -> Option<(f64, f64, &str, &str)> {
    let mut r: Option<(f64, f64, &str, &str)> = None;
    for k in known {
        let Some(v) = f(k).filter(|v| v.is_finite() && *v > 0.0) else {
            continue;
        };
        r = Some(match r {
            None => (v, v, &k.id, &k.id),
            Some((lo, hi, a, b)) => {
                let (lo, a) = if v < lo { (v, k.id.as_str()) } else { (lo, a) };
                let (hi, b) = if v > hi { (v, k.id.as_str()) } else { (hi, b) };
                (lo, hi, a, b)
            }
        });
    }
    r
}

/// A warning if `value` lies outside the catalog's range of `f` widened by [`MARGIN`].
fn out_of_range(
    what: &str,
    value: f64,
    unit: (&str, f64),
    known: &[Known],
    f: impl Fn(&Known) -> Option<f64>,
) -> Option<String> {
    let (lo, hi, lo_id, hi_id) = range(known, f)?;
    if value >= lo / MARGIN && value <= hi * MARGIN {
        return None;
    }
    let (name, scale) = unit;
    let s = |x: f64| {
        let v = x / scale;
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.3}")
        }
    };
    Some(format!(
        "suspicious hardware: {what} {} {name} is outside the plausible range {}..{} {name} \
         (known devices: {} {name} {lo_id} to {} {name} {hi_id}, widened {MARGIN}x); check \
         the value and its unit",
        s(value),
        s(lo / MARGIN),
        s(hi * MARGIN),
        s(lo),
        s(hi),
    ))
}

/// Every warning about a device (its compute unit and memory tiers), in a fixed order; none
/// for any shipped preset.
pub fn hardware_warnings(compute: &dyn ComputeUnit, memory: &MemoryHierarchy) -> Vec<String> {
    let mut out = Vec::new();
    if !memory.tiers.iter().any(|t| t.level() == TierLevel::OnChip) {
        out.push(
            "suspicious hardware: the device has no on-chip memory tier, so every GEMM is \
             timed at the device-memory roof (on an A100, Llama-2-70B's prefill GEMMs take \
             about 1.9x longer than with its L2); \
             add an `sram` component for its L2/SRAM (as the presets do, e.g. \
             preset:a100-sxm4-80gb's `a100_sxm4_80gb_l2`) unless the device really has none"
                .to_string(),
        );
    }
    let known = known_devices();
    let matrix = compute
        .peak(Engine::Matrix, DType::Bf16)
        .or_else(|| compute.peak(Engine::Matrix, DType::Fp16))
        .map(|p| p.0)
        .filter(|p| p.is_finite() && *p > 0.0);
    let bandwidth = memory
        .device_index()
        .map(|i| memory.tiers[i].bandwidth().0)
        .filter(|b| b.is_finite() && *b > 0.0);
    if let Some(m) = matrix {
        out.extend(out_of_range(
            "the dense bf16/fp16 matrix peak",
            m,
            ("TFLOP/s", 1e12),
            known,
            |k| k.matrix,
        ));
    }
    if let Some(b) = bandwidth {
        out.extend(out_of_range(
            "the device-memory bandwidth",
            b,
            ("TB/s", 1e12),
            known,
            |k| k.bandwidth,
        ));
    }
    if let (Some(m), Some(b)) = (matrix, bandwidth) {
        out.extend(out_of_range(
            "the ridge point (matrix peak / device bandwidth)",
            m / b,
            ("FLOP/B", 1.0),
            known,
            Known::ridge,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_parses_with_peaks_and_bandwidths() {
        let k = known_devices();
        assert!(k.len() >= 10, "{k:?}");
        let h100 = k.iter().find(|d| d.id == "H100-SXM5-80GB").unwrap();
        assert_eq!(h100.matrix, Some(989.4e12));
        assert!(k.iter().filter(|d| d.ridge().is_some()).count() >= 8);
    }

    #[test]
    fn ranges_widen_by_the_margin() {
        let known = vec![
            Known {
                id: "a".into(),
                matrix: Some(100e12),
                bandwidth: Some(1e12),
            },
            Known {
                id: "b".into(),
                matrix: Some(1000e12),
                bandwidth: None,
            },
        ];
        let w = |v: f64| out_of_range("peak", v, ("TFLOP/s", 1e12), &known, |k| k.matrix);
        assert!(w(26e12).is_none() && w(3999e12).is_none());
        let msg = w(4001e12).unwrap();
        assert!(
            msg.contains("4001 TFLOP/s") && msg.contains("25.000..4000"),
            "{msg}"
        );
        assert!(w(24e12).is_some());
    }

    #[test]
    fn no_shipped_hardware_preset_is_suspicious() {
        for (name, group) in perfcast_config::layers::preset_groups() {
            if group != "hardware" && group != "systems" {
                continue;
            }
            let cfg = perfcast_config::Config::load(
                &perfcast_config::Sources::files(
                    &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
                    [format!("preset:{name}")],
                )
                .without_env(),
            )
            .unwrap();
            let d = cfg.device().unwrap();
            let w = hardware_warnings(&*d.compute, &d.memory);
            assert!(w.is_empty(), "{name}: {w:?}");
        }
    }
}
