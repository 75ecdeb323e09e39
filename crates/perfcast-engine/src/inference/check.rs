//! Checking a plan against the model and the system, and sharding the model over its TP and
//! PP degrees.

use super::plan::InferencePlan;
use super::shard::Shard;
use super::Inference;
use perfcast_core::{DType, Engine, Interconnect, Key, ModelError};

impl Inference {
    /// Check the plan against the model and the system and derive the per-device shapes.
    pub(super) fn shard(&self, plan: &InferencePlan) -> Result<Shard, ModelError> {
        let m = &self.model;
        for (key, v) in [
            (Key::inference("batch"), plan.batch),
            (Key::inference("input_len"), plan.input_len),
            (Key::inference("output_len"), plan.output_len),
            (Key::inference("tp"), plan.tp),
            (Key::inference("pp"), plan.pp),
            (Key::inference("replicas"), plan.replicas),
            (Key::inference("ep"), plan.ep),
        ] {
            if v == 0 {
                return Err(ModelError::invalid(key, v, "must be >= 1"));
            }
        }
        self.check_experts(plan)?;
        // Under attention data parallelism the attention side is not split: every rank holds
        // it whole.
        let tp = plan.tp as u64 / plan.attention_ranks() as u64;
        if !m.heads.is_multiple_of(tp) {
            return Err(ModelError::invalid(
                Key::inference("tp"),
                tp,
                format!("must divide model.heads = {}", m.heads),
            ));
        }
        let kv = if m.mla.is_some() { tp } else { m.kv_heads() };
        if kv >= tp && !kv.is_multiple_of(tp) {
            return Err(ModelError::invalid(
                Key::inference("tp"),
                tp,
                format!(
                    "must divide model.kv_heads = {kv} (or be a multiple of it: KV heads are then replicated)"
                ),
            ));
        }
        if kv < tp && !tp.is_multiple_of(kv) {
            return Err(ModelError::invalid(
                Key::inference("tp"),
                tp,
                format!(
                    "exceeds model.kv_heads = {kv}, so must be a multiple of it (each KV head is replicated on tp / kv_heads devices)"
                ),
            ));
        }
        if !m.ffn_hidden.is_multiple_of(tp) {
            return Err(ModelError::invalid(
                Key::inference("tp"),
                tp,
                format!("must divide model.ffn_hidden = {}", m.ffn_hidden),
            ));
        }
        if plan.pp as u64 > m.layers {
            return Err(ModelError::invalid(
                Key::inference("pp"),
                plan.pp,
                format!("must not exceed model.layers = {}", m.layers),
            ));
        }
        let context = plan.input_len as u64 + plan.output_len as u64;
        if context > m.context_limit() {
            let key = if m.max_context.is_some() {
                "model.max_context"
            } else {
                "model.seq_len"
            };
            return Err(ModelError::invalid(
                Key::inference("output_len"),
                plan.output_len,
                format!(
                    "inference.input_len + inference.output_len = {context} must not exceed the \
                     model's context length {key} = {}",
                    m.context_limit()
                ),
            ));
        }
        let gpus = plan.gpus() as u64;
        if gpus > self.system.devices as u64 {
            return Err(ModelError::invalid(
                Key::inference("replicas"),
                plan.replicas,
                format!(
                    "inference.tp x inference.pp x inference.replicas = {gpus} must not exceed \
                     the devices of system `{}` = {}",
                    self.system.name, self.system.devices
                ),
            ));
        }
        if plan.tp > 1 {
            self.level(plan.tp, Key::inference("tp"))?;
        }
        if plan.pp > 1 {
            self.level(plan.gpus_per_replica(), Key::inference("pp"))?;
        }
        let base = self.check_dtypes(plan)?;
        Ok(Shard::new(m, plan, base))
    }

    /// Expert parallelism, attention data parallelism and the experts' format against the
    /// model: `ep` divides `tp` and the experts, the expert width divides over `tp / ep`, a
    /// dense model has neither.
    fn check_experts(&self, plan: &InferencePlan) -> Result<(), ModelError> {
        let (tp, ep) = (plan.tp as u64, plan.ep as u64);
        let Some(moe) = &self.model.moe else {
            for (key, set) in [
                ("ep", ep > 1),
                ("attention_dp", plan.attention_dp),
                ("attention_tp", plan.attention_tp.is_some()),
                ("expert_dtype", plan.expert_dtype.is_some()),
            ] {
                if set {
                    return Err(ModelError::invalid(
                        Key::inference(key),
                        match key {
                            "ep" => ep.to_string(),
                            "attention_dp" => "true".to_string(),
                            "attention_tp" => plan.attention_tp.unwrap_or(1).to_string(),
                            _ => format!("{:?}", plan.expert_dtype),
                        },
                        "is for mixture-of-experts models; this model has no experts",
                    ));
                }
            }
            return Ok(());
        };
        if !tp.is_multiple_of(ep) {
            return Err(ModelError::invalid(
                Key::inference("ep"),
                ep,
                format!("must divide inference.tp = {tp} (the experts are spread over ep of the tp ranks, each expert's width over the other tp / ep)"),
            ));
        }
        if !moe.experts.is_multiple_of(ep) {
            return Err(ModelError::invalid(
                Key::inference("ep"),
                ep,
                format!("must divide model.moe.experts = {}", moe.experts),
            ));
        }
        let etp = tp / ep;
        if !moe.expert_ffn_hidden.is_multiple_of(etp) {
            return Err(ModelError::invalid(
                Key::inference("ep"),
                ep,
                format!(
                    "leaves tp / ep = {etp} ranks per expert, which must divide model.moe.expert_ffn_hidden = {}",
                    moe.expert_ffn_hidden
                ),
            ));
        }
        if let Some(atp) = plan.attention_tp {
            if !plan.attention_dp {
                return Err(ModelError::invalid(
                    Key::inference("attention_tp"),
                    atp,
                    "is the tensor parallelism inside each attention data-parallel group: set inference.attention_dp = true (without it attention runs over all inference.tp ranks)",
                ));
            }
            if atp == 0 || !tp.is_multiple_of(atp as u64) {
                return Err(ModelError::invalid(
                    Key::inference("attention_tp"),
                    atp,
                    format!("must be at least 1 and divide inference.tp = {tp} (the tp ranks form tp / attention_tp attention groups)"),
                ));
            }
        }
        if plan.attention_dp && ep != tp {
            return Err(ModelError::invalid(
                Key::inference("ep"),
                ep,
                format!("must equal inference.tp = {tp} with inference.attention_dp (each rank's tokens go to the experts' ranks)"),
            ));
        }
        if let Some(d) = plan.expert_dtype {
            let cu = &self.system.compute;
            let engine = if plan.activation_dtype.bytes() >= d.bytes() {
                plan.activation_dtype
            } else {
                d
            };
            if cu.peak(Engine::Matrix, engine).is_none() {
                return Err(ModelError::invalid(
                    Key::inference("expert_dtype"),
                    d,
                    format!("device `{}` has no matrix engine for {engine}", cu.kind()),
                ));
            }
        }
        Ok(())
    }

    /// Supported formats and the 16-bit base format.
    pub(super) fn check_dtypes(&self, plan: &InferencePlan) -> Result<DType, ModelError> {
        let cu = &self.system.compute;
        let supported = || {
            DType::ALL
                .iter()
                .filter(|d| cu.peak(Engine::Matrix, **d).is_some())
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (act, w) = (plan.activation_dtype, plan.weight_dtype);
        let engine = if act.bytes() >= w.bytes() { act } else { w };
        if cu.peak(Engine::Matrix, engine).is_none() {
            let key = if engine == act {
                Key::inference("activation_dtype")
            } else {
                Key::inference("weight_dtype")
            };
            return Err(ModelError::invalid(
                key,
                engine,
                format!(
                    "device `{}` has no matrix engine for {engine} (it has: {})",
                    cu.kind(),
                    supported()
                ),
            ));
        }
        let base = if act.bytes() >= 2.0 {
            act
        } else if cu.peak(Engine::Matrix, DType::Bf16).is_some() {
            DType::Bf16
        } else if cu.peak(Engine::Matrix, DType::Fp16).is_some() {
            DType::Fp16
        } else {
            return Err(ModelError::invalid(
                Key::inference("activation_dtype"),
                act,
                format!(
                    "needs a 16-bit matrix format (bf16 or fp16) on device `{}` for attention and the LM head (it has: {})",
                    cu.kind(),
                    supported()
                ),
            ));
        };
        let kv = plan.kv_dtype;
        if kv != base && cu.peak(Engine::Matrix, kv).is_none() {
            return Err(ModelError::invalid(
                Key::inference("kv_dtype"),
                kv,
                format!(
                    "device `{}` has no arithmetic for {kv} to dequantise the KV cache (it has: {})",
                    cu.kind(),
                    supported()
                ),
            ));
        }
        Ok(base)
    }

    /// The innermost network level (its index and itself) spanning `ranks` devices.
    pub(super) fn level(
        &self,
        ranks: u32,
        key: Key,
    ) -> Result<(usize, &dyn Interconnect), ModelError> {
        self.system
            .network
            .iter()
            .enumerate()
            .find(|(_, l)| l.domain_size() >= ranks)
            .map(|(i, l)| (i, l.as_ref()))
            .ok_or_else(|| {
                ModelError::invalid(
                    key,
                    ranks,
                    format!(
                        "no network level of system `{}` spans {ranks} devices (levels: {})",
                        self.system.name,
                        self.system
                            .network
                            .iter()
                            .map(|l| format!("{} x{}", l.kind(), l.domain_size()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }
}
