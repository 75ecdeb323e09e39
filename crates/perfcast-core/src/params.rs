//! Parameter parsing for plugin factories: a component's parameters arrive as a JSON value and
//! are deserialised into the plugin's own struct (with `#[serde(deny_unknown_fields)]`), so a
//! mistyped key is an error that names the key path.

use crate::error::PluginError;
use serde::de::DeserializeOwned;

/// Deserialise `params` into `T`, reporting the key path of the first error.
pub fn parse<T: DeserializeOwned>(params: &serde_json::Value) -> Result<T, PluginError> {
    // A component given no parameters is an empty table, not `null`.
    let empty = serde_json::Value::Object(Default::default());
    let v = if params.is_null() { &empty } else { params };
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        PluginError::Params {
            path: if path == "." { String::new() } else { path },
            message: crate::suggest::rewrite_serde(&e.into_inner().to_string()),
        }
    })
}

/// Error unless `v` is finite and strictly positive.
pub fn positive(key: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!("must be a finite number > 0, got {v}"),
        })
    }
}

/// A hardware quantity's physical range, in the unit its key is given in: far wider than any
/// device built or planned, so only a unit mistake or garbage falls outside (a bandwidth of
/// 1e-300 TB/s printed a 300-digit step time with exit 0; 1e300 was refused as "not finite").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// Smallest value, > 0.
    pub lo: f64,
    /// Largest value.
    pub hi: f64,
    /// The unit, for messages.
    pub unit: &'static str,
}

/// Memory capacity, GB: 1 MB to 1 PB.
pub const CAPACITY_GB: Range = Range {
    lo: 1e-3,
    hi: 1e6,
    unit: "GB",
};
/// On-chip memory capacity, MB: 1 kB to 1 TB.
pub const CAPACITY_MB: Range = Range {
    lo: 1e-3,
    hi: 1e6,
    unit: "MB",
};
/// Memory bandwidth, TB/s: 0.1 GB/s to 10 PB/s.
pub const BANDWIDTH_TBS: Range = Range {
    lo: 1e-4,
    hi: 1e4,
    unit: "TB/s",
};
/// Link bandwidth, GB/s: 10 MB/s to 1 PB/s.
pub const BANDWIDTH_GBS: Range = Range {
    lo: 1e-2,
    hi: 1e6,
    unit: "GB/s",
};
/// Link bandwidth, Gb/s: 0.1 Gb/s to 10 Pb/s.
pub const BANDWIDTH_GBPS: Range = Range {
    lo: 1e-1,
    hi: 1e7,
    unit: "Gb/s",
};
/// A compute engine's peak, TFLOP/s: 1 GFLOP/s to 10 EFLOP/s.
pub const PEAK_TFLOPS: Range = Range {
    lo: 1e-3,
    hi: 1e7,
    unit: "TFLOP/s",
};

/// Error unless `v` is within `r` (the bounds in the message, the value in scientific
/// notation: never 300 digits).
pub fn physical(key: &str, v: f64, r: Range) -> Result<f64, PluginError> {
    if v.is_finite() && (r.lo..=r.hi).contains(&v) {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!(
                "must be between {:e} and {:e} {} (a physical range: a unit mistake or garbage is outside it), got {v:e}",
                r.lo, r.hi, r.unit
            ),
        })
    }
}

/// Error unless `v` is a fraction in (0, 1].
pub fn fraction(key: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!("must be in (0, 1], got {v}"),
        })
    }
}

/// Error unless `v` is finite and non-negative.
pub fn non_negative(key: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!("must be a finite number >= 0, got {v}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct P {
        a: f64,
        inner: Inner,
    }
    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        b: u32,
    }

    /// (value, range, accepted): inside the bounds and at them accepted; below, above, NaN and
    /// infinite refused with the bounds and the value in scientific notation.
    #[test]
    fn physical_ranges() {
        let table: &[(f64, Range, bool)] = &[
            (3.35, BANDWIDTH_TBS, true),
            (1e-4, BANDWIDTH_TBS, true),
            (1e4, BANDWIDTH_TBS, true),
            (1e-300, BANDWIDTH_TBS, false),
            (1e300, BANDWIDTH_TBS, false),
            (f64::NAN, CAPACITY_GB, false),
            (f64::INFINITY, PEAK_TFLOPS, false),
            (-80.0, CAPACITY_GB, false),
            (989.0, PEAK_TFLOPS, true),
            (400.0, BANDWIDTH_GBPS, true),
            (900.0, BANDWIDTH_GBS, true),
            (50.0, CAPACITY_MB, true),
        ];
        for &(v, r, ok) in table {
            match physical("k", v, r) {
                Ok(x) => assert!(ok && x == v, "{v} {r:?}"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!ok, "{v} {r:?}: {e}");
                    assert!(
                        e.contains(r.unit) && e.contains(&format!("{:e}", r.lo)),
                        "{e}"
                    );
                    assert!(e.len() < 200, "{e}");
                }
            }
        }
    }

    #[test]
    fn errors_name_the_key_path() {
        let e = parse::<P>(&serde_json::json!({"a": 1.0, "inner": {"b": "x"}})).unwrap_err();
        assert!(
            matches!(&e, PluginError::Params { path, .. } if path == "inner.b"),
            "{e}"
        );
        let e = parse::<P>(&serde_json::json!({"a": 1.0, "inner": {"b": 1, "c": 2}})).unwrap_err();
        assert!(e.to_string().contains("unknown key `c`"), "{e}");
        assert!(positive("x", f64::NAN).is_err());
        assert!(fraction("x", 1.5).is_err());
        assert!(non_negative("x", 0.0).is_ok());
    }
}
