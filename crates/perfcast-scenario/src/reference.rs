//! `[reference]`: published figures of the scenario a configuration describes, shown beside
//! the prediction with the difference (`perfcast predict`, `perfcast infer`). Only figures a
//! source states belong here, with the source named:
//!
//! ```toml
//! [reference]
//! source = "Narayanan et al. 2021, arXiv:2104.04473, §5.1"
//! tflops_per_gpu = 140.0
//! ```

use perfcast_config::Config;
use serde::{Deserialize, Serialize};

/// The published figures of a scenario (every one optional; `source` required).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// Where the figures come from (paper, section or table).
    pub source: String,
    /// A remark on how the figures compare (conventions, what the run differed in).
    #[serde(default)]
    pub note: Option<String>,
    /// Training: seconds per optimizer step.
    #[serde(default)]
    pub iteration_time_s: Option<f64>,
    /// Training: tokens per second, whole cluster.
    #[serde(default)]
    pub tokens_per_s: Option<f64>,
    /// Training: model TFLOP/s per GPU (the papers' "teraFLOP/s per GPU").
    #[serde(default)]
    pub tflops_per_gpu: Option<f64>,
    /// Training: hardware TFLOP/s per GPU (recomputed forward passes counted, as Narayanan
    /// et al. 2021's `96BslH^2(1 + s/6H + V/16lH)` does).
    #[serde(default)]
    pub tflops_per_gpu_hardware: Option<f64>,
    /// Training: model FLOPs utilisation, a fraction.
    #[serde(default)]
    pub mfu: Option<f64>,
    /// Training: hardware FLOPs utilisation (recompute counted), a fraction.
    #[serde(default)]
    pub hfu: Option<f64>,
    /// Serving: time to first token, milliseconds.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Serving: time per output token, milliseconds.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
    /// Serving: end-to-end latency of the batch, seconds.
    #[serde(default)]
    pub latency_s: Option<f64>,
    /// Serving: output tokens per second of the deployment.
    #[serde(default)]
    pub output_tokens_per_s: Option<f64>,
}

/// One published figure beside the prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compared {
    /// The `[reference]` key.
    pub key: &'static str,
    /// What it is, for tables.
    pub label: &'static str,
    /// Unit of `published` and `predicted`.
    pub unit: &'static str,
    pub published: f64,
    pub predicted: f64,
    /// `(predicted - published) / published`.
    pub difference: f64,
}

/// The `[reference]` of `cfg`, if it has one (an error names the key).
pub fn reference(cfg: &Config) -> Result<Option<Reference>, crate::ScenarioError> {
    let Some(r): Option<Reference> = cfg.extract_opt("reference")? else {
        return Ok(None);
    };
    if r.source.trim().is_empty() {
        return Err(cfg
            .invalid("reference.source", "must name where the figures come from")
            .into());
    }
    for (key, v) in r.figures() {
        // A normal float (a subnormal published figure made the difference +inf%), and a
        // utilisation a fraction (`mfu = 2` was shown as "published 200 %").
        let why = if !(v.is_normal() && v > 0.0) {
            Some("a published figure is a positive normal number")
        } else if matches!(key, "mfu" | "hfu") && v > 1.0 {
            Some("a utilisation is a fraction, at most 1 (0.45, not 45)")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(cfg
                .invalid(
                    &format!("reference.{key}"),
                    format!("{v:e} is not allowed: {why}"),
                )
                .into());
        }
    }
    Ok(Some(r))
}

impl Reference {
    /// Every figure given, by key.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        [
            ("iteration_time_s", self.iteration_time_s),
            ("tokens_per_s", self.tokens_per_s),
            ("tflops_per_gpu", self.tflops_per_gpu),
            ("tflops_per_gpu_hardware", self.tflops_per_gpu_hardware),
            ("mfu", self.mfu),
            ("hfu", self.hfu),
            ("ttft_ms", self.ttft_ms),
            ("tpot_ms", self.tpot_ms),
            ("latency_s", self.latency_s),
            ("output_tokens_per_s", self.output_tokens_per_s),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }

    /// The figures beside `predicted(key)` (a host's value of the same metric, in the same
    /// unit); a figure the report has no metric for (a serving figure in a training report)
    /// is left out.
    pub fn compare(&self, predicted: impl Fn(&str) -> Option<f64>) -> Vec<Compared> {
        self.figures()
            .into_iter()
            .filter_map(|(key, published)| {
                let p = predicted(key)?;
                let (label, unit) = label_of(key);
                Some(Compared {
                    key,
                    label,
                    unit,
                    published,
                    predicted: p,
                    difference: (p - published) / published,
                })
            })
            .collect()
    }
}

fn label_of(key: &str) -> (&'static str, &'static str) {
    match key {
        "iteration_time_s" => ("iteration time", "s"),
        "tokens_per_s" => ("tokens/s", "tok/s"),
        "tflops_per_gpu" => ("TFLOP/s per GPU (model)", "TFLOP/s"),
        "tflops_per_gpu_hardware" => ("TFLOP/s per GPU (hardware)", "TFLOP/s"),
        "mfu" => ("MFU", "fraction"),
        "hfu" => ("HFU", "fraction"),
        "ttft_ms" => ("time to first token", "ms"),
        "tpot_ms" => ("time per output token", "ms"),
        "latency_s" => ("end-to-end latency", "s"),
        _ => ("output tokens/s", "tok/s"),
    }
}
