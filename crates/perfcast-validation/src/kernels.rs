//! Kernel-level measurements (`configs/validation/kernels.toml`, schema `perfcast-kernels/1`):
//! one GEMM, grouped GEMM or attention kernel timed on its own, predicted by the device's
//! compute unit on its memory hierarchy (`ComputeUnit::op_time`, the hierarchical roofline by
//! default) and compared with the published TFLOP/s.
//!
//! This is what grounds the efficiency model: end-to-end cases test how ops compose, these
//! test the ops. The FLOP conventions are the file's (SCHEMA.md, "Kernel benchmarks"): a
//! GEMM is `2mnk`, an M-grouped GEMM `2nk·Σm_g`, a K-grouped one `2mn·Σk_g`; attention
//! forward `2·b·h·P·(d_qk + d_v)`, backward `2·b·h·P·(3·d_qk + 2·d_v)`, with `P = s_q·s_kv`
//! unmasked and `s²/2` (`half`) or `s(s+1)/2` (`tril`) causal. The op handed to the device
//! carries the same work; the predicted TFLOP/s is the published FLOP count over the predicted
//! time, so both sides count alike.

use crate::presets::Hardware;
use crate::{Error, Result};
use perfcast_config::Plugins;
use perfcast_core::op::{Attention, AttentionKind, ComputeOp, Gemm, GemmScaling};
use perfcast_core::{DType, System};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema this module reads.
pub const SCHEMA: &str = "perfcast-kernels/1";

/// The measurements shipped with the repository.
pub const KERNELS: &str = perfcast_assets::validation::KERNELS;

/// `kind` of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    Gemm,
    GroupedGemm,
    AttentionFwd,
    AttentionBwd,
    AttentionFwdBwd,
}

/// `dtype` of a measurement (input precision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelDType {
    Fp16,
    Bf16,
    Fp8,
    Mxfp8,
    Fp4,
}

impl KernelDType {
    /// The matrix-engine format the op runs in (MXFP8 runs the fp8 tensor-core path).
    pub const fn dtype(self) -> DType {
        match self {
            KernelDType::Fp16 => DType::Fp16,
            KernelDType::Bf16 => DType::Bf16,
            KernelDType::Fp8 | KernelDType::Mxfp8 => DType::Fp8,
            KernelDType::Fp4 => DType::Fp4,
        }
    }
}

/// `scaling` of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelScaling {
    Tensorwise,
    #[serde(rename = "block_1x128_128x128")]
    Block,
    Mx,
}

impl KernelScaling {
    /// The operand scaling of the GEMM the device times.
    pub const fn scaling(self) -> GemmScaling {
        match self {
            KernelScaling::Tensorwise => GemmScaling::Tensor,
            KernelScaling::Block => GemmScaling::Block,
            KernelScaling::Mx => GemmScaling::Mx,
        }
    }
}

/// One `[[kernel]]` entry (the fields this module reads; the file has more, for people).
#[derive(Debug, Clone, Deserialize)]
pub struct Kernel {
    pub id: String,
    pub gpu: String,
    pub kind: KernelKind,
    pub dtype: KernelDType,
    #[serde(default)]
    pub out_dtype: Option<KernelDType>,
    /// Operand scaling of a low-precision kernel (none for 16-bit ones).
    #[serde(default)]
    pub scaling: Option<KernelScaling>,
    pub tflops: f64,
    /// The library or kernel and its version.
    #[serde(default)]
    pub software: String,
    // GEMM shapes.
    #[serde(default)]
    pub m: Option<u64>,
    #[serde(default)]
    pub n: Option<u64>,
    #[serde(default)]
    pub k: Option<u64>,
    #[serde(default)]
    pub groups: Option<u64>,
    #[serde(default)]
    pub grouped_layout: Option<String>,
    #[serde(default)]
    pub m_per_group: Option<u64>,
    #[serde(default)]
    pub m_total: Option<u64>,
    #[serde(default)]
    pub k_per_group: Option<u64>,
    #[serde(default)]
    pub k_total: Option<u64>,
    // Attention shapes.
    #[serde(default)]
    pub batch: Option<u64>,
    #[serde(default)]
    pub heads: Option<u64>,
    #[serde(default)]
    pub kv_heads: Option<u64>,
    #[serde(default)]
    pub seq_len: Option<u64>,
    #[serde(default)]
    pub seq_len_q: Option<u64>,
    #[serde(default)]
    pub seq_len_kv: Option<u64>,
    #[serde(default)]
    pub head_dim: Option<u64>,
    #[serde(default)]
    pub head_dim_v: Option<u64>,
    #[serde(default)]
    pub causal: Option<bool>,
    #[serde(default)]
    pub causal_flops: Option<String>,
    #[serde(default)]
    pub best_of_search: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct File {
    schema: String,
    kernel: Vec<Kernel>,
}

/// Parse a kernels file.
pub fn parse(text: &str) -> Result<Vec<Kernel>> {
    let refused = |message: String| Error::File {
        file: "kernels file".into(),
        message,
    };
    let f: File = toml::from_str(text).map_err(|e| refused(e.to_string()))?;
    if f.schema != SCHEMA {
        return Err(refused(format!(
            "schema = \"{}\", expected \"{SCHEMA}\"",
            f.schema
        )));
    }
    Ok(f.kernel)
}

/// The attention kernel family of a measurement, from the library its `software` names
/// (FlashAttention-3, cuDNN's fused attention, else FlashAttention-2's generation).
pub fn attention_family(software: &str) -> AttentionKind {
    let s = software.to_ascii_lowercase();
    if s.contains("cudnn") {
        AttentionKind::Cudnn
    } else if s.contains("flashattention-3") || s.contains("flashattention 3") || s.contains("fa3")
    {
        AttentionKind::Flash3
    } else {
        AttentionKind::Flash
    }
}

/// The source of a measurement: its id's prefix (`mamf`, `deepgemm`, `fa2`, `cudnn`, ...).
pub fn source_group(k: &Kernel) -> &str {
    k.id.split('_').next().unwrap_or("")
}

/// The ops of a measurement and the FLOPs the source counts for it.
fn ops(k: &Kernel) -> Result<(Vec<ComputeOp>, f64)> {
    let need = |v: Option<u64>, what: &str| {
        v.ok_or_else(|| kernel_error(k, Error::Invalid(format!("no `{what}`"))))
    };
    let dt = k.dtype.dtype();
    let out = k.out_dtype.map(KernelDType::dtype).unwrap_or(match dt {
        DType::Fp8 | DType::Fp4 => DType::Bf16,
        d => d,
    });
    let gemm = |m, n, kk, batch| {
        let mut g = Gemm::new(m, n, kk, dt).batched(batch);
        g.out = out;
        g.scaling = k
            .scaling
            .map_or(GemmScaling::Tensor, KernelScaling::scaling);
        ComputeOp::Gemm(g)
    };
    match k.kind {
        KernelKind::Gemm => {
            let (m, n, kk) = (need(k.m, "m")?, need(k.n, "n")?, need(k.k, "k")?);
            Ok((vec![gemm(m, n, kk, 1)], 2.0 * (m * n * kk) as f64))
        }
        KernelKind::GroupedGemm => {
            let g = need(k.groups, "groups")?.max(1);
            let (n, layout) = (need(k.n, "n")?, k.grouped_layout.as_deref().unwrap_or(""));
            if layout == "k_grouped" {
                let m = need(k.m, "m")?;
                let total = k.k_total.or(k.k_per_group.map(|x| x * g));
                let total = need(total, "k_total or k_per_group")?;
                let per = total.div_ceil(g);
                Ok((vec![gemm(m, n, per, g)], 2.0 * (m * n * total) as f64))
            } else {
                let kk = need(k.k, "k")?;
                let total = k.m_total.or(k.m_per_group.map(|x| x * g));
                let total = need(total, "m_total or m_per_group")?;
                let per = total.div_ceil(g);
                Ok((vec![gemm(per, n, kk, g)], 2.0 * (total * n * kk) as f64))
            }
        }
        KernelKind::AttentionFwd | KernelKind::AttentionBwd | KernelKind::AttentionFwdBwd => {
            let b = need(k.batch, "batch")?;
            let h = need(k.heads, "heads")?;
            let sq = need(k.seq_len_q.or(k.seq_len), "seq_len")?;
            let skv = need(k.seq_len_kv.or(k.seq_len), "seq_len")?;
            let dqk = need(k.head_dim, "head_dim")?;
            let dv = k.head_dim_v.unwrap_or(dqk);
            let causal = k.causal.unwrap_or(false);
            let p = if !causal {
                (sq * skv) as f64
            } else if k.causal_flops.as_deref() == Some("tril") {
                (sq * (sq + 1)) as f64 / 2.0
            } else {
                (sq * sq) as f64 / 2.0
            };
            let fwd = 2.0 * (b * h) as f64 * p * (dqk + dv) as f64;
            let bwd = 2.0 * (b * h) as f64 * p * (3 * dqk + 2 * dv) as f64;
            // The op IR has one head dim: the mean of Q/K's and V's carries the same forward
            // work (the file's convention: 2·b·h·P·(d_qk + d_v)).
            let attn = |backward| {
                ComputeOp::Attention(Attention {
                    batch: b,
                    heads: h,
                    kv_heads: k.kv_heads.unwrap_or(h),
                    q_len: sq,
                    kv_len: skv,
                    head_dim: (dqk + dv).div_ceil(2),
                    causal,
                    kind: attention_family(&k.software),
                    dtype: dt,
                    backward,
                })
            };
            Ok(match k.kind {
                KernelKind::AttentionFwd => (vec![attn(false)], fwd),
                KernelKind::AttentionBwd => (vec![attn(true)], bwd),
                _ => (vec![attn(false), attn(true)], fwd + bwd),
            })
        }
    }
}

/// One measurement against its prediction.
#[derive(Debug, Clone, Serialize)]
pub struct KernelResult {
    pub id: String,
    pub group: String,
    pub gpu: String,
    pub kind: KernelKind,
    pub measured_tflops: f64,
    /// `None` with `error` set when the device or the op cannot be built.
    pub predicted_tflops: Option<f64>,
    pub error: Option<String>,
}

impl KernelResult {
    /// Predicted / measured - 1.
    pub fn relative_error(&self) -> Option<f64> {
        self.predicted_tflops
            .map(|p| p / self.measured_tflops - 1.0)
    }
}

/// Predict every measurement of `kernels` (one device built per accelerator id).
pub fn run(kernels: &[Kernel], plugins: &Plugins) -> Vec<KernelResult> {
    run_with(kernels, &BTreeMap::new(), plugins)
}

/// [`run`] with `key=value` overrides per accelerator id (`--set` style, e.g. to fit a
/// device's parameters to its measurements).
pub fn run_with(
    kernels: &[Kernel],
    sets: &BTreeMap<String, Vec<String>>,
    plugins: &Plugins,
) -> Vec<KernelResult> {
    let mut systems: BTreeMap<String, Result<System>> = BTreeMap::new();
    kernels
        .iter()
        .map(|k| {
            let sys = systems.entry(k.gpu.clone()).or_insert_with(|| {
                let mut h = Hardware::of(&k.gpu)?;
                // The check is of the compute unit's own model (what answers for hardware
                // without tables), not of the kernel tables a preset names.
                h.set("device.kernels", "none");
                if let Some(s) = sets.get(&k.gpu) {
                    h.set_raw(s);
                }
                h.system(plugins)
            });
            let predicted = match sys {
                Ok(s) => predict(k, s),
                Err(e) => Err(e.clone()),
            };
            KernelResult {
                id: k.id.clone(),
                group: source_group(k).to_string(),
                gpu: k.gpu.clone(),
                kind: k.kind,
                measured_tflops: k.tflops,
                predicted_tflops: predicted.as_ref().ok().copied(),
                error: predicted.err().map(|e| e.to_string()),
            }
        })
        .collect()
}

/// The TFLOP/s `system`'s device reaches on `k`, counted as the source counts (the kernel's
/// duration without its launch overhead).
pub fn predict(k: &Kernel, system: &System) -> Result<f64> {
    let (ops, flops) = ops(k)?;
    let mut t = 0.0;
    for op in &ops {
        let r = system
            .compute
            .op_time(op, &system.memory)
            .map_err(|e| kernel_error(k, e.into()))?;
        // The sources time the kernel's own duration (CUDA events or profiler traces over
        // back-to-back launches), not the host's launch: the device's launch overhead is
        // left out.
        t += r.time.0 - r.overhead.0;
    }
    if !(t.is_finite() && t > 0.0) {
        return Err(kernel_error(
            k,
            Error::Invalid(format!("predicted time {t} s")),
        ));
    }
    Ok(flops / t / 1e12)
}

/// [`Error::Kernel`]: `e` about measurement `k`.
fn kernel_error(k: &Kernel, e: Error) -> Error {
    Error::Kernel {
        id: k.id.clone(),
        source: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_parses_and_every_op_builds() {
        let ks = parse(KERNELS).unwrap();
        assert!(ks.len() >= 200, "{}", ks.len());
        for k in &ks {
            let (ops, flops) = ops(k).unwrap();
            assert!(!ops.is_empty() && flops > 0.0, "{}", k.id);
            // The op carries the source's FLOPs (attention: head dims averaged).
            let op_flops: f64 = ops.iter().map(|o| o.flops().0).sum();
            if k.head_dim_v.is_none() {
                let causal_tril = k.causal_flops.as_deref() == Some("tril");
                let tol = if causal_tril { 1e-3 } else { 1e-9 };
                assert!(
                    (op_flops / flops - 1.0).abs() < tol,
                    "{}: {op_flops} vs {flops}",
                    k.id
                );
            }
        }
    }
}
