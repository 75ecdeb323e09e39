//! Fine-tuning: what a step trains (`plan.task`) and LoRA's low-rank adapters (Hu et al.
//! 2021, "LoRA: Low-Rank Adaptation of Large Language Models", §4.1).
//!
//! `pretrain` and `sft` train every weight: supervised fine-tuning runs the pre-training
//! step's program on other data (packed sequences are the model's `seq_len`), so its step is
//! the same. `lora` freezes the base weights:
//! * no weight-gradient GEMM for a frozen weight (the backward runs the data gradients only)
//!   and no transposed copy of its saved input under a low-precision recipe;
//! * no gradient, optimizer state, gradient reduction or optimizer update for them: the
//!   strategies' gradient reductions and post-step parameter gathers are those of the
//!   adapters alone (`Training::frozen_comms`; Megatron-Core's DDP buffers and distributed
//!   optimizer hold only parameters with `requires_grad`), experts and embedding included;
//! * no backward into the frozen embedding table;
//! * each targeted projection `W` (`k -> n`) gains adapters `A` (`k -> r`) and `B`
//!   (`r -> n`), `y = xW + (xA)B·α/r`: forward two GEMMs and the sum into the output,
//!   backward four GEMMs (`dB`, `d(xA)`, `dA`, `dx`) and the sum into the input's gradient.
//!   The adapters run in the activations' precision (NeMo's `ParallelLinearAdapter` is
//!   built of Megatron-Core's `ColumnParallelLinear`/`RowParallelLinear`, not of Transformer
//!   Engine's fp8 modules) and are split over tensor parallelism as it splits them: `A` by
//!   its rank beside a column-parallel base (`linear_qkv`, `linear_fc1`), by its input beside
//!   a row-parallel one (`linear_proj`, `linear_fc2`), `B` by its output; the exchange of
//!   their rank-`r` activations between the ranks is not modelled (`r / h` of the layer's).
//!
//! Not modelled: the first layer's data gradient that nothing below needs (autograd skips it
//! when the embedding is frozen: 1 layer in `L`); activations a stack might stop saving for a
//! frozen linear, and each adapter's `r`-wide intermediate (`r / h` of one saved tensor):
//! the layer keeps what it keeps in pre-training; module-level recompute
//! (`plan.recompute_modules`) reruns the base GEMMs of a module, not its adapters.

use perfcast_core::workload::ModelSpec;
use perfcast_core::{Key, ModelError};
use serde::{Deserialize, Serialize};

/// What a training step trains.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Every weight (the default).
    #[default]
    Pretrain,
    /// Supervised fine-tuning of every weight: the pre-training step's program.
    Sft,
    /// Frozen base weights with low-rank adapters ([`LoraPlan`]).
    Lora,
}

impl Task {
    pub fn is_pretrain(&self) -> bool {
        *self == Task::Pretrain
    }
    pub fn name(self) -> &'static str {
        match self {
            Task::Pretrain => "pretrain",
            Task::Sft => "sft",
            Task::Lora => "lora",
        }
    }
}

/// A projection LoRA adapts, by Megatron-Core's module name (NeMo 2.0's `target_modules`).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum LoraTarget {
    /// The fused query/key/value projection.
    LinearQkv,
    /// The attention output projection.
    LinearProj,
    /// The MLP's first (up, or gate and up) projection.
    LinearFc1,
    /// The MLP's down projection.
    LinearFc2,
}

impl LoraTarget {
    pub const ALL: [LoraTarget; 4] = [
        LoraTarget::LinearQkv,
        LoraTarget::LinearProj,
        LoraTarget::LinearFc1,
        LoraTarget::LinearFc2,
    ];
    pub fn name(self) -> &'static str {
        match self {
            LoraTarget::LinearQkv => "linear_qkv",
            LoraTarget::LinearProj => "linear_proj",
            LoraTarget::LinearFc1 => "linear_fc1",
            LoraTarget::LinearFc2 => "linear_fc2",
        }
    }
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
    /// The model has this projection in a form adapters are modelled on.
    fn fits(self, m: &ModelSpec) -> bool {
        match self {
            LoraTarget::LinearQkv => m.mla.is_none(),
            LoraTarget::LinearFc1 | LoraTarget::LinearFc2 => m.moe.is_none(),
            LoraTarget::LinearProj => true,
        }
    }
    /// The projection's `(input, output)` widths in the whole model (before tensor
    /// parallelism).
    fn widths(self, m: &ModelSpec) -> (u64, u64) {
        let h = m.hidden;
        match self {
            LoraTarget::LinearQkv => (h, m.q_width() + 2 * m.kv_width()),
            LoraTarget::LinearProj => (m.heads * m.v_head_dim(), h),
            LoraTarget::LinearFc1 => (h, (m.ffn_act.matrices() - 1) * m.ffn_hidden),
            LoraTarget::LinearFc2 => (m.ffn_hidden, h),
        }
    }
}

fn d_rank() -> u32 {
    32
}
fn d_targets() -> Vec<LoraTarget> {
    LoraTarget::ALL.to_vec()
}

/// LoRA's adapters (`plan.lora`). The defaults are NeMo 2.0's `LoRA` PEFT defaults
/// (nemo/collections/llm/peft/lora.py: `dim = 32`, `target_modules = ["linear_qkv",
/// "linear_proj", "linear_fc1", "linear_fc2"]`); a stack may set its own
/// (`EngineParams::lora`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LoraPlan {
    /// The adapters' rank `r`.
    #[serde(default = "d_rank")]
    pub rank: u32,
    /// The projections that get adapters.
    #[serde(default = "d_targets")]
    pub targets: Vec<LoraTarget>,
}

impl Default for LoraPlan {
    fn default() -> Self {
        LoraPlan {
            rank: d_rank(),
            targets: d_targets(),
        }
    }
}

impl LoraPlan {
    /// These adapters without the targets the model does not have in a form adapters are
    /// modelled on (an MoE model's MLPs, latent attention's QKV): what a stack's defaults,
    /// which name every projection, mean for the model.
    pub fn for_model(&self, m: &ModelSpec) -> LoraPlan {
        LoraPlan {
            rank: self.rank,
            targets: self.targets.iter().copied().filter(|t| t.fits(m)).collect(),
        }
    }

    /// Reject a rank or target list that names no adapter the model can have, naming the
    /// keys they came from: `[rank, targets]`.
    pub fn validate(&self, m: &ModelSpec, keys: [Key; 2]) -> Result<(), ModelError> {
        let [rank_key, targets_key] = keys;
        if self.targets.is_empty() {
            return Err(ModelError::invalid(
                targets_key,
                "[]",
                "names no projection: list one or more of linear_qkv, linear_proj, \
                 linear_fc1, linear_fc2",
            ));
        }
        for t in &self.targets {
            if m.mla.is_some() && matches!(t, LoraTarget::LinearQkv) {
                return Err(ModelError::invalid(
                    targets_key,
                    t.name(),
                    "latent attention (MLA) has no fused QKV projection: adapters on its \
                     down- and up-projections are not modelled",
                ));
            }
            if m.moe.is_some() && matches!(t, LoraTarget::LinearFc1 | LoraTarget::LinearFc2) {
                return Err(ModelError::invalid(
                    targets_key,
                    t.name(),
                    "adapters on a mixture-of-experts model's MLPs (its experts) are not \
                     modelled: target linear_qkv and linear_proj",
                ));
            }
        }
        let narrowest = self
            .targets
            .iter()
            .map(|t| {
                let (k, n) = t.widths(m);
                (k.min(n), t.name())
            })
            .min()
            .unwrap_or((0, ""));
        if self.rank == 0 || self.rank as u64 > narrowest.0 {
            return Err(ModelError::invalid(
                rank_key,
                self.rank,
                format!(
                    "must be >= 1 and at most the narrowest targeted projection's width ({} \
                     of {})",
                    narrowest.0, narrowest.1
                ),
            ));
        }
        Ok(())
    }

    /// The [`LoraTarget`] bits of the targets `m` has ([`LoraPlan::for_model`]).
    pub(super) fn mask(&self, m: &ModelSpec) -> u8 {
        self.targets
            .iter()
            .filter(|t| t.fits(m))
            .fold(0, |acc, t| acc | t.bit())
    }
}

/// The adapters of one layer on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoraShape {
    pub rank: u64,
    /// [`LoraTarget`] bits.
    pub targets: u8,
    /// The tensor-parallel split of the base weights (and of the adapters).
    pub split: u64,
}

impl LoraShape {
    pub fn has(&self, t: LoraTarget) -> bool {
        self.targets & t.bit() != 0
    }
}

/// Adapter parameters of one layer on one device: `r·(k + n) / t` per targeted projection of
/// input width `k` and output width `n`, both adapters split `t = split` ways as NeMo's
/// `ParallelLinearAdapter` splits them (`A` by its rank for a column-parallel base, by its
/// input for a row-parallel one; `B` by its output).
pub(super) fn layer_adapter_params(m: &ModelSpec, l: &LoraShape) -> f64 {
    LoraTarget::ALL
        .iter()
        .filter(|x| l.has(**x))
        .map(|x| {
            let (k, n) = x.widths(m);
            (l.rank * (k + n)) as f64 / l.split.max(1) as f64
        })
        .sum()
}

impl LoraTarget {
    /// The base projection is column-parallel (split by its output: `linear_qkv`,
    /// `linear_fc1`) rather than row-parallel (by its input: `linear_proj`, `linear_fc2`).
    pub(super) fn column_parallel(self) -> bool {
        matches!(self, LoraTarget::LinearQkv | LoraTarget::LinearFc1)
    }
}
