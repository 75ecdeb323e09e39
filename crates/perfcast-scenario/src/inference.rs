//! An inference scenario: `[model]`, the system, `[inference]` and `[options]`.
//!
//! Devices: `system.devices` left at its built-in default becomes `tp x pp x replicas`;
//! otherwise the plan may use at most `system.devices`.

use crate::{engine_error, is_set, Scenario, ScenarioError};
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
    /// The scenario of `cfg` (its stack resolved once: [`Scenario::inference`]).
    pub fn from_config(cfg: &Config) -> Result<Self, ScenarioError> {
        Self::of(&Scenario::inference(cfg))
    }

    /// The inference scenario of `sc`: a `[model]`, an `[inference]` plan and a system are
    /// required.
    pub fn of(sc: &Scenario) -> Result<Self, ScenarioError> {
        let cfg = sc.config();
        let model = sc.model()?.clone();
        let mut system = sc.system()?.clone();
        if !cfg.contains("inference") {
            return Err(ScenarioError::Missing {
                section: "inference",
                hint: "it needs the serving plan (batch, input_len, output_len; tp, pp, replicas, weight_dtype, activation_dtype, kv_dtype, attention, graph_capture optional; docs/commands/infer.md)",
            });
        }
        let mut plan: InferencePlan = cfg.extract("inference")?;
        sc.stack()?
            .apply_inference_plan(&mut plan, &sc.user_set(), sc.generation()?);
        if !is_set(cfg, "system.devices") {
            let gpus = plan.gpus();
            if gpus > 0 && gpus < u32::MAX {
                system.devices = gpus;
            }
        }
        let inference =
            Inference::new(model, system, options(sc)?).map_err(|e| engine_error(cfg, e))?;
        Ok(InferenceScenario { inference, plan })
    }
}

/// The inference engine's options of `[options]` (defaults when absent), with the stack's
/// option fields where `[options]` leaves them unset.
pub fn options(sc: &Scenario) -> Result<InferenceOptions, ScenarioError> {
    let mut o: InferenceOptions = sc.config().extract_opt("options")?.unwrap_or_default();
    sc.stack()?.apply_inference_options(&mut o, &sc.user_set());
    Ok(o)
}
