//! perfcast-scenario: a merged configuration turned into what the engines evaluate.
//!
//! Every host (the CLI's commands, the search, the studies, the validation harness, later the
//! Python bindings) goes through this one layer to read a scenario, so that they agree on:
//!
//! - the **resolution**: a command reads its configuration once into a [`Scenario`] (the
//!   stack checked against the command's engines, the GPU generation), and every view below
//!   derives from it;
//! - the **model** of `[model]`: its `ModelSpec` fields, an included model preset, or
//!   `hf_config = "config.json"` (a Hugging Face config, [`hf`]) ([`model`]);
//! - the **devices**: `plan.dp` and `system.devices` reconciled ([`training::resolve_devices`];
//!   an inference plan fills `system.devices` when it is left at its default);
//! - the engines' **options** from `[options]` ([`training::options`], [`inference::options`]);
//! - a **serving** scenario ([`serving`]): `[serving]` over `[inference]`'s plan fields and
//!   lengths, `[slo]`, a trace file relative to the file that names it;
//! - the **software stack** (`stack = "NAME"`, `[software]`): a typed [`Stack`] whose fields
//!   fill the plan and option fields the configuration leaves unset ([`stack::MAPPING`]);
//! - **errors**: the engine's typed keys ([`perfcast_core::Key`], whose sections are the
//!   configuration's own) turned into configuration errors that say where the value came
//!   from ([`engine_error`]), with no text rewritten.
//!
//! Invariant: nothing here panics on user input; every error names the key and its origin.

pub mod explain;
pub mod hf;
pub mod inference;
mod model;
pub mod network;
pub mod plausible;
pub mod reference;
mod resolved;
pub mod roofline;
pub mod serving;
pub mod stack;
pub mod training;

pub use inference::InferenceScenario;
pub use model::{model, models_resolved};
pub use resolved::Scenario;
pub use serving::ServingScenario;
pub use stack::stacks_resolved;
pub use stack::{Stack, StackKind};
pub use training::TrainingScenario;

use perfcast_config::{Config, HostError, LayerOrigin};
use perfcast_core::ModelError;

/// Why a configuration does not make a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A configuration error (a key, its origin, what is allowed).
    #[error(transparent)]
    Host(#[from] HostError),
    /// A model error that names no key (a plugin's failure, a non-finite number).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A section the command needs is absent.
    #[error("no `[{section}]` in the configuration: {hint}")]
    Missing {
        /// The missing section.
        section: &'static str,
        /// What it should hold and where to read about it.
        hint: &'static str,
    },
}

/// What a host checks before any plugin library loads (`Sources::checked_by`): what no
/// library can change, namely the model (validated) and the values of the training plan, the
/// inference plan and the serving section. Components, and the plan fields that name them,
/// resolve once the libraries have loaded.
pub fn check_before_libraries(
    cfg: &Config,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if cfg.contains("model") {
        model(cfg)?;
    }
    cfg.extract_opt::<perfcast_engine::TrainingPlan>("plan")?;
    cfg.extract_opt::<perfcast_engine::inference::InferencePlan>("inference")?;
    cfg.extract_opt::<perfcast_serving::ServingConfig>("serving")?;
    Ok(())
}

/// An engine error as a configuration error: the key as the configuration spells it (the
/// engine's [`perfcast_core::Key`] sections are the configuration's sections), with where
/// its value came from.
pub fn engine_error(cfg: &Config, e: ModelError) -> ScenarioError {
    match e {
        ModelError::Invalid { key, value, rule } => {
            ScenarioError::Host(cfg.invalid(&key.to_string(), format!("got `{value}`; {rule}")))
        }
        other => ScenarioError::Model(other),
    }
}

/// An engine error of a serving deployment: [`engine_error`], with a key of the inference plan
/// that the `[serving]` section sets (`serving.tp`, `serving.ep`, ...; they take precedence
/// over `[inference]`) named as the user set it.
pub fn serving_error(cfg: &Config, e: ModelError) -> ScenarioError {
    if let ModelError::Invalid { key, value, rule } = &e {
        let k = key.to_string();
        if let Some(field) = k.strip_prefix("inference.") {
            let serving = format!("serving.{field}");
            if is_set(cfg, &serving) {
                return ScenarioError::Host(
                    cfg.invalid(&serving, format!("got `{value}`; {rule}")),
                );
            }
        }
    }
    engine_error(cfg, e)
}

/// The configuration a report was produced from, as JSON a host can write to a file and feed
/// back (`perfcast predict config.json` gives the same report): the merged configuration,
/// every layer applied, with `[model]` replaced by the resolved `model` (a `hf_config` path is
/// relative to a file that need not travel with the report).
///
/// This is how reports carry their configuration instead of serialising trait objects
/// (`typetag`): a component is its registry kind plus its parameter table, which is plain
/// data for built-ins and dynamic plugins alike.
pub fn reproducible_config(
    cfg: &Config,
    model: &perfcast_core::ModelSpec,
) -> Result<serde_json::Value, ScenarioError> {
    let internal = |e: serde_json::Error| {
        ScenarioError::Host(cfg.invalid("", format!("cannot serialise the configuration: {e}")))
    };
    let mut v = serde_json::to_value(cfg.value()).map_err(internal)?;
    if let Some(top) = v.as_object_mut() {
        top.insert(
            "model".into(),
            serde_json::to_value(model).map_err(internal)?,
        );
    }
    Ok(v)
}

/// Whether `key` is set by a layer above the built-in defaults.
pub fn is_set(cfg: &Config, key: &str) -> bool {
    cfg.contains(key)
        && cfg
            .layer_of(key)
            .is_some_and(|o| o != LayerOrigin::Default.label())
}
