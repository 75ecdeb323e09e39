//! Timing one pass: each compute op on the device (GEMMs also as split-K and GEMV variants,
//! with the engine's fixed costs), each collective on its network level, accumulated by class.

use super::plan::InferencePlan;
use super::report::PhaseBreakdown;
use super::shard::{OpClass, Shard};
use super::Inference;
use perfcast_core::op::{Collective, CollectiveKind, ComputeOp};
use perfcast_core::{DType, Engine, Key, ModelError, Seconds, TimeBound};

/// Time and traffic accumulated over a set of ops.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Acc {
    pub(super) gemm: f64,
    pub(super) attention: f64,
    pub(super) other: f64,
    pub(super) comm: f64,
    pub(super) overhead: f64,
    pub(super) flops: f64,
    pub(super) bytes: f64,
    pub(super) kernels: f64,
}

impl Acc {
    /// One timed attention core of `kernels` launches, booked under attention.
    pub(super) fn attention(t: &Timed, kernels: f64) -> Acc {
        Acc {
            attention: t.busy,
            overhead: t.overhead,
            flops: t.flops,
            bytes: t.bytes,
            kernels,
            ..Acc::default()
        }
    }
    pub(super) fn total(&self) -> f64 {
        self.gemm + self.attention + self.other + self.comm + self.overhead
    }
    /// `self += k * o`.
    pub(super) fn add_scaled(&mut self, o: &Acc, k: f64) {
        self.gemm += k * o.gemm;
        self.attention += k * o.attention;
        self.other += k * o.other;
        self.comm += k * o.comm;
        self.overhead += k * o.overhead;
        self.flops += k * o.flops;
        self.bytes += k * o.bytes;
        self.kernels += k * o.kernels;
    }
    pub(super) fn breakdown(&self, steps: u32) -> PhaseBreakdown {
        PhaseBreakdown {
            total: Seconds(self.total()),
            gemm: Seconds(self.gemm),
            attention: Seconds(self.attention),
            other_ops: Seconds(self.other),
            communication: Seconds(self.comm),
            overheads: Seconds(self.overhead),
            steps,
            flops: self.flops,
            device_bytes: self.bytes,
        }
    }
}

/// One timed compute op.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timed {
    /// Device busy time (compute and memory combined per `compute_memory_overlap`).
    pub(super) busy: f64,
    /// Device launch overhead plus exposed host launch.
    pub(super) overhead: f64,
    pub(super) flops: f64,
    pub(super) bytes: f64,
    pub(super) bound: TimeBound,
}

/// Split-K factors tried for a GEMM (1 is always tried).
pub(super) const SPLIT_K: [u64; 5] = [2, 4, 8, 16, 32];
/// Rows up to which a GEMM may run as a GEMV on the vector units.
pub(super) const GEMV_MAX_ROWS: u64 = 16;
/// Shallowest reduction slice a split may leave.
pub(super) const MIN_SPLIT_DEPTH: u64 = 128;

/// How the engine adjusts a plugin's timing of an op the core IR cannot fully describe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Adjust {
    /// Factor on the device-memory time (KV cache in its own format, KV re-reads).
    pub(super) mem_scale: f64,
    /// An alternative compute time (another engine); the faster one is used.
    pub(super) compute: Option<f64>,
}

impl Adjust {
    /// `op` moving `bytes` of device traffic instead of what its shape says (the KV cache in
    /// its own format, re-reads, positions the op does not list), with an alternative
    /// `compute` time.
    pub(super) fn traffic(op: &ComputeOp, bytes: f64, compute: Option<f64>) -> Adjust {
        let op_bytes = op.min_bytes().0;
        Adjust {
            mem_scale: if op_bytes > 0.0 {
                bytes / op_bytes
            } else {
                1.0
            },
            compute,
        }
    }
    const NONE: Adjust = Adjust {
        mem_scale: 1.0,
        compute: None,
    };
}

/// Which kind of pass is being timed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pass {
    /// Tokens processed.
    pub(super) tokens: u64,
    /// Tokens that need logits (last token of each sequence).
    pub(super) logits: u64,
    /// Host launch cost applies per kernel (not graph-captured).
    pub(super) eager: bool,
}

impl Inference {
    /// Time one compute op as the plugin models it, GEMMs with the best split-K.
    pub(super) fn compute(&self, op: &ComputeOp, pass: Pass) -> Result<Timed, ModelError> {
        match op {
            ComputeOp::Gemm(g) => self.gemm(g, pass),
            _ => self.compute_adjusted(op, pass, Adjust::NONE),
        }
    }

    /// A GEMM timed as libraries run it: when its output tiles cannot fill the device (skinny
    /// decode and short-prompt GEMMs), cuBLAS/CUTLASS heuristics split the reduction
    /// dimension over `s` thread-block groups and sum fp32 partials (split-K, CUTLASS
    /// documentation "Efficient GEMM in CUDA"; TensorRT-LLM's GEMM plugins do the same). The
    /// split is an ordinary batched GEMM of depth `k / s` with `s` fp32 partial outputs, so the
    /// compute-unit plugin times it with its own efficiency model; the fastest `s` is kept.
    pub(super) fn gemm(&self, g: &perfcast_core::Gemm, pass: Pass) -> Result<Timed, ModelError> {
        let op = ComputeOp::Gemm(*g);
        // A few rows (decode at small batch) also run as a GEMV on the vector units, which
        // pad nothing (cuBLAS gemv, TensorRT-LLM's batched-GEMV kernels for m <= 4-8); the
        // faster engine is used. Beyond a few rows the matrix engine always wins.
        let gemv = if g.m <= GEMV_MAX_ROWS {
            self.vector_time(g.flops().0, g.compute_dtype(), g.m * g.n * g.batch)
        } else {
            None
        };
        let adj = Adjust {
            mem_scale: 1.0,
            compute: gemv,
        };
        let mut best = self.compute_adjusted(&op, pass, adj)?;
        for s in SPLIT_K {
            let depth = g.k.div_ceil(s);
            if depth < MIN_SPLIT_DEPTH {
                break;
            }
            let split = perfcast_core::Gemm {
                k: depth,
                batch: g.batch * s,
                out: DType::Fp32,
                ..*g
            };
            let t = self.compute_adjusted(&ComputeOp::Gemm(split), pass, Adjust::NONE)?;
            if t.busy + t.overhead < best.busy + best.overhead {
                best = Timed {
                    flops: g.flops().0,
                    ..t
                };
            }
        }
        Ok(best)
    }

    /// Compute time of `flops` of dot products producing `outputs` values in `dtype` on the
    /// vector engine, at the plugin's peak and efficiency for such an op.
    pub(super) fn vector_time(&self, flops: f64, dtype: DType, outputs: u64) -> Option<f64> {
        let v = perfcast_core::VectorOp {
            kind: perfcast_core::VectorOpKind::Elementwise,
            elements: outputs.max(1),
            flops_per_element: flops / outputs.max(1) as f64,
            bytes_per_element: 0.0,
            dtype,
            launches: 1,
        };
        let cu = &self.system.compute;
        let eff = cu.efficiency(&ComputeOp::Vector(v));
        cu.peak(Engine::Vector, dtype)
            .filter(|p| p.0 > 0.0 && p.0.is_finite() && eff > 0.0 && eff <= 1.0)
            .map(|p| flops / (p.0 * eff))
    }

    /// Time one compute op with the engine's adjustments (see [`Adjust`]).
    pub(super) fn compute_adjusted(
        &self,
        op: &ComputeOp,
        pass: Pass,
        adj: Adjust,
    ) -> Result<Timed, ModelError> {
        let t = self.system.compute.op_time(op, &self.system.memory)?;
        for (what, v) in [
            ("op time", t.time.0),
            ("op compute time", t.compute.0),
            ("op memory time", t.memory.0),
            ("op overhead", t.overhead.0),
        ] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        let ov = self.options.compute_memory_overlap;
        let plugin_busy = (t.time.0 - t.overhead.0).max(0.0);
        // A plugin with its own timing model may report only a total; adjust only what it
        // splits into compute and memory.
        let split = t.compute.0 > 0.0 || t.memory.0 > 0.0;
        let (busy, bound) = if !split {
            (plugin_busy * adj.mem_scale, t.bound)
        } else if ov >= 1.0 && adj == Adjust::NONE {
            (plugin_busy, t.bound)
        } else {
            let mem = t.memory.0 * adj.mem_scale;
            let c = match adj.compute {
                Some(alt) => t.compute.0.min(alt),
                None => t.compute.0,
            };
            let overlapped = |c: f64, m: f64| c.max(m) + (1.0 - ov) * c.min(m);
            let mut busy = overlapped(c, mem);
            // A plugin whose total is above its parts' maximum has its own model of how they
            // combine (the roofline and measured kernels report the maximum, up to rounding):
            // its total is kept, as training keeps it, scaled only by the adjustments.
            let (c0, m0) = (t.compute.0, t.memory.0);
            if plugin_busy - c0.max(m0) > 1e-9 * plugin_busy {
                let unadjusted = overlapped(c0, m0);
                if unadjusted > 0.0 {
                    busy = plugin_busy * busy / unadjusted;
                }
            }
            let bound = if t.overhead.0 > busy {
                TimeBound::Overhead
            } else if mem > c {
                match t.bound {
                    TimeBound::Memory(i) => TimeBound::Memory(i),
                    _ => TimeBound::Memory(self.system.memory.device_index().unwrap_or(0) as u8),
                }
            } else {
                TimeBound::Compute
            };
            (busy, bound)
        };
        let device = busy + t.overhead.0;
        let host = if pass.eager {
            op.launches() as f64 * self.options.host_launch_us * 1e-6
        } else {
            0.0
        };
        let exposed = (host - device).max(0.0);
        let overhead = t.overhead.0 + exposed;
        Ok(Timed {
            busy,
            overhead,
            flops: t.flops.0,
            bytes: t.device_bytes.0 * adj.mem_scale,
            bound: if overhead > busy {
                TimeBound::Overhead
            } else {
                bound
            },
        })
    }

    /// Time one collective over the innermost level spanning its ranks.
    pub(super) fn collective(
        &self,
        c: Collective,
        pass: Pass,
        acc: &mut Acc,
    ) -> Result<(), ModelError> {
        if c.ranks <= 1 {
            return Ok(());
        }
        let (i, level) = self.level(c.ranks, Key::inference(""))?;
        let wire = level
            .try_collective_time(&c, self.options.collective_algorithm)
            .map_err(|e| crate::network::level_error(i, e))?
            .0;
        perfcast_core::units::ensure_finite("collective time", wire)?;
        let fixed = self.options.collective_overhead_us * 1e-6;
        let host = if pass.eager {
            self.options.host_launch_us * 1e-6
        } else {
            0.0
        };
        acc.comm += wire;
        acc.overhead += fixed + (host - wire - fixed).max(0.0);
        acc.kernels += 1.0;
        Ok(())
    }

    pub(super) fn add_compute(
        &self,
        class: OpClass,
        op: &ComputeOp,
        pass: Pass,
        acc: &mut Acc,
    ) -> Result<(), ModelError> {
        let t = self.compute(op, pass)?;
        match class {
            OpClass::Gemm(_) => acc.gemm += t.busy,
            OpClass::Other => acc.other += t.busy,
        }
        acc.overhead += t.overhead;
        acc.flops += t.flops;
        acc.bytes += t.bytes;
        acc.kernels += op.launches() as f64;
        Ok(())
    }

    /// Every layer of a pass of `pass.tokens` tokens (the replica's), attention cores
    /// excluded, with their collectives: the same program on every layer of a dense model;
    /// otherwise the attention side on every layer, the dense MLP on the dense layers and the
    /// experts on the MoE layers ([`super::moe`]), each on the tokens of the busiest rank
    /// (`ceil(tokens / dp)` under attention data parallelism).
    pub(super) fn layers(&self, sh: &Shard, pass: Pass) -> Result<Acc, ModelError> {
        let m = pass.tokens;
        let mut acc = Acc::default();
        if sh.moe.is_none() && sh.mla.is_none() && sh.dp == 1 {
            let act_bytes = m as f64 * sh.hidden as f64 * sh.base.bytes();
            let mut layer = Acc::default();
            for (class, op) in sh.layer_ops(m) {
                self.add_compute(class, &op, pass, &mut layer)?;
            }
            let all_reduce = Collective {
                kind: CollectiveKind::AllReduce,
                bytes: perfcast_core::Bytes(act_bytes),
                ranks: sh.tp as u32,
            };
            // After the attention output projection and after the MLP down projection.
            self.collective(all_reduce, pass, &mut layer)?;
            self.collective(all_reduce, pass, &mut layer)?;
            acc.add_scaled(&layer, sh.layers as f64);
            return Ok(acc);
        }
        let rank = Pass {
            tokens: m.div_ceil(sh.dp),
            ..pass
        };
        let all_reduce = Collective {
            kind: CollectiveKind::AllReduce,
            bytes: perfcast_core::Bytes(rank.tokens as f64 * sh.hidden as f64 * sh.base.bytes()),
            ranks: sh.attn_tp as u32,
        };
        let mut part = |ops: Vec<(OpClass, ComputeOp)>,
                        comm: &dyn Fn(&mut Acc) -> Result<(), ModelError>,
                        layers: u64|
         -> Result<(), ModelError> {
            if layers == 0 {
                return Ok(());
            }
            let mut one = Acc::default();
            for (class, op) in ops {
                self.add_compute(class, &op, rank, &mut one)?;
            }
            comm(&mut one)?;
            acc.add_scaled(&one, layers as f64);
            Ok(())
        };
        let tp_reduce = |a: &mut Acc| self.collective(all_reduce, rank, a);
        part(sh.attention_side_ops(rank.tokens), &tp_reduce, sh.layers)?;
        part(
            sh.mlp_ops(rank.tokens).to_vec(),
            &tp_reduce,
            sh.dense_layers,
        )?;
        if let Some(moe) = &sh.moe {
            let measured = self.measured_experts(sh, moe, m, rank)?;
            let rest = |a: &mut Acc| {
                if let Some(x) = &measured {
                    a.add_scaled(x, 1.0);
                }
                self.moe_comm(sh, moe, rank, a)
            };
            let ops = sh.moe_ops(moe, m, rank.tokens, measured.is_none());
            part(ops, &rest, sh.moe_layers)?;
        }
        Ok(acc)
    }

    /// One MoE layer's routed experts timed whole by the compute unit when it has
    /// measurements of fused MoE blocks ([`perfcast_core::ComputeUnit::routed_experts_time`]),
    /// with the work and kernels of the ops they stand for ([`Shard::routed_ops`]); `None`
    /// when it has none (the ops are then timed one by one).
    fn measured_experts(
        &self,
        sh: &Shard,
        moe: &super::shard::MoeShard,
        tokens: u64,
        rank: Pass,
    ) -> Result<Option<Acc>, ModelError> {
        if !self.options.measured_moe {
            return Ok(None);
        }
        let experts = sh.routed_experts(moe, tokens);
        let Some(t) = self.system.compute.routed_experts_time(&experts)? else {
            return Ok(None);
        };
        perfcast_core::units::ensure_finite("routed experts time", t.0)?;
        let mut ops = Vec::new();
        sh.routed_ops(moe, tokens, rank.tokens, &mut ops);
        let mut acc = Acc {
            gemm: t.0,
            ..Acc::default()
        };
        for (_, op) in &ops {
            acc.flops += op.flops().0;
            acc.bytes += op.min_bytes().0;
            acc.kernels += op.launches() as f64;
        }
        // Launched from the host one kernel at a time when not graph-captured.
        if rank.eager {
            acc.overhead += (acc.kernels * self.options.host_launch_us * 1e-6 - t.0).max(0.0);
        }
        Ok(Some(acc))
    }

    /// The communication of one MoE layer: the tensor-parallel all-reduce of the experts'
    /// partial outputs, or under attention data parallelism the dispatch of each rank's
    /// routed copies to the experts' ranks and their return (two all-to-alls).
    fn moe_comm(
        &self,
        sh: &Shard,
        moe: &super::shard::MoeShard,
        rank: Pass,
        acc: &mut Acc,
    ) -> Result<(), ModelError> {
        let token_bytes = sh.hidden as f64 * sh.base.bytes();
        if sh.dp == 1 {
            return self.collective(
                Collective {
                    kind: CollectiveKind::AllReduce,
                    bytes: perfcast_core::Bytes(rank.tokens as f64 * token_bytes),
                    ranks: sh.tp as u32,
                },
                rank,
                acc,
            );
        }
        // Each rank of an attention group dispatches its share of the group's tokens.
        let own = rank.tokens.div_ceil(sh.attn_tp);
        let copies = Collective {
            kind: CollectiveKind::AllToAll,
            bytes: perfcast_core::Bytes((own * moe.top_k) as f64 * token_bytes),
            ranks: moe.ep as u32,
        };
        self.collective(copies, rank, acc)?;
        self.collective(copies, rank, acc)
    }

    /// One forward pass of a replica (all stages in sequence) without the attention cores.
    pub(super) fn pass_without_attention(
        &self,
        sh: &Shard,
        plan: &InferencePlan,
        pass: Pass,
    ) -> Result<Acc, ModelError> {
        let mut acc = self.layers(sh, pass)?;
        let rank = Pass {
            tokens: pass.tokens.div_ceil(sh.dp),
            logits: pass.logits.div_ceil(sh.dp),
            ..pass
        };
        let m = rank.tokens;
        let act_bytes = m as f64 * sh.hidden as f64 * sh.base.bytes();
        let tp = sh.attn_tp as u32;
        let all_reduce = Collective {
            kind: CollectiveKind::AllReduce,
            bytes: perfcast_core::Bytes(act_bytes),
            ranks: tp,
        };
        for (class, op) in sh.edge_ops(m, rank.logits) {
            self.add_compute(class, &op, rank, &mut acc)?;
        }
        // Vocab-parallel embedding: partial lookups summed across TP.
        self.collective(all_reduce, rank, &mut acc)?;
        // Logits gathered across TP (fp32).
        self.collective(
            Collective {
                kind: CollectiveKind::AllGather,
                bytes: perfcast_core::Bytes(rank.logits as f64 * sh.vocab_full as f64 * 4.0),
                ranks: tp,
            },
            rank,
            &mut acc,
        )?;
        self.pipeline_handoffs(plan, act_bytes, rank, &mut acc)?;
        acc.overhead += self.options.step_overhead_us * 1e-6;
        Ok(acc)
    }

    /// Pipeline hand-offs of a pass's activations (`act_bytes`), one per stage boundary.
    pub(super) fn pipeline_handoffs(
        &self,
        plan: &InferencePlan,
        act_bytes: f64,
        pass: Pass,
        acc: &mut Acc,
    ) -> Result<(), ModelError> {
        if plan.pp > 1 {
            let mut p2p = Acc::default();
            self.collective(
                Collective {
                    kind: CollectiveKind::SendRecv,
                    bytes: perfcast_core::Bytes(act_bytes),
                    ranks: plan.gpus_per_replica(),
                },
                pass,
                &mut p2p,
            )?;
            acc.add_scaled(&p2p, (plan.pp - 1) as f64);
        }
        Ok(())
    }
}
