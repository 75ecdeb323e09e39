//! A search scenario from a merged configuration: `[model]`, the system (`[system]` and its
//! components), the optional `[plan]` (the template of every field the search does not walk,
//! and the published plan to compare with), the optional `[options]` (engine options and
//! strategy parameters, as `perfcast predict` reads them), the stack (`stack = "NAME"`: its
//! plan fields fill the template, and a stack without an overlap narrows that dimension) and
//! the optional `[search]` section.

use crate::space::{Budget, Constraints, Objective, SearchConfig, SearchSpace};
use crate::SearchError;
use perfcast_config::Config;
use perfcast_engine::training::{Training, TrainingPlan};
use perfcast_scenario::training::{options, plan, resolve_devices, template};
use perfcast_scenario::Scenario as Resolved;

/// The config's top-level section this crate reads.
pub const SECTION: &str = "search";

/// Everything a search needs, resolved from a configuration.
pub struct Scenario {
    /// One per device count.
    pub trainings: Vec<Training>,
    pub space: SearchSpace,
    pub constraints: Constraints,
    /// Plan fields the search does not walk (from `[plan]`, else the engine's defaults).
    pub template: TrainingPlan,
    /// The config's own `[plan]`, when it has one.
    pub plan: Option<TrainingPlan>,
    pub objective: Objective,
    pub top: usize,
    /// USD per GPU-hour, for reporting the cost objective (`search.price_per_gpu_hour`).
    pub price_per_gpu_hour: f64,
    /// How long the walk may take (`search.max_seconds`, default
    /// [`crate::space::DEFAULT_MAX_SECONDS`]).
    pub budget: Budget,
}

impl Scenario {
    /// Run the search.
    pub fn search(&self) -> Result<crate::SearchResult, SearchError> {
        crate::search::search_within(
            &self.trainings,
            &self.space,
            &self.constraints,
            &self.template,
            self.objective,
            self.top,
            self.budget,
        )
    }

    /// [`Scenario::search`] with the memory of every partial recompute count checked one
    /// by one instead of by bisection: what the bisection is tested against.
    #[doc(hidden)]
    pub fn search_scanning_memory(&self) -> Result<crate::SearchResult, SearchError> {
        let space = (
            self.trainings.as_slice(),
            &self.space,
            &self.constraints,
            &self.template,
        );
        crate::search::search_with(space, self.objective, self.top, self.budget, false)
    }
}

/// The search scenario of the resolved configuration `resolved` (loaded with [`SECTION`]
/// among the allowed sections; its stack resolved once, for a training command).
pub fn load_scenario(resolved: &Resolved) -> Result<Scenario, SearchError> {
    let cfg = resolved.config();
    let model = resolved.model()?;
    let mut system = resolved.system()?.clone();
    let mut plan: Option<TrainingPlan> = plan(resolved)?;
    // The [plan]'s devices as `perfcast predict` reconciles them (without `plan.dp`, DP
    // fills the system; without `system.devices`, the plan sets it). A [plan] for another
    // device count than the system's (e.g. `--set system.devices=512`) stays as written: it is
    // then compared only if its count is searched, and reported as not searched otherwise.
    if let Some(p) = plan.as_mut() {
        let mut reconciled = p.clone();
        if resolve_devices(cfg, &mut reconciled, &mut system).is_ok() {
            *p = reconciled;
        }
    }
    let sc: SearchConfig = cfg.extract_opt(SECTION)?.unwrap_or_default();
    let constraints = constraints(cfg, &sc, plan.as_ref())?;
    let counts = device_counts(cfg, &sc, system.devices)?;
    let (budget, price) = budget_and_price(cfg, &sc)?;
    // Engine options and strategy parameters, as `perfcast predict` reads them.
    let options = options(resolved)?;
    let mut trainings = Vec::with_capacity(counts.len());
    for n in counts {
        let mut sys = system.clone();
        sys.devices = n;
        let t =
            Training::with_options(model.clone(), sys, cfg.registry(), &options).map_err(|e| {
                SearchError::Model {
                    context: format!("model and system with {n} devices"),
                    source: e,
                }
            })?;
        trainings.push(t);
    }
    let base = match &plan {
        Some(p) => p.clone(),
        None => template(resolved)?,
    };
    let template = TrainingPlan {
        global_batch: constraints.global_batch,
        ..base
    };
    // The stack narrows the overlap dimensions the section leaves open.
    let mut space = sc.space();
    let stack = resolved.stack()?;
    stack.narrow_search(
        &mut space.tp_comm_overlap,
        &mut space.overlap_grad_reduce,
        &mut space.overlap_param_gather,
    );
    stack.narrow_parallel(&mut space.zero_stage, &mut space.sp, &mut space.recompute);
    Ok(Scenario {
        trainings,
        space,
        constraints,
        template,
        plan,
        objective: sc.objective.unwrap_or_default(),
        top: sc.top.unwrap_or(10),
        price_per_gpu_hour: price,
        budget,
    })
}

/// The constraints of `[search]`: the global batch (of the section, else of the `[plan]`),
/// the memory headroom and the TP and micro-batch bounds, each checked.
fn constraints(
    cfg: &Config,
    sc: &SearchConfig,
    plan: Option<&TrainingPlan>,
) -> Result<Constraints, SearchError> {
    let global_batch = match (sc.global_batch, plan) {
        (Some(g), _) => g,
        (None, Some(p)) => p.global_batch,
        (None, None) => {
            return Err(SearchError::Invalid {
                key: "search.global_batch".into(),
                message: "missing: set search.global_batch or plan.global_batch".into(),
            })
        }
    };
    let d = Constraints::default();
    let constraints = Constraints {
        global_batch,
        memory_headroom: sc.memory_headroom.unwrap_or(d.memory_headroom),
        max_tp: sc.max_tp,
        max_micro_batch: sc.max_micro_batch.unwrap_or(d.max_micro_batch),
    };
    if global_batch == 0 {
        let key = if sc.global_batch.is_some() {
            "search.global_batch"
        } else {
            "plan.global_batch"
        };
        return Err(cfg.invalid(key, "must be a positive integer").into());
    }
    let h = constraints.memory_headroom;
    if !(h.is_finite() && (0.0..1.0).contains(&h)) {
        return Err(cfg
            .invalid(
                "search.memory_headroom",
                format!("{h} is not allowed: a fraction in [0, 1)"),
            )
            .into());
    }
    if constraints.max_micro_batch == 0 {
        return Err(cfg
            .invalid("search.max_micro_batch", "must be a positive integer")
            .into());
    }
    if constraints.max_tp == Some(0) {
        return Err(cfg
            .invalid("search.max_tp", "must be a positive integer")
            .into());
    }
    Ok(constraints)
}

/// The device counts searched (`search.devices`, else the system's), sorted and distinct.
fn device_counts(
    cfg: &Config,
    sc: &SearchConfig,
    system_devices: u32,
) -> Result<Vec<u32>, SearchError> {
    let mut counts = match &sc.devices {
        Some(d) => d
            .counts()
            .map_err(|m| SearchError::from(cfg.invalid("search.devices", m)))?,
        None => vec![system_devices],
    };
    if counts.is_empty() || counts.contains(&0) {
        return Err(cfg
            .invalid(
                "search.devices",
                "must be a positive device count, a non-empty list of them or \
                 { min, max, step }",
            )
            .into());
    }
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

/// The walk's time budget and the price per GPU-hour of the cost objective, checked.
fn budget_and_price(cfg: &Config, sc: &SearchConfig) -> Result<(Budget, f64), SearchError> {
    let budget = Budget {
        max_seconds: Some(sc.max_seconds.unwrap_or(crate::space::DEFAULT_MAX_SECONDS)),
    };
    if let Some(s) = budget.max_seconds.filter(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(cfg
            .invalid(
                "search.max_seconds",
                format!("{s} is not allowed: a positive number of seconds"),
            )
            .into());
    }
    let price = sc
        .price_per_gpu_hour
        .unwrap_or(crate::space::DEFAULT_PRICE_PER_GPU_HOUR);
    if !(price.is_finite() && price > 0.0) {
        return Err(cfg
            .invalid(
                "search.price_per_gpu_hour",
                format!("{price} is not allowed: a positive price in USD"),
            )
            .into());
    }
    Ok((budget, price))
}
