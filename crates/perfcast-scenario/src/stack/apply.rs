//! The one mapping of a [`Stack`]'s fields onto the engines' plan and option fields
//! ([`MAPPING`] documents it; the `apply_*` functions are it).

use super::{GpuGeneration, Stack, TpComm};
use perfcast_engine::inference::{InferenceOptions, InferencePlan};
use perfcast_engine::software::EfficiencyScales;
use perfcast_engine::training::DEFAULT_STRATEGIES;
use perfcast_engine::{TrainingOptions, TrainingPlan};

/// The one table from `[software]` keys to the engines' fields: `(software key, training
/// key, inference key, what the engines do with it)`; `-` where an engine has no such field,
/// `*` for each key of a table. The user's explicit key of the training or inference column
/// wins over the stack. docs/configuration.md ("Software stacks") shows this table (a test keeps the two
/// in step).
pub const MAPPING: &[(&str, &str, &str, &str)] = &[
    (
        "attention.kernel",
        "plan.attention",
        "inference.attention",
        "modelled: the kernel family (`flash` = FlashAttention-2 class, `flash3`, `cudnn`; `plain` materialises scores)",
    ),
    (
        "attention.by_generation",
        "plan.attention",
        "inference.attention",
        "the kernel on a device whose `device.generation` has an entry",
    ),
    (
        "overlap.tp_comm",
        "plan.tp_comm_overlap",
        "-",
        "modelled; `on` sets it, `available` leaves it off (validation: a case's `parallel.tp_comm_overlap`), `off` keeps the search from trying it",
    ),
    (
        "overlap.grad_reduce",
        "plan.overlap_grad_reduce",
        "-",
        "modelled; `false` also narrows the search",
    ),
    (
        "overlap.param_gather",
        "plan.overlap_param_gather",
        "-",
        "modelled; `false` also narrows the search",
    ),
    (
        "parallel.zero_stages",
        "search.zero_stage",
        "-",
        "narrows the search (unset: every stage)",
    ),
    (
        "parallel.sequence_parallel",
        "search.sp",
        "-",
        "`false` narrows the search",
    ),
    (
        "parallel.recompute",
        "search.recompute",
        "-",
        "narrows the search (unset: every registered policy)",
    ),
    (
        "parallel.stages_per_rank",
        "plan.vpp",
        "-",
        "the interleaving of `plan.schedule = \"interleaved-1f1b\"` without `plan.vpp`, and validation's for a case that names an interleaved schedule but not its degree (`parallel.vpp` assumed; unset: the fastest that fits)",
    ),
    (
        "moe.balanced_gate",
        "-",
        "-",
        "validation: where a case's `moe_routing = \"balanced\"` router sends a token's experts (`uniform`: anywhere, Megatron-Core; `consecutive`: k consecutive experts, NeMo AutoModel)",
    ),
    (
        "overlap.cp_exchange",
        "plan.cp_comm",
        "-",
        "modelled",
    ),
    (
        "overlap.tp_comm_efficiency",
        "options.strategy_params.tensor.overlap_efficiency",
        "-",
        "modelled (unset: the plugin default)",
    ),
    (
        "overlap.pp_p2p",
        "options.strategy_params.pipeline.overlap_p2p",
        "-",
        "modelled: interleaved schedules' hand-offs hidden behind compute (unset: the plugin default, off)",
    ),
    (
        "overlap.grad_reduce_efficiency",
        "options.strategy_params.data.overlap_efficiency",
        "-",
        "modelled (unset: the plugin default)",
    ),
    (
        "overlap.param_gather_efficiency",
        "options.strategy_params.{zero,fsdp}.prefetch_efficiency",
        "-",
        "modelled (unset: the plugin default)",
    ),
    (
        "overlap.cp_exchange_efficiency",
        "options.strategy_params.context.overlap_efficiency",
        "-",
        "modelled (unset: the plugin default)",
    ),
    (
        "fused.*",
        "options.engine.fused.*",
        "-",
        "modelled: unfused ops book eager PyTorch's kernels and traffic; `fused.projections = false` (torchtitan's separate `wq`, `wk`, `wv`, `w1`, `w3`) reads a low-precision linear measured whole at each projection's own shape",
    ),
    (
        "host.cuda_graphs",
        "options.engine.host.cuda_graphs",
        "inference.graph_capture",
        "inference: modelled; training: not modelled yet",
    ),
    (
        "host.kernel_launch_us",
        "options.engine.host.kernel_launch_us",
        "options.host_launch_us",
        "inference: modelled; training: not modelled yet",
    ),
    (
        "host.graph_launch_us",
        "options.engine.host.graph_launch_us",
        "options.graph_launch_us",
        "inference: modelled; training: not modelled yet",
    ),
    (
        "host.step_overhead_us",
        "options.engine.host.step_overhead_us",
        "options.step_overhead_us",
        "inference: modelled; training: not modelled yet",
    ),
    (
        "fp8.recipe",
        "plan.fp8_recipe",
        "-",
        "modelled; for a plan of the recipe's format that names none",
    ),
    (
        "fp8.param_gather",
        "options.engine.fp8_param_gather",
        "-",
        "modelled (recipes with one scale per tensor)",
    ),
    (
        "fp8.saved_inputs",
        "options.engine.fp8_saved_inputs",
        "-",
        "modelled: the weight gradient's GEMM inputs kept in the recipe's format (activation memory)",
    ),
    (
        "fp8.weight_cache",
        "options.engine.fp8_weight_cache",
        "-",
        "modelled: each weight's quantisation (and transposed copy) once per step instead of once per micro-batch",
    ),
    (
        "fp8.recipes.*",
        "options.engine.fp8_recipes.*",
        "-",
        "modelled: each field set replaces the engine's compulsory quantisation traffic of that recipe (`bookkeeping_us` not modelled yet)",
    ),
    (
        "fsdp.per_parameter",
        "options.engine.fsdp.per_parameter",
        "-",
        "not modelled yet",
    ),
    (
        "fsdp.prefetch_depth",
        "options.engine.fsdp.prefetch_depth",
        "-",
        "not modelled yet",
    ),
    (
        "fsdp.reshard_after_forward",
        "options.strategy_params.{zero,fsdp}.reshard_after_forward",
        "-",
        "modelled (ZeRO-3; unset: the plugin default)",
    ),
    (
        "recompute.selective",
        "options.engine.selective_recompute",
        "-",
        "modelled (`attention_core`, `op_sac`)",
    ),
    (
        "efficiency.*",
        "options.engine.efficiency.*",
        "options.efficiency.*",
        "training: modelled; inference: not modelled yet",
    ),
    (
        "serving.collective_overhead_us",
        "-",
        "options.collective_overhead_us",
        "modelled",
    ),
    (
        "serving.decode_kv_group_reread",
        "-",
        "options.decode_kv_group_reread",
        "modelled",
    ),
    (
        "serving.usable_memory_fraction",
        "-",
        "options.usable_memory_fraction",
        "modelled",
    ),
    (
        "serving.max_prefill_tokens",
        "-",
        "options.max_prefill_tokens",
        "modelled",
    ),
    (
        "serving.measured_moe",
        "-",
        "options.measured_moe",
        "modelled",
    ),
    (
        "serving.measured_attention",
        "-",
        "options.measured_attention",
        "modelled",
    ),
];

/// The `[options]` key (below `options.`) a numeric or boolean `[software]` key lands on in
/// the training (`training = true`) or the inference engine, by [`MAPPING`] (`efficiency.gemm`
/// -> `engine.efficiency.gemm` in training); `None` where that engine has no such field, or
/// where the key lands on a plan field or on several options (a stack's value there is not
/// one option a caller could set in its place).
pub fn option_key(software_key: &str, training: bool) -> Option<String> {
    MAPPING.iter().find_map(|(sw, train, infer, _)| {
        let target = if training { train } else { infer };
        let rest = target.strip_prefix("options.")?;
        if rest.contains('{') {
            return None;
        }
        match (sw.strip_suffix('*'), rest.strip_suffix('*')) {
            (Some(sw_prefix), Some(rest_prefix)) => software_key
                .strip_prefix(sw_prefix)
                .filter(|leaf| !leaf.is_empty())
                .map(|leaf| format!("{rest_prefix}{leaf}")),
            (None, None) => (*sw == software_key).then(|| rest.to_string()),
            _ => None,
        }
    })
}

/// Whether the user set an engine key (so the stack leaves it alone): a predicate on the
/// full key (`plan.attention`, `options.engine.host.cuda_graphs`).
pub type UserSet<'a> = &'a dyn Fn(&str) -> bool;

/// Assign `v` to `dst` unless the user set `key`.
fn put<T>(set: UserSet, key: &str, dst: &mut T, v: T) {
    if !set(key) {
        *dst = v;
    }
}

fn put_opt<T>(set: UserSet, key: &str, dst: &mut T, v: Option<T>) {
    if let Some(v) = v {
        put(set, key, dst, v);
    }
}

impl Stack {
    /// Set the stack's training-plan fields of `plan` that the user did not set, on a device
    /// of `generation` (when known).
    pub fn apply_training_plan(
        &self,
        plan: &mut TrainingPlan,
        set: UserSet,
        generation: Option<GpuGeneration>,
    ) {
        let o = &self.overlap;
        put(
            set,
            "plan.attention",
            &mut plan.attention,
            self.attention.on(generation),
        );
        put(
            set,
            "plan.tp_comm_overlap",
            &mut plan.tp_comm_overlap,
            o.tp_comm == TpComm::On,
        );
        put(
            set,
            "plan.overlap_grad_reduce",
            &mut plan.overlap_grad_reduce,
            o.grad_reduce,
        );
        put(
            set,
            "plan.overlap_param_gather",
            &mut plan.overlap_param_gather,
            o.param_gather,
        );
        put(set, "plan.cp_comm", &mut plan.cp_comm, o.cp_exchange);
        // The framework's interleaving, for an interleaved schedule that names no degree.
        if let Some(v) = self.parallel.stages_per_rank {
            if plan.vpp <= 1 && plan.schedule.as_deref() == Some("interleaved-1f1b") {
                put(set, "plan.vpp", &mut plan.vpp, v);
            }
        }
        // The stack's recipe, for a plan of its format that names none.
        if let Some(r) = self.fp8.recipe {
            if plan.fp8_recipe.is_none() && r.dtype() == plan.precision {
                put(set, "plan.fp8_recipe", &mut plan.fp8_recipe, Some(r));
            }
        }
    }

    /// Set the stack's training-option fields of `opts` that the user did not set.
    pub fn apply_training_options(&self, opts: &mut TrainingOptions, set: UserSet) {
        let e = &mut opts.engine;
        let k = |s: &str| format!("options.engine.{s}");
        let (f, sf) = (&mut e.fused, self.fused);
        for (name, dst, v) in [
            ("norm", &mut f.norm, sf.norm),
            ("activation", &mut f.activation, sf.activation),
            ("residual", &mut f.residual, sf.residual),
            ("rope", &mut f.rope, sf.rope),
            ("softmax", &mut f.softmax, sf.softmax),
            ("cross_entropy", &mut f.cross_entropy, sf.cross_entropy),
            ("fp8_cast", &mut f.fp8_cast, sf.fp8_cast),
            ("projections", &mut f.projections, sf.projections),
        ] {
            put(set, &k(&format!("fused.{name}")), dst, v);
        }
        let h = &self.host;
        put(
            set,
            &k("host.cuda_graphs"),
            &mut e.host.cuda_graphs,
            h.cuda_graphs,
        );
        put_opt(
            set,
            &k("host.kernel_launch_us"),
            &mut e.host.kernel_launch_us,
            h.kernel_launch_us,
        );
        put_opt(
            set,
            &k("host.graph_launch_us"),
            &mut e.host.graph_launch_us,
            h.graph_launch_us,
        );
        put_opt(
            set,
            &k("host.step_overhead_us"),
            &mut e.host.step_overhead_us,
            h.step_overhead_us,
        );
        for (name, dst, v) in [
            (
                "fp8_param_gather",
                &mut e.fp8_param_gather,
                self.fp8.param_gather,
            ),
            (
                "fp8_saved_inputs",
                &mut e.fp8_saved_inputs,
                self.fp8.saved_inputs,
            ),
            (
                "fp8_weight_cache",
                &mut e.fp8_weight_cache,
                self.fp8.weight_cache,
            ),
        ] {
            put(set, &k(name), dst, v);
        }
        for (recipe, costs) in &self.fp8.recipes {
            if !set(&k(&format!("fp8_recipes.{recipe}"))) {
                e.fp8_recipes.insert(*recipe, *costs);
            }
        }
        put(
            set,
            &k("fsdp.per_parameter"),
            &mut e.fsdp.per_parameter,
            self.fsdp.per_parameter,
        );
        put(
            set,
            &k("fsdp.prefetch_depth"),
            &mut e.fsdp.prefetch_depth,
            self.fsdp.prefetch_depth,
        );
        put(
            set,
            &k("selective_recompute"),
            &mut e.selective_recompute,
            self.recompute.selective,
        );
        scales(set, "options.engine.", &mut e.efficiency, self.efficiency);
        self.apply_strategy_params(opts, set);
    }

    /// Set the stack's strategy parameters of `opts` the user did not set: only for the
    /// strategies in use (the engine refuses others).
    fn apply_strategy_params(&self, opts: &mut TrainingOptions, set: UserSet) {
        let in_use: Vec<String> = match &opts.strategies {
            Some(l) => l.clone(),
            None => DEFAULT_STRATEGIES.iter().map(|s| s.to_string()).collect(),
        };
        let o = &self.overlap;
        let params: [(&[&str], &str, Option<serde_json::Value>); 6] = [
            (&["pipeline"], "overlap_p2p", o.pp_p2p.map(Into::into)),
            (
                &["tensor"],
                "overlap_efficiency",
                o.tp_comm_efficiency.map(Into::into),
            ),
            (
                &["data"],
                "overlap_efficiency",
                o.grad_reduce_efficiency.map(Into::into),
            ),
            (
                &["context"],
                "overlap_efficiency",
                o.cp_exchange_efficiency.map(Into::into),
            ),
            (
                &["zero", "fsdp"],
                "prefetch_efficiency",
                o.param_gather_efficiency.map(Into::into),
            ),
            (
                &["zero", "fsdp"],
                "reshard_after_forward",
                self.fsdp.reshard_after_forward.map(Into::into),
            ),
        ];
        for (strategies, param, value) in params {
            let Some(value) = value else { continue };
            for s in strategies.iter().filter(|s| in_use.iter().any(|u| u == *s)) {
                if set(&format!("options.strategy_params.{s}.{param}")) {
                    continue;
                }
                let entry = opts
                    .strategy_params
                    .entry(s.to_string())
                    .or_insert_with(|| serde_json::Value::Object(Default::default()));
                if let Some(obj) = entry.as_object_mut() {
                    obj.insert(param.to_string(), value.clone());
                }
            }
        }
    }

    /// Set the stack's inference-plan fields of `plan` that the user did not set, on a device
    /// of `generation` (when known).
    pub fn apply_inference_plan(
        &self,
        plan: &mut InferencePlan,
        set: UserSet,
        generation: Option<GpuGeneration>,
    ) {
        put(
            set,
            "inference.attention",
            &mut plan.attention,
            self.attention.on(generation),
        );
        put(
            set,
            "inference.graph_capture",
            &mut plan.graph_capture,
            self.host.cuda_graphs,
        );
    }

    /// Set the stack's inference-option fields of `opts` that the user did not set.
    pub fn apply_inference_options(&self, opts: &mut InferenceOptions, set: UserSet) {
        let (h, s) = (&self.host, &self.serving);
        put_opt(
            set,
            "options.host_launch_us",
            &mut opts.host_launch_us,
            h.kernel_launch_us,
        );
        put_opt(
            set,
            "options.graph_launch_us",
            &mut opts.graph_launch_us,
            h.graph_launch_us,
        );
        put_opt(
            set,
            "options.step_overhead_us",
            &mut opts.step_overhead_us,
            h.step_overhead_us,
        );
        put_opt(
            set,
            "options.collective_overhead_us",
            &mut opts.collective_overhead_us,
            s.collective_overhead_us,
        );
        put_opt(
            set,
            "options.decode_kv_group_reread",
            &mut opts.decode_kv_group_reread,
            s.decode_kv_group_reread,
        );
        put_opt(
            set,
            "options.usable_memory_fraction",
            &mut opts.usable_memory_fraction,
            s.usable_memory_fraction,
        );
        put_opt(
            set,
            "options.max_prefill_tokens",
            &mut opts.max_prefill_tokens,
            s.max_prefill_tokens,
        );
        put_opt(
            set,
            "options.measured_moe",
            &mut opts.measured_moe,
            s.measured_moe,
        );
        put_opt(
            set,
            "options.measured_attention",
            &mut opts.measured_attention,
            s.measured_attention,
        );
        scales(set, "options.", &mut opts.efficiency, self.efficiency);
    }

    /// Search-space defaults the stack narrows (a dimension the `[search]` section leaves
    /// unset): a stack without TP overlap does not try it; one that never overlaps the
    /// gradient reduction or the parameter gathers tries only `false`.
    pub fn narrow_search(
        &self,
        tp_comm_overlap: &mut Option<Vec<bool>>,
        overlap_grad_reduce: &mut Option<Vec<bool>>,
        overlap_param_gather: &mut Option<Vec<bool>>,
    ) {
        let o = &self.overlap;
        if tp_comm_overlap.is_none() && o.tp_comm == TpComm::Off {
            *tp_comm_overlap = Some(vec![false]);
        }
        if overlap_grad_reduce.is_none() && !o.grad_reduce {
            *overlap_grad_reduce = Some(vec![false]);
        }
        if overlap_param_gather.is_none() && !o.param_gather {
            *overlap_param_gather = Some(vec![false]);
        }
    }

    /// The parallelisation dimensions the stack narrows (`[software.parallel]`, where the
    /// `[search]` section leaves them unset): only the ZeRO stages, sequence parallelism and
    /// recompute policies the framework implements are tried.
    pub fn narrow_parallel(
        &self,
        zero_stage: &mut Option<Vec<u8>>,
        sp: &mut Option<Vec<bool>>,
        recompute: &mut Option<Vec<String>>,
    ) {
        let p = &self.parallel;
        if zero_stage.is_none() {
            zero_stage.clone_from(&p.zero_stages);
        }
        if sp.is_none() && p.sequence_parallel == Some(false) {
            *sp = Some(vec![false]);
        }
        if recompute.is_none() {
            recompute.clone_from(&p.recompute);
        }
    }
}

fn scales(set: UserSet, prefix: &str, dst: &mut EfficiencyScales, v: EfficiencyScales) {
    put(
        set,
        &format!("{prefix}efficiency.gemm"),
        &mut dst.gemm,
        v.gemm,
    );
    put(
        set,
        &format!("{prefix}efficiency.attention"),
        &mut dst.attention,
        v.attention,
    );
    put(
        set,
        &format!("{prefix}efficiency.vector"),
        &mut dst.vector,
        v.vector,
    );
}
