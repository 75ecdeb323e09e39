//! Mixture-of-experts layers in inference: the experts a device holds under expert and
//! expert-tensor parallelism, the experts a step actually reads, and the ops of one MoE layer
//! on one device.
//!
//! - **Placement.** The routed experts are spread over `ep` ranks of a replica's `tp`, each
//!   expert's inner width over the other `tp / ep` (TensorRT-LLM `moe_ep_size` x
//!   `moe_tp_size`). Shared experts and the router sit beside the attention: split over its
//!   tensor-parallel ranks, or whole on every rank under attention data parallelism.
//! - **Experts a step reads.** With `T` tokens routed, each to `k` distinct experts of `E`
//!   chosen uniformly, an expert receives none with probability `(1 - k/E)^T`, so a rank
//!   holding `E / ep` experts reads the weights of `E/ep x (1 - (1 - k/E)^T)` of them in
//!   expectation (the occupancy of `E` bins after `T` draws of `k`; e.g. Feller, "An
//!   Introduction to Probability Theory", vol. 1, §II.11): a decode step of a few tokens reads
//!   a few experts, a prefill of thousands all of them. `experts_touched` is tested against a
//!   Monte-Carlo of uniform routing.
//! - **Load on the slowest rank.** The routed copies a rank receives are `T x k / ep` on
//!   average, times the router's imbalance and the statistical excess of a finite sample
//!   (`crate::training::load_factor`, the training engine's rule): every MoE layer waits
//!   for the busiest rank.
//! - **Grouped GEMMs.** The touched experts' gate/up and down projections run as one grouped
//!   GEMM each (CUTLASS grouped GEMM, TensorRT-LLM's MoE plugin, DeepGEMM): a batched GEMM of
//!   `touched` problems of `rows / touched` rows, every problem reading its own expert's
//!   weights, timed by the compute unit (the kernel tables do not hold grouped GEMMs: the
//!   analytical model answers). Tokens are permuted into expert order before and combined
//!   after (one read and one write of the routed copies each).
//! - **Communication.** With tensor-parallel attention every rank has every token: the
//!   experts' partial outputs are summed by the same all-reduce as a dense MLP's. Under
//!   attention data parallelism each rank dispatches its tokens' copies to the experts' ranks
//!   and gathers them back: two all-to-alls of `tokens x k x hidden` per rank
//!   (`Inference::moe_comm`).

use super::shard::{GemmName, MoeShard, OpClass, Shard};
use perfcast_core::op::{ComputeOp, Gemm, GemmScaling, RoutedExperts, VectorOpKind};
use perfcast_core::workload::MoeSpec;

impl MoeShard {
    /// Expected experts of this device that `tokens` routed tokens touch (module
    /// documentation), at least one when any token is routed.
    pub fn experts_touched(&self, tokens: u64) -> f64 {
        if tokens == 0 {
            return 0.0;
        }
        let p_miss = (1.0 - self.top_k as f64 / self.experts as f64).max(0.0);
        (self.local as f64 * (1.0 - p_miss.powf(tokens as f64))).max(1.0)
    }

    /// The routed copies the busiest device processes when the replica routes `tokens`.
    pub fn busiest_rows(&self, tokens: u64) -> f64 {
        let copies = (tokens * self.top_k) as f64 / self.ep as f64;
        let mut spec = MoeSpec::new(self.experts, self.top_k, self.ffn);
        spec.load_imbalance = Some(self.imbalance);
        spec.capacity_factor = self.capacity;
        copies * crate::training::load_factor(&spec, self.ep, copies)
    }

    /// Weight elements of one MoE layer on this device besides attention: its routed
    /// experts, the shared experts and the router (in their own formats: `(routed, rest)`).
    pub fn weights(&self, hidden: u64) -> (f64, f64) {
        let routed = (self.local * (self.up_n + self.ffn) * hidden) as f64;
        let shared = ((self.shared_up_n + self.shared_ffn) * hidden) as f64;
        (routed, shared + (hidden * self.experts) as f64)
    }
}

impl Shard {
    /// The ops of one MoE layer's MLP on this device when the replica's pass routes `tokens`
    /// tokens, `rank_tokens` of which enter on this device (all of them without attention
    /// data parallelism): the router; with `routed`, top-k, permute, the routed experts'
    /// grouped GEMMs and activation, and combine (without it, what a measured fused MoE
    /// block times: [`Shard::routed_experts`]); and the shared experts.
    pub fn moe_ops(
        &self,
        moe: &MoeShard,
        tokens: u64,
        rank_tokens: u64,
        routed: bool,
    ) -> Vec<(OpClass, ComputeOp)> {
        let h = self.hidden;
        let m = rank_tokens;
        let mut ops = Vec::with_capacity(10);
        // The router in the 16-bit format (TensorRT-LLM and vLLM keep it unquantised).
        ops.push((
            OpClass::Gemm(GemmName::Router),
            ComputeOp::Gemm(Gemm::new(m, moe.experts, h, self.base)),
        ));
        if routed {
            self.routed_ops(moe, tokens, m, &mut ops);
        }
        if moe.shared_ffn > 0 {
            ops.push((
                OpClass::Gemm(GemmName::SharedUp),
                ComputeOp::Gemm(self.gemm(m, moe.shared_up_n, h)),
            ));
            ops.push((OpClass::Other, self.activation(m * moe.shared_ffn)));
            ops.push((
                OpClass::Gemm(GemmName::SharedDown),
                ComputeOp::Gemm(self.gemm(m, h, moe.shared_ffn)),
            ));
        }
        ops
    }

    /// The routed experts' ops of one MoE layer on this device when the replica routes
    /// `tokens` tokens, `m` of which enter here: top-k over the router's logits, permute, the
    /// grouped GEMMs and activation, combine.
    pub fn routed_ops(
        &self,
        moe: &MoeShard,
        tokens: u64,
        m: u64,
        ops: &mut Vec<(OpClass, ComputeOp)>,
    ) {
        let h = self.hidden;
        // Softmax / sigmoid and top-k over the router's logits.
        ops.push((
            OpClass::Other,
            ComputeOp::Vector(self.vector(VectorOpKind::Softmax, m * moe.experts, 5.0, 2.0)),
        ));
        let rows = moe.busiest_rows(tokens);
        let touched = moe.experts_touched(tokens);
        if rows > 0.0 {
            let rows_u = rows.ceil() as u64;
            let groups = touched.ceil() as u64;
            let per = rows_u.div_ceil(groups).max(1);
            let grouped = |n: u64, k: u64| Gemm {
                m: per,
                n,
                k,
                batch: groups,
                a: self.act,
                b: moe.weight,
                out: self.base,
                scaling: GemmScaling::Tensor,
            };
            // Permute the routed copies into expert order (read the tokens, write the copies).
            ops.push((
                OpClass::Other,
                ComputeOp::Vector(self.vector(VectorOpKind::Elementwise, rows_u * h, 0.0, 2.0)),
            ));
            ops.push((
                OpClass::Gemm(GemmName::ExpertUp),
                ComputeOp::Gemm(grouped(moe.up_n, h)),
            ));
            ops.push((OpClass::Other, self.activation(rows_u * moe.ffn)));
            ops.push((
                OpClass::Gemm(GemmName::ExpertDown),
                ComputeOp::Gemm(grouped(h, moe.ffn)),
            ));
            // Combine: the weighted sum of each token's copies (read the copies, write the
            // tokens).
            ops.push((
                OpClass::Other,
                ComputeOp::Vector(self.vector(VectorOpKind::Elementwise, rows_u * h, 2.0, 2.0)),
            ));
        }
    }

    /// One MoE layer's routed experts on this device when the replica routes `tokens`
    /// tokens, as a measured fused MoE block describes them (the tokens the expert-parallel
    /// group routes, the busiest rank's load over the mean).
    pub fn routed_experts(&self, moe: &MoeShard, tokens: u64) -> RoutedExperts {
        let mean = (tokens * moe.top_k) as f64 / moe.ep as f64;
        RoutedExperts {
            tokens,
            hidden: self.hidden,
            ffn: moe.ffn * moe.etp,
            top_k: moe.top_k,
            experts: moe.experts,
            tp: moe.etp,
            ep: moe.ep,
            gated: moe.up_n > moe.ffn,
            act: self.act,
            weight: moe.weight,
            scaling: GemmScaling::Tensor,
            load_factor: if mean > 0.0 {
                moe.busiest_rows(tokens) / mean
            } else {
                1.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::DType;

    fn shard(experts: u64, top_k: u64, ep: u64) -> MoeShard {
        MoeShard {
            experts,
            top_k,
            ep,
            etp: 1,
            local: experts / ep,
            ffn: 2048,
            up_n: 4096,
            shared_ffn: 0,
            shared_up_n: 0,
            weight: DType::Bf16,
            imbalance: 1.0,
            capacity: None,
        }
    }

    /// The expected experts touched against a Monte-Carlo of uniform top-k routing (k
    /// distinct experts per token), within 2% of the local experts: (experts, top-k, ep,
    /// tokens).
    #[test]
    fn experts_touched_matches_uniform_routing() {
        let table: &[(u64, u64, u64, u64)] = &[
            (256, 8, 8, 1),
            (256, 8, 8, 16),
            (256, 8, 8, 128),
            (128, 8, 8, 64),
            (128, 1, 8, 32),
            (8, 2, 1, 1),
            (8, 2, 1, 4),
            (32, 4, 4, 1000),
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        for &(e, k, ep, t) in table {
            let s = shard(e, k, ep);
            let trials = 400;
            let mut sum = 0u64;
            for _ in 0..trials {
                let mut hit = vec![false; e as usize];
                for _ in 0..t {
                    let mut chosen: Vec<u64> = Vec::with_capacity(k as usize);
                    while chosen.len() < k as usize {
                        let x = next() % e;
                        if !chosen.contains(&x) {
                            chosen.push(x);
                        }
                    }
                    for x in chosen {
                        hit[x as usize] = true;
                    }
                }
                // This device holds the first E / ep experts.
                sum += hit[..(e / ep) as usize].iter().filter(|h| **h).count() as u64;
            }
            let mc = sum as f64 / trials as f64;
            let model = s.experts_touched(t);
            assert!(
                (model - mc.max(1.0)).abs() <= 0.02 * s.local as f64 + 0.05,
                "E {e} k {k} ep {ep} T {t}: model {model} vs Monte-Carlo {mc}"
            );
        }
        assert_eq!(shard(256, 8, 8).experts_touched(0), 0.0);
        // A prefill of thousands of tokens reads every local expert.
        assert!((shard(256, 8, 8).experts_touched(8192) - 32.0).abs() < 1e-9);
    }

    /// The busiest rank's copies: the mean times the statistical excess (large for a
    /// decode-sized batch, small for a prefill).
    #[test]
    fn busiest_rows_is_the_mean_times_the_excess() {
        let s = shard(256, 8, 8);
        let mean = 4096.0 * 8.0 / 8.0;
        let r = s.busiest_rows(4096);
        assert!(r > mean && r < 1.05 * mean, "{r}");
        let d = s.busiest_rows(8);
        assert!(d > 8.0 * 1.3, "{d}");
        assert_eq!(shard(8, 2, 1).busiest_rows(10), 20.0);
    }
}
