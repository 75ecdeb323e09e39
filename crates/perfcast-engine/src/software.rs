//! What a software stack does, as the engines take it: the option types a stack profile
//! (`configs/stacks/*.toml`, read by perfcast-scenario) sets beneath the user's own
//! `[options]`.
//!
//! Every default here is the engine's behaviour before stacks existed, so a configuration that
//! names no stack gets the numbers it always got. Several of these fields are declared and
//! validated but **not yet modelled** (each says so: host costs, per-step fp8 bookkeeping,
//! FSDP details); the stack profiles already carry sourced values for them, so the model behind a
//! field can be switched on without touching the profiles. (The attention kernel a stack
//! runs is the plan's own `attention`, a kernel family of [`perfcast_core::AttentionKind`].)

use crate::training::CastCosts;
use perfcast_core::{Key, ModelError, Section};
use serde::{Deserialize, Serialize};

fn yes() -> bool {
    true
}
fn one_f() -> f64 {
    1.0
}
fn one_u() -> u32 {
    1
}

/// Multipliers on the achieved throughput of a framework's kernels, where they differ from
/// the kernels the hardware plugins' efficiencies describe (cuBLAS GEMMs, fused attention,
/// bandwidth-bound fused element-wise kernels). 1 is "the same"; 0.9 means the framework's
/// kernels take 1/0.9 of the time. Shared by every plan of the stack, never per case.
///
/// The training op program divides each op's time by its class's multiplier (all stack
/// profiles ship 1.0 until a kernel-level measurement says otherwise).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EfficiencyScales {
    /// GEMMs. Default 1.
    #[serde(default = "one_f")]
    pub gemm: f64,
    /// The attention core. Default 1.
    #[serde(default = "one_f")]
    pub attention: f64,
    /// Element-wise and reduction kernels (norms, activations, casts, loss). Default 1.
    #[serde(default = "one_f")]
    pub vector: f64,
}

impl Default for EfficiencyScales {
    fn default() -> Self {
        EfficiencyScales {
            gemm: 1.0,
            attention: 1.0,
            vector: 1.0,
        }
    }
}

impl EfficiencyScales {
    /// Each scale must be finite and in (0, 2].
    /// `prefix` is where the table sits (`engine.` in training, empty in inference).
    pub fn validate(&self, prefix: &str) -> Result<(), ModelError> {
        for (name, v) in [
            ("gemm", self.gemm),
            ("attention", self.attention),
            ("vector", self.vector),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 2.0) {
                return Err(ModelError::invalid(
                    options(format!("{prefix}efficiency.{name}")),
                    v,
                    "must be in (0, 2] (a multiplier on achieved throughput)",
                ));
            }
        }
        Ok(())
    }
}

/// Host-side (CPU) costs of a training step: what the GPU waits for when the framework cannot
/// run ahead of it.
///
/// Not modelled yet: the training engine assumes the host is always ahead (today's numbers);
/// these fields carry the stack's values for the model of host-bound steps (small
/// micro-batches, eager PyTorch).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct HostCosts {
    /// Fixed host time per optimizer step (data loader hand-off, logging, the Python training
    /// loop), µs. Default 0.
    #[serde(default)]
    pub step_overhead_us: f64,
    /// Host time to issue one kernel when not graph-captured (framework dispatch plus the CUDA
    /// launch), µs: a kernel costs `max(device time, kernel_launch_us)`. Default 0.
    #[serde(default)]
    pub kernel_launch_us: f64,
    /// The layer's forward and backward are replayed as captured CUDA graphs (Megatron-Core
    /// `--enable-cuda-graph` / `--cuda-graph-impl`): no per-kernel host cost, one
    /// `graph_launch_us` per graph. Default false.
    #[serde(default)]
    pub cuda_graphs: bool,
    /// Host time to launch one captured graph, µs. Default 0.
    #[serde(default)]
    pub graph_launch_us: f64,
}

impl HostCosts {
    /// Every time must be finite and >= 0.
    pub fn validate(&self) -> Result<(), ModelError> {
        for (name, v) in [
            ("step_overhead_us", self.step_overhead_us),
            ("kernel_launch_us", self.kernel_launch_us),
            ("graph_launch_us", self.graph_launch_us),
        ] {
            non_negative(options(format!("engine.host.{name}")), v)?;
        }
        Ok(())
    }
}

/// Which element-wise ops the framework runs as single fused kernels (read each input once,
/// write each output once: the traffic `training::ops` documents). An op that is not fused
/// runs as the framework's separate kernels, each reading and writing its operands.
///
/// The training op program books the fused traffic for a fused op and eager PyTorch's op
/// sequence for one that is not (`training::shape::LayerShape::pointwise` lists both); the
/// defaults are Megatron-LM/Apex/Transformer Engine's kernels.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FusedOps {
    /// LayerNorm/RMSNorm as one kernel (Apex `FusedLayerNorm`, TE). Default true.
    #[serde(default = "yes")]
    pub norm: bool,
    /// Bias + GeLU, or SwiGLU's gate-times-up, as one kernel. Default true.
    #[serde(default = "yes")]
    pub activation: bool,
    /// Bias + dropout + residual add as one kernel. Default true.
    #[serde(default = "yes")]
    pub residual: bool,
    /// Rotary embedding of q and k as one kernel. Default true.
    #[serde(default = "yes")]
    pub rope: bool,
    /// Scale + mask + softmax of materialised scores as one kernel (`attention = "plain"`).
    /// Default true.
    #[serde(default = "yes")]
    pub softmax: bool,
    /// The cross-entropy loss as one kernel over the logits. Default false: the engine books
    /// Megatron-LM's vocabulary-parallel cross entropy as 6 separate kernels forward and 2
    /// backward (`training::ops`).
    #[serde(default)]
    pub cross_entropy: bool,
    /// fp8: the quantisation of a GEMM input fused into the kernel that produces it (TE
    /// `LayerNormLinear` writes the norm's output in fp8). Default false: a separate cast.
    #[serde(default)]
    pub fp8_cast: bool,
    /// The query, key and value projections one linear layer, and a gated MLP's gate and up
    /// projections one (Megatron-Core's `linear_qkv` and `linear_fc1`). Default true; false
    /// for frameworks that keep them apart (torchtitan's `wq`, `wk`, `wv`, `w1`, `w3`). What
    /// reads it: a low-precision linear the device has measured whole, looked up at each
    /// projection's own shape (`ComputeUnit::quantised_linear_ratio`). The 16-bit GEMMs are
    /// timed fused either way (apart, the narrow key and value projections of a tensor-
    /// parallel shard would cost more than their FLOPs' share: not modelled).
    #[serde(default = "yes")]
    pub projections: bool,
}

impl Default for FusedOps {
    fn default() -> Self {
        FusedOps {
            norm: true,
            activation: true,
            residual: true,
            rope: true,
            softmax: true,
            cross_entropy: false,
            fp8_cast: false,
            projections: true,
        }
    }
}

/// A framework's own quantisation costs for one low-precision recipe, where they differ from
/// the compulsory traffic of fused kernels ([`crate::training::Fp8Recipe::costs`], the
/// engine's model): bytes of device-memory traffic per element of the quantised 16-bit
/// tensor, kernels per quantisation. Each field is optional: an unset field keeps the
/// engine's value. Eager PyTorch, for one, runs the amax and the cast as several kernels
/// (more traffic); Transformer Engine writes an MX or block-scaled tensor's row- and
/// column-wise copies in one pass (less). Applied by [`crate::EngineParams::recipe_costs`].
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct CastCostsOverride {
    /// Forward: quantise a GEMM input.
    #[serde(default)]
    pub cast: Option<f64>,
    /// Read for the amax before the cast can run.
    #[serde(default)]
    pub amax: Option<f64>,
    /// Backward: quantise the output gradient for both backward GEMMs.
    #[serde(default)]
    pub grad_cast: Option<f64>,
    /// Backward: lay out the saved input for the weight-gradient GEMM.
    #[serde(default)]
    pub transpose: Option<f64>,
    /// Scale factors written per quantised element.
    #[serde(default)]
    pub scale: Option<f64>,
    /// Kernels per quantisation.
    #[serde(default)]
    pub kernels: Option<u32>,
    /// Per-step bookkeeping, µs: amax-history roll and scale update, the amax all-reduce
    /// over the data-parallel group. Not modelled yet. Default none (0).
    #[serde(default)]
    pub bookkeeping_us: Option<f64>,
}

impl CastCostsOverride {
    /// `base` with the fields this sets replaced.
    pub fn apply(&self, base: CastCosts) -> CastCosts {
        CastCosts {
            cast: self.cast.unwrap_or(base.cast),
            amax: self.amax.unwrap_or(base.amax),
            grad_cast: self.grad_cast.unwrap_or(base.grad_cast),
            transpose: self.transpose.unwrap_or(base.transpose),
            scale: self.scale.unwrap_or(base.scale),
            kernels: self.kernels.unwrap_or(base.kernels),
        }
    }

    /// Every quantity finite and >= 0, at least one kernel; `path` names the table in errors
    /// (`engine.fp8_recipes.mx`).
    pub fn validate(&self, path: &str) -> Result<(), ModelError> {
        for (name, v) in [
            ("cast", self.cast),
            ("amax", self.amax),
            ("grad_cast", self.grad_cast),
            ("transpose", self.transpose),
            ("scale", self.scale),
            ("bookkeeping_us", self.bookkeeping_us),
        ] {
            if let Some(v) = v {
                non_negative(options(format!("{path}.{name}")), v)?;
            }
        }
        if self.kernels == Some(0) {
            return Err(ModelError::invalid(
                options(format!("{path}.kernels")),
                0,
                "must be >= 1",
            ));
        }
        Ok(())
    }
}

/// What a framework's "selective" recompute saves and reruns.
///
/// Both are modelled: `attention_core` is the `selective` policy (Korthikanti et al. 2022);
/// under `op_sac` the engine reruns what torchtitan's policy does not save and keeps what it
/// saves (`training::ops::layer`, `ActivationShape::op_sac_kept`).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SelectiveRecompute {
    /// Megatron's selective recompute: only the attention core (scores, softmax, dropout,
    /// ·V) is rerun in the backward pass (Korthikanti et al. 2022 §5; Megatron-LM
    /// `--recompute-granularity selective`). Default.
    #[default]
    AttentionCore,
    /// torchtitan's per-op selective activation checkpointing: every op of a layer is rerun
    /// except the saved ones: the attention kernel's output, every second matmul's output and
    /// the TP reduce-scatters (torchtitan `activation_checkpoint.selective_ac_option = "op"`,
    /// its `_save_list` in `parallelize_llama.py`).
    OpSac,
}

/// How a framework's fully sharded data parallelism works, beyond what `plan.zero_stage` and
/// the `zero`/`fsdp` strategy parameters (`prefetch_efficiency`, `reshard_after_forward`)
/// say.
///
/// Not modelled yet: the engine models FSDP as ZeRO-3 with one layer's gathers prefetched
/// behind its neighbour's compute.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FsdpParams {
    /// Per-parameter sharding (PyTorch FSDP2 `fully_shard`: each parameter a DTensor sharded
    /// on dim 0, all-gathered into a flat buffer and copied out per parameter, reduce-scatter
    /// inputs copied in) instead of FSDP1's one flat parameter per unit (views, no copies).
    /// Default false.
    #[serde(default)]
    pub per_parameter: bool,
    /// Units whose all-gather is issued ahead of the one computing (FSDP2 prefetches the next
    /// unit implicitly; `set_modules_to_forward_prefetch` raises it). Default 1.
    #[serde(default = "one_u")]
    pub prefetch_depth: u32,
}

impl Default for FsdpParams {
    fn default() -> Self {
        FsdpParams {
            per_parameter: false,
            prefetch_depth: 1,
        }
    }
}

fn options(path: String) -> Key {
    Key::owned(Section::Options, path)
}

fn non_negative(key: Key, v: f64) -> Result<(), ModelError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ModelError::invalid(key, v, "must be a finite number >= 0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        assert_eq!(FusedOps::default(), toml::from_str::<FusedOps>("").unwrap());
        assert!(toml::from_str::<FusedOps>("nrom = true").is_err());
        // An override replaces only what it sets.
        let base = crate::training::Fp8Recipe::Tensorwise.costs();
        let o: CastCostsOverride = toml::from_str("amax = 6.0\nkernels = 7").unwrap();
        let c = o.apply(base);
        assert_eq!((c.amax, c.kernels, c.cast), (6.0, 7, base.cast));
        assert_eq!(CastCostsOverride::default().apply(base), base);
        let e = CastCostsOverride {
            grad_cast: Some(-1.0),
            ..Default::default()
        }
        .validate("engine.fp8_recipes.block")
        .unwrap_err()
        .to_string();
        assert!(e.contains("engine.fp8_recipes.block.grad_cast"), "{e}");
        let e = CastCostsOverride {
            kernels: Some(0),
            ..Default::default()
        }
        .validate("engine.fp8_recipes.mx")
        .unwrap_err()
        .to_string();
        assert!(e.contains("engine.fp8_recipes.mx.kernels"), "{e}");
        let bad = EfficiencyScales {
            gemm: 0.0,
            ..EfficiencyScales::default()
        };
        let e = bad.validate("engine.").unwrap_err().to_string();
        assert!(e.contains("engine.efficiency.gemm"), "{e}");
        let e = HostCosts {
            kernel_launch_us: f64::NAN,
            ..HostCosts::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("engine.host.kernel_launch_us"), "{e}");
    }
}
