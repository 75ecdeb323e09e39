//! The execution plugins a `Training` resolves from a registry, and the options that choose
//! them.

use super::plan::EngineParams;
use super::{Training, DEFAULT_STRATEGIES};
use perfcast_core::parallel::{
    AxisDecl, AxisSet, CommList, ParallelStrategy, PipelineSchedule, PlanShape, RecomputePolicy,
    MAX_DECLARED_AXES,
};
use perfcast_core::registry::{Category, Registry};
use perfcast_core::{Key, ModelError, Section};
use std::sync::Arc;

/// The execution plugins a `Training` evaluates plans with. Built only by
/// [`TrainingComponents::from_registry`] and [`TrainingComponents::from_options`], which number
/// the strategies' declared axes (`declare_axes`): the fields are the engine's, so that the
/// strategies, their axes and their ranges cannot disagree.
#[derive(Clone)]
pub struct TrainingComponents {
    /// Applied in order; each adds its split, collectives and state sharding.
    pub(crate) strategies: Vec<Arc<dyn ParallelStrategy>>,
    /// The axes the strategies declare, numbered in the order of `strategies` and then of
    /// their declarations ([`AxisSet::declared`]`(k)` is `declared[k]`).
    pub(crate) declared: Vec<DeclaredAxis>,
    /// Per strategy, the run's number of its first declared axis and how many it declares.
    pub(crate) axis_ranges: Vec<(u8, u8)>,
    /// Recompute policies by name (the plan's `recompute`).
    pub(crate) recompute: Vec<(String, Arc<dyn RecomputePolicy>)>,
    /// Pipeline schedules by name (the plan's `schedule`).
    pub(crate) schedules: Vec<(String, Arc<dyn PipelineSchedule>)>,
    /// Registered policies and schedules that could not be built without parameters, and why
    /// (reported when a plan names one).
    pub(crate) unbuilt: Vec<(String, String)>,
}

/// An axis a strategy in use declares.
#[derive(Clone, Debug, PartialEq)]
pub struct DeclaredAxis {
    pub decl: AxisDecl,
    /// The name the strategy is used by (`options.strategies`).
    pub owner: String,
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
        for &n in &names {
            let params = options.strategy_params.get(n).unwrap_or(&null);
            strategies.push(
                registry
                    .parallel_strategy(n, params)
                    .map_err(registry_error)?,
            );
        }
        let (declared, axis_ranges) = declare_axes(&names, &strategies)?;
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
            declared,
            axis_ranges,
            recompute,
            schedules,
            unbuilt,
        })
    }
}

/// Number the axes the strategies declare: checked names, none claimed twice, at most
/// [`MAX_DECLARED_AXES`].
#[allow(clippy::type_complexity)]
fn declare_axes(
    names: &[&str],
    strategies: &[Arc<dyn ParallelStrategy>],
) -> Result<(Vec<DeclaredAxis>, Vec<(u8, u8)>), ModelError> {
    let key = || Key::options("strategies");
    let mut declared: Vec<DeclaredAxis> = Vec::new();
    let mut ranges = Vec::with_capacity(strategies.len());
    for (name, s) in names.iter().zip(strategies) {
        let first = declared.len();
        for decl in s.axes() {
            decl.check()
                .map_err(|e| ModelError::invalid(key(), name, format!("strategy `{name}`: {e}")))?;
            if let Some(other) = declared.iter().find(|d| d.decl.name == decl.name) {
                return Err(ModelError::invalid(
                    key(),
                    name,
                    format!(
                        "strategy `{name}` declares axis `{}`, which strategy `{}` declares too",
                        decl.name, other.owner
                    ),
                ));
            }
            if declared.len() == MAX_DECLARED_AXES {
                return Err(ModelError::invalid(
                    key(),
                    name,
                    format!(
                        "strategy `{name}` declares axis `{}`: the strategies in use may \
                         declare at most {MAX_DECLARED_AXES} axes",
                        decl.name
                    ),
                ));
            }
            declared.push(DeclaredAxis {
                decl,
                owner: name.to_string(),
            });
        }
        ranges.push((first as u8, (declared.len() - first) as u8));
    }
    Ok((declared, ranges))
}

impl TrainingComponents {
    /// Call `f` with every strategy, the plan as it sees it (its own declared axes' degrees
    /// at `axes[0..]`; the plan itself when no axis is declared) and the run's number of its
    /// first declared axis and how many it declares.
    pub(super) fn each_strategy(
        &self,
        shape: &PlanShape,
        mut f: impl FnMut(&dyn ParallelStrategy, &PlanShape, (u8, u8)) -> Result<(), ModelError>,
    ) -> Result<(), ModelError> {
        if self.declared.is_empty() {
            for s in &self.strategies {
                f(s.as_ref(), shape, (0, 0))?;
            }
            return Ok(());
        }
        for (s, &(first, n)) in self.strategies.iter().zip(&self.axis_ranges) {
            let mut view = *shape;
            view.axes = [1; MAX_DECLARED_AXES];
            let (i, len) = (first as usize, n as usize);
            view.axes[..len].copy_from_slice(&shape.axes[i..i + len]);
            f(s.as_ref(), &view, (first, n))?;
        }
        Ok(())
    }

    /// Every strategy's collectives in `out`, their groups' declared axes numbered as the run
    /// numbers them; a collective on a declared axis its strategy did not declare is an
    /// error naming the strategy.
    pub(super) fn comms(
        &self,
        shape: &PlanShape,
        dims: &perfcast_core::parallel::LayerDims,
        out: &mut CommList,
    ) -> Result<(), ModelError> {
        self.each_strategy(shape, |s, view, (first, n)| {
            let start = out.len();
            s.comms(view, dims, out)?;
            for op in out.ops_mut_from(start) {
                let local = op.group.declared_bits();
                if local == 0 {
                    continue;
                }
                if (local as u32) >> n != 0 {
                    return Err(ModelError::invalid(
                        Key::options("strategies"),
                        s.kind(),
                        format!(
                            "strategy `{}` adds a collective on a declared axis it does not \
                             declare (group {:#x}; it declares {n})",
                            s.kind(),
                            op.group.0
                        ),
                    ));
                }
                let global = ((local as u16) << first) << 8;
                op.group = AxisSet((op.group.0 & AxisSet::BUILT_IN.0) | global);
            }
            Ok(())
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
