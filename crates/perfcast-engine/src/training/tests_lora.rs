//! Fine-tuning (`plan.task`): `sft` is pre-training's program; `lora` drops the frozen
//! weights' gradients, optimizer state, gradient reduction and weight-gradient GEMMs and adds
//! its adapters' GEMMs and parameters; the fast path agrees; bad input names the key.

use super::lora::{layer_adapter_params, LoraShape};
use super::tests_moe::{dsv3_small, training};
use super::*;
use perfcast_testkit::gpt;

fn dense_plan() -> TrainingPlan {
    TrainingPlan {
        tp: 2,
        pp: 2,
        dp: 2,
        micro_batch: 1,
        global_batch: 8,
        recompute: "selective".into(),
        zero_stage: 1,
        ..TrainingPlan::default()
    }
}

fn lora(rank: u32, targets: &[LoraTarget]) -> TrainingPlan {
    TrainingPlan {
        task: Task::Lora,
        lora: Some(LoraPlan {
            rank,
            targets: targets.to_vec(),
        }),
        ..dense_plan()
    }
}

#[test]
fn sft_is_the_pretraining_step() {
    let t = training(gpt(8, 4096, 32), 8);
    let sft = TrainingPlan {
        task: Task::Sft,
        ..dense_plan()
    };
    let (a, b) = (
        t.evaluate(&dense_plan()).unwrap(),
        t.evaluate(&sft).unwrap(),
    );
    assert_eq!(a.iteration_time.0, b.iteration_time.0);
    assert_eq!(a.memory.peak.0, b.memory.peak.0);
    assert_eq!(a.model_flops.0, b.model_flops.0);
}

/// `r·(k + n) / t` per targeted projection on one device, both adapters split over tensor
/// parallelism (table: h 4096, 32 heads, MLP 16384; and latent attention's output projection,
/// whose input is `heads x v_head_dim`).
#[test]
fn adapter_parameters_per_layer() {
    let m = gpt(8, 4096, 32);
    let (h, f) = (4096u64, 16384u64);
    let shape =
        |m: &perfcast_core::workload::ModelSpec, rank, targets: &[LoraTarget], split| LoraShape {
            rank,
            targets: LoraPlan {
                rank: rank as u32,
                targets: targets.to_vec(),
            }
            .mask(m),
            split,
        };
    use LoraTarget::*;
    // (rank, targets, tp, parameters x tp)
    let table: [(u64, &[LoraTarget], u64, u64); 5] = [
        (16, &[LinearQkv], 1, 16 * (h + 3 * h)),
        (16, &[LinearQkv], 2, 16 * (h + 3 * h)),
        (8, &[LinearProj], 2, 8 * (h + h)),
        (32, &[LinearFc1, LinearFc2], 4, 32 * (h + f) + 32 * (f + h)),
        (
            4,
            &LoraTarget::ALL,
            1,
            4 * (h + 3 * h) + 4 * (h + h) + 4 * (h + f) + 4 * (f + h),
        ),
    ];
    for (rank, targets, tp, want) in table {
        let got = layer_adapter_params(&m, &shape(&m, rank, targets, tp));
        assert_eq!(got, want as f64 / tp as f64, "{targets:?} tp {tp}");
    }
    let d = dsv3_small();
    let v = d.heads * d.mla.unwrap().v_head_dim;
    let got = layer_adapter_params(&d, &shape(&d, 8, &[LinearProj], 1));
    assert_eq!(got, (8 * (v + d.hidden)) as f64);
}

/// Frozen base weights: no weight-gradient GEMMs (the backward's GEMM time falls by more
/// than the adapters add), the adapters' GEMMs in the forward, gradients and optimizer
/// state of the adapters only, no embedding gradient, model FLOPs `4·P + 6·P_a` plus
/// attention, and a gradient reduction of the adapters' bytes only.
#[test]
fn lora_freezes_the_base_weights() {
    let m = gpt(8, 4096, 32);
    let t = training(m.clone(), 8);
    let targets = [LoraTarget::LinearQkv, LoraTarget::LinearProj];
    let (full, lo) = (
        t.evaluate(&dense_plan()).unwrap(),
        t.evaluate(&lora(16, &targets)).unwrap(),
    );
    assert!(lo.iteration_time.0 < 0.85 * full.iteration_time.0);
    assert!(lo.layer.forward_compute.0 > full.layer.forward_compute.0);
    assert!(lo.layer.backward_compute.0 < 0.75 * full.layer.backward_compute.0);
    assert!(lo.breakdown.optimizer.0 < 0.05 * full.breakdown.optimizer.0);
    assert!(lo.breakdown.dp_comm.0 <= full.breakdown.dp_comm.0);
    // Model state: adapters' gradients (2 B) and optimizer state (12 B, sharded over DP by
    // ZeRO-1) on the first of two stages of 4 layers each.
    let a = layer_adapter_params(
        &m,
        &LoraShape {
            rank: 16,
            targets: 0b11,
            split: 2,
        },
    );
    let first = &lo.memory.first_stage;
    assert!(
        (first.grads.0 - 4.0 * a * 2.0).abs() < 1e-6,
        "{}",
        first.grads.0
    );
    assert!((first.optimizer.0 - 4.0 * a * 12.0 / 2.0).abs() < 1e-6);
    assert!(first.weights.0 > full.memory.first_stage.weights.0);
    assert!(lo.memory.peak.0 < full.memory.peak.0);
    // FLOPs: 4 per frozen weight, 6 per adapter weight, attention 3 x forward.
    let tokens = 8.0 * m.seq_len as f64;
    let attn = 3.0 * m.layers as f64 * flops::attention_fwd_per_token(&m);
    let whole = layer_adapter_params(
        &m,
        &LoraShape {
            rank: 16,
            targets: 0b11,
            split: 1,
        },
    );
    let want =
        tokens * (4.0 * m.matmul_params_per_token() as f64 + attn + 6.0 * m.layers as f64 * whole);
    assert!((lo.model_flops.0 / want - 1.0).abs() < 1e-12);
    // The op program: the frozen layer's backward has the data-gradient GEMMs and the
    // adapters' four each; no embedding gradient.
    let ops = t.op_breakdown(&lora(16, &targets)).unwrap();
    let gemms = |part: &str| {
        ops.iter()
            .filter(|o| o.part == part && matches!(o.op, perfcast_core::op::ComputeOp::Gemm(_)))
            .count()
    };
    assert_eq!(gemms("layer forward"), 4 + 2 * 2);
    assert_eq!(gemms("layer backward"), 4 + 2 * 4);
    assert_eq!(gemms("head backward"), 1);
    assert_eq!(
        ops.iter()
            .filter(|o| o.part == "embedding backward")
            .count(),
        0
    );
    let base = t.op_breakdown(&dense_plan()).unwrap();
    let n = |part: &str| {
        base.iter()
            .filter(|o| o.part == part && matches!(o.op, perfcast_core::op::ComputeOp::Gemm(_)))
            .count()
    };
    assert_eq!((n("layer backward"), n("head backward")), (8, 2));
}

/// A higher rank costs more; a plan naming no adapters takes the stack's (NeMo 2.0's rank 32
/// on the four projections).
#[test]
fn rank_and_default_adapters() {
    let t = training(gpt(8, 4096, 32), 8);
    let time = |p: &TrainingPlan| t.evaluate(p).unwrap().iteration_time.0;
    let targets = [LoraTarget::LinearQkv];
    assert!(time(&lora(64, &targets)) > time(&lora(8, &targets)));
    let default = TrainingPlan {
        task: Task::Lora,
        ..dense_plan()
    };
    assert_eq!(time(&default), time(&lora(32, &LoraTarget::ALL)));
}

/// The search's fast path evaluates a LoRA plan as `evaluate` does, and does not mistake it
/// for the pre-training plan of the same shape in its layer cache.
#[test]
fn fast_path_equals_evaluate_with_lora() {
    let t = training(gpt(8, 4096, 32), 8);
    let mut cache = LayerCache::new();
    for p in [
        dense_plan(),
        lora(16, &[LoraTarget::LinearQkv]),
        dense_plan(),
    ] {
        let mut g = t.plan_group(&p, &mut cache).unwrap();
        let ri = t.recompute_names().iter().position(|r| *r == "selective");
        let si = t
            .schedule_names()
            .iter()
            .position(|s| *s == p.schedule_name());
        g.set_variant(ri.unwrap(), None, si.unwrap()).unwrap();
        let rep = t.evaluate(&p).unwrap();
        assert_eq!(rep.iteration_time.0, g.time().unwrap());
        assert_eq!(rep.memory.peak.0, g.memory_peak().unwrap());
    }
    assert_eq!(cache.len(), 2);
}

/// An MoE model's experts are frozen too: no expert gradients, optimizer state or gradient
/// reduction over the expert data-parallel group; the stack's default adapters (every
/// projection) take the ones the model has (latent attention's output projection here).
#[test]
fn lora_on_moe_freezes_the_experts() {
    let t = training(dsv3_small(), 64);
    let base = super::tests_moe::plan(1, 64, 8);
    let lo = TrainingPlan {
        task: Task::Lora,
        lora: Some(LoraPlan {
            rank: 16,
            targets: vec![LoraTarget::LinearProj],
        }),
        ..base.clone()
    };
    let (a, b) = (t.evaluate(&base).unwrap(), t.evaluate(&lo).unwrap());
    assert!(b.iteration_time.0 < a.iteration_time.0);
    assert!(b.memory.first_stage.grads.0 < 0.01 * a.memory.first_stage.grads.0);
    // The collectives: gradient reductions of the adapters only (none of the experts'), and
    // the experts' dispatch as in pre-training.
    let p = t.prepare(&lo).unwrap();
    let mut comms = perfcast_core::parallel::CommList::default();
    t.frozen_comms(&p, &mut comms).unwrap();
    let data: f64 = comms
        .iter()
        .filter(|c| c.class == perfcast_core::parallel::CommClass::Data)
        .map(|c| c.bytes.0)
        .sum();
    let adapters = p.params.adapter_layer * p.params.max_layers() as f64 * 2.0;
    assert!(data > 0.0 && data <= 2.0 * adapters, "{data} vs {adapters}");
    assert!(comms
        .iter()
        .any(|c| c.class == perfcast_core::parallel::CommClass::Expert));
    let default = TrainingPlan {
        lora: None,
        ..lo.clone()
    };
    assert_eq!(
        t.evaluate(&default).unwrap().iteration_time.0,
        t.evaluate(&TrainingPlan {
            lora: Some(LoraPlan {
                rank: 32,
                targets: vec![LoraTarget::LinearProj],
            }),
            ..lo
        })
        .unwrap()
        .iteration_time
        .0
    );
}

#[test]
fn bad_fine_tuning_names_the_key() {
    let dense = training(gpt(8, 4096, 32), 8);
    let moe = training(dsv3_small(), 64);
    let moe_plan = |targets: Vec<LoraTarget>| TrainingPlan {
        task: Task::Lora,
        lora: Some(LoraPlan { rank: 8, targets }),
        ..super::tests_moe::plan(1, 64, 8)
    };
    use LoraTarget::*;
    // (training, plan, fragments of the complaint)
    let table: [(&Training, TrainingPlan, &[&str]); 6] = [
        (
            &dense,
            lora(0, &[LinearQkv]),
            &["plan.lora.rank", "0", ">= 1"],
        ),
        (
            &dense,
            lora(4097, &[LinearQkv]),
            &["plan.lora.rank", "4097", "4096", "linear_qkv"],
        ),
        (
            &dense,
            lora(8, &[]),
            &["plan.lora.targets", "names no projection"],
        ),
        (
            &dense,
            TrainingPlan {
                lora: Some(LoraPlan::default()),
                ..dense_plan()
            },
            &["plan.lora", "pretrain", "plan.task"],
        ),
        (
            &moe,
            moe_plan(vec![LinearFc1]),
            &["plan.lora.targets", "linear_fc1", "experts"],
        ),
        (
            &moe,
            moe_plan(vec![LinearQkv]),
            &["plan.lora.targets", "linear_qkv", "MLA"],
        ),
    ];
    for (t, p, parts) in table {
        let e = t.evaluate(&p).unwrap_err().to_string();
        for part in parts {
            assert!(e.contains(part), "{e} lacks {part}");
        }
    }
    // Defaults that name nothing are the stack's key's fault, not the plan's.
    let r = perfcast_builtins::registry().unwrap();
    let options = TrainingOptions {
        engine: EngineParams {
            lora: LoraPlan {
                rank: 0,
                ..LoraPlan::default()
            },
            ..EngineParams::default()
        },
        ..TrainingOptions::default()
    };
    let t = Training::with_options(
        gpt(8, 4096, 32),
        perfcast_testkit::flat::h100(8),
        &r,
        &options,
    )
    .unwrap();
    let p = TrainingPlan {
        task: Task::Lora,
        ..dense_plan()
    };
    let e = t.evaluate(&p).unwrap_err().to_string();
    assert!(e.contains("options.engine.lora.rank"), "{e}");
    // Unknown values are refused by the schema, naming what is allowed.
    let bad = toml::from_str::<TrainingPlan>("global_batch = 8\ntask = \"prefix\"\n")
        .unwrap_err()
        .to_string();
    assert!(bad.contains("lora") && bad.contains("sft"), "{bad}");
    let bad = toml::from_str::<TrainingPlan>(
        "global_batch = 8\ntask = \"lora\"\n[lora]\ntargets = [\"q_proj\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("linear_qkv"), "{bad}");
}
