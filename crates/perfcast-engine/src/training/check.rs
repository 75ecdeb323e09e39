//! Building a `Training` (the model and the system checked once) and the checks every plan
//! passes before anything is worked out.

use super::components::{TrainingComponents, TrainingOptions};
use super::lora::Task;
use super::modules::RecomputeModules;
use super::plan::{EngineParams, TrainingPlan};
use super::Training;
use crate::network::Network;
use perfcast_core::parallel::PlanShape;
use perfcast_core::registry::Registry;
use perfcast_core::workload::ModelSpec;
use perfcast_core::{DType, Engine, Key, ModelError, Section, System};

fn positive(key: Key, v: u32) -> Result<(), ModelError> {
    if v == 0 {
        Err(ModelError::invalid(key, v, "must be a positive integer"))
    } else {
        Ok(())
    }
}

impl Training {
    /// Resolve the default execution plugins from `registry`.
    pub fn new(model: ModelSpec, system: System, registry: &Registry) -> Result<Self, ModelError> {
        let comps = TrainingComponents::from_registry(registry)?;
        Self::with_components(model, system, comps, EngineParams::default())
    }

    /// Resolve the execution plugins from `registry` as `options` say.
    pub fn with_options(
        model: ModelSpec,
        system: System,
        registry: &Registry,
        options: &TrainingOptions,
    ) -> Result<Self, ModelError> {
        let comps = TrainingComponents::from_options(registry, options)?;
        Self::with_components(model, system, comps, options.engine.clone())
    }

    /// Use explicit execution plugins and engine parameters.
    pub fn with_components(
        model: ModelSpec,
        system: System,
        comps: TrainingComponents,
        params: EngineParams,
    ) -> Result<Self, ModelError> {
        model.validate()?;
        // Parameter counts are u64 in the core: refuse sizes whose count would overflow.
        let (l, h, f, v) = (
            model.layers as u128,
            model.hidden as u128,
            model.ffn_hidden as u128,
            model.vocab as u128,
        );
        let q = (model.heads as u128) * (model.head_dim() as u128);
        let per_layer = h * (q + 2 * (model.kv_heads() as u128) * (model.head_dim() as u128))
            + q * h
            + 3 * h * f
            + 8 * h;
        let experts = model.moe.map_or(0, |m| {
            (m.experts + m.shared_experts) as u128
                * 3
                * h
                * m.expert_ffn_hidden.max(m.shared_ffn_hidden()) as u128
        });
        let bound = l * (per_layer + experts) + 2 * v * h + (model.seq_len as u128) * h;
        if bound >= 1u128 << 60 {
            return Err(ModelError::invalid(
                Key::model("hidden"),
                model.hidden,
                format!(
                    "the model's parameter count (~{:.3e}) is beyond 2^60",
                    bound as f64
                ),
            ));
        }
        if system.devices == 0 {
            return Err(ModelError::invalid(
                Key::system("devices"),
                0,
                "must be a positive integer",
            ));
        }
        params.validate_software()?;
        if !(params.runtime_reserve_gib.is_finite() && params.runtime_reserve_gib >= 0.0) {
            return Err(ModelError::invalid(
                Key::options("engine.runtime_reserve_gib"),
                params.runtime_reserve_gib,
                "must be a finite number >= 0",
            ));
        }
        let capacity = system
            .memory
            .device()
            .map(|t| t.capacity())
            .ok_or_else(|| {
                ModelError::invalid(
                    Key::system("memory"),
                    format!("{:?}", system.memory),
                    "needs a device-level memory tier (e.g. HBM)",
                )
            })?;
        if !(capacity.0.is_finite() && capacity.0 > 0.0) {
            return Err(ModelError::invalid(
                Key::system("memory device capacity"),
                capacity.0,
                "must be finite and > 0",
            ));
        }
        if system.network.is_empty() && system.devices > 1 {
            return Err(ModelError::invalid(
                Key::system("network"),
                "[]",
                "a system of more than one device needs at least one network level",
            ));
        }
        let network = Network::with_topology(
            &system.network,
            system.topology.clone(),
            system.devices as u64,
        )?;
        if comps.strategies.is_empty() {
            return Err(ModelError::invalid(
                Key::other("parallel strategies"),
                "[]",
                "at least one strategy is needed",
            ));
        }
        Ok(Training {
            model,
            system,
            network,
            params,
            comps,
            capacity,
        })
    }

    /// The modules of `plan.recompute_modules` exist in the model.
    fn check_modules(&self, m: RecomputeModules) -> Result<(), ModelError> {
        let model = &self.model;
        let missing = [
            (
                RecomputeModules::MLA_UP_PROJ,
                model.mla.is_none(),
                "mla_up_proj needs latent attention (model.attention = \"mla\")",
            ),
            (
                RecomputeModules::MOE_ACT,
                model.moe.is_none(),
                "moe_act needs a mixture-of-experts model ([model.moe])",
            ),
            (
                RecomputeModules::SHARED_EXPERTS,
                model.moe.is_none_or(|x| x.shared_experts == 0),
                "shared_experts needs an MoE model with shared experts (model.moe.shared_experts)",
            ),
        ];
        match missing
            .iter()
            .find(|(bit, absent, _)| *absent && m.contains(*bit))
        {
            Some((_, _, why)) => Err(ModelError::invalid(
                Key::plan("recompute_modules"),
                m.names().join(", "),
                *why,
            )),
            None => Ok(()),
        }
    }

    /// The plan as the strategies see it, its declared axes numbered as the run numbers them
    /// and checked (after [`Training::check_plan`]): each `plan.axes` key an axis a strategy in
    /// use declares, each degree dividing what its declaration says.
    pub(super) fn shape(&self, plan: &TrainingPlan) -> Result<PlanShape, ModelError> {
        let mut shape = plan.shape();
        if plan.axes.is_empty() {
            return Ok(shape);
        }
        let declared = &self.comps.declared;
        for (name, &degree) in &plan.axes {
            let key = || Key::owned(Section::Plan, format!("axes.{name}"));
            let k = self
                .declared_axis(name)
                .map_err(|why| ModelError::invalid(key(), degree, why))?;
            // (A zero degree is refused by `check_plan`, which runs first.)
            shape.axes[k] = degree;
        }
        if plan.ep > 1 || plan.etp > 1 {
            self.check_expert_mesh(&shape)?;
        }
        let m = &self.model;
        let experts = m.moe.map_or(1, |x| x.experts);
        for (d, &degree) in declared.iter().zip(&shape.axes) {
            let div = d.decl.divides;
            let key = || Key::owned(Section::Plan, format!("axes.{}", d.decl.name));
            let checks = [
                (div.heads, m.heads, "model.heads"),
                (div.kv_heads, m.kv_heads(), "model.kv_heads"),
                (div.sequence, m.seq_len, "model.seq_len"),
                (
                    div.experts,
                    experts,
                    "the routed experts (model.moe.experts)",
                ),
            ];
            for (on, n, what) in checks {
                if on && !n.is_multiple_of(degree as u64) {
                    return Err(ModelError::invalid(
                        key(),
                        degree,
                        format!("must divide {what} = {n} (strategy `{}`)", d.owner),
                    ));
                }
            }
            if div.batch {
                shape.batch_split *= degree;
            }
        }
        let per = plan.micro_batch as u64 * plan.dp as u64 * shape.batch_split as u64;
        if shape.batch_split > 1 && !(plan.global_batch as u64).is_multiple_of(per) {
            return Err(ModelError::invalid(
                Key::plan("global_batch"),
                plan.global_batch,
                format!(
                    "must be a multiple of plan.micro_batch x plan.dp x the declared axes that \
                     split the batch = {per}"
                ),
            ));
        }
        Ok(shape)
    }

    /// The expert mesh is carved out of a stage's TP x CP x DP ranks and at most one declared
    /// axis that splits the batch (counted as data-parallel ranks): with expert parallelism,
    /// refuse a declared axis (degree > 1) that does not split the batch, or a second one.
    fn check_expert_mesh(&self, shape: &PlanShape) -> Result<(), ModelError> {
        let mut batch = None;
        for (d, &degree) in self.comps.declared.iter().zip(&shape.axes) {
            let key = || Key::owned(Section::Plan, format!("axes.{}", d.decl.name));
            if degree <= 1 {
                continue;
            }
            if !d.decl.divides.batch {
                return Err(ModelError::invalid(
                    key(),
                    degree,
                    format!(
                        "cannot be combined with expert parallelism: the expert mesh is carved \
                         out of tp x cp x dp and an axis that splits the batch, and axis `{}` \
                         of strategy `{}` does not split it",
                        d.decl.name, d.owner
                    ),
                ));
            }
            if let Some(first) = batch.replace(&d.decl.name) {
                return Err(ModelError::invalid(
                    key(),
                    degree,
                    format!(
                        "a second declared axis that splits the batch (after `{first}`) cannot \
                         be combined with expert parallelism: the expert mesh is carved out of \
                         tp x cp x dp and one such axis"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Reject adapters on a plan that does not fine-tune with LoRA, and adapters the model
    /// cannot have.
    fn check_task(&self, plan: &TrainingPlan) -> Result<(), ModelError> {
        if plan.task != Task::Lora && plan.lora.is_some() {
            return Err(ModelError::invalid(
                Key::plan("lora"),
                "[plan.lora]",
                format!(
                    "describes LoRA adapters, but plan.task = \"{}\" trains every weight: \
                     set plan.task = \"lora\" or remove [plan.lora]",
                    plan.task.name()
                ),
            ));
        }
        if plan.task != Task::Lora {
            return Ok(());
        }
        match &plan.lora {
            Some(l) => l.validate(
                &self.model,
                [Key::plan("lora.rank"), Key::plan("lora.targets")],
            ),
            None => self.params.lora.for_model(&self.model).validate(
                &self.model,
                [
                    Key::options("engine.lora.rank"),
                    Key::options("engine.lora.targets"),
                ],
            ),
        }
    }

    /// The rank and target bits of a LoRA plan's adapters: `plan.lora`, else the stack's
    /// defaults ([`EngineParams::lora`]) on the projections this model has.
    pub(super) fn adapters(&self, plan: &TrainingPlan) -> Option<(u32, u8)> {
        if plan.task != Task::Lora {
            return None;
        }
        let l = plan.lora.as_ref().unwrap_or(&self.params.lora);
        Some((l.rank, l.mask(&self.model)))
    }

    pub(super) fn check_plan(&self, plan: &TrainingPlan) -> Result<(), ModelError> {
        positive(Key::plan("tp"), plan.tp)?;
        positive(Key::plan("pp"), plan.pp)?;
        positive(Key::plan("dp"), plan.dp)?;
        positive(Key::plan("cp"), plan.cp)?;
        positive(Key::plan("ep"), plan.ep)?;
        positive(Key::plan("vpp"), plan.vpp)?;
        positive(Key::plan("micro_batch"), plan.micro_batch)?;
        positive(Key::plan("global_batch"), plan.global_batch)?;
        positive(Key::plan("etp"), plan.etp)?;
        self.check_task(plan)?;
        if let Some(m) = plan.recompute_modules {
            self.check_modules(m)?;
        }
        if plan.ep > 1 || plan.etp > 1 {
            let key = if plan.ep > 1 { "ep" } else { "etp" };
            let v = plan.ep.max(plan.etp);
            if self.model.moe.is_none() {
                return Err(ModelError::invalid(
                    Key::plan(key),
                    v,
                    "must be 1: expert parallelism needs a mixture-of-experts model",
                ));
            }
            if !self
                .comps
                .strategies
                .iter()
                .any(|s| s.axis() == perfcast_core::parallel::Axis::Expert)
            {
                return Err(ModelError::invalid(
                    Key::plan(key),
                    v,
                    "needs an expert-parallel strategy (the built-in `expert`) among \
                     options.strategies",
                ));
            }
        }
        if !matches!(
            plan.precision,
            DType::Bf16 | DType::Fp16 | DType::Fp8 | DType::Fp4
        ) {
            return Err(ModelError::invalid(
                Key::plan("precision"),
                plan.precision,
                "must be bf16, fp16, fp8 or fp4",
            ));
        }
        if let Some(r) = plan.fp8_recipe {
            if r.dtype() != plan.precision {
                return Err(ModelError::invalid(
                    Key::plan("fp8_recipe"),
                    r,
                    format!(
                        "runs {} GEMMs but plan.precision = {}",
                        r.dtype(),
                        plan.precision
                    ),
                ));
            }
        }
        let unit = self.system.compute.as_ref();
        if unit.peak(Engine::Matrix, plan.precision).is_none() {
            let have: Vec<&str> = [DType::Bf16, DType::Fp16, DType::Fp8, DType::Fp4]
                .into_iter()
                .filter(|d| unit.peak(Engine::Matrix, *d).is_some())
                .map(|d| d.name())
                .collect();
            return Err(ModelError::invalid(
                Key::plan("precision"),
                plan.precision,
                format!(
                    "the devices of `{}` (compute unit `{}`) have no matrix-engine peak for it; \
                     they have: {}",
                    self.system.name,
                    unit.kind(),
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                ),
            ));
        }
        if let Some((name, &degree)) = plan.axes.iter().find(|(_, &d)| d == 0) {
            let key = Key::owned(Section::Plan, format!("axes.{name}"));
            return Err(ModelError::invalid(
                key,
                degree,
                "must be a positive integer",
            ));
        }
        if plan.devices() != self.system.devices as u64 {
            let declared: String = plan
                .axes
                .iter()
                .map(|(k, v)| format!("x{v} ({k})"))
                .collect();
            let key = if plan.axes.is_empty() {
                "tp*pp*dp*cp"
            } else {
                "tp*pp*dp*cp*axes"
            };
            return Err(ModelError::invalid(
                Key::plan(key),
                format!(
                    "{}x{}x{}x{}{declared} = {}",
                    plan.tp,
                    plan.pp,
                    plan.dp,
                    plan.cp,
                    plan.devices()
                ),
                format!("must equal the system's devices = {}", self.system.devices),
            ));
        }
        Ok(())
    }
}
