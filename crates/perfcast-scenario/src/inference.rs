//! An inference scenario: `[model]`, the system, `[inference]` and `[options]`.
//!
//! Devices: `system.devices` left at its built-in default becomes `tp x pp x replicas`;
//! otherwise the plan may use at most `system.devices`.

use crate::stack::{generation, inference_stack, user_set};
use crate::{engine_error, is_set, ScenarioError};
use perfcast_config::Config;
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};

/// A model on a system with an inference plan, ready to evaluate.
pub struct InferenceScenario {
    /// The model on the system, with the serving options of `[options]`.
    pub inference: Inference,
    /// The `[inference]` plan.
    pub plan: InferencePlan,
}

impl InferenceScenario {
    /// The scenario of `cfg`: a `[model]`, an `[inference]` plan and a system are required.
    pub fn from_config(cfg: &Config) -> Result<Self, ScenarioError> {
        let model = crate::model(cfg)?;
        let mut system = cfg.system()?;
        if !cfg.contains("inference") {
            return Err(ScenarioError::Missing {
                section: "inference",
                hint: "it needs the serving plan (batch, input_len, output_len; tp, pp, replicas, weight_dtype, activation_dtype, kv_dtype, attention, graph_capture optional; README.md, \"infer\")",
            });
        }
        let mut plan: InferencePlan = cfg.extract("inference")?;
        inference_stack(cfg)?.apply_inference_plan(&mut plan, &user_set(cfg), generation(cfg)?);
        if !is_set(cfg, "system.devices") {
            let gpus = plan.gpus();
            if gpus > 0 && gpus < u32::MAX {
                system.devices = gpus;
            }
        }
        let inference =
            Inference::new(model, system, options(cfg)?).map_err(|e| engine_error(cfg, e))?;
        Ok(InferenceScenario { inference, plan })
    }
}

/// The inference engine's options of `[options]` (defaults when absent), with the stack's
/// option fields where `[options]` leaves them unset.
pub fn options(cfg: &Config) -> Result<InferenceOptions, ScenarioError> {
    let mut o: InferenceOptions = cfg.extract_opt("options")?.unwrap_or_default();
    inference_stack(cfg)?.apply_inference_options(&mut o, &user_set(cfg));
    Ok(o)
}
