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

mod apply;
mod sections;

pub use apply::{option_key, UserSet, MAPPING};
pub use sections::{
    AttentionKernel, AttentionSw, BalancedGate, Fp8Sw, FsdpSw, GpuGeneration, HostSw, MoeSw,
    OverlapSw, ParallelSw, RecomputeSw, ServingSw, TpComm,
};

use crate::{is_set, ScenarioError};
use perfcast_config::Config;
use perfcast_engine::software::{EfficiencyScales, FusedOps};
use serde::{Deserialize, Serialize};

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
    /// Which parallelisation features it offers (the search tries only those).
    pub parallel: ParallelSw,
    /// Multipliers on the framework's kernel throughput.
    pub efficiency: EfficiencyScales,
    /// Inference-runtime options (serving stacks).
    pub serving: ServingSw,
    /// Mixture-of-experts behaviour.
    pub moe: MoeSw,
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

thread_local! {
    /// Stacks read on this thread (what a test of "once per command" counts).
    static RESOLVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times [`Stack::from_config`] has read a stack on the calling thread: a test of
/// "a command resolves its stack once" ([`crate::Scenario`]) reads it before and after.
pub fn stacks_resolved() -> usize {
    RESOLVED.with(std::cell::Cell::get)
}

impl Stack {
    /// The stack of `cfg` (its `[software]` table, or the defaults), for an engine of `use_`:
    /// a stack of the other kind is an error at `stack`. A command calls it once, through
    /// [`crate::Scenario::resolve`].
    pub fn from_config(cfg: &Config, use_: StackKind) -> Result<Stack, ScenarioError> {
        RESOLVED.with(|n| n.set(n.get() + 1));
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

    /// The first value outside its documented range: `(software key, what is wrong)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        for (g, k) in &self.attention.by_generation {
            if *k == AttentionKernel::Plain {
                return bad(
                    &format!("software.attention.by_generation.{}", g.name()),
                    "must be a fused kernel (flash, flash2, flash3, cudnn): only which fused kernel runs may differ by GPU generation",
                );
            }
        }
        for (r, c) in &self.fp8.recipes {
            if let Err(e) = c.validate(&format!("software.fp8.recipes.{r}")) {
                let (k, m) = key_and_rule(e);
                return bad(&k, &m);
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
        if self.parallel.stages_per_rank.is_some_and(|v| v < 2) {
            return bad(
                "software.parallel.stages_per_rank",
                "must be >= 2 (an interleaved schedule runs at least two chunks per rank)",
            );
        }
        if let Err(e) = self.efficiency.validate("") {
            let (k, m) = key_and_rule(e);
            return bad(&format!("software.{k}"), &m);
        }
        Ok(())
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

/// The GPU generation of `cfg`'s device (`device.generation`), if it names one.
pub fn generation(cfg: &Config) -> Result<Option<GpuGeneration>, ScenarioError> {
    let Some(name) = cfg.extract_opt::<String>("device.generation")? else {
        return Ok(None);
    };
    match GpuGeneration::parse(&name) {
        Some(g) => Ok(Some(g)),
        None => Err(cfg
            .invalid(
                "device.generation",
                format!(
                    "unknown GPU generation `{name}`; generations: {}",
                    GpuGeneration::ALL.map(GpuGeneration::name).join(", ")
                ),
            )
            .into()),
    }
}

/// The user-set predicate of `cfg`: a key set by any layer above the built-in defaults (the
/// stack sets only `[software]`, so every `[plan]`/`[options]` key present is the user's).
pub fn user_set(cfg: &Config) -> impl Fn(&str) -> bool + '_ {
    move |k| is_set(cfg, k)
}
