//! `[serving.speculative]`: how drafts are made, their acceptance and their cost.

use perfcast_core::{Key, ModelError};
use serde::{Deserialize, Serialize};

/// How a speculative draft is made.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum DraftMethod {
    /// Each draft token costs `draft_cost` x a target decode step (the default; `draft_cost`
    /// 0: prompt look-up / n-gram drafting, no model runs).
    #[default]
    Ratio,
    /// The model's own multi-token-prediction module (DeepSeek-V3, DeepSeek-AI 2024 §2.2;
    /// TensorRT-LLM and SGLang run it `draft_len` times, one pass of one more layer of the
    /// model's kind and its LM head per draft token), timed as a one-layer model.
    Mtp,
    /// A separate draft model (`draft_model`, a model preset) on the instance's GPUs with
    /// the same tensor parallelism, one decode pass per draft token; its weights and KV
    /// cache share the devices' memory.
    DraftModel,
}

impl DraftMethod {
    /// The name in configurations.
    pub const fn name(self) -> &'static str {
        match self {
            DraftMethod::Ratio => "ratio",
            DraftMethod::Mtp => "mtp",
            DraftMethod::DraftModel => "draft_model",
        }
    }
}

/// Per-token acceptance of a DeepSeek-V3 MTP draft: "between 85% and 90%" for the second
/// token (DeepSeek-AI 2024, arXiv:2412.19437 §5.4.3); the low end.
pub const MTP_ACCEPTANCE_RATE: f64 = 0.85;

/// `[serving.speculative]`: speculative decoding (Leviathan et al. 2023; Chen et al. 2023).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeConfig {
    /// Draft tokens proposed per step (`k`).
    pub draft_len: u32,
    /// Probability that the target model accepts a draft token (each independently, up to the
    /// first rejection), in [0, 1]. Default for `method = "mtp"`: [`MTP_ACCEPTANCE_RATE`];
    /// required otherwise (how often a draft model or n-gram matches depends on the pair and
    /// the data: no published figure fits every one).
    #[serde(default)]
    pub acceptance_rate: Option<f64>,
    /// How drafts are made (default `ratio`).
    #[serde(default)]
    pub method: DraftMethod,
    /// `method = "ratio"`: time of one drafting step as a fraction of a target decode step
    /// at the same batch (about the draft-to-target size ratio for a separate draft model,
    /// 0 for prompt look-up). Default 0.
    #[serde(default)]
    pub draft_cost: Option<f64>,
    /// `method = "draft_model"`: the draft model, a model preset's name (`perfcast config
    /// presets`), e.g. "llama3.1-8b" for Llama 3.1 70B.
    #[serde(default)]
    pub draft_model: Option<String>,
}

impl SpeculativeConfig {
    /// The acceptance rate in effect.
    pub fn acceptance(&self) -> Option<f64> {
        self.acceptance_rate.or(match self.method {
            DraftMethod::Mtp => Some(MTP_ACCEPTANCE_RATE),
            _ => None,
        })
    }
}

impl SpeculativeConfig {
    pub(crate) fn validate(&self) -> Result<(), ModelError> {
        if !(1..=64).contains(&self.draft_len) {
            return Err(ModelError::invalid(
                Key::serving("speculative.draft_len"),
                self.draft_len,
                "must be in 1..=64",
            ));
        }
        let Some(a) = self.acceptance() else {
            return Err(ModelError::invalid(
                Key::serving("speculative.acceptance_rate"),
                "missing",
                format!(
                    "is required with method = \"{}\": give the rate measured for the draft \
                     and the data (only method = \"mtp\" has a published default, {MTP_ACCEPTANCE_RATE})",
                    self.method.name()
                ),
            ));
        };
        if !(a.is_finite() && (0.0..=1.0).contains(&a)) {
            return Err(ModelError::invalid(
                Key::serving("speculative.acceptance_rate"),
                a,
                "must be in [0, 1]",
            ));
        }
        if let Some(c) = self.draft_cost {
            if self.method != DraftMethod::Ratio {
                return Err(ModelError::invalid(
                    Key::serving("speculative.draft_cost"),
                    c,
                    format!(
                        "is for method = \"ratio\"; with method = \"{}\" the draft is timed \
                         on the devices: remove it",
                        self.method.name()
                    ),
                ));
            }
            if !(c.is_finite() && c >= 0.0) {
                return Err(ModelError::invalid(
                    Key::serving("speculative.draft_cost"),
                    c,
                    "must be a finite number >= 0",
                ));
            }
        }
        match (&self.draft_model, self.method) {
            (Some(m), DraftMethod::Ratio | DraftMethod::Mtp) => Err(ModelError::invalid(
                Key::serving("speculative.draft_model"),
                m,
                format!(
                    "is for method = \"draft_model\" (method is \"{}\")",
                    self.method.name()
                ),
            )),
            (None, DraftMethod::DraftModel) => Err(ModelError::invalid(
                Key::serving("speculative.draft_model"),
                "missing",
                "is required with method = \"draft_model\": a model preset's name (`perfcast \
                 config presets`)",
            )),
            _ => Ok(()),
        }
    }
}
