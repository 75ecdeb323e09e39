//! Memory per pipeline stage: model state per ZeRO stage, the activations the recompute
//! policy keeps (`activations` has the per-layer bytes) times what the schedule holds in
//! flight, and transient buffers, against the device tier's capacity.

use super::activations::StateBytes;
use super::plan::TrainingPlan;
use super::prepare::Prepared;
use super::report::{MemoryReport, StageMemory};
use super::Training;
use perfcast_core::parallel::{CpComm, ScheduleInput};
use perfcast_core::{Bytes, ModelError, Seconds};

/// Micro-batches (whole-stage units) whose activations stage `idx` holds at its peak, each
/// chunk weighted by its layers (the schedule's `peak_layers_held` over the stage's layers).
/// The short chunks of an uneven split (`stage_layers`) are the
/// first stage's first chunks and the last stage's last ones (Llama 3's embedding-only and
/// head-only chunks); with equal chunks this is the schedule's `in_flight`.
pub(super) fn layer_weighted_in_flight(
    p: &Prepared,
    input: &ScheduleInput,
    idx: u32,
    vpp: u32,
    last: u32,
) -> f64 {
    let n = if idx == 0 {
        p.params.n_first
    } else if idx == last {
        p.params.n_last
    } else {
        p.params.n_mid
    };
    if vpp <= 1 || n == 0 || n == p.params.n_mid {
        return p.sched.in_flight(input, idx);
    }
    let per = p.params.n_mid / vpp as u64;
    let deficit = p.params.n_mid - n;
    let chunk_layers = |c: u32| {
        // Chunks counted from the stage's short end.
        let from_end = if idx == 0 { c } else { vpp - 1 - c } as u64;
        (per - deficit.saturating_sub(from_end * per).min(per)) as f64
    };
    p.sched.peak_layers_held(input, idx, &chunk_layers) / n as f64
}

impl Training {
    /// Memory of pipeline stage `idx` of a prepared plan.
    pub(super) fn stage_memory(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        input: &ScheduleInput,
        idx: u32,
    ) -> StageMemory {
        let last = plan.pp.saturating_sub(1);
        let with_emb = idx == 0;
        let with_head = idx == last;
        let pr = &p.params;
        let (params, rp, eparams, n) = if idx == 0 {
            (pr.first_params, &p.rp_first, pr.first_expert, pr.n_first)
        } else if idx == last {
            (pr.last_params, &p.rp_last, pr.last_expert, pr.n_last)
        } else {
            (pr.mid_params, &p.rp_mid, pr.mid_expert, pr.n_mid)
        };
        let (trained, etrained) = pr.trainable(p.ls.frozen(), n, params, eparams);
        let tok = (p.b * p.s / p.cpd) as f64;
        let reserved = Bytes::from_gib(self.params.runtime_reserve_gib);
        let in_flight = layer_weighted_in_flight(p, input, idx, plan.vpp, last);
        let mut per_mb = rp.kept.0;
        if with_emb && p.dropout {
            // Input-embedding dropout mask.
            per_mb += tok * p.hf / p.ps as f64;
        }
        let mut temp = rp.working.0;
        if with_head {
            // fp32 logits of the loss (Korthikanti 2022 §4.1: 4sbV/t).
            temp += 4.0 * tok * p.ls.vocab_dev as f64;
        }
        if plan.cp > 1 && plan.cp_comm == CpComm::AllGather {
            // All-gather context parallelism: the whole sequence's K and V, and in the
            // backward their gradients (before the reduce-scatter), of one layer.
            let ls = &p.ls;
            let kv = 2.0 * (ls.b * ls.s * ls.kv_dev * ls.d) as f64 * p.dims.act_bytes;
            temp += 2.0 * kv;
        }
        if plan.zero_stage >= 3 && p.ssplit.weights > 1 {
            // ZeRO-3: the gathered weights of the current and the prefetched layer, and the
            // gathered embedding table / LM head on their stages (one table when tied on a
            // single stage).
            let tables = match (with_emb, with_head) {
                (true, true) if p.dims.tied_embeddings => 1.0,
                (e, h) => e as u8 as f64 + h as u8 as f64,
            };
            temp +=
                (2.0 * p.params.layer_dev + tables * p.dims.embedding_params) * p.dims.weight_bytes;
        }
        if plan.zero_stage >= 3 && p.ssplit.expert_weights > 1 {
            // ZeRO-3 over the expert data-parallel group: the gathered experts of the current
            // and the prefetched MoE layer.
            if let Some(mp) = &p.moe {
                temp += 2.0 * mp.expert_layer_params * p.dims.weight_bytes;
            }
        }
        let st = &p.state;
        let mut weights = params * st.weights / p.ssplit.weights.max(1) as f64;
        let mut grads = trained * st.grads / p.ssplit.grads.max(1) as f64;
        let mut optimizer = trained * st.optimizer / p.ssplit.optimizer.max(1) as f64;
        if eparams > 0.0 {
            let ss = &p.ssplit;
            weights += eparams * st.weights / ss.expert_weights.max(1) as f64;
            grads += etrained * st.grads / ss.expert_grads.max(1) as f64;
            optimizer += etrained * st.optimizer / ss.expert_optimizer.max(1) as f64;
        }
        // DualPipe holds a stage of each direction: its model state twice.
        let copies = p.sched.model_copies();
        if copies != 1.0 {
            weights *= copies;
            grads *= copies;
            optimizer *= copies;
        }
        let activations = in_flight * per_mb;
        let total = weights + grads + optimizer + activations + temp + reserved.0;
        StageMemory {
            stage: idx,
            in_flight,
            weights: Bytes(weights),
            grads: Bytes(grads),
            optimizer: Bytes(optimizer),
            activations: Bytes(activations),
            temp: Bytes(temp),
            reserved,
            total: Bytes(total),
        }
    }

    /// Memory per stage of a prepared plan: the first, the second (the busiest middle stage:
    /// under every built-in schedule a middle stage holds no more than stage 1) and the last.
    pub(super) fn memory_report(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        input: &ScheduleInput,
    ) -> MemoryReport {
        let first_mem = self.stage_memory(plan, p, input, 0);
        let last_mem = self.stage_memory(plan, p, input, plan.pp - 1);
        let second_mem = if plan.pp > 2 {
            Some(self.stage_memory(plan, p, input, 1))
        } else {
            None
        };
        let mut peak = first_mem.total.max(last_mem.total);
        if let Some(sm) = &second_mem {
            peak = peak.max(sm.total);
        }
        let fits = peak.0 <= self.capacity.0;
        MemoryReport {
            first_stage: first_mem,
            second_stage: second_mem,
            last_stage: last_mem,
            peak,
            capacity: self.capacity,
            fits,
            shortfall: Bytes((peak.0 - self.capacity.0).max(0.0)),
        }
    }

    /// Memory of every pipeline stage's device under `plan` (allocates; for reports).
    pub fn memory_per_stage(&self, plan: &TrainingPlan) -> Result<Vec<StageMemory>, ModelError> {
        let p = self.prepare(plan)?;
        let input = Self::memory_input(plan, &p);
        Ok((0..plan.pp)
            .map(|i| self.stage_memory(plan, &p, &input, i))
            .collect())
    }

    pub(super) fn memory_input(plan: &TrainingPlan, p: &Prepared) -> ScheduleInput {
        ScheduleInput {
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: p.shape.micro_batches(),
            forward: Seconds::ZERO,
            backward: Seconds::ZERO,
            p2p: Seconds::ZERO,
        }
    }

    /// A lower bound on the peak memory per device of every plan of this model on `devices`
    /// devices, whatever its degrees, ZeRO stage, recompute or precision: the model state
    /// sharded over all of them at the least bytes per parameter any plan keeps
    /// (`StateBytes::mixed_precision_adam` without fp32 gradients or fp8 copies, 16 B),
    /// plus the runtime reserve. Sound because each stage's weights, gradients and optimizer
    /// state are split at most `tp x cp x dp` ways and the busiest of `pp` stages holds at
    /// least `1/pp` of the parameters; activations only add. With frozen base weights
    /// (`task = "lora"`) only the 16-bit weights count (2 B: the adapters' state only adds).
    /// For refusing a hopeless search at once.
    pub fn memory_floor(&self, devices: u32, task: super::lora::Task) -> Bytes {
        let adam = StateBytes::mixed_precision_adam(false, false);
        let state = match task {
            super::lora::Task::Lora => adam.weights,
            _ => adam.total(),
        };
        let params = self.model.params() as f64;
        Bytes(
            params * state / devices.max(1) as f64
                + Bytes::from_gib(self.params.runtime_reserve_gib).0,
        )
    }

    /// Memory per device of `plan` without timing it (cheap: for pruning plans that cannot
    /// fit before they are evaluated). Same numbers as `evaluate(plan)?.memory`.
    pub fn memory(&self, plan: &TrainingPlan) -> Result<MemoryReport, ModelError> {
        let p = self.prepare(plan)?;
        let input = Self::memory_input(plan, &p);
        Ok(self.memory_report(plan, &p, &input))
    }
}
