//! Native `perfcast_core` values <-> the plain `#[repr(C)]` data that crosses the boundary.

use crate::c::{
    PcLayerActivations, PcOp, PcOpTime, PcRecomputePlan, PcScheduleInput, PcScheduleResult,
};
use crate::codes::*;
use perfcast_core::parallel::{LayerActivations, RecomputePlan, ScheduleInput, ScheduleResult};
use perfcast_core::{
    Attention, Bytes, ComputeOp, Engine, FlopCount, Gemm, OpTime, PluginError, Seconds, VectorOp,
};

impl PcOp {
    /// Encode a native op (counts precomputed by perfcast's own accounting).
    pub fn from_native(op: &ComputeOp) -> PcOp {
        let mut p = PcOp {
            struct_size: std::mem::size_of::<PcOp>() as u32,
            engine: engine_code(Engine::of(op)),
            dtype: op.dtype().code(),
            flops: op.flops().0,
            min_bytes: op.min_bytes().0,
            launches: op.launches(),
            ..PcOp::default()
        };
        match op {
            ComputeOp::Gemm(g) => {
                p.kind = OP_GEMM;
                p.m = g.m;
                p.n = g.n;
                p.k = g.k;
                p.batch = g.batch;
                p.a_dtype = g.a.code();
                p.b_dtype = g.b.code();
                p.out_dtype = g.out.code();
                p.reserved1 = gemm_scaling_code(g.scaling);
            }
            ComputeOp::Attention(a) => {
                p.kind = OP_ATTENTION;
                p.att_batch = a.batch;
                p.heads = a.heads;
                p.kv_heads = a.kv_heads;
                p.q_len = a.q_len;
                p.kv_len = a.kv_len;
                p.head_dim = a.head_dim;
                p.causal = a.causal as u32;
                p.attention_kind = attention_kind_code(a.kind);
                p.reserved2 = attention_family_code(a.kind);
                p.backward = a.backward as u32;
            }
            ComputeOp::Vector(v) => {
                p.kind = OP_VECTOR;
                p.elements = v.elements;
                p.flops_per_element = v.flops_per_element;
                p.bytes_per_element = v.bytes_per_element;
                p.vector_kind = vector_kind_code(v.kind);
            }
        }
        p
    }

    /// Decode into a native op; an unknown code is an error naming the field.
    pub fn to_native(&self) -> Result<ComputeOp, String> {
        let dt = |what: &str, c: u32| {
            dtype_from_code(c).ok_or_else(|| format!("unknown dtype code {c} in op.{what}"))
        };
        match self.kind {
            OP_GEMM => Ok(ComputeOp::Gemm(Gemm {
                m: self.m,
                n: self.n,
                k: self.k,
                batch: self.batch,
                a: dt("a_dtype", self.a_dtype)?,
                b: dt("b_dtype", self.b_dtype)?,
                out: dt("out_dtype", self.out_dtype)?,
                scaling: gemm_scaling_from_code(self.reserved1)
                    .ok_or_else(|| format!("unknown GEMM scaling code {}", self.reserved1))?,
            })),
            OP_ATTENTION => Ok(ComputeOp::Attention(Attention {
                batch: self.att_batch,
                heads: self.heads,
                kv_heads: self.kv_heads,
                q_len: self.q_len,
                kv_len: self.kv_len,
                head_dim: self.head_dim,
                causal: self.causal != 0,
                kind: attention_kind_from_code(self.attention_kind, self.reserved2).ok_or_else(
                    || {
                        format!(
                            "unknown attention kind code {} (family {})",
                            self.attention_kind, self.reserved2
                        )
                    },
                )?,
                dtype: dt("dtype", self.dtype)?,
                backward: self.backward != 0,
            })),
            OP_VECTOR => Ok(ComputeOp::Vector(VectorOp {
                kind: vector_kind_from_code(self.vector_kind)
                    .ok_or_else(|| format!("unknown vector op kind code {}", self.vector_kind))?,
                elements: self.elements,
                flops_per_element: self.flops_per_element,
                bytes_per_element: self.bytes_per_element,
                dtype: dt("dtype", self.dtype)?,
                launches: self.launches,
            })),
            k => Err(format!("unknown op kind code {k}")),
        }
    }
}

impl PcScheduleInput {
    pub fn from_native(i: &ScheduleInput) -> Self {
        PcScheduleInput {
            struct_size: std::mem::size_of::<PcScheduleInput>() as u32,
            stages: i.stages,
            virtual_stages: i.virtual_stages,
            micro_batches: i.micro_batches,
            forward: i.forward.0,
            backward: i.backward.0,
            p2p: i.p2p.0,
        }
    }
    pub fn to_native(&self) -> ScheduleInput {
        ScheduleInput {
            stages: self.stages,
            virtual_stages: self.virtual_stages,
            micro_batches: self.micro_batches,
            forward: Seconds(self.forward),
            backward: Seconds(self.backward),
            p2p: Seconds(self.p2p),
        }
    }
}

impl PcScheduleResult {
    /// Unchecked: the host checks a plugin's answer when it reads it back.
    pub fn from_native(r: &ScheduleResult) -> Self {
        PcScheduleResult {
            struct_size: std::mem::size_of::<PcScheduleResult>() as u32,
            reserved0: 0,
            time: r.time.0,
            bubble: r.bubble.0,
            p2p: r.p2p.0,
            peak_in_flight: r.peak_in_flight,
        }
    }
}

impl PcLayerActivations {
    pub fn from_native(a: &LayerActivations) -> Self {
        PcLayerActivations {
            struct_size: std::mem::size_of::<PcLayerActivations>() as u32,
            reserved0: 0,
            input: a.input.0,
            attention_core: a.attention_core.0,
            other: a.other.0,
        }
    }
    pub fn to_native(&self) -> LayerActivations {
        LayerActivations {
            input: Bytes(self.input),
            attention_core: Bytes(self.attention_core),
            other: Bytes(self.other),
        }
    }
}

impl PcRecomputePlan {
    /// Unchecked: the host checks a plugin's answer when it reads it back.
    pub fn from_native(p: &RecomputePlan) -> Self {
        PcRecomputePlan {
            struct_size: std::mem::size_of::<PcRecomputePlan>() as u32,
            reserved0: 0,
            full_layers: p.full_layers,
            attention_layers: p.attention_layers,
            kept: p.kept.0,
            working: p.working.0,
        }
    }
}

impl PcOpTime {
    pub fn from_native(t: &OpTime) -> PcOpTime {
        let (bound, bound_tier) = bound_code(t.bound);
        PcOpTime {
            struct_size: std::mem::size_of::<PcOpTime>() as u32,
            bound,
            bound_tier,
            reserved0: 0,
            time: t.time.0,
            compute: t.compute.0,
            memory: t.memory.0,
            overhead: t.overhead.0,
            flops: t.flops.0,
            device_bytes: t.device_bytes.0,
        }
    }

    /// Decode and check a plugin's answer: every number finite and >= 0, a known bound whose
    /// tier index fits `n_tiers`. `plugin` names the component in the error.
    pub fn to_native(&self, plugin: &str, n_tiers: usize) -> Result<OpTime, PluginError> {
        for (what, v) in [
            ("op_time.time", self.time),
            ("op_time.compute", self.compute),
            ("op_time.memory", self.memory),
            ("op_time.overhead", self.overhead),
            ("op_time.flops", self.flops),
            ("op_time.device_bytes", self.device_bytes),
        ] {
            check_non_negative(plugin, what, v)?;
        }
        let bound = bound_from_code(self.bound, self.bound_tier, n_tiers).ok_or_else(|| {
            PluginError::Failed {
                plugin: plugin.to_string(),
                message: format!(
                    "op_time returned bound code {} (tier {}) with {n_tiers} memory tiers",
                    self.bound, self.bound_tier
                ),
            }
        })?;
        Ok(OpTime {
            time: Seconds(self.time),
            compute: Seconds(self.compute),
            memory: Seconds(self.memory),
            overhead: Seconds(self.overhead),
            bound,
            flops: FlopCount(self.flops),
            device_bytes: Bytes(self.device_bytes),
        })
    }
}

/// `PluginError::BadValue` unless `v` is finite and >= 0.
pub fn check_non_negative(plugin: &str, what: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(bad_value(plugin, what, v))
    }
}

/// `PluginError::BadValue` unless `v` is finite and > 0.
pub fn check_positive(plugin: &str, what: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(bad_value(plugin, what, v))
    }
}

/// `PluginError::BadValue` unless `v` is in (0, 1].
pub fn check_fraction(plugin: &str, what: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(bad_value(plugin, what, v))
    }
}

pub fn bad_value(plugin: &str, what: &str, v: f64) -> PluginError {
    PluginError::BadValue {
        plugin: plugin.to_string(),
        what: what.to_string(),
        value: v,
    }
}

/// A `ParamSpec` from the plain fields of a C `perfcast_param`: name, type code, default
/// code, and the texts unit, default, range, doc, source.
pub fn param_spec(
    name: &str,
    ty: u32,
    default_kind: u32,
    [unit, default, range, doc, source]: [&str; 5],
) -> Result<perfcast_core::ParamSpec, String> {
    use std::borrow::Cow;
    if name.is_empty() {
        return Err("a declared parameter has no name".into());
    }
    let ty = perfcast_core::ParamType::from_code(ty)
        .ok_or_else(|| format!("parameter `{name}`: unknown type code {ty}"))?;
    let default = perfcast_core::ParamDefault::from_code(default_kind, default.to_string())
        .ok_or_else(|| format!("parameter `{name}`: unknown default code {default_kind}"))?;
    Ok(perfcast_core::ParamSpec {
        name: Cow::Owned(name.to_string()),
        ty,
        unit: Cow::Owned(unit.to_string()),
        default,
        range: Cow::Owned(range.to_string()),
        doc: Cow::Owned(doc.to_string()),
        source: Cow::Owned(source.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::{AttentionKind, DType, TimeBound, VectorOpKind};

    #[test]
    fn ops_round_trip() {
        let mut g = Gemm::new(3, 5, 7, DType::Bf16).batched(2);
        g.b = DType::Int4;
        let ops = [
            ComputeOp::Gemm(g),
            ComputeOp::Attention(Attention {
                batch: 2,
                heads: 32,
                kv_heads: 8,
                q_len: 1,
                kv_len: 4096,
                head_dim: 128,
                causal: true,
                kind: AttentionKind::Flash,
                dtype: DType::Fp8,
                backward: true,
            }),
            ComputeOp::Vector(VectorOp {
                kind: VectorOpKind::Rope,
                elements: 1 << 20,
                flops_per_element: 6.0,
                bytes_per_element: 4.0,
                dtype: DType::Bf16,
                launches: 3,
            }),
        ];
        for op in ops {
            let p = PcOp::from_native(&op);
            assert_eq!(p.flops, op.flops().0);
            assert_eq!(p.min_bytes, op.min_bytes().0);
            assert_eq!(p.to_native().unwrap(), op);
        }
        let bad = PcOp {
            kind: 9,
            ..PcOp::default()
        };
        assert!(bad.to_native().unwrap_err().contains("op kind"));
    }

    #[test]
    fn op_time_is_checked() {
        let t = OpTime {
            time: Seconds(2.0),
            compute: Seconds(1.0),
            memory: Seconds(1.5),
            overhead: Seconds(0.5),
            bound: TimeBound::Memory(1),
            flops: FlopCount(10.0),
            device_bytes: Bytes(20.0),
        };
        let p = PcOpTime::from_native(&t);
        assert_eq!(p.to_native("x", 2).unwrap(), t);
        assert!(p.to_native("x", 1).is_err());
        let nan = PcOpTime {
            time: f64::NAN,
            ..p
        };
        let e = nan.to_native("acme/npu9", 2).unwrap_err();
        assert!(matches!(e, PluginError::BadValue { ref what, .. } if what == "op_time.time"));
        let neg = PcOpTime { memory: -1.0, ..p };
        assert!(neg.to_native("x", 2).is_err());
    }
}
