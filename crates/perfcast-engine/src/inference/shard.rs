//! Per-device shapes of one replica under a plan (Megatron tensor parallelism: attention heads
//! and the MLP's inner dimension split over `tp`, layers over `pp`), and the ops of one
//! forward pass built from them.

use super::plan::InferencePlan;
use perfcast_core::op::{Attention, ComputeOp, Gemm, GemmScaling, VectorOp, VectorOpKind};
use perfcast_core::workload::{FfnAct, LayerSpans, ModelSpec, MoeSpec, PositionKind};
use perfcast_core::{AttentionKind, DType};

/// Shapes on one device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Shard {
    pub tp: u64,
    pub pp: u64,
    /// Ranks a pass's tokens split over on the attention side (attention data parallelism:
    /// `tp`; else 1).
    pub dp: u64,
    /// Ranks the attention side splits its heads and dense MLPs over (`tp / dp`).
    pub attn_tp: u64,
    pub layers: u64,
    /// Layers with a dense MLP and with experts (`layers` and 0 for a dense model).
    pub dense_layers: u64,
    pub moe_layers: u64,
    /// The experts on this device, for a mixture-of-experts model.
    pub moe: Option<MoeShard>,
    /// Multi-head latent attention (DeepSeek-V2/V3): its ranks and widths.
    pub mla: Option<perfcast_core::workload::MlaSpec>,
    /// Layers of the largest stage (`ceil(layers / pp)`).
    pub stage_layers: u64,
    /// What the model's layers attend over (full, sliding window, chunked), all of them
    /// (a pass runs every stage) and the first stage's (the largest: its KV cache).
    pub spans: LayerSpans,
    pub stage_spans: LayerSpans,
    pub hidden: u64,
    pub head_dim: u64,
    /// Query heads per device.
    pub q_heads: u64,
    /// KV heads per device. With fewer KV heads than `tp`, each KV head is replicated on
    /// `tp / kv_heads` devices so that every device holds the one its query heads use
    /// (TensorRT-LLM and vLLM do the same); the KV cache per device is then one head.
    pub kv_heads: u64,
    /// MLP inner width per device.
    pub ffn: u64,
    /// Output width of the MLP's first GEMM per device (gate and up fused for SwiGLU).
    pub up_n: u64,
    pub ffn_act: FfnAct,
    pub rope: bool,
    /// Vocabulary rows per device (vocab-parallel embedding and LM head, padded up).
    pub vocab: u64,
    pub vocab_full: u64,
    /// Linear-layer weight format.
    pub weight: DType,
    /// Activation format fed to the matrix engine.
    pub act: DType,
    /// 16-bit format of everything kept unquantised: residual stream, norms, attention math,
    /// embedding and LM head.
    pub base: DType,
    pub kv: DType,
    pub attention: AttentionKind,
}

impl Shard {
    /// Shapes for a validated plan; `base` is the 16-bit format chosen for the device.
    pub fn new(model: &ModelSpec, plan: &InferencePlan, base: DType) -> Shard {
        let tp = plan.tp as u64;
        let pp = plan.pp as u64;
        let dp = plan.attention_ranks() as u64;
        let attn_tp = tp / dp;
        let kv = model.kv_heads();
        let ffn = model.ffn_hidden / attn_tp;
        Shard {
            tp,
            pp,
            dp,
            attn_tp,
            layers: model.layers,
            dense_layers: model.dense_layers(),
            moe_layers: model.moe_layers(),
            moe: model
                .moe
                .as_ref()
                .map(|m| MoeShard::new(model, m, plan, base)),
            mla: model.mla,
            stage_layers: model.layers.div_ceil(pp),
            spans: model.layer_spans(0, model.layers),
            stage_spans: model.layer_spans(0, model.layers.div_ceil(pp)),
            hidden: model.hidden,
            head_dim: model.qk_head_dim(),
            q_heads: model.heads / attn_tp,
            // MLA caches one latent per token, shared by every head.
            kv_heads: if model.mla.is_some() {
                1
            } else {
                (kv / attn_tp).max(1)
            },
            ffn,
            up_n: (model.ffn_act.matrices() - 1) * ffn,
            ffn_act: model.ffn_act,
            rope: model.position() == PositionKind::Rope,
            vocab: model.vocab.div_ceil(attn_tp),
            vocab_full: model.vocab,
            weight: plan.weight_dtype,
            act: plan.activation_dtype,
            base,
            kv: plan.kv_dtype,
            attention: plan.attention,
        }
    }

    /// Format the matrix engine runs the linear layers in: the wider of activations and
    /// weights (weight-only quantisation dequantises to the activation format).
    pub fn engine_dtype(&self) -> DType {
        if self.act.bytes() >= self.weight.bytes() {
            self.act
        } else {
            self.weight
        }
    }

    /// Query heads sharing one KV head on this device.
    pub fn group(&self) -> u64 {
        (self.q_heads / self.kv_heads).max(1)
    }

    /// Width of the fused QKV projection output on this device.
    pub fn qkv_n(&self) -> u64 {
        (self.q_heads + 2 * self.kv_heads) * self.head_dim
    }

    /// Matmul weights of one layer's attention on this device (elements): QKV and output
    /// projections split by heads, or MLA's (its down-projections whole on every rank, the
    /// rest split by heads).
    pub fn attention_matmul_weights(&self) -> u64 {
        let h = self.hidden;
        match &self.mla {
            Some(m) => {
                let heads = self.q_heads;
                let q = if m.q_lora_rank > 0 {
                    h * m.q_lora_rank + m.q_lora_rank * heads * m.qk_head_dim()
                } else {
                    h * heads * m.qk_head_dim()
                };
                q + h * (m.kv_lora_rank + m.qk_rope_head_dim)
                    + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
                    + heads * m.v_head_dim * h
            }
            None => h * self.qkv_n() + self.q_heads * self.head_dim * h,
        }
    }

    /// Matmul weights of one dense layer on this device (elements).
    pub fn layer_matmul_weights(&self) -> u64 {
        self.attention_matmul_weights() + (self.up_n + self.ffn) * self.hidden
    }

    /// KV-cache bytes one token occupies on the device holding the largest stage, were
    /// every layer caching it: `2 x layers x kv_heads x head_dim x bytes`, with `kv_heads`
    /// already divided by TP (seed digest §2.9); MLA: `layers x (kv_lora_rank + rope) x
    /// bytes`, the latent and the rotary key every rank of the attention's TP group holds
    /// whole (DeepSeek-AI 2024 §2.1: 576 elements per token and layer for DeepSeek-V3).
    /// Sliding-window and chunked layers keep fewer positions: [`Shard::kv_bytes`].
    pub fn kv_bytes_per_token(&self) -> f64 {
        self.stage_layers as f64 * self.kv_position_bytes()
    }

    /// KV-cache bytes of one position in one layer on this device.
    pub fn kv_position_bytes(&self) -> f64 {
        match &self.mla {
            Some(m) => (m.kv_lora_rank + m.qk_rope_head_dim) as f64 * self.kv.bytes(),
            None => 2.0 * self.kv_heads as f64 * self.head_dim as f64 * self.kv.bytes(),
        }
    }

    /// KV-cache bytes of one sequence of `len` tokens on the device holding the largest
    /// stage: each layer keeps the positions its kind attends over
    /// ([`LayerSpans::kv_positions`]).
    pub fn kv_bytes(&self, len: u64) -> f64 {
        if self.stage_spans.all_full() {
            return len as f64 * self.kv_bytes_per_token();
        }
        self.stage_spans.kv_positions(len) as f64 * self.kv_position_bytes()
    }

    pub(super) fn gemm(&self, m: u64, n: u64, k: u64) -> Gemm {
        Gemm {
            m,
            n,
            k,
            batch: 1,
            a: self.act,
            b: self.weight,
            out: self.base,
            // TensorRT-LLM's FP8 GEMMs: per-tensor scales.
            scaling: GemmScaling::Tensor,
        }
    }

    pub(super) fn vector(
        &self,
        kind: VectorOpKind,
        elements: u64,
        flops: f64,
        accesses: f64,
    ) -> VectorOp {
        VectorOp {
            kind,
            elements,
            flops_per_element: flops,
            bytes_per_element: accesses * self.base.bytes(),
            dtype: self.base,
            launches: 1,
        }
    }

    /// The compute ops of one transformer layer on `m` tokens, attention excluded (it depends
    /// on the context length and is timed separately). One kernel each, as fused production
    /// runtimes issue them: residual add fused into the next norm, bias into the GEMM
    /// epilogue, gate and up projections in one GEMM, rotary embedding and the KV-cache write
    /// in one kernel.
    pub fn layer_ops(&self, m: u64) -> [(OpClass, ComputeOp); 8] {
        let h = self.hidden;
        let pos_kind = if self.rope {
            VectorOpKind::Rope
        } else {
            VectorOpKind::Elementwise
        };
        [
            (
                OpClass::Other,
                ComputeOp::Vector(self.vector(VectorOpKind::Norm, m * h, 4.0, 2.0)),
            ),
            (
                OpClass::Gemm(GemmName::Qkv),
                ComputeOp::Gemm(self.gemm(m, self.qkv_n(), h)),
            ),
            (
                OpClass::Other,
                ComputeOp::Vector(self.vector(pos_kind, m * self.qkv_n(), 6.0, 2.0)),
            ),
            (
                OpClass::Gemm(GemmName::OutProj),
                ComputeOp::Gemm(self.gemm(m, h, self.q_heads * self.head_dim)),
            ),
            (
                OpClass::Other,
                // Residual add + norm: read x and residual, write both.
                ComputeOp::Vector(self.vector(VectorOpKind::Norm, m * h, 6.0, 4.0)),
            ),
            (
                OpClass::Gemm(GemmName::MlpUp),
                ComputeOp::Gemm(self.gemm(m, self.up_n, h)),
            ),
            (OpClass::Other, self.activation(m * self.ffn)),
            (
                OpClass::Gemm(GemmName::MlpDown),
                ComputeOp::Gemm(self.gemm(m, h, self.ffn)),
            ),
        ]
    }

    /// The MLP's activation kernel over `elements` outputs (FLOPs and accesses per element
    /// by activation).
    pub(super) fn activation(&self, elements: u64) -> ComputeOp {
        let (flops, accesses) = match self.ffn_act {
            // silu(gate) * up: read two, write one.
            FfnAct::Swiglu => (6.0, 3.0),
            // gelu with bias, squared relu: read one, write one.
            FfnAct::Gelu => (10.0, 2.0),
            FfnAct::Relu2 => (3.0, 2.0),
        };
        ComputeOp::Vector(self.vector(VectorOpKind::Activation, elements, flops, accesses))
    }

    /// The ops of one layer before its MLP, on `m` tokens, attention core excluded: norm, the
    /// projections (QKV or MLA's), rotary embedding, output projection, residual + norm.
    pub fn attention_side_ops(&self, m: u64) -> Vec<(OpClass, ComputeOp)> {
        let Some(mla) = &self.mla else {
            return self.layer_ops(m)[..5].to_vec();
        };
        let h = self.hidden;
        let heads = self.q_heads;
        let norm = |n: u64| ComputeOp::Vector(self.vector(VectorOpKind::Norm, n, 4.0, 2.0));
        let mut ops = vec![(OpClass::Other, norm(m * h))];
        let qk = mla.qk_head_dim();
        if mla.q_lora_rank > 0 {
            ops.push((
                OpClass::Gemm(GemmName::QDown),
                ComputeOp::Gemm(self.gemm(m, mla.q_lora_rank, h)),
            ));
            ops.push((OpClass::Other, norm(m * mla.q_lora_rank)));
            ops.push((
                OpClass::Gemm(GemmName::QUp),
                ComputeOp::Gemm(self.gemm(m, heads * qk, mla.q_lora_rank)),
            ));
        } else {
            ops.push((
                OpClass::Gemm(GemmName::QUp),
                ComputeOp::Gemm(self.gemm(m, heads * qk, h)),
            ));
        }
        ops.push((
            OpClass::Gemm(GemmName::KvDown),
            ComputeOp::Gemm(self.gemm(m, mla.kv_lora_rank + mla.qk_rope_head_dim, h)),
        ));
        ops.push((OpClass::Other, norm(m * mla.kv_lora_rank)));
        // The latent's expansion to every head's key and value: in decode the runtimes absorb
        // it into the query and the output (DeepSeek-AI 2024 §2.1.1), which takes the same
        // FLOPs and reads the same weights per token; one GEMM stands for either form.
        ops.push((
            OpClass::Gemm(GemmName::KvUp),
            ComputeOp::Gemm(self.gemm(
                m,
                heads * (mla.qk_nope_head_dim + mla.v_head_dim),
                mla.kv_lora_rank,
            )),
        ));
        ops.push((
            OpClass::Other,
            ComputeOp::Vector(self.vector(
                VectorOpKind::Rope,
                m * (heads + 1) * mla.qk_rope_head_dim,
                6.0,
                2.0,
            )),
        ));
        ops.push((
            OpClass::Gemm(GemmName::OutProj),
            ComputeOp::Gemm(self.gemm(m, h, heads * mla.v_head_dim)),
        ));
        ops.push((
            OpClass::Other,
            ComputeOp::Vector(self.vector(VectorOpKind::Norm, m * h, 6.0, 4.0)),
        ));
        ops
    }

    /// The dense MLP of a layer on `m` tokens: gate/up GEMM, activation, down GEMM.
    pub fn mlp_ops(&self, m: u64) -> [(OpClass, ComputeOp); 3] {
        let [.., a, b, c] = self.layer_ops(m);
        [a, b, c]
    }

    /// Ops outside the layers, for `m` input tokens of which `m_last` need logits: embedding
    /// lookup (first stage), final norm, LM head and sampling (last stage).
    pub fn edge_ops(&self, m: u64, m_last: u64) -> [(OpClass, ComputeOp); 4] {
        let h = self.hidden;
        let head = Gemm {
            m: m_last,
            n: self.vocab,
            k: h,
            batch: 1,
            a: self.base,
            b: self.base,
            out: self.base,
            scaling: GemmScaling::Tensor,
        };
        let mut sampling = self.vector(VectorOpKind::Softmax, m_last * self.vocab_full, 5.0, 0.0);
        // fp32 logits read twice (max/sum, then top-k/sample), probabilities written once.
        sampling.bytes_per_element = 12.0;
        sampling.dtype = DType::Fp32;
        sampling.launches = 2;
        [
            (
                OpClass::Other,
                ComputeOp::Vector(self.vector(VectorOpKind::Embedding, m * h, 0.0, 2.0)),
            ),
            (
                OpClass::Other,
                ComputeOp::Vector(self.vector(VectorOpKind::Norm, m_last * h, 4.0, 2.0)),
            ),
            (OpClass::Gemm(GemmName::LmHead), ComputeOp::Gemm(head)),
            (OpClass::Other, ComputeOp::Vector(sampling)),
        ]
    }

    /// The attention core of one layer: `batch` sequences, `q_len` new tokens each, over
    /// `kv_len` cached positions.
    pub fn attention_op(&self, batch: u64, q_len: u64, kv_len: u64) -> Attention {
        Attention {
            batch,
            heads: self.q_heads,
            kv_heads: self.kv_heads,
            q_len,
            kv_len,
            head_dim: self.head_dim,
            causal: true,
            kind: self.attention,
            dtype: self.base,
            backward: false,
        }
    }

    /// Device-memory bytes of an attention op with the KV cache in its own format and
    /// `kv_passes` passes over each KV head (1 when the kernel shares a KV head across its
    /// query group); Q and O (and plain attention's score matrix) in the base format.
    pub fn attention_bytes(&self, a: &Attention, kv_passes: f64) -> f64 {
        let e = self.base.bytes();
        let b = a.batch as f64;
        let q = b * a.heads as f64 * a.q_len as f64 * a.head_dim as f64 * e;
        let kv = 2.0 * b * a.kv_heads as f64 * a.kv_len as f64 * a.head_dim as f64;
        let scores = if a.kind.is_flash() {
            0.0
        } else {
            4.0 * b * a.heads as f64 * a.q_len as f64 * a.kv_len as f64 * e
        };
        2.0 * q + kv * self.kv.bytes() * kv_passes + scores
    }
}

/// Named GEMMs of a layer, for the per-GEMM roofline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmName {
    Qkv,
    OutProj,
    MlpUp,
    MlpDown,
    LmHead,
    /// MLA: the query's down-projection.
    QDown,
    /// MLA: the query's up-projection (or its full projection).
    QUp,
    /// MLA: the key/value latent and the rotary key.
    KvDown,
    /// MLA: the latent's expansion to the heads' keys and values.
    KvUp,
    /// MoE: the router.
    Router,
    /// MoE: the routed experts' gate/up and down GEMMs (grouped).
    ExpertUp,
    ExpertDown,
    /// MoE: the shared experts.
    SharedUp,
    SharedDown,
}

impl GemmName {
    pub const fn name(self) -> &'static str {
        match self {
            GemmName::Qkv => "qkv_proj",
            GemmName::OutProj => "out_proj",
            GemmName::MlpUp => "mlp_up",
            GemmName::MlpDown => "mlp_down",
            GemmName::LmHead => "lm_head",
            GemmName::QDown => "q_down",
            GemmName::QUp => "q_up",
            GemmName::KvDown => "kv_down",
            GemmName::KvUp => "kv_up",
            GemmName::Router => "router",
            GemmName::ExpertUp => "expert_up",
            GemmName::ExpertDown => "expert_down",
            GemmName::SharedUp => "shared_up",
            GemmName::SharedDown => "shared_down",
        }
    }
}

/// Which breakdown bucket an op's time goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpClass {
    Gemm(GemmName),
    Other,
}

/// The experts of a mixture-of-experts layer on one device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MoeShard {
    /// Routed experts of the layer (`E`).
    pub experts: u64,
    pub top_k: u64,
    /// Expert parallelism and the expert tensor parallelism it leaves (`tp / ep`).
    pub ep: u64,
    pub etp: u64,
    /// Routed experts on this device (`E / ep`).
    pub local: u64,
    /// One expert's inner width on this device, and its gate/up output width.
    pub ffn: u64,
    pub up_n: u64,
    /// The shared experts' inner width on this device (all of them summed), and their gate/up
    /// output width (0 without shared experts).
    pub shared_ffn: u64,
    pub shared_up_n: u64,
    /// Format of the routed experts' weights.
    pub weight: DType,
    /// The router's systematic imbalance and the capacity factor (`MoeSpec`).
    pub imbalance: f64,
    pub capacity: Option<f64>,
}

impl MoeShard {
    /// The experts of `moe` on one device of a checked `plan` (`base`: the 16-bit format).
    pub fn new(model: &ModelSpec, moe: &MoeSpec, plan: &InferencePlan, _base: DType) -> Self {
        let tp = plan.tp as u64;
        let ep = (plan.ep as u64).max(1);
        let etp = (tp / ep).max(1);
        let attn_tp = tp / plan.attention_ranks() as u64;
        let mats = model.ffn_act.matrices() - 1;
        let ffn = moe.expert_ffn_hidden / etp;
        let shared_ffn = moe.shared_experts * moe.shared_ffn_hidden() / attn_tp.max(1);
        MoeShard {
            experts: moe.experts,
            top_k: moe.top_k,
            ep,
            etp,
            local: moe.experts / ep,
            ffn,
            up_n: mats * ffn,
            shared_ffn,
            shared_up_n: mats * shared_ffn,
            weight: plan.expert_dtype.unwrap_or(plan.weight_dtype),
            imbalance: moe.load_imbalance(),
            capacity: moe.capacity_factor,
        }
    }
}
