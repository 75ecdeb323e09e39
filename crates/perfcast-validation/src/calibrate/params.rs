//! The parameters `perfcast calibrate` fits: `--param KEY[,KEY...][=LO..HI]` and the
//! documented default set ([`DEFAULT_PARAMS`], listed in `configs/validation/CALIBRATION.md`).

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// A parameter to fit: one value shared by one or more configuration keys (tied keys, e.g. the
/// same efficiency of two presets of one GPU), within bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    /// Dotted configuration keys, all set to the parameter's value.
    pub keys: Vec<String>,
    /// `(lo, hi)`, `lo < hi`; `None`: half to twice the configuration's current value.
    pub bounds: Option<(f64, f64)>,
}

impl fmt::Display for ParamSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.keys.join(","))?;
        if let Some((lo, hi)) = self.bounds {
            write!(f, "={lo}..{hi}")?;
        }
        Ok(())
    }
}

/// The syntax, for messages.
pub const SYNTAX: &str =
    "KEY[,KEY...][=LO..HI], e.g. components.h100_sxm5_80gb.matmul_efficiency=0.5..0.8";

impl FromStr for ParamSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<ParamSpec> {
        let bad = |why: String| Error::ParamSyntax {
            param: s.to_string(),
            message: why,
        };
        let (keys, bounds) = match s.split_once('=') {
            Some((k, b)) => (k, Some(b.trim())),
            None => (s, None),
        };
        let mut out = Vec::new();
        for key in keys.split(',') {
            let key = key.trim();
            if key.is_empty() {
                return Err(bad("empty key".into()));
            }
            if let Some(seg) = key.split('.').find(|seg| {
                seg.is_empty()
                    || !seg
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            }) {
                return Err(bad(format!(
                    "key segment `{seg}` of `{key}` must be non-empty letters, digits, `_` or `-`"
                )));
            }
            if out.iter().any(|k| k == key) {
                return Err(bad(format!("key `{key}` is named twice")));
            }
            out.push(key.to_string());
        }
        let bounds = match bounds {
            None => None,
            Some("") => return Err(bad("no bounds after `=`".into())),
            Some(b) => {
                let (lo, hi) = b
                    .split_once("..")
                    .ok_or_else(|| bad(format!("bounds `{b}` are not LO..HI")))?;
                let num = |x: &str| -> Result<f64> {
                    let x = x.trim();
                    match x.parse::<f64>() {
                        Ok(v) if v.is_finite() => Ok(v),
                        Ok(_) => Err(bad(format!("bound `{x}` is not a finite number"))),
                        Err(_) => Err(bad(format!("bound `{x}` is not a number"))),
                    }
                };
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo >= hi {
                    return Err(bad(format!(
                        "bounds {lo}..{hi} are empty: LO must be below HI"
                    )));
                }
                Some((lo, hi))
            }
        };
        Ok(ParamSpec { keys: out, bounds })
    }
}

/// One parameter of the default set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultParam {
    /// The keys (tied).
    pub keys: &'static [&'static str],
    /// Bounds.
    pub lo: f64,
    /// Bounds.
    pub hi: f64,
    /// What it is.
    pub what: &'static str,
}

impl DefaultParam {
    /// As a [`ParamSpec`].
    pub fn spec(&self) -> ParamSpec {
        ParamSpec {
            keys: self.keys.iter().map(|k| k.to_string()).collect(),
            bounds: Some((self.lo, self.hi)),
        }
    }
}

/// The shared parameters `perfcast calibrate` fits without `--param`: per software stack
/// (tied over the profiles that build on one root profile: `stacks.NAME.KEY`, the stack's
/// `[software]` key for the cases mapped to it), what its training step loses against the
/// kernels timed alone, as a multiplier on the achieved throughput of its GEMMs and attention
/// (`efficiency.gemm`, `efficiency.attention`); and the fitted fixed costs of the inference
/// engine (`perfcast_engine::inference::InferenceOptions`). The hardware carries no fitted
/// parameter: kernels come from the tables timed on silicon (or the analytical model fitted
/// to them), clocks from the power limit. What a software stack sets from its sources (e.g.
/// `decode_kv_group_reread`: 0 for TensorRT-LLM's XQA kernel) is the stack's, not a shared
/// parameter (a calibrated key overrides the stacks' value, as a user's key does); discrete
/// parameters are not fitted. `configs/validation/CALIBRATION.md` lists the same set (a test
/// checks). A default parameter (or one of its keys) that applies to no case of the cases
/// file is left out, and the report says so.
pub const DEFAULT_PARAMS: &[DefaultParam] = &[
    DefaultParam {
        keys: &[
            "stacks.megatron-lm-2021.efficiency.gemm",
            "stacks.megatron-lm-2021.efficiency.attention",
            "stacks.megatron-lm-2022.efficiency.gemm",
            "stacks.megatron-lm-2022.efficiency.attention",
        ],
        lo: 0.5,
        hi: 1.2,
        what: "Megatron-LM (2021-22) training against the kernels timed alone",
    },
    DefaultParam {
        keys: &[
            "stacks.megatron-core-2024.efficiency.gemm",
            "stacks.megatron-core-2024.efficiency.attention",
            "stacks.megatron-core-2025.efficiency.gemm",
            "stacks.megatron-core-2025.efficiency.attention",
        ],
        lo: 0.5,
        hi: 1.2,
        what: "Megatron-Core (2024-25) training against the kernels timed alone",
    },
    DefaultParam {
        keys: &[
            "stacks.torchtitan-compile-2025.efficiency.gemm",
            "stacks.torchtitan-compile-2025.efficiency.attention",
            "stacks.torchtitan-compile-2026.efficiency.gemm",
            "stacks.torchtitan-compile-2026.efficiency.attention",
            "stacks.torchtitan-compile-asynctp-2025.efficiency.gemm",
            "stacks.torchtitan-compile-asynctp-2025.efficiency.attention",
            "stacks.torchtitan-eager-2025.efficiency.gemm",
            "stacks.torchtitan-eager-2025.efficiency.attention",
        ],
        lo: 0.5,
        hi: 1.2,
        what: "torchtitan (2025-26) training against the kernels timed alone",
    },
    DefaultParam {
        keys: &[
            "stacks.meta-llama3-2024.efficiency.gemm",
            "stacks.meta-llama3-2024.efficiency.attention",
        ],
        lo: 0.5,
        hi: 1.2,
        what: "Meta's Llama 3 stack (2024) training against the kernels timed alone",
    },
    DefaultParam {
        keys: &[
            "stacks.nemo-automodel-2025.efficiency.gemm",
            "stacks.nemo-automodel-2025.efficiency.attention",
        ],
        lo: 0.5,
        hi: 1.2,
        what: "NeMo AutoModel (2025) training against the kernels timed alone",
    },
    DefaultParam {
        keys: &["options.host_launch_us"],
        lo: 1.0,
        hi: 50.0,
        what: "inference: host cost of one kernel launch without graph capture, µs",
    },
    DefaultParam {
        keys: &["options.collective_overhead_us"],
        lo: 0.0,
        hi: 50.0,
        what: "inference: fixed cost per collective beyond the alpha-beta time, µs",
    },
    DefaultParam {
        keys: &["options.step_overhead_us"],
        lo: 0.0,
        hi: 500.0,
        what: "inference: fixed cost per forward pass, µs",
    },
    DefaultParam {
        keys: &["options.compute_memory_overlap"],
        lo: 0.0,
        hi: 1.0,
        what: "inference: overlap of a kernel's compute and memory time",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_specs() {
        let p: ParamSpec = "a.b,c.d=0.5..0.9".parse().unwrap();
        assert_eq!(p.keys, ["a.b", "c.d"]);
        assert_eq!(p.bounds, Some((0.5, 0.9)));
        assert_eq!(p.to_string(), "a.b,c.d=0.5..0.9");
        let p: ParamSpec = "options.engine.runtime_reserve_gib".parse().unwrap();
        assert_eq!(p.bounds, None);
        let p: ParamSpec = "x=-1e-3..2".parse().unwrap();
        assert_eq!(p.bounds, Some((-0.001, 2.0)));
        // (input, what the message says)
        let bad = [
            ("", "empty key"),
            ("a,,b", "empty key"),
            ("a..b", "key segment"),
            ("a b", "key segment"),
            ("a,a", "named twice"),
            ("a=", "no bounds"),
            ("a=0.5", "not LO..HI"),
            ("a=x..1", "`x` is not a number"),
            ("a=0..y", "`y` is not a number"),
            ("a=0..inf", "not a finite number"),
            ("a=nan..1", "not a finite number"),
            ("a=0.9..0.5", "are empty"),
            ("a=1..1", "are empty"),
        ];
        for (s, want) in bad {
            let e = s.parse::<ParamSpec>().unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("expected KEY"), "{s}: {e}");
        }
    }

    /// CALIBRATION.md lists the default set: every key, with its bounds.
    #[test]
    fn calibration_md_lists_the_default_set() {
        let doc = perfcast_assets::validation::CALIBRATION;
        for d in DEFAULT_PARAMS {
            let keys: Vec<String> = d.keys.iter().map(|k| format!("`{k}`")).collect();
            let row = format!("| {} | {}..{} |", keys.join(", "), d.lo, d.hi);
            assert!(
                doc.contains(&row),
                "CALIBRATION.md lacks the row ending `{row}`"
            );
        }
    }

    #[test]
    fn default_set_is_well_formed() {
        for d in DEFAULT_PARAMS {
            assert!(d.lo < d.hi && !d.keys.is_empty() && !d.what.is_empty());
            let s = d.spec().to_string();
            assert_eq!(s.parse::<ParamSpec>().unwrap(), d.spec(), "{s}");
        }
    }
}
