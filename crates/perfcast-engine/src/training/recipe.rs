//! Low-precision training recipes: which format the GEMMs run in, how their operands are
//! scaled, and what quantising them costs in device-memory traffic.
//!
//! Each linear layer's three GEMMs (forward `Y = X·W`, data gradient `dX = dY·Wᵀ`, weight
//! gradient `dW = Xᵀ·dY`) take quantised operands. The forward quantises its input `X` along
//! the reduction axis (the hidden dimension); the weight gradient reduces over tokens, so it
//! needs `X` and `dY` laid out and scaled along the token axis; the data gradient needs `dY`
//! along its hidden axis. Per element of the quantised 16-bit tensor, the compulsory traffic of
//! a fused quantisation kernel (read 16 bits once, write the narrow copy once) is:
//!
//! | recipe | fwd `X` | `dY` (both GEMMs) | `X` for `dW` | scales |
//! |---|---|---|---|---|
//! | `delayed` | 2 + 1 | 2 + 1 + 1 (cast, transposed copy) | 1 + 1 (transpose the fp8 copy) | — |
//! | `current`, `tensorwise` | + 2 amax pass | + 2 amax pass | 1 + 1 | — |
//! | `rowwise` | 2 + 1 | 2 + 1 row-wise, 2 + 2 + 1 column-wise | 2 + 2 + 1 | — |
//! | `block`, `mx` | 2 + 1 | 2 · (2 + 1) | 2 + 1 | per block |
//! | `nvfp4` | 2 + ½, + 2 amax pass | 2 · (2 + ½), + 2 | 2 + ½ | per 16 |
//!
//! Delayed scaling takes its scale from an amax history, so the amax of the current tensor
//! is a by-product of the cast (Micikevicius et al. 2022, "FP8 Formats for Deep Learning",
//! §4.3; Transformer Engine's `DelayedScaling`). Current (dynamic per-tensor) scaling needs the
//! tensor's amax before it can cast: a reduction over the whole tensor, one more read (Transformer
//! Engine `Float8CurrentScaling`, torchao `tensorwise`). Per-tensor scaling survives a transpose,
//! so the weight-gradient operand is a transposed copy of the fp8 tensor. Row-wise scaling
//! (torchao `rowwise`: one scale per row of `X`, per column of `W`) fuses a row's amax into its
//! cast, but the weight-gradient operands are scaled per column of `X` and `dY`: a column spans
//! every token of the micro-batch, too long to hold on chip, so its amax is a separate pass
//! before a second cast from the 16-bit tensor. Block scaling (1x128 activation groups, 128x128
//! weight blocks: DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" §3.3) and the MX formats
//! (32-element blocks, E8M0 scales: OCP "Microscaling Formats (MX) Specification" v1.0) hold a
//! block on chip, so each orientation is one fused pass from the 16-bit tensor, plus its scales.
//! NVFP4 (16-element blocks with E4M3 scales under a per-tensor FP32 scale: NVIDIA 2025,
//! "Pretraining Large Language Models with NVFP4", §2) writes half a byte per element and needs
//! the tensor amax for its second-level scale first.
//!
//! What stays in 16 bits under every recipe: attention (scores and softmax), the LM head and
//! the loss, the embedding, norms and element-wise ops (DeepSeek-V3 §3.3.1; NVIDIA's NVFP4
//! recipe also keeps a few final layers in BF16, not modelled). Frameworks whose quantisation is
//! less fused than the compulsory traffic (eager PyTorch, separate amax kernels) set their own
//! costs in a software-stack profile.

use perfcast_core::op::GemmScaling;
use perfcast_core::DType;
use serde::{Deserialize, Serialize};

/// A low-precision GEMM recipe (`plan.fp8_recipe`); the names are the validation schema's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fp8Recipe {
    /// Per-tensor scales from an amax history (Transformer Engine `DelayedScaling`).
    Delayed,
    /// Per-tensor scales from the current tensor's amax (Transformer Engine
    /// `Float8CurrentScaling`).
    Current,
    /// torchao's dynamic per-tensor scaling (the same scheme as `current`).
    Tensorwise,
    /// torchao per-row (activations) and per-column (weights) scaling.
    Rowwise,
    /// 1x128 activation groups and 128x128 weight blocks with FP32 scales.
    Block,
    /// MXFP8: 32-element blocks with E8M0 scales (Blackwell).
    Mx,
    /// NVFP4: 4-bit GEMMs, 16-element blocks with E4M3 scales and a per-tensor scale
    /// (`plan.precision = "fp4"`).
    Nvfp4,
}

/// Device-memory traffic of quantising GEMM operands, bytes per element of the 16-bit tensor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CastCosts {
    /// Forward: quantise a GEMM input (read 16 bits, write the narrow copy).
    pub cast: f64,
    /// Reading a tensor for its amax before the cast can run (0 when the scale comes from
    /// history or is fused into the cast).
    pub amax: f64,
    /// Backward: quantise the output gradient for both backward GEMMs.
    pub grad_cast: f64,
    /// Backward: lay out the saved input for the weight-gradient GEMM.
    pub transpose: f64,
    /// Scale factors written per quantised element.
    pub scale: f64,
    /// Kernels per quantisation.
    pub kernels: u32,
}

impl Fp8Recipe {
    /// Every recipe, in the schema's order.
    pub const ALL: [Fp8Recipe; 7] = [
        Fp8Recipe::Delayed,
        Fp8Recipe::Current,
        Fp8Recipe::Tensorwise,
        Fp8Recipe::Rowwise,
        Fp8Recipe::Block,
        Fp8Recipe::Mx,
        Fp8Recipe::Nvfp4,
    ];

    /// The name in configurations.
    pub const fn name(self) -> &'static str {
        match self {
            Fp8Recipe::Delayed => "delayed",
            Fp8Recipe::Current => "current",
            Fp8Recipe::Tensorwise => "tensorwise",
            Fp8Recipe::Rowwise => "rowwise",
            Fp8Recipe::Block => "block",
            Fp8Recipe::Mx => "mx",
            Fp8Recipe::Nvfp4 => "nvfp4",
        }
    }

    /// The recipe a plan of `precision` runs without one named: Transformer Engine's default
    /// (delayed scaling) for fp8, NVFP4 for fp4; none for 16-bit plans.
    pub const fn default_for(precision: DType) -> Option<Fp8Recipe> {
        match precision {
            DType::Fp8 => Some(Fp8Recipe::Delayed),
            DType::Fp4 => Some(Fp8Recipe::Nvfp4),
            _ => None,
        }
    }

    /// The matrix-engine format of the recipe's GEMMs.
    pub const fn dtype(self) -> DType {
        match self {
            Fp8Recipe::Nvfp4 => DType::Fp4,
            _ => DType::Fp8,
        }
    }

    /// How the GEMM operands are scaled.
    pub const fn scaling(self) -> GemmScaling {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Current | Fp8Recipe::Tensorwise => GemmScaling::Tensor,
            Fp8Recipe::Rowwise => GemmScaling::Row,
            Fp8Recipe::Block => GemmScaling::Block,
            Fp8Recipe::Mx => GemmScaling::Mx,
            Fp8Recipe::Nvfp4 => GemmScaling::Nv,
        }
    }

    /// One scale per tensor: a quantised tensor can be sharded, gathered or transposed and
    /// keep its scale (what lets frameworks all-gather weights and activations in fp8).
    pub const fn per_tensor(self) -> bool {
        matches!(self.scaling(), GemmScaling::Tensor)
    }

    /// The compulsory traffic of fused quantisation kernels (module docs).
    pub fn costs(self) -> CastCosts {
        let narrow = self.dtype().bytes();
        let one_pass = 2.0 + narrow;
        let scale = self.scaling().scale_bytes_per_element();
        match self {
            Fp8Recipe::Delayed => CastCosts {
                cast: one_pass,
                amax: 0.0,
                grad_cast: one_pass + narrow,
                transpose: 2.0 * narrow,
                scale,
                kernels: 1,
            },
            Fp8Recipe::Current | Fp8Recipe::Tensorwise => CastCosts {
                amax: 2.0,
                kernels: 2,
                ..Fp8Recipe::Delayed.costs()
            },
            // Row-wise for the forward and the data gradient, column-wise (amax pass, then a
            // second cast) for the weight gradient.
            Fp8Recipe::Rowwise => CastCosts {
                cast: one_pass,
                amax: 0.0,
                grad_cast: one_pass + 2.0 + one_pass,
                transpose: 2.0 + one_pass,
                scale,
                kernels: 2,
            },
            Fp8Recipe::Block | Fp8Recipe::Mx => CastCosts {
                cast: one_pass,
                amax: 0.0,
                grad_cast: 2.0 * one_pass,
                transpose: one_pass,
                scale,
                kernels: 1,
            },
            Fp8Recipe::Nvfp4 => CastCosts {
                cast: one_pass,
                amax: 2.0,
                grad_cast: 2.0 * one_pass,
                transpose: one_pass,
                scale,
                kernels: 2,
            },
        }
    }
}

impl std::fmt::Display for Fp8Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module table, recipe by recipe: (recipe, cast, amax, grad_cast, transpose, scale).
    #[test]
    fn cast_costs_table() {
        let table = [
            (Fp8Recipe::Delayed, 3.0, 0.0, 4.0, 2.0, 0.0),
            (Fp8Recipe::Current, 3.0, 2.0, 4.0, 2.0, 0.0),
            (Fp8Recipe::Tensorwise, 3.0, 2.0, 4.0, 2.0, 0.0),
            (Fp8Recipe::Rowwise, 3.0, 0.0, 8.0, 5.0, 0.0),
            (Fp8Recipe::Block, 3.0, 0.0, 6.0, 3.0, 4.0 / 128.0),
            (Fp8Recipe::Mx, 3.0, 0.0, 6.0, 3.0, 1.0 / 32.0),
            (Fp8Recipe::Nvfp4, 2.5, 2.0, 5.0, 2.5, 1.0 / 16.0),
        ];
        assert_eq!(table.len(), Fp8Recipe::ALL.len());
        for (r, cast, amax, grad, tr, scale) in table {
            let c = r.costs();
            assert_eq!(
                (c.cast, c.amax, c.grad_cast, c.transpose, c.scale),
                (cast, amax, grad, tr, scale),
                "{r}"
            );
        }
    }

    #[test]
    fn formats_and_names() {
        for r in Fp8Recipe::ALL {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.name()));
            assert_eq!(r.dtype() == DType::Fp4, r == Fp8Recipe::Nvfp4);
        }
        assert_eq!(Fp8Recipe::default_for(DType::Bf16), None);
        assert_eq!(Fp8Recipe::default_for(DType::Fp8), Some(Fp8Recipe::Delayed));
        assert!(Fp8Recipe::Tensorwise.per_tensor() && !Fp8Recipe::Mx.per_tensor());
    }
}
