//! Mixture-of-experts, latent attention and expert parallelism through `evaluate`: the
//! mechanisms one at a time, the fast path against `evaluate`, and bad input.

use super::*;
use perfcast_core::registry::Registry;

use perfcast_core::parallel::Dispatcher;
use perfcast_core::workload::{AttentionLayout, FfnAct, MlaSpec, MoeSpec};
use perfcast_testkit::{a100_from_registry, gpt};

fn registry() -> Registry {
    perfcast_builtins::registry().unwrap()
}

/// A DeepSeek-V3-shaped model at 1/4 depth (16 layers, the first dense): MLA, 64 routed
/// experts of 2048, top-8 (groups of 8, 4 per token), one shared expert.
pub(super) fn dsv3_small() -> ModelSpec {
    ModelSpec {
        kv_heads: Some(128),
        ffn_hidden: 18432,
        ffn_act: FfnAct::Swiglu,
        vocab: 129280,
        seq_len: 4096,
        tied_embeddings: false,
        attention: Some(AttentionLayout::Mla),
        mla: Some(MlaSpec {
            q_lora_rank: 1536,
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        }),
        moe: Some(MoeSpec {
            shared_experts: 1,
            dense_layers: 1,
            expert_groups: Some(8),
            group_top_k: Some(4),
            ..MoeSpec::new(64, 8, 2048)
        }),
        ..gpt(16, 7168, 128)
    }
}

pub(super) fn training(m: ModelSpec, devices: u32) -> Training {
    let r = registry();
    Training::new(m, a100_from_registry(&r, devices).unwrap(), &r).unwrap()
}

pub(super) fn plan(pp: u32, dp: u32, ep: u32) -> TrainingPlan {
    TrainingPlan {
        pp,
        dp,
        ep,
        micro_batch: 1,
        global_batch: 4 * dp,
        recompute: "full".into(),
        zero_stage: 1,
        ..TrainingPlan::default()
    }
}

/// An MoE plan evaluates to finite numbers; EP shards the experts' state; the dispatch
/// shows up as exposed expert-parallel communication; a larger EP group spanning nodes
/// costs more dispatch time than one inside the NVLink domain.
#[test]
fn expert_parallelism_through_evaluate() {
    let t = training(dsv3_small(), 64);
    let r8 = t.evaluate(&plan(1, 64, 8)).unwrap();
    let r64 = t.evaluate(&plan(1, 64, 64)).unwrap();
    for r in [&r8, &r64] {
        r.check_finite().unwrap();
        assert!(r.breakdown.ep_comm.0 > 0.0);
        assert!(r.layer.moe_block_forward.is_some());
    }
    assert!(r64.memory.peak.0 < r8.memory.peak.0);
    // 15 MoE layers, 8 -> 1 local experts of 3 x 7168 x 2048 (bf16 weights).
    let want = 15.0 * 7.0 * (3.0 * 7168.0 * 2048.0) * 2.0;
    let got = r8.memory.first_stage.weights.0 - r64.memory.first_stage.weights.0;
    assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    // EP 8 inside a node, EP 64 over 8 nodes: the dispatch crosses InfiniBand.
    assert!(r64.breakdown.ep_comm.0 > 2.0 * r8.breakdown.ep_comm.0);
    // A hierarchical dispatcher sends a token once per node (at most 4 groups = nodes).
    let deepep = TrainingPlan {
        moe_dispatcher: Dispatcher::Deepep,
        ..plan(1, 64, 64)
    };
    let rd = t.evaluate(&deepep).unwrap();
    assert!(rd.breakdown.ep_comm.0 < 0.7 * r64.breakdown.ep_comm.0);
    // Overlapping the dispatch with another micro-batch's compute hides some of it.
    let overlap = TrainingPlan {
        ep_comm_overlap: true,
        ..plan(1, 64, 64)
    };
    let ro = t.evaluate(&overlap).unwrap();
    assert!(ro.breakdown.ep_comm.0 < r64.breakdown.ep_comm.0);
    assert!(ro.breakdown.hidden_comm.0 > r64.breakdown.hidden_comm.0);
}

/// Load imbalance: the slowest rank's tokens set every MoE layer's time; a capacity factor
/// caps it.
#[test]
fn imbalance_on_the_slowest_rank() {
    let base = training(dsv3_small(), 64)
        .evaluate(&plan(1, 64, 8))
        .unwrap();
    let mut m = dsv3_small();
    m.moe.as_mut().unwrap().load_imbalance = Some(1.5);
    let skew = training(m.clone(), 64).evaluate(&plan(1, 64, 8)).unwrap();
    let f = |r: &TrainingReport| r.layer.moe_block_forward.unwrap().0;
    assert!(f(&skew) > 1.25 * f(&base), "{} vs {}", f(&skew), f(&base));
    m.moe.as_mut().unwrap().capacity_factor = Some(1.0);
    let capped = training(m, 64).evaluate(&plan(1, 64, 8)).unwrap();
    assert!(f(&capped) <= f(&base) * 1.0001);
    let g = moe::load_factor(&MoeSpec::new(256, 8, 2048), 64, 4096.0 * 8.0);
    // sqrt(2 ln 64 x 63/64 / 32768) = 1.58%.
    assert!((g - 1.0158).abs() < 1e-3, "{g}");
}

/// The fast path (plan groups and variants, placements) equals `evaluate` for MoE plans.
#[test]
fn fast_path_equals_evaluate_for_moe() {
    let t = training(dsv3_small(), 64);
    let mut cache = LayerCache::new();
    let rnames: Vec<String> = t.recompute_names().iter().map(|s| s.to_string()).collect();
    let snames: Vec<String> = t.schedule_names().iter().map(|s| s.to_string()).collect();
    let mut compared = 0;
    for (pp, dp, ep, vpp) in [(1, 64, 8, 1), (4, 16, 16, 1), (4, 16, 8, 2), (2, 32, 32, 1)] {
        let base = TrainingPlan {
            vpp,
            global_batch: 8 * dp,
            ..plan(pp, dp, ep)
        };
        let mut g = t.plan_group(&base, &mut cache).unwrap();
        for (ri, r) in rnames.iter().enumerate() {
            for (si, s) in snames.iter().enumerate() {
                let p = TrainingPlan {
                    recompute: r.clone(),
                    schedule: Some(s.clone()),
                    ..base.clone()
                };
                let fast = g
                    .set_variant(ri, None, si)
                    .and_then(|_| Ok((g.time()?, g.memory_peak()?)));
                match (t.evaluate(&p), fast) {
                    (Ok(rep), Ok((time, mem))) => {
                        assert_eq!(rep.iteration_time.0, time, "{p:?}");
                        assert_eq!(rep.memory.peak.0, mem, "{p:?}");
                        let lb = g.time_lower_bound(si).unwrap();
                        assert!(lb <= time, "{lb} > {time}");
                        compared += 1;
                    }
                    (Err(_), Err(_)) => {}
                    (a, b) => panic!("{p:?}: {:?} vs {:?}", a.err(), b.err()),
                }
            }
        }
        let si = snames
            .iter()
            .position(|s| s == base.schedule_name())
            .unwrap();
        for pl in Placement::all() {
            g.set_variant(0, None, si).unwrap();
            g.set_placement(pl);
            let p = TrainingPlan {
                recompute: rnames[0].clone(),
                schedule: Some(snames[si].clone()),
                ..base.clone()
            };
            if let Ok(want) = t.evaluate_placed(&p, &pl) {
                assert_eq!(g.time().unwrap(), want.iteration_time.0);
            }
        }
    }
    assert!(compared >= 12, "{compared}");
}

/// Multi-token prediction adds a layer and an LM head to the last stage; sliding windows
/// make attention cheaper.
#[test]
fn mtp_and_sliding_windows() {
    let mut m = dsv3_small();
    let base = training(m.clone(), 64).evaluate(&plan(2, 32, 8)).unwrap();
    m.mtp_layers = 1;
    let mtp = training(m, 64).evaluate(&plan(2, 32, 8)).unwrap();
    assert!(mtp.iteration_time.0 > base.iteration_time.0);
    assert!(mtp.model_flops.0 > base.model_flops.0);
    let dense = ModelSpec {
        kv_heads: Some(8),
        ffn_act: FfnAct::Swiglu,
        seq_len: 8192,
        ..gpt(8, 4096, 32)
    };
    let p = TrainingPlan {
        dp: 8,
        global_batch: 8,
        ..TrainingPlan::default()
    };
    let full = training(dense.clone(), 8).evaluate(&p).unwrap();
    let slid = training(
        ModelSpec {
            sliding_window: Some(512),
            sliding_window_layers: Some(4),
            ..dense.clone()
        },
        8,
    )
    .evaluate(&p)
    .unwrap();
    let a = |r: &TrainingReport| r.breakdown.compute.attention;
    assert!(a(&slid) < 0.65 * a(&full), "{} vs {}", a(&slid), a(&full));
    // Chunked local attention on 3 of 4 layers (Llama 4): each chunk is a causal block, so
    // 2,048-token chunks of 8,192-token sequences cost those layers a quarter of their
    // attention; a chunk as long as the sequence changes nothing.
    use perfcast_core::workload::AttentionSpan::{Chunked, Full};
    let chunked = |c: u64| {
        training(
            ModelSpec {
                attention_chunk: Some(c),
                layer_pattern: Some(vec![Chunked, Chunked, Chunked, Full]),
                ..dense.clone()
            },
            8,
        )
        .evaluate(&p)
        .unwrap()
    };
    let want = 0.25 + 0.75 * 0.25;
    let got = a(&chunked(2048)) / a(&full);
    assert!((got - want).abs() < 0.05, "{got} vs {want}");
    assert_eq!(a(&chunked(8192)), a(&full));
}

/// Bad expert-parallel plans: an error naming the key, never a panic.
#[test]
fn bad_expert_plans_name_the_key() {
    let t = training(dsv3_small(), 64);
    let table: [(TrainingPlan, &str); 6] = [
        (plan(1, 64, 3), "plan.ep"),
        (plan(1, 64, 128), "model.moe.experts"),
        (
            TrainingPlan {
                etp: 3,
                ..plan(1, 64, 8)
            },
            "plan.etp",
        ),
        (
            TrainingPlan {
                etp: 16,
                ..plan(1, 64, 8)
            },
            "plan.tp x plan.cp x plan.dp",
        ),
        (
            TrainingPlan {
                tp: 8,
                dp: 8,
                ..plan(1, 8, 8)
            },
            "plan.sp",
        ),
        (
            TrainingPlan {
                ep_comm_overlap: true,
                global_batch: 64,
                ..plan(1, 64, 8)
            },
            "plan.ep_comm_overlap",
        ),
    ];
    for (p, key) in table {
        let e = t.evaluate(&p).unwrap_err().to_string();
        assert!(e.contains(key), "{p:?}: {e}");
    }
    // A dense model refuses EP; so does an MoE model without an expert strategy.
    let dense = training(gpt(4, 1024, 16), 8);
    let e = dense.evaluate(&plan(1, 8, 2)).unwrap_err().to_string();
    assert!(
        e.contains("plan.ep") && e.contains("mixture-of-experts"),
        "{e}"
    );
    let r = registry();
    let opts = TrainingOptions {
        strategies: Some(
            ["tensor", "sequence", "context", "pipeline", "data", "zero"]
                .map(String::from)
                .to_vec(),
        ),
        ..TrainingOptions::default()
    };
    let no_ep =
        Training::with_options(dsv3_small(), a100_from_registry(&r, 64).unwrap(), &r, &opts)
            .unwrap();
    let e = no_ep.evaluate(&plan(1, 64, 8)).unwrap_err().to_string();
    assert!(e.contains("expert-parallel strategy"), "{e}");
    no_ep.evaluate(&plan(1, 64, 1)).unwrap();
}

/// Active-parameter FLOPs: the GEMMs of the MoE layer's program (attention projections, the
/// router, `top_k` routed experts' rows and the shared expert) do `2 x tokens x` the weights
/// one token passes through, forward, and twice that backward; the report's model FLOPs are
/// `6 x P_mm x tokens` (P_mm: `ModelSpec::matmul_params_per_token`) plus the attention term.
#[test]
fn active_parameter_flops() {
    let mut m = dsv3_small();
    // No systematic imbalance and EP 1 (no sampling excess): the rank routes exactly
    // tokens x top_k copies.
    m.moe.as_mut().unwrap().load_imbalance = Some(1.0);
    let t = training(m.clone(), 64);
    let p = TrainingPlan {
        recompute: "none".into(),
        ..plan(1, 64, 1)
    };
    let ops = t.op_breakdown(&p).unwrap();
    let gemm = |part: &str| -> f64 {
        ops.iter()
            .filter(|o| o.part == part && o.class == "gemm")
            .map(|o| o.op.flops().0 * o.count)
            .sum()
    };
    let spec = m.moe.unwrap();
    let (h, tokens) = (m.hidden as f64, m.seq_len as f64);
    let mat = m.ffn_act.matrices() as f64;
    let per_token = m.attention_weights() as f64
        + spec.top_k as f64 * mat * h * spec.expert_ffn_hidden as f64
        + spec.shared_experts as f64 * mat * h * spec.shared_ffn_hidden() as f64
        + h * spec.experts as f64;
    let want = 2.0 * tokens * per_token;
    let fwd = gemm("layer forward");
    assert!((fwd / want - 1.0).abs() < 1e-9, "{fwd} vs {want}");
    let bwd = gemm("layer backward");
    assert!(
        (bwd / (2.0 * want) - 1.0).abs() < 1e-9,
        "{bwd} vs {}",
        2.0 * want
    );

    let r = t.evaluate(&p).unwrap();
    let step_tokens = p.global_batch as f64 * tokens;
    let attn = flops::attention_fwd_per_token(&m);
    let model =
        step_tokens * (6.0 * m.matmul_params_per_token() as f64 + 3.0 * m.layers as f64 * attn);
    assert!(
        (r.model_flops.0 / model - 1.0).abs() < 1e-9,
        "{} vs {model}",
        r.model_flops.0
    );
    // The active parameters, not the total: DeepSeek-V3's shape routes 8 of 64 experts.
    assert!(m.matmul_params_per_token() < m.active_params());
    assert!(3 * m.active_params() < m.params());
}

/// EP must fit the devices: a group larger than TP x CP x DP (or than the device count) is
/// an error naming the key, not a panic or a wrong answer.
#[test]
fn expert_group_larger_than_the_devices() {
    let mut m = dsv3_small();
    m.moe.as_mut().unwrap().experts = 256;
    let t = training(m, 64);
    for p in [plan(1, 64, 128), plan(2, 32, 64), plan(1, 64, 256)] {
        let e = t.evaluate(&p).unwrap_err().to_string();
        assert!(e.contains("plan.ep"), "{p:?}: {e}");
    }
    t.evaluate(&plan(1, 64, 64)).unwrap();
}

/// DualPipe on an MoE plan: the same compute as 1F1B, a smaller bubble
/// (`(p/2 - 1)(F + B/2)` against `(p - 1)(F + B)`), the model state twice and `p + 1`
/// micro-batches in flight on every stage; the search's fast path agrees with `evaluate`.
#[test]
fn dualpipe_against_1f1b() {
    let t = training(dsv3_small(), 64);
    let base = TrainingPlan {
        global_batch: 128,
        ..plan(4, 16, 8)
    };
    let one = t.evaluate(&base).unwrap();
    let dual = t
        .evaluate(&TrainingPlan {
            schedule: Some("dualpipe".into()),
            ..base.clone()
        })
        .unwrap();
    let b = |r: &TrainingReport| r.breakdown.bubble.0;
    assert!(b(&dual) < 0.5 * b(&one), "{} vs {}", b(&dual), b(&one));
    assert!(dual.iteration_time.0 < one.iteration_time.0);
    let (f1, f2) = (&one.memory.first_stage, &dual.memory.first_stage);
    assert_eq!(f2.weights.0, 2.0 * f1.weights.0);
    assert_eq!(f2.optimizer.0, 2.0 * f1.optimizer.0);
    assert_eq!((f1.in_flight, f2.in_flight), (4.0, 5.0));
    // Fewer micro-batches than twice the stages: refused by name.
    let e = t
        .evaluate(&TrainingPlan {
            schedule: Some("dualpipe".into()),
            global_batch: 64,
            ..base.clone()
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan.micro_batch") && e.contains("dualpipe"),
        "{e}"
    );
    // The fast path (the search's) gives evaluate's time and memory.
    let names = t.schedule_names();
    let s = names.iter().position(|n| *n == "dualpipe").unwrap();
    let rec = t
        .recompute_names()
        .iter()
        .position(|n| *n == "full")
        .unwrap();
    let mut cache = crate::training::LayerCache::new();
    let mut g = t.plan_group(&base, &mut cache).unwrap();
    g.set_variant(rec, None, s).unwrap();
    let rel = |a: f64, b: f64| (a - b).abs() / b;
    assert!(rel(g.time().unwrap(), dual.iteration_time.0) < 1e-9);
    assert!(rel(g.memory_peak().unwrap(), dual.memory.peak.0) < 1e-9);
}

/// A schedule that overlaps two micro-batches (combined 1F1B, DualPipe) hides the expert
/// all-to-all as the plan's `ep_comm_overlap` does: combined 1F1B is 1F1B with the flag, to
/// the bit, and exposes less expert communication than plain 1F1B.
#[test]
fn schedules_that_overlap_hide_the_expert_all_to_all() {
    let t = training(dsv3_small(), 64);
    let with = |schedule: &str, flag: bool| {
        t.evaluate(&TrainingPlan {
            schedule: Some(schedule.into()),
            ep_comm_overlap: flag,
            global_batch: 16 * 16,
            ..plan(4, 16, 8)
        })
        .unwrap()
    };
    let (combined, flagged, plain) = (
        with("combined-1f1b", false),
        with("1f1b", true),
        with("1f1b", false),
    );
    assert_eq!(combined.iteration_time.0, flagged.iteration_time.0);
    assert_eq!(combined.memory.peak.0, flagged.memory.peak.0);
    assert!(combined.breakdown.ep_comm.0 < plain.breakdown.ep_comm.0);
    assert!(combined.iteration_time.0 < plain.iteration_time.0);
    // DualPipe without the flag hides it too.
    let dual = with("dualpipe", false);
    assert_eq!(
        dual.breakdown.ep_comm.0,
        with("dualpipe", true).breakdown.ep_comm.0
    );
}
