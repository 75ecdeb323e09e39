//! The execution plugins a `Training` resolves from a registry, and the options that choose
//! them.

use super::plan::EngineParams;
use super::{Training, DEFAULT_STRATEGIES};
use perfcast_core::parallel::{ParallelStrategy, PipelineSchedule, RecomputePolicy};
use perfcast_core::registry::{Category, Registry};
use perfcast_core::{Key, ModelError, Section};
use std::sync::Arc;

/// The execution plugins a `Training` evaluates plans with.
#[derive(Clone)]
pub struct TrainingComponents {
    /// Applied in order; each adds its split, collectives and state sharding.
    pub strategies: Vec<Arc<dyn ParallelStrategy>>,
    /// Recompute policies by name (the plan's `recompute`).
    pub recompute: Vec<(String, Arc<dyn RecomputePolicy>)>,
    /// Pipeline schedules by name (the plan's `schedule`).
    pub schedules: Vec<(String, Arc<dyn PipelineSchedule>)>,
    /// Registered policies and schedules that could not be built without parameters, and why
    /// (reported when a plan names one).
    pub unbuilt: Vec<(String, String)>,
}

fn registry_error(e: perfcast_core::registry::RegistryError) -> ModelError {
    let s = e.to_string();
    ModelError::invalid(Key::other("plugin"), s.clone(), s)
}

impl TrainingComponents {
    /// The default strategies, and every registered recompute policy and schedule, each built
    /// with its default parameters.
    pub fn from_registry(registry: &Registry) -> Result<Self, ModelError> {
        Self::from_options(registry, &TrainingOptions::default())
    }

    /// The strategies of `options` (default: [`DEFAULT_STRATEGIES`]) built with their
    /// parameters, and every registered recompute policy and schedule.
    pub fn from_options(
        registry: &Registry,
        options: &TrainingOptions,
    ) -> Result<Self, ModelError> {
        let names: Vec<&str> = match &options.strategies {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => DEFAULT_STRATEGIES.to_vec(),
        };
        for key in options.strategy_params.keys() {
            if !names.contains(&key.as_str()) {
                return Err(ModelError::invalid(
                    Key::owned(Section::Options, format!("strategy_params.{key}")),
                    key,
                    format!("not a strategy in use; in use: {}", names.join(", ")),
                ));
            }
        }
        let null = serde_json::Value::Null;
        let mut strategies = Vec::with_capacity(names.len());
        for n in names {
            let params = options.strategy_params.get(n).unwrap_or(&null);
            strategies.push(
                registry
                    .parallel_strategy(n, params)
                    .map_err(registry_error)?,
            );
        }
        let recompute_names = registry.names(Category::RecomputePolicy);
        let schedule_names = registry.names(Category::PipelineSchedule);
        for (table, what, params, known) in [
            (
                "recompute_params",
                "recompute policy",
                &options.recompute_params,
                &recompute_names,
            ),
            (
                "schedule_params",
                "pipeline schedule",
                &options.schedule_params,
                &schedule_names,
            ),
        ] {
            if let Some(key) = params.keys().find(|k| !known.contains(k)) {
                return Err(ModelError::invalid(
                    Key::owned(Section::Options, format!("{table}.{key}")),
                    key,
                    format!(
                        "not a registered {what}{}; registered: {}",
                        perfcast_core::suggest::did_you_mean(key, known.iter().map(String::as_str)),
                        known.join(", ")
                    ),
                ));
            }
        }
        // Every registered policy and schedule is built up front (the search walks them); one
        // that cannot be built without parameters nobody gave (a loaded plugin's required
        // ones) is kept aside with its error, which only a plan naming it gets.
        let mut unbuilt = Vec::new();
        let mut recompute = Vec::new();
        for n in recompute_names {
            let given = options.recompute_params.get(&n);
            match registry.recompute_policy(&n, given.unwrap_or(&null)) {
                Ok(p) => recompute.push((n, p)),
                Err(e) if given.is_none() => unbuilt.push((n, e.to_string())),
                Err(e) => return Err(registry_error(e)),
            }
        }
        let mut schedules = Vec::new();
        for n in schedule_names {
            let given = options.schedule_params.get(&n);
            match registry.pipeline_schedule(&n, given.unwrap_or(&null)) {
                Ok(p) => schedules.push((n, p)),
                Err(e) if given.is_none() => unbuilt.push((n, e.to_string())),
                Err(e) => return Err(registry_error(e)),
            }
        }
        Ok(TrainingComponents {
            strategies,
            recompute,
            schedules,
            unbuilt,
        })
    }
}

/// How a host configures the training model (e.g. a `[training]` config table): engine
/// parameters, and the parallel strategies with their parameters. Shared by every plan.
#[derive(serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrainingOptions {
    #[serde(default)]
    pub engine: EngineParams,
    /// Strategy registry names in mesh order; default `tensor, sequence, context, pipeline,
    /// data, zero`.
    #[serde(default)]
    pub strategies: Option<Vec<String>>,
    /// Parameters per strategy name, e.g. `data = { overlap_efficiency = 0.9 }`.
    #[serde(default)]
    pub strategy_params: std::collections::BTreeMap<String, serde_json::Value>,
    /// Parameters per recompute policy name (the built-ins take none).
    #[serde(default)]
    pub recompute_params: std::collections::BTreeMap<String, serde_json::Value>,
    /// Parameters per pipeline schedule name, e.g. `"example/zb-h1" = { weight_grad_share =
    /// 0.4 }` for a loaded schedule (the built-ins take none).
    #[serde(default)]
    pub schedule_params: std::collections::BTreeMap<String, serde_json::Value>,
}

/// The plugin named `name` in `list` (a scan of the few resolved plugins), or an error on
/// `key` listing the registered names of `what`.
pub(super) fn by_name<'a, T: ?Sized>(
    list: &'a [(String, Arc<T>)],
    unbuilt: &[(String, String)],
    name: &str,
    key: Key,
    what: &str,
) -> Result<&'a T, ModelError> {
    if let Some((_, why)) = unbuilt.iter().find(|(n, _)| n == name) {
        return Err(ModelError::invalid(
            key,
            name,
            format!("the {what} cannot be built: {why} (give its parameters in options)"),
        ));
    }
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| p.as_ref())
        .ok_or_else(|| {
            let known: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
            ModelError::invalid(
                key,
                name,
                format!(
                    "unknown {what}{}; registered: {}",
                    perfcast_core::suggest::did_you_mean(name, known.iter().copied()),
                    known.join(", ")
                ),
            )
        })
}

impl Training {
    pub(super) fn recompute_policy(&self, name: &str) -> Result<&dyn RecomputePolicy, ModelError> {
        by_name(
            &self.comps.recompute,
            &self.comps.unbuilt,
            name,
            Key::plan("recompute"),
            "recompute policy",
        )
    }

    pub(super) fn schedule(&self, name: &str) -> Result<&dyn PipelineSchedule, ModelError> {
        by_name(
            &self.comps.schedules,
            &self.comps.unbuilt,
            name,
            Key::plan("schedule"),
            "pipeline schedule",
        )
    }
}
