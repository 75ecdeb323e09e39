//! Efficiency of a fused (flash) attention kernel.
//!
//! A flash kernel (Dao et al. 2022; FlashAttention-2, Dao 2023; FlashAttention-3, Shah et al.
//! 2024; cuDNN's fused SDPA) gives each thread block one tile of query rows and streams the
//! key/value tiles through on-chip memory: per (query tile, key tile) pair it runs two small
//! matrix products of depth `head_dim` and an online softmax. What it reaches of the matrix
//! peak is modelled as
//!
//! `e = e_pass(family, dtype) · d / (d + d_half) · L / (L + L_overhead) · u_q · u_wave`
//!
//! - `e_pass`: the fraction of peak the family's inner loop reaches at long sequences and
//!   large head dims, forward or backward (a kernel-data fit per device and family).
//! - `d / (d + d_half)`: the softmax and rescaling work per score does not shrink with the
//!   head dim, the matrix work does (FA3 forward on H100 rises from 50% of peak at d = 64 to
//!   76% at d = 256: Shah et al. 2024, Fig. 5).
//! - `L / (L + L_overhead)`: per query tile, a fixed cost (loading Q, the final rescale,
//!   writing O) of about `L_overhead` keys' worth of work; `L` is the keys a query tile sees:
//!   `kv_len`, or `kv_len / 2` under a causal mask, which also computes (and masks) the
//!   diagonal tile in full, one more tile of overhead.
//! - `u_q`: query rows padded to the row tile (decode steps have few rows).
//! - `u_wave`: (batch x heads x query tiles) thread blocks spread over the SMs in waves.

use perfcast_core::op::Attention;
use perfcast_core::params::{fraction, non_negative, positive};
use perfcast_core::{DType, PluginError};
use serde::Deserialize;

/// One attention kernel family's efficiency on a device.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionParams {
    /// Fraction of the matrix peak the forward pass reaches at long sequences and large head
    /// dims (16-bit).
    pub forward: f64,
    /// The same for the backward pass (FLOPs 2.5x the forward's).
    pub backward: f64,
    /// Forward with 8-bit inputs, as a fraction of the 8-bit peak (default: `forward`).
    #[serde(default)]
    pub forward_fp8: Option<f64>,
    /// Backward with 8-bit inputs (default: `backward`).
    #[serde(default)]
    pub backward_fp8: Option<f64>,
    /// Head dim at which the per-score softmax cost equals the matrix work.
    #[serde(default = "d_head_dim_half")]
    pub head_dim_half: f64,
    /// Fixed cost of a query tile, in keys' worth of work (about one key tile).
    #[serde(default = "d_kv_overhead")]
    pub kv_overhead: f64,
    /// Query rows of a thread block's tile.
    #[serde(default = "d_q_tile")]
    pub q_tile: u64,
}

// Modelling defaults of the tile structure (FlashAttention-2/3 use 128-row query tiles and
// 128-key tiles for head dims up to 128: Dao 2023 §3.3; Shah et al. 2024 §4); the head-dim
// term's default is the FA3 fit (d_half ~ 58 from 50/65/76% at d = 64/128/256).
fn d_head_dim_half() -> f64 {
    58.0
}
fn d_kv_overhead() -> f64 {
    128.0
}
fn d_q_tile() -> u64 {
    128
}

impl AttentionParams {
    /// Check the parameters (`path` prefixes the keys in errors).
    pub fn validate(&self, path: &str) -> Result<(), PluginError> {
        for (k, v) in [
            ("forward", Some(self.forward)),
            ("backward", Some(self.backward)),
            ("forward_fp8", self.forward_fp8),
            ("backward_fp8", self.backward_fp8),
        ] {
            if let Some(v) = v {
                fraction(&format!("{path}.{k}"), v)?;
            }
        }
        non_negative(&format!("{path}.head_dim_half"), self.head_dim_half)?;
        non_negative(&format!("{path}.kv_overhead"), self.kv_overhead)?;
        positive(&format!("{path}.q_tile"), self.q_tile as f64)?;
        Ok(())
    }

    /// The efficiency of `a` on a device of `sms` streaming multiprocessors.
    pub fn efficiency(&self, a: &Attention, sms: u32) -> f64 {
        let eight_bit = a.dtype.bytes() <= 1.0 && a.dtype != DType::Int8;
        let base = match (a.backward, eight_bit) {
            (false, false) => self.forward,
            (true, false) => self.backward,
            (false, true) => self.forward_fp8.unwrap_or(self.forward),
            (true, true) => self.backward_fp8.unwrap_or(self.backward),
        };
        let d = a.head_dim as f64;
        let head = d / (d + self.head_dim_half);
        let causal = a.causal && a.q_len > 1;
        let (keys, overhead) = if causal {
            (a.kv_len as f64 / 2.0, 2.0 * self.kv_overhead)
        } else {
            (a.kv_len as f64, self.kv_overhead)
        };
        let length = keys / (keys + overhead).max(1e-9);
        let tile = self.q_tile.max(1);
        let q_tiles = a.q_len.div_ceil(tile).max(1);
        let rows = a.q_len as f64 / (q_tiles * tile) as f64;
        let blocks = (a.batch.max(1) * a.heads.max(1) * q_tiles) as f64;
        let sms = sms.max(1) as f64;
        let wave = blocks / ((blocks / sms).ceil() * sms);
        base * head * length * rows * wave
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::op::AttentionKind;

    fn op(seq: u64, d: u64, causal: bool) -> Attention {
        Attention {
            batch: 16384 / seq,
            heads: 2048 / d,
            kv_heads: 2048 / d,
            q_len: seq,
            kv_len: seq,
            head_dim: d,
            causal,
            kind: AttentionKind::Flash3,
            dtype: DType::Fp16,
            backward: false,
        }
    }

    /// The shape of the FA3 forward curve on H100 (Shah et al. 2024, Fig. 5; the fa3_ rows of
    /// configs/validation/kernels.toml): rises with the sequence, with the head dim, and a
    /// causal mask costs most at short sequences.
    #[test]
    fn trends_follow_the_kernel_data() {
        let p = AttentionParams {
            forward: 0.97,
            backward: 0.8,
            forward_fp8: None,
            backward_fp8: None,
            head_dim_half: 58.0,
            kv_overhead: 128.0,
            q_tile: 128,
        };
        let e = |s, d, c| p.efficiency(&op(s, d, c), 132);
        assert!(e(512, 128, false) < e(2048, 128, false));
        assert!(e(2048, 128, false) < e(16384, 128, false));
        assert!(e(16384, 64, false) < e(16384, 128, false));
        assert!(e(16384, 128, false) < e(16384, 256, false));
        let short = e(512, 128, true) / e(512, 128, false);
        let long = e(16384, 128, true) / e(16384, 128, false);
        assert!(short < 0.7 && long > 0.95, "{short} {long}");
        // Long sequences, d = 128: within a few percent of the measured 65% of peak.
        assert!(
            (e(16384, 128, false) - 0.655).abs() < 0.03,
            "{}",
            e(16384, 128, false)
        );
    }
}
