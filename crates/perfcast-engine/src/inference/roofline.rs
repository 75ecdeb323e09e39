//! The GEMM roofline of a plan: every GEMM of one prefill pass and of the mean decode step
//! on one device, with its shape, intensity, time and bound.

use super::plan::InferencePlan;
use super::report::{GemmPoint, Phase};
use super::shard::{GemmName, OpClass};
use super::time::{Pass, Timed};
use super::Inference;
use perfcast_core::op::ComputeOp;
use perfcast_core::workload::AttentionSpan;
use perfcast_core::{DType, Engine, ModelError, Seconds, TimeBound};

impl Inference {
    /// Every GEMM (and the attention core) of one prefill pass and of the mean decode step,
    /// placed on the device's roofline.
    pub fn gemm_roofline(&self, plan: &InferencePlan) -> Result<Vec<GemmPoint>, ModelError> {
        let report = self.evaluate(plan)?;
        let sh = self.shard(plan)?;
        let b = plan.batch as u64;
        let s = plan.input_len as u64;
        let mut out = Vec::with_capacity(12);
        let n = plan.output_len as u64 - 1;
        let phases = [
            (Phase::Prefill, b * s, s, s, true, report.prefill.total.0),
            (
                Phase::Decode,
                b,
                1,
                s + n.div_ceil(2).max(1),
                !plan.graph_capture,
                report.decode.per_step().0,
            ),
        ];
        for (phase, m, q_len, kv_len, eager, pass_time) in phases {
            if phase == Phase::Decode && n == 0 {
                continue;
            }
            // The busiest rank's rows under attention data parallelism.
            let (mr, br) = (m.div_ceil(sh.dp), b.div_ceil(sh.dp));
            let pass = Pass {
                tokens: mr,
                logits: br,
                eager,
            };
            let layers = sh.layers;
            let program: Vec<(OpClass, ComputeOp, u64)> =
                if sh.moe.is_none() && sh.mla.is_none() && sh.dp == 1 {
                    sh.layer_ops(m)
                        .into_iter()
                        .map(|(c, op)| (c, op, layers))
                        .collect()
                } else {
                    let mut p: Vec<(OpClass, ComputeOp, u64)> = sh
                        .attention_side_ops(mr)
                        .into_iter()
                        .map(|(c, op)| (c, op, layers))
                        .collect();
                    if sh.dense_layers > 0 {
                        p.extend(sh.mlp_ops(mr).map(|(c, op)| (c, op, sh.dense_layers)));
                    }
                    if let (Some(moe), true) = (&sh.moe, sh.moe_layers > 0) {
                        p.extend(
                            sh.moe_ops(moe, m, mr, true)
                                .into_iter()
                                .map(|(c, op)| (c, op, sh.moe_layers)),
                        );
                    }
                    p
                };
            let mut ops: Vec<(GemmName, u64, ComputeOp)> = program
                .into_iter()
                .filter_map(|(c, op, count)| match c {
                    OpClass::Gemm(name) => Some((name, count, op)),
                    OpClass::Other => None,
                })
                .collect();
            for (c, op) in sh.edge_ops(mr, br) {
                if let OpClass::Gemm(name) = c {
                    ops.push((name, 1, op));
                }
            }
            for (name, count, op) in ops {
                let t = self.compute(&op, pass)?;
                let ComputeOp::Gemm(g) = op else { continue };
                out.push(self.point(
                    phase,
                    name.name(),
                    (g.m, g.n, g.k),
                    count,
                    (g.compute_dtype(), g.b),
                    &op,
                    &t,
                    pass_time,
                )?);
            }
            // One attention point per layer kind (sliding-window and chunked layers see
            // part of the context).
            for (span, count, _) in sh.spans.kinds() {
                if count == 0 {
                    continue;
                }
                let (op, t) = self.span_op(&sh, pass, span, br, q_len, kv_len)?;
                let (name, n) = match (span, op) {
                    (AttentionSpan::Full, _) => ("attention", kv_len),
                    (AttentionSpan::Sliding, ComputeOp::Attention(a)) => {
                        ("attention (sliding)", a.kv_len)
                    }
                    (_, ComputeOp::Attention(a)) => ("attention (chunked)", a.kv_len),
                    (_, _) => ("attention", kv_len),
                };
                out.push(self.point(
                    phase,
                    name,
                    (br * q_len, n, sh.head_dim),
                    count,
                    (sh.base, sh.kv),
                    &op,
                    &t,
                    pass_time,
                )?);
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn point(
        &self,
        phase: Phase,
        name: &'static str,
        (m, n, k): (u64, u64, u64),
        count: u64,
        (dtype, weight_dtype): (DType, DType),
        op: &ComputeOp,
        t: &Timed,
        pass_time: f64,
    ) -> Result<GemmPoint, ModelError> {
        let (peak, bw) = self.matrix_peak_and_bandwidth(op.dtype());
        // The datasheet ridge (peak over peak device bandwidth), as rooflines are drawn; the
        // `bound` comes from the timing model, efficiencies included.
        let ridge = if bw > 0.0 { peak / bw } else { 0.0 };
        let limiter = match t.bound {
            TimeBound::Compute => "compute".to_string(),
            TimeBound::Overhead => "overhead".to_string(),
            TimeBound::Memory(i) => format!(
                "memory:{}",
                self.system
                    .memory
                    .tiers
                    .get(i as usize)
                    .map(|t| t.kind())
                    .unwrap_or("?")
            ),
        };
        let intensity = if t.bytes > 0.0 {
            t.flops / t.bytes
        } else {
            0.0
        };
        let time = t.busy + t.overhead;
        let share = if pass_time > 0.0 {
            count as f64 * time / pass_time
        } else {
            0.0
        };
        for (what, v) in [("ridge", ridge), ("intensity", intensity), ("time", time)] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        Ok(GemmPoint {
            phase,
            name,
            m,
            n,
            k,
            count,
            dtype,
            weight_dtype,
            flops: t.flops,
            bytes: t.bytes,
            intensity,
            ridge,
            time: Seconds(time),
            bound: t.bound,
            limiter,
            share_of_phase_time: share,
        })
    }

    /// The device's matrix peak for `dtype` (FLOP/s) and its device-memory bandwidth
    /// (bytes/s), each 0 when the device has none.
    pub(super) fn matrix_peak_and_bandwidth(&self, dtype: DType) -> (f64, f64) {
        let peak = self
            .system
            .compute
            .peak(Engine::Matrix, dtype)
            .map(|p| p.0)
            .unwrap_or(0.0);
        let bw = self
            .system
            .memory
            .device()
            .map(|d| d.bandwidth().0)
            .unwrap_or(0.0);
        (peak, bw)
    }
}
