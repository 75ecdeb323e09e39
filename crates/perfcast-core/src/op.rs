//! The op IR: what a device executes (compute ops) and what a group of devices exchanges
//! (collectives). Ops are plain data; the engine builds them per layer and hands them to the
//! `ComputeUnit` and `Interconnect` plugins to be timed.

use crate::dtype::DType;
use crate::units::{Bytes, FlopCount};
use serde::{Deserialize, Serialize};

/// A (batched) matrix multiply `C[m,n] = A[m,k] · B[k,n]`, `batch` times.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gemm {
    /// Rows of A and C (tokens, for a layer's linear projections).
    pub m: u64,
    /// Columns of B and C.
    pub n: u64,
    /// Reduction depth: columns of A, rows of B.
    pub k: u64,
    /// Independent GEMMs of this shape (default 1).
    #[serde(default = "one")]
    pub batch: u64,
    /// Format of the A (activation) operand; also the matrix-engine format used.
    pub a: DType,
    /// Format of the B (weight) operand. Weight-only quantisation has `b` narrower than `a`.
    pub b: DType,
    /// Format of the output.
    pub out: DType,
    /// How 8- and 4-bit operands are scaled (default: one scale per tensor, or none).
    #[serde(default)]
    pub scaling: GemmScaling,
}

/// The scaling granularity of a low-precision GEMM's operands: what the kernel must apply in
/// its main loop or epilogue besides the multiply-adds (the recipes of FP8/FP4 training and
/// inference; a compute unit may time each differently).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum GemmScaling {
    /// One scale per tensor (or none: 16-bit GEMMs): FP8 delayed or current/tensorwise
    /// scaling (Transformer Engine, torchao tensorwise).
    #[default]
    Tensor,
    /// One scale per row of A and per column of B (torchao rowwise).
    Row,
    /// 1x128 activation groups and 128x128 weight blocks with FP32 scales (DeepSeek-V3,
    /// DeepGEMM; Transformer Engine's blockwise recipe).
    Block,
    /// MX formats: 32-element blocks with E8M0 scales (MXFP8, MXFP4; OCP MX spec v1.0),
    /// applied by Blackwell's tensor cores.
    Mx,
    /// NVFP4: 16-element blocks with FP8 (E4M3) scales and a per-tensor FP32 scale.
    Nv,
}

impl GemmScaling {
    /// Every scaling, in code order.
    pub const ALL: [GemmScaling; 5] = [
        GemmScaling::Tensor,
        GemmScaling::Row,
        GemmScaling::Block,
        GemmScaling::Mx,
        GemmScaling::Nv,
    ];
    /// The name in configurations.
    pub const fn name(self) -> &'static str {
        match self {
            GemmScaling::Tensor => "tensor",
            GemmScaling::Row => "row",
            GemmScaling::Block => "block",
            GemmScaling::Mx => "mx",
            GemmScaling::Nv => "nv",
        }
    }
    /// Bytes of scale factors stored per element of the scaled operand (activations and
    /// weights alike, to first order): 4 B per 32 (MX: 1 B per 32), per 16 (NVFP4: 1 B), per
    /// 128 (block: 4 B), none for tensor and row scaling (one value per tensor or row).
    pub fn scale_bytes_per_element(self) -> f64 {
        match self {
            GemmScaling::Tensor | GemmScaling::Row => 0.0,
            GemmScaling::Block => 4.0 / 128.0,
            GemmScaling::Mx => 1.0 / 32.0,
            GemmScaling::Nv => 1.0 / 16.0,
        }
    }
}

fn one() -> u64 {
    1
}

impl Gemm {
    /// A GEMM with all operands in one format.
    pub fn new(m: u64, n: u64, k: u64, dtype: DType) -> Self {
        Gemm {
            m,
            n,
            k,
            batch: 1,
            a: dtype,
            b: dtype,
            out: dtype,
            scaling: GemmScaling::Tensor,
        }
    }
    /// The same GEMM `batch` times (e.g. once per attention head).
    pub fn batched(mut self, batch: u64) -> Self {
        self.batch = batch;
        self
    }
    /// 2·m·n·k per batch entry (a multiply-add is two operations).
    #[inline]
    pub fn flops(&self) -> FlopCount {
        FlopCount(2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64)
    }
    /// Compulsory traffic: read A and B once (with their block scales), write C once.
    #[inline]
    pub fn min_bytes(&self) -> Bytes {
        let (m, n, k, b) = (
            self.m as f64,
            self.n as f64,
            self.k as f64,
            self.batch as f64,
        );
        let scales = self.scaling.scale_bytes_per_element();
        Bytes(
            b * (m * k * (self.a.bytes() + scales)
                + k * n * (self.b.bytes() + scales)
                + m * n * self.out.bytes()),
        )
    }
    /// The format the matrix engine runs in: the wider of the two inputs (weight-only
    /// quantised weights are dequantised to the activation format).
    #[inline]
    pub fn compute_dtype(&self) -> DType {
        if self.a.bytes() >= self.b.bytes() {
            self.a
        } else {
            self.b
        }
    }
}

/// The routed experts of one mixture-of-experts layer on one device, as a fused MoE kernel
/// runs them (top-k over the router's logits, permute into expert order, the grouped gate/up
/// and down GEMMs with the activation between them, combine): what a compute unit with
/// measurements of whole MoE blocks times at once ([`crate::ComputeUnit::routed_experts_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoutedExperts {
    /// Tokens the expert-parallel group routes in the pass: every rank's own, gathered, under
    /// attention data parallelism; the replica's (which every rank holds) under
    /// tensor-parallel attention.
    pub tokens: u64,
    /// The model's hidden width.
    pub hidden: u64,
    /// One expert's whole inner width (`tp` splits it).
    pub ffn: u64,
    /// Experts each token is routed to.
    pub top_k: u64,
    /// Routed experts of the layer.
    pub experts: u64,
    /// Expert tensor parallelism: each expert's inner width over `tp` ranks.
    pub tp: u64,
    /// Expert parallelism: the experts over `ep` ranks.
    pub ep: u64,
    /// Gated experts (SwiGLU: gate and up projections) or a plain two-matrix MLP.
    pub gated: bool,
    /// Format of the activations.
    pub act: DType,
    /// Format of the experts' weights.
    pub weight: DType,
    /// The weights' scaling.
    pub scaling: GemmScaling,
    /// Routed copies the busiest device receives over the mean (>= 1): the layer waits for
    /// it.
    pub load_factor: f64,
}

/// How attention scores are computed, and by which kernel family. Every kind but `Plain`
/// is a tiled ("flash") kernel: scores stay on chip, device-memory traffic is Q, K, V and O
/// only (Dao et al. 2022); the families differ in how much of the matrix peak they reach
/// (a compute unit may model each: the built-in GPU takes one efficiency per family).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum AttentionKind {
    /// Scores materialised in device memory: QKᵀ GEMM, softmax, ·V GEMM.
    #[default]
    Plain,
    /// FlashAttention-2 (Dao 2023) and kernels of its generation (Ampere-style MMA; e.g.
    /// Transformer Engine's flash backend, PyTorch SDPA's flash kernel).
    Flash,
    /// FlashAttention-3 (Shah et al. 2024): Hopper's asynchronous warpgroup MMA (wgmma) and
    /// TMA, producer/consumer warp specialisation.
    Flash3,
    /// cuDNN's fused scaled-dot-product attention (cuDNN 9 frontend), the kernel family of
    /// Transformer Engine's fused-attention backend and PyTorch SDPA's cuDNN backend.
    Cudnn,
}

impl AttentionKind {
    /// Every kind, in code order.
    pub const ALL: [AttentionKind; 4] = [
        AttentionKind::Plain,
        AttentionKind::Flash,
        AttentionKind::Flash3,
        AttentionKind::Cudnn,
    ];
    /// A tiled kernel (every kind but `Plain`): no score matrix in device memory.
    pub const fn is_flash(self) -> bool {
        !matches!(self, AttentionKind::Plain)
    }
    /// The name in configurations.
    pub const fn name(self) -> &'static str {
        match self {
            AttentionKind::Plain => "plain",
            AttentionKind::Flash => "flash",
            AttentionKind::Flash3 => "flash3",
            AttentionKind::Cudnn => "cudnn",
        }
    }
}

/// The attention core (after the QKV projection, before the output projection).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Attention {
    /// Sequences (micro-batch).
    pub batch: u64,
    /// Query heads on this device.
    pub heads: u64,
    /// Key/value heads on this device.
    pub kv_heads: u64,
    /// Query positions per sequence (1 for a decode step).
    pub q_len: u64,
    /// Key/value positions each query attends over (the context so far, in decode).
    pub kv_len: u64,
    /// Elements per head.
    pub head_dim: u64,
    /// Causal masking: only about half of the score matrix is computed (by flash kernels).
    pub causal: bool,
    /// Kernel: plain or a flash family.
    pub kind: AttentionKind,
    /// Format of Q, K, V, the output and the scores; also the matrix-engine format used.
    pub dtype: DType,
    /// Backward pass (2x the forward FLOPs, 2.5x for flash: recompute of scores included).
    #[serde(default)]
    pub backward: bool,
}

impl Attention {
    /// Score (QKᵀ) and context (·V) GEMM FLOPs: 4·b·heads·q·kv·d forward, counting the full
    /// score matrix unless `causal` and the kernel skips masked tiles (flash only).
    pub fn flops(&self) -> FlopCount {
        let base = 4.0
            * self.batch as f64
            * self.heads as f64
            * self.q_len as f64
            * self.kv_len as f64
            * self.head_dim as f64;
        let causal = if self.causal && self.kind.is_flash() && self.q_len > 1 {
            0.5
        } else {
            1.0
        };
        let pass = if self.backward {
            // dQ, dK, dV, dP: 2x forward; flash also recomputes the scores: +0.5x.
            if self.kind.is_flash() {
                2.5
            } else {
                2.0
            }
        } else {
            1.0
        };
        FlopCount(base * causal * pass)
    }

    /// Device-memory traffic. Flash: Q, K, V read and O written (backward: roughly twice that
    /// plus dO). Plain: additionally the score matrix written and read by each of the
    /// pointwise steps (scale/mask, softmax, dropout), modelled as 2 writes + 2 reads.
    pub fn bytes(&self) -> Bytes {
        let e = self.dtype.bytes();
        let b = self.batch as f64;
        let q = b * self.heads as f64 * self.q_len as f64 * self.head_dim as f64 * e;
        let kv = 2.0 * b * self.kv_heads as f64 * self.kv_len as f64 * self.head_dim as f64 * e;
        let o = q;
        let io = q + kv + o;
        let scores = b * self.heads as f64 * self.q_len as f64 * self.kv_len as f64 * e;
        let pass = if self.backward { 2.5 } else { 1.0 };
        if self.kind.is_flash() {
            Bytes(io * pass)
        } else {
            Bytes((io + 4.0 * scores) * pass)
        }
    }
}

/// Memory-bound vector ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorOpKind {
    /// LayerNorm or RMSNorm.
    Norm,
    /// Softmax (of attention scores, or of logits when sampling).
    Softmax,
    /// Activation function (GeLU, SiLU·gate, squared ReLU).
    Activation,
    /// Dropout, forward or backward.
    Dropout,
    /// Residual addition, bias add and other binary elementwise ops.
    Elementwise,
    /// Embedding lookup (gather) or its gradient scatter.
    Embedding,
    /// Cross-entropy loss over the logits.
    Loss,
    /// Format conversion (e.g. fp8 casts with scaling).
    Cast,
    /// Rotary position embedding.
    Rope,
    /// Optimizer update.
    Optimizer,
}

impl VectorOpKind {
    /// Snake-case name, as configurations and reports spell it (`norm`, `rope`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            VectorOpKind::Norm => "norm",
            VectorOpKind::Softmax => "softmax",
            VectorOpKind::Activation => "activation",
            VectorOpKind::Dropout => "dropout",
            VectorOpKind::Elementwise => "elementwise",
            VectorOpKind::Embedding => "embedding",
            VectorOpKind::Loss => "loss",
            VectorOpKind::Cast => "cast",
            VectorOpKind::Rope => "rope",
            VectorOpKind::Optimizer => "optimizer",
        }
    }
}

/// A memory-bound op over `elements` output elements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VectorOp {
    /// What the op computes.
    pub kind: VectorOpKind,
    /// Output elements.
    pub elements: u64,
    /// Arithmetic per output element.
    pub flops_per_element: f64,
    /// Device-memory bytes moved per output element (reads + writes).
    pub bytes_per_element: f64,
    /// Format of the elements; the vector-engine format `peak` is asked for.
    pub dtype: DType,
    /// Kernel launches the op takes (fused ops take one).
    #[serde(default = "one_u32")]
    pub launches: u32,
}

fn one_u32() -> u32 {
    1
}

impl VectorOp {
    /// `elements · flops_per_element`.
    pub fn flops(&self) -> FlopCount {
        FlopCount(self.elements as f64 * self.flops_per_element)
    }
    /// Device-memory traffic: `elements · bytes_per_element`.
    pub fn bytes(&self) -> Bytes {
        Bytes(self.elements as f64 * self.bytes_per_element)
    }
}

/// An op that runs on one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ComputeOp {
    /// A matrix multiply (matrix engine).
    Gemm(Gemm),
    /// An attention core (matrix engine).
    Attention(Attention),
    /// A memory-bound op (vector engine).
    Vector(VectorOp),
}

impl ComputeOp {
    /// Operations the op performs.
    pub fn flops(&self) -> FlopCount {
        match self {
            ComputeOp::Gemm(g) => g.flops(),
            ComputeOp::Attention(a) => a.flops(),
            ComputeOp::Vector(v) => v.flops(),
        }
    }
    /// Compulsory device-memory traffic (perfect on-chip reuse).
    pub fn min_bytes(&self) -> Bytes {
        match self {
            ComputeOp::Gemm(g) => g.min_bytes(),
            ComputeOp::Attention(a) => a.bytes(),
            ComputeOp::Vector(v) => v.bytes(),
        }
    }
    /// The format the op runs in, the one [`crate::ComputeUnit::peak`] is asked for: a
    /// GEMM's [`Gemm::compute_dtype`], else the op's `dtype`.
    pub fn dtype(&self) -> DType {
        match self {
            ComputeOp::Gemm(g) => g.compute_dtype(),
            ComputeOp::Attention(a) => a.dtype,
            ComputeOp::Vector(v) => v.dtype,
        }
    }
    /// Kernel launches: one per GEMM and flash attention, five for plain attention, a
    /// vector op's `launches`.
    pub fn launches(&self) -> u32 {
        match self {
            ComputeOp::Gemm(_) => 1,
            // Plain: QKᵀ, scale+mask, softmax, dropout, ·V.
            ComputeOp::Attention(a) => {
                if a.kind.is_flash() {
                    1
                } else {
                    5
                }
            }
            ComputeOp::Vector(v) => v.launches,
        }
    }
    /// Short label for reports: `gemm`, `attention`, or the vector op's kind name.
    pub fn class(&self) -> &'static str {
        match self {
            ComputeOp::Gemm(_) => "gemm",
            ComputeOp::Attention(_) => "attention",
            ComputeOp::Vector(v) => v.kind.name(),
        }
    }
}

/// Collective communication patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    /// Every rank ends with the elementwise reduction of all ranks' buffers.
    AllReduce,
    /// Every rank ends with the concatenation of all ranks' shards.
    AllGather,
    /// Every rank ends with its shard of the reduction of all ranks' buffers.
    ReduceScatter,
    /// Every rank sends a distinct shard of its buffer to every other rank.
    AllToAll,
    /// Point-to-point transfer between two ranks (pipeline hand-off).
    SendRecv,
    /// One rank's buffer copied to every rank.
    Broadcast,
}

impl CollectiveKind {
    /// Snake-case name, as reports and messages spell it (`all_reduce`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::SendRecv => "send_recv",
            CollectiveKind::Broadcast => "broadcast",
        }
    }

    /// Bytes each rank sends over the wire for a ring (bus-bandwidth) implementation, as a
    /// multiple of the buffer size `S`: all-reduce 2(p-1)/p, all-gather and reduce-scatter
    /// (p-1)/p, all-to-all (p-1)/p, send/recv 1, broadcast 1 (0 for one rank) (NCCL
    /// performance notes; Thakur et al. 2005).
    pub fn ring_traffic_factor(self, ranks: u32) -> f64 {
        let p = ranks.max(1) as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (p - 1.0) / p,
            CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter
            | CollectiveKind::AllToAll => (p - 1.0) / p,
            CollectiveKind::SendRecv => 1.0,
            CollectiveKind::Broadcast => {
                if ranks > 1 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// Sequential latency steps of a ring implementation over `ranks` ranks: all-reduce
    /// 2(p-1), send/recv 1, the others p-1.
    pub fn ring_steps(self, ranks: u32) -> f64 {
        let p = ranks.max(1) as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (p - 1.0),
            CollectiveKind::SendRecv => 1.0,
            _ => p - 1.0,
        }
    }
}

/// A collective over a group of ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    /// The pattern.
    pub kind: CollectiveKind,
    /// The full buffer size `S` (all-reduce: the tensor; all-gather: the gathered output;
    /// reduce-scatter: the input; send/recv: the message).
    pub bytes: Bytes,
    /// Ranks in the group.
    pub ranks: u32,
}

/// One step of a device program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Op {
    /// Work on the device.
    Compute(ComputeOp),
    /// Communication with other devices.
    Collective(Collective),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_counts() {
        let g = Gemm::new(2048, 12288, 4096, DType::Bf16);
        assert_eq!(g.flops().0, 2.0 * 2048.0 * 12288.0 * 4096.0);
        assert_eq!(
            g.min_bytes().0,
            2.0 * (2048.0 * 4096.0 + 4096.0 * 12288.0 + 2048.0 * 12288.0)
        );
        let mut w4 = g;
        w4.b = DType::Int4;
        assert_eq!(w4.compute_dtype(), DType::Bf16);
    }

    #[test]
    fn ring_volume_table() {
        // (kind, ranks, factor): the 2(p-1)/p all-reduce volume and friends.
        let table = [
            (CollectiveKind::AllReduce, 8, 1.75),
            (CollectiveKind::AllReduce, 2, 1.0),
            (CollectiveKind::AllReduce, 1, 0.0),
            (CollectiveKind::AllGather, 4, 0.75),
            (CollectiveKind::ReduceScatter, 8, 0.875),
            (CollectiveKind::SendRecv, 2, 1.0),
        ];
        for (k, p, f) in table {
            assert!((k.ring_traffic_factor(p) - f).abs() < 1e-12, "{k:?} p={p}");
        }
    }

    #[test]
    fn attention_flash_vs_plain() {
        let a = Attention {
            batch: 1,
            heads: 32,
            kv_heads: 8,
            q_len: 2048,
            kv_len: 2048,
            head_dim: 128,
            causal: true,
            kind: AttentionKind::Plain,
            dtype: DType::Bf16,
            backward: false,
        };
        let f = Attention {
            kind: AttentionKind::Flash,
            ..a
        };
        assert!(a.bytes().0 > 10.0 * f.bytes().0);
        assert_eq!(f.flops().0 * 2.0, a.flops().0);
    }
}
