//! The software stack of a scenario: the `[software]` table (from the stack `stack = "NAME"`
//! selects, beneath anything the user sets) read into a typed [`Stack`], and the one mapping
//! of its fields onto the engines' plan and option fields ([`MAPPING`]).
//!
//! Precedence, lowest first: the engines' defaults < the stack (`configs/stacks/NAME.toml`,
//! and its base) < the user's `[software]` keys < the user's explicit `[plan]`,
//! `[inference]` and `[options]` keys. A configuration without `stack` and without
//! `[software]` gets [`Stack::default`], which maps every field to the engine's default (the
//! `generic` stack).
//!
//! The stack is resolved once, when a scenario is loaded; the engines see only their plain
//! plan and option fields.

use crate::{is_set, ScenarioError};
use perfcast_core::parallel::CpComm;
use perfcast_core::AttentionKind;
use perfcast_engine::inference::{InferenceOptions, InferencePlan};
use perfcast_engine::software::{
    EfficiencyScales, FlashKernel, Fp8RecipeCosts, FusedOps, GpuGeneration, SelectiveRecompute,
    FP8_RECIPES,
};
use perfcast_engine::training::DEFAULT_STRATEGIES;
use perfcast_engine::{TrainingOptions, TrainingPlan};
use perfcast_host::Config;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a software stack does: the kernels it runs, what it overlaps and fuses, its host
/// overheads, low-precision recipes and FSDP, as one `[software]` table
/// (`deny_unknown_fields` at every level: a misspelt key is an error naming it and its file
/// and line).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Stack {
    /// One line: the framework, its versions and what runs it.
    pub description: String,
    /// The framework family (`megatron`, `torchtitan`, `deepspeed`, `mosaicml`, `meta`,
    /// `tensorrt-llm`, `vllm`, `generic`): what comparable cases share (error bars, issue 14).
    pub family: String,
    /// Which engines the stack describes.
    pub kind: StackKind,
    /// The attention kernel.
    pub attention: AttentionSw,
    /// Which communications the framework overlaps with compute.
    pub overlap: OverlapSw,
    /// Which element-wise ops run fused.
    pub fused: FusedOps,
    /// Host-side overheads and CUDA graphs.
    pub host: HostSw,
    /// Low-precision recipes.
    pub fp8: Fp8Sw,
    /// Fully sharded data parallelism.
    pub fsdp: FsdpSw,
    /// What "selective" recompute means.
    pub recompute: RecomputeSw,
    /// Multipliers on the framework's kernel throughput.
    pub efficiency: EfficiencyScales,
    /// Inference-runtime options (serving stacks).
    pub serving: ServingSw,
}

/// Which engines a stack describes.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum StackKind {
    /// Training and inference (the `generic` stack).
    #[default]
    Any,
    /// A training framework: `predict`, `search`, `sweep`.
    Training,
    /// An inference runtime: `infer`, `roofline --phase`.
    Inference,
}

impl StackKind {
    /// The name configurations use.
    pub const fn name(self) -> &'static str {
        match self {
            StackKind::Any => "any",
            StackKind::Training => "training",
            StackKind::Inference => "inference",
        }
    }
}

/// The attention kernel a stack runs.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKernel {
    /// Scores materialised in device memory (Megatron-LM before FlashAttention).
    Plain,
    /// A fused kernel, unspecified (the engines' default).
    #[default]
    Flash,
    /// FlashAttention-2 (also PyTorch SDPA's flash backend).
    Flash2,
    /// FlashAttention-3 (Hopper).
    Flash3,
    /// cuDNN fused attention (Transformer Engine `FusedAttention`, PyTorch SDPA's cuDNN
    /// backend).
    Cudnn,
    /// TensorRT-LLM's context FMHA and generation MMHA/XQA kernels.
    Trtllm,
    /// FlashInfer.
    Flashinfer,
}

impl AttentionKernel {
    /// The plan's attention kind: `plain`, else `flash`.
    pub fn kind(self) -> AttentionKind {
        match self {
            AttentionKernel::Plain => AttentionKind::Plain,
            _ => AttentionKind::Flash,
        }
    }
    /// The engines' fused-kernel choice.
    pub fn flash_kernel(self) -> FlashKernel {
        match self {
            AttentionKernel::Plain | AttentionKernel::Flash => FlashKernel::Generic,
            AttentionKernel::Flash2 => FlashKernel::Flash2,
            AttentionKernel::Flash3 => FlashKernel::Flash3,
            AttentionKernel::Cudnn => FlashKernel::Cudnn,
            AttentionKernel::Trtllm => FlashKernel::Trtllm,
            AttentionKernel::Flashinfer => FlashKernel::Flashinfer,
        }
    }
}

/// `[software.attention]`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AttentionSw {
    /// `plain`, `flash` (unspecified fused kernel; default), `flash2`, `flash3`, `cudnn`,
    /// `trtllm`, `flashinfer`.
    pub kernel: AttentionKernel,
    /// The fused kernel on a GPU generation where the framework picks another one
    /// (`{ ampere = "flash2" }`); `plain` is not allowed here.
    pub by_generation: BTreeMap<GpuGeneration, AttentionKernel>,
}

/// Whether a framework overlaps tensor-parallel collectives with GEMMs.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TpComm {
    /// The framework has no such overlap: plans default to none and the search does not try
    /// it.
    Off,
    /// The framework offers it, off unless asked for (Megatron-Core `--tp-comm-overlap`): plans
    /// default to none, the search tries both, the validation harness reads the flag from a
    /// case's notes. Default.
    #[default]
    Available,
    /// On by default (torchtitan async TP, NeMo's performance recipes).
    On,
}

fn yes() -> bool {
    true
}

/// `[software.overlap]`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OverlapSw {
    /// TP collectives behind GEMMs: `off`, `available` (default), `on`.
    #[serde(default)]
    pub tp_comm: TpComm,
    /// The gradient reduction overlapped with the backward (bucketed DDP). Default true.
    #[serde(default = "yes")]
    pub grad_reduce: bool,
    /// Parameter all-gathers overlapped with the forward. Default true.
    #[serde(default = "yes")]
    pub param_gather: bool,
    /// Context-parallel K/V exchange: `p2p` (ring, overlapped; default) or `all_gather`
    /// (exposed).
    #[serde(default)]
    pub cp_exchange: CpComm,
    /// Fraction of the GEMM time that hides TP collectives when overlapped (`tensor`'s
    /// `overlap_efficiency`; unset: the plugin default).
    #[serde(default)]
    pub tp_comm_efficiency: Option<f64>,
    /// `data`'s `overlap_efficiency` (unset: the plugin default).
    #[serde(default)]
    pub grad_reduce_efficiency: Option<f64>,
    /// `zero`/`fsdp`'s `prefetch_efficiency` (unset: the plugin default).
    #[serde(default)]
    pub param_gather_efficiency: Option<f64>,
    /// `context`'s `overlap_efficiency` (unset: the plugin default).
    #[serde(default)]
    pub cp_exchange_efficiency: Option<f64>,
}

impl Default for OverlapSw {
    fn default() -> Self {
        OverlapSw {
            tp_comm: TpComm::Available,
            grad_reduce: true,
            param_gather: true,
            cp_exchange: CpComm::P2p,
            tp_comm_efficiency: None,
            grad_reduce_efficiency: None,
            param_gather_efficiency: None,
            cp_exchange_efficiency: None,
        }
    }
}

/// `[software.host]`: unset times keep each engine's own default (training: 0, the host
/// always ahead; inference: `InferenceOptions`' fitted values).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct HostSw {
    /// CUDA graphs: training replays captured layer graphs; inference captures decode steps.
    pub cuda_graphs: bool,
    /// Host time to issue one kernel outside a graph, µs.
    pub kernel_launch_us: Option<f64>,
    /// Host time to launch one captured graph, µs.
    pub graph_launch_us: Option<f64>,
    /// Fixed host time per training step or per inference forward pass, µs.
    pub step_overhead_us: Option<f64>,
}

/// `[software.fp8]`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Fp8Sw {
    /// The recipe fp8 training uses when the plan names none.
    pub recipe: Option<String>,
    /// Parameters all-gathered in fp8.
    pub param_gather: bool,
    /// Quantisation costs per recipe (`[software.fp8.recipes.NAME]`).
    pub recipes: BTreeMap<String, Fp8RecipeCosts>,
}

fn one() -> u32 {
    1
}

/// `[software.fsdp]`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FsdpSw {
    /// Per-parameter sharding (FSDP2) rather than one flat parameter per unit (FSDP1).
    #[serde(default)]
    pub per_parameter: bool,
    /// Units gathered ahead of the one computing. Default 1.
    #[serde(default = "one")]
    pub prefetch_depth: u32,
    /// ZeRO-3/FSDP weights freed after the forward and gathered again for the backward
    /// (unset: the `zero`/`fsdp` strategy's default, true).
    #[serde(default)]
    pub reshard_after_forward: Option<bool>,
}

impl Default for FsdpSw {
    fn default() -> Self {
        FsdpSw {
            per_parameter: false,
            prefetch_depth: 1,
            reshard_after_forward: None,
        }
    }
}

/// `[software.recompute]`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RecomputeSw {
    /// What `recompute = "selective"` means: `attention_core` (Megatron; default) or `op_sac`
    /// (torchtitan's per-op SAC).
    pub selective: SelectiveRecompute,
}

/// `[software.serving]`: inference-runtime options (unset: `InferenceOptions`' defaults).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ServingSw {
    /// Fixed cost per collective call beyond alpha-beta, µs.
    pub collective_overhead_us: Option<f64>,
    /// Fraction of GQA decode KV re-reads that reach memory (0: grouped kernels, XQA,
    /// FlashDecoding; 1: one pass per query head).
    pub decode_kv_group_reread: Option<f64>,
    /// Fraction of device memory allocations may fill.
    pub usable_memory_fraction: Option<f64>,
    /// Tokens per prefill pass at most (`max_num_tokens`, `max_num_batched_tokens`).
    pub max_prefill_tokens: Option<u32>,
}

/// The one table from `[software]` keys to the engines' fields: `(software key, training
/// key, inference key)`; `-` where an engine has no such field. `*` stands for each key of a
/// table. README.md ("Software stacks") shows it (a test keeps the two in step).
pub const MAPPING: &[(&str, &str, &str)] = &[
    (
        "attention.kernel",
        "plan.attention, options.engine.flash_kernel",
        "inference.attention, options.flash_kernel",
    ),
    (
        "attention.by_generation",
        "options.engine.flash_kernel_by_generation",
        "options.flash_kernel_by_generation",
    ),
    (
        "overlap.tp_comm",
        "plan.tp_comm_overlap (on: true; search: off tries only false)",
        "-",
    ),
    ("overlap.grad_reduce", "plan.overlap_grad_reduce", "-"),
    ("overlap.param_gather", "plan.overlap_param_gather", "-"),
    ("overlap.cp_exchange", "plan.cp_comm", "-"),
    (
        "overlap.tp_comm_efficiency",
        "options.strategy_params.tensor.overlap_efficiency",
        "-",
    ),
    (
        "overlap.grad_reduce_efficiency",
        "options.strategy_params.data.overlap_efficiency",
        "-",
    ),
    (
        "overlap.param_gather_efficiency",
        "options.strategy_params.{zero,fsdp}.prefetch_efficiency",
        "-",
    ),
    (
        "overlap.cp_exchange_efficiency",
        "options.strategy_params.context.overlap_efficiency",
        "-",
    ),
    ("fused.*", "options.engine.fused.*", "-"),
    (
        "host.cuda_graphs",
        "options.engine.host.cuda_graphs",
        "inference.graph_capture",
    ),
    (
        "host.kernel_launch_us",
        "options.engine.host.kernel_launch_us",
        "options.host_launch_us",
    ),
    (
        "host.graph_launch_us",
        "options.engine.host.graph_launch_us",
        "options.graph_launch_us",
    ),
    (
        "host.step_overhead_us",
        "options.engine.host.step_overhead_us",
        "options.step_overhead_us",
    ),
    ("fp8.recipe", "options.engine.fp8_recipe", "-"),
    ("fp8.param_gather", "options.engine.fp8_param_gather", "-"),
    ("fp8.recipes.*", "options.engine.fp8_recipes.*", "-"),
    (
        "fsdp.per_parameter",
        "options.engine.fsdp.per_parameter",
        "-",
    ),
    (
        "fsdp.prefetch_depth",
        "options.engine.fsdp.prefetch_depth",
        "-",
    ),
    (
        "fsdp.reshard_after_forward",
        "options.strategy_params.{zero,fsdp}.reshard_after_forward",
        "-",
    ),
    (
        "recompute.selective",
        "options.engine.selective_recompute",
        "-",
    ),
    (
        "efficiency.*",
        "options.engine.efficiency.*",
        "options.efficiency.*",
    ),
    (
        "serving.collective_overhead_us",
        "-",
        "options.collective_overhead_us",
    ),
    (
        "serving.decode_kv_group_reread",
        "-",
        "options.decode_kv_group_reread",
    ),
    (
        "serving.usable_memory_fraction",
        "-",
        "options.usable_memory_fraction",
    ),
    (
        "serving.max_prefill_tokens",
        "-",
        "options.max_prefill_tokens",
    ),
];

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
    /// The stack of `cfg` (its `[software]` table, or the defaults), for an engine of `use_`:
    /// a stack of the other kind is an error at `stack`.
    pub fn from_config(cfg: &Config, use_: StackKind) -> Result<Stack, ScenarioError> {
        let s: Stack = cfg.extract_opt("software")?.unwrap_or_default();
        if let Err((key, message)) = s.check() {
            return Err(cfg.invalid(&key, message).into());
        }
        if s.kind != StackKind::Any && use_ != StackKind::Any && s.kind != use_ {
            let key = if cfg.contains("stack") {
                "stack"
            } else {
                "software.kind"
            };
            return Err(cfg
                .invalid(
                    key,
                    format!(
                        "this stack describes {} ({}software.kind = \"{}\"); this command needs a {} stack (`perfcast config presets` lists the stacks)",
                        match s.kind {
                            StackKind::Training => "a training framework",
                            _ => "an inference runtime",
                        },
                        cfg.extract_opt::<String>("stack")
                            .ok()
                            .flatten()
                            .map(|n| format!("`{n}`: "))
                            .unwrap_or_default(),
                        s.kind.name(),
                        use_.name()
                    ),
                )
                .into());
        }
        Ok(s)
    }

    fn by_generation(&self) -> BTreeMap<GpuGeneration, FlashKernel> {
        self.attention
            .by_generation
            .iter()
            .map(|(g, k)| (*g, k.flash_kernel()))
            .collect()
    }

    /// The first value outside its documented range: `(software key, what is wrong)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        for (g, k) in &self.attention.by_generation {
            if *k == AttentionKernel::Plain {
                return bad(
                    &format!("software.attention.by_generation.{}", generation_name(*g)),
                    "must be a fused kernel (flash, flash2, flash3, cudnn, trtllm, flashinfer): the plan's attention kind does not change with the GPU",
                );
            }
        }
        let recipes = FP8_RECIPES.join(", ");
        if let Some(r) = &self.fp8.recipe {
            if !FP8_RECIPES.contains(&r.as_str()) {
                return bad(
                    "software.fp8.recipe",
                    &format!("unknown recipe `{r}`; recipes: {recipes}"),
                );
            }
        }
        for (r, c) in &self.fp8.recipes {
            if !FP8_RECIPES.contains(&r.as_str()) {
                return bad(
                    &format!("software.fp8.recipes.{r}"),
                    &format!("unknown recipe; recipes: {recipes}"),
                );
            }
            if let Err(e) = c.validate(r) {
                let (k, m) = key_and_rule(e);
                let field = k.rsplit('.').next().unwrap_or_default().to_string();
                return bad(&format!("software.fp8.recipes.{r}.{field}"), &m);
            }
        }
        let o = &self.overlap;
        for (k, v) in [
            ("tp_comm_efficiency", o.tp_comm_efficiency),
            ("grad_reduce_efficiency", o.grad_reduce_efficiency),
            ("param_gather_efficiency", o.param_gather_efficiency),
            ("cp_exchange_efficiency", o.cp_exchange_efficiency),
            (
                "decode_kv_group_reread",
                self.serving.decode_kv_group_reread,
            ),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && (0.0..=1.0).contains(&v))) {
                let section = if k == "decode_kv_group_reread" {
                    "serving"
                } else {
                    "overlap"
                };
                return bad(&format!("software.{section}.{k}"), "must be in [0, 1]");
            }
        }
        let h = &self.host;
        for (k, v) in [
            ("host.kernel_launch_us", h.kernel_launch_us),
            ("host.graph_launch_us", h.graph_launch_us),
            ("host.step_overhead_us", h.step_overhead_us),
            (
                "serving.collective_overhead_us",
                self.serving.collective_overhead_us,
            ),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return bad(&format!("software.{k}"), "must be a finite number >= 0");
            }
        }
        if self
            .serving
            .usable_memory_fraction
            .is_some_and(|u| !(u.is_finite() && u > 0.0 && u <= 1.0))
        {
            return bad(
                "software.serving.usable_memory_fraction",
                "must be in (0, 1]",
            );
        }
        if self.serving.max_prefill_tokens == Some(0) {
            return bad("software.serving.max_prefill_tokens", "must be >= 1");
        }
        if self.fsdp.prefetch_depth == 0 {
            return bad("software.fsdp.prefetch_depth", "must be >= 1");
        }
        if let Err(e) = self.efficiency.validate("") {
            let (k, m) = key_and_rule(e);
            return bad(&format!("software.{k}"), &m);
        }
        Ok(())
    }

    /// Set the stack's training-plan fields of `plan` that the user did not set.
    pub fn apply_training_plan(&self, plan: &mut TrainingPlan, set: UserSet) {
        let o = &self.overlap;
        put(
            set,
            "plan.attention",
            &mut plan.attention,
            self.attention.kernel.kind(),
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
    }

    /// Set the stack's training-option fields of `opts` that the user did not set.
    pub fn apply_training_options(&self, opts: &mut TrainingOptions, set: UserSet) {
        let e = &mut opts.engine;
        let k = |s: &str| format!("options.engine.{s}");
        put(
            set,
            &k("flash_kernel"),
            &mut e.flash_kernel,
            self.attention.kernel.flash_kernel(),
        );
        put(
            set,
            &k("flash_kernel_by_generation"),
            &mut e.flash_kernel_by_generation,
            self.by_generation(),
        );
        let (f, sf) = (&mut e.fused, self.fused);
        for (name, dst, v) in [
            ("norm", &mut f.norm, sf.norm),
            ("activation", &mut f.activation, sf.activation),
            ("residual", &mut f.residual, sf.residual),
            ("rope", &mut f.rope, sf.rope),
            ("softmax", &mut f.softmax, sf.softmax),
            ("cross_entropy", &mut f.cross_entropy, sf.cross_entropy),
            ("fp8_cast", &mut f.fp8_cast, sf.fp8_cast),
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
        if self.fp8.recipe.is_some() {
            put(
                set,
                &k("fp8_recipe"),
                &mut e.fp8_recipe,
                self.fp8.recipe.clone(),
            );
        }
        put(
            set,
            &k("fp8_param_gather"),
            &mut e.fp8_param_gather,
            self.fp8.param_gather,
        );
        for (name, costs) in &self.fp8.recipes {
            if !set(&k(&format!("fp8_recipes.{name}"))) {
                e.fp8_recipes.insert(name.clone(), *costs);
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
        // Strategy parameters: only for the strategies in use (the engine refuses others).
        let in_use: Vec<String> = match &opts.strategies {
            Some(l) => l.clone(),
            None => DEFAULT_STRATEGIES.iter().map(|s| s.to_string()).collect(),
        };
        let o = &self.overlap;
        let params: [(&[&str], &str, Option<serde_json::Value>); 5] = [
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

    /// Set the stack's inference-plan fields of `plan` that the user did not set.
    pub fn apply_inference_plan(&self, plan: &mut InferencePlan, set: UserSet) {
        put(
            set,
            "inference.attention",
            &mut plan.attention,
            self.attention.kernel.kind(),
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
        put(
            set,
            "options.flash_kernel",
            &mut opts.flash_kernel,
            self.attention.kernel.flash_kernel(),
        );
        put(
            set,
            "options.flash_kernel_by_generation",
            &mut opts.flash_kernel_by_generation,
            self.by_generation(),
        );
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
}

/// An engine check's key path and `got VALUE; RULE`.
fn key_and_rule(e: perfcast_core::ModelError) -> (String, String) {
    match e {
        perfcast_core::ModelError::Invalid { key, value, rule } => {
            (key.path.to_string(), format!("got `{value}`; {rule}"))
        }
        other => (String::new(), other.to_string()),
    }
}

fn generation_name(g: GpuGeneration) -> String {
    serde_json::to_value(g)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
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

/// The stack of `cfg` for a training command.
pub fn training_stack(cfg: &Config) -> Result<Stack, ScenarioError> {
    Stack::from_config(cfg, StackKind::Training)
}

/// The stack of `cfg` for an inference command.
pub fn inference_stack(cfg: &Config) -> Result<Stack, ScenarioError> {
    Stack::from_config(cfg, StackKind::Inference)
}

/// The user-set predicate of `cfg`: a key set by any layer above the built-in defaults (the
/// stack sets only `[software]`, so every `[plan]`/`[options]` key present is the user's).
pub fn user_set(cfg: &Config) -> impl Fn(&str) -> bool + '_ {
    move |k| is_set(cfg, k)
}
