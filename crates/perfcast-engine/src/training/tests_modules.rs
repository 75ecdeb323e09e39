//! Module-level selective recompute (`plan.recompute_modules`) through `evaluate`: `core_attn`
//! alone is the stack's `selective`; every other module trades activation memory for
//! recompute time; the bytes each drops; the FLOPs it reruns; the fast path agrees; bad input.

use super::modules::RecomputeModules;
use super::tests_moe::{dsv3_small, plan, training};
use super::*;
use perfcast_testkit::gpt;

fn modules(names: &[&str]) -> Option<RecomputeModules> {
    Some(RecomputeModules::parse(names).unwrap())
}

fn selective(pp: u32, dp: u32, ep: u32, m: Option<RecomputeModules>) -> TrainingPlan {
    TrainingPlan {
        recompute: "selective".into(),
        recompute_modules: m,
        ..plan(pp, dp, ep)
    }
}

#[test]
fn core_attn_alone_is_the_stacks_selective() {
    for (t, p) in [
        (training(dsv3_small(), 64), selective(4, 16, 8, None)),
        (
            training(gpt(8, 4096, 32), 8),
            TrainingPlan {
                ep: 1,
                ..selective(2, 4, 1, None)
            },
        ),
    ] {
        let base = t.evaluate(&p).unwrap();
        let core = t
            .evaluate(&TrainingPlan {
                recompute_modules: modules(&["core_attn"]),
                ..p.clone()
            })
            .unwrap();
        assert_eq!(base.iteration_time.0, core.iteration_time.0);
        assert_eq!(base.memory.peak.0, core.memory.peak.0);
        assert_eq!(base.hfu, core.hfu);
    }
}

/// Each module added to `core_attn` keeps less and reruns more; the GEMM modules add
/// hardware FLOPs, the norms and the activation do not (they are not matmuls).
#[test]
fn each_module_trades_memory_for_time() {
    let t = training(dsv3_small(), 64);
    let core = t
        .evaluate(&selective(1, 64, 8, modules(&["core_attn"])))
        .unwrap();
    // (module, adds matmul FLOPs)
    for (m, gemm) in [
        ("layernorm", false),
        ("mla_up_proj", true),
        ("mlp", true),
        ("moe_act", false),
        ("shared_experts", true),
    ] {
        let r = t
            .evaluate(&selective(1, 64, 8, modules(&["core_attn", m])))
            .unwrap();
        let act = |x: &TrainingReport| x.memory.first_stage.activations.0;
        assert!(act(&r) < act(&core), "{m}: {} vs {}", act(&r), act(&core));
        assert!(
            r.breakdown.recompute.0 > core.breakdown.recompute.0,
            "{m}: recompute {} vs {}",
            r.breakdown.recompute.0,
            core.breakdown.recompute.0
        );
        assert!(r.iteration_time.0 > core.iteration_time.0, "{m}");
        let extra = |x: &TrainingReport| x.hfu * x.iteration_time.0 - x.mfu * x.iteration_time.0;
        if gemm {
            assert!(extra(&r) > extra(&core) * (1.0 + 1e-9), "{m}");
        } else {
            assert!((extra(&r) / extra(&core) - 1.0).abs() < 1e-9, "{m}");
        }
    }
}

/// The bytes each module drops from one layer (data table against the formulas), the total
/// kept without recompute unchanged.
#[test]
fn bytes_each_module_drops() {
    let l = super::shape::MlaShape {
        q_rank: 1536,
        kv_rank: 512,
        nope: 128,
        rope: 64,
        v: 128,
    };
    let base = activations::ActivationShape {
        micro_batch: 1.0,
        seq_len: 4096.0,
        hidden: 7168.0,
        heads: 128.0,
        kv_heads: 128.0,
        head_dim: 128.0,
        ffn_hidden: 18432.0,
        ffn_matrices: 3.0,
        tp: 2.0,
        pointwise: 2.0,
        cp: 1.0,
        elem: 2.0,
        gemm_in: 2.0,
        dropout: false,
        attention: perfcast_core::AttentionKind::Flash,
        mla: Some(l),
        modules: None,
    };
    let (e, tok, a) = (2.0, 4096.0, 64.0);
    let sbh_sp = tok * 7168.0 / 2.0;
    let plain = base.layer();
    let core = plain.attention_core.0;
    // (modules, bytes `selective` drops)
    let table: [(&[&str], f64); 4] = [
        (&["core_attn"], core),
        (&["layernorm"], 2.0 * e * sbh_sp),
        (
            &["mla_up_proj"],
            e * tok * a * (2.0 * 192.0 + 128.0 + 128.0),
        ),
        (&["mlp"], e * tok * 3.0 * 18432.0 / 2.0),
    ];
    for (names, want) in table {
        let got = activations::ActivationShape {
            modules: modules(names),
            ..base
        }
        .layer();
        assert!(
            (got.attention_core.0 / want - 1.0).abs() < 1e-12,
            "{names:?}"
        );
        assert!(
            (got.total().0 / plain.total().0 - 1.0).abs() < 1e-12,
            "{names:?}"
        );
        assert_eq!(got.input, plain.input);
    }
}

/// The search's fast path takes the template's modules as `evaluate` does.
#[test]
fn fast_path_equals_evaluate_with_modules() {
    let t = training(dsv3_small(), 64);
    let base = selective(4, 16, 8, modules(&["layernorm", "mla_up_proj", "moe_act"]));
    let mut cache = LayerCache::new();
    let mut g = t.plan_group(&base, &mut cache).unwrap();
    let ri = t
        .recompute_names()
        .iter()
        .position(|r| *r == "selective")
        .unwrap();
    let si = t
        .schedule_names()
        .iter()
        .position(|s| *s == base.schedule_name())
        .unwrap();
    g.set_variant(ri, None, si).unwrap();
    let rep = t.evaluate(&base).unwrap();
    assert_eq!(rep.iteration_time.0, g.time().unwrap());
    assert_eq!(rep.memory.peak.0, g.memory_peak().unwrap());
}

#[test]
fn bad_modules_name_the_key() {
    let moe = training(dsv3_small(), 64);
    let dense = training(gpt(8, 4096, 32), 8);
    let dense_plan = |m: &[&str]| TrainingPlan {
        ep: 1,
        ..selective(2, 4, 1, modules(m))
    };
    // (training, plan, fragments of the complaint)
    let table: [(&Training, TrainingPlan, &[&str]); 4] = [
        (
            &moe,
            TrainingPlan {
                recompute: "full".into(),
                ..selective(4, 16, 8, modules(&["layernorm"]))
            },
            &["plan.recompute_modules", "selective", "full"],
        ),
        (
            &dense,
            dense_plan(&["mla_up_proj"]),
            &["plan.recompute_modules", "mla"],
        ),
        (
            &dense,
            dense_plan(&["moe_act"]),
            &["moe_act", "[model.moe]"],
        ),
        (
            &dense,
            dense_plan(&["shared_experts"]),
            &["shared_experts", "shared"],
        ),
    ];
    for (t, p, want) in table {
        let e = t.evaluate(&p).unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "`{w}` missing in: {e}");
        }
    }
    // A plan file's list: unknown and unmodelled names.
    for (list, want) in [
        ("[\"core_atn\"]", "core_attn, layernorm"),
        ("[\"moe\"]", "moe_act"),
    ] {
        let text = format!("global_batch = 8\nrecompute_modules = {list}\n");
        let e = toml::from_str::<TrainingPlan>(&text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// A stack that saves the weight gradients' GEMM inputs in the recipe's format keeps exactly
/// `(2 - 1 - 4/128)` bytes less per element of those inputs (block recipe), and nothing changes
/// in 16 bits or in the step time.
#[test]
fn fp8_saved_inputs_keep_the_gemm_inputs_narrow() {
    let r = perfcast_builtins::registry().unwrap();
    let with = |saved: bool| {
        let options = TrainingOptions {
            engine: EngineParams {
                fp8_saved_inputs: saved,
                ..EngineParams::default()
            },
            ..TrainingOptions::default()
        };
        Training::with_options(dsv3_small(), perfcast_testkit::flat::h100(64), &r, &options)
            .unwrap()
    };
    let (off, on) = (with(false), with(true));
    let fp8 = TrainingPlan {
        precision: perfcast_core::DType::Fp8,
        fp8_recipe: Some(Fp8Recipe::Block),
        recompute: "none".into(),
        ..plan(1, 64, 8)
    };
    let (a, b) = (off.evaluate(&fp8).unwrap(), on.evaluate(&fp8).unwrap());
    assert_eq!(a.iteration_time.0, b.iteration_time.0);
    // One MoE layer's GEMM inputs per micro-batch: the two norms' outputs, MLA's latents and
    // output-projection input, the routed rows entering the experts and the experts' and the
    // shared expert's down-projection inputs (`MoePrep`'s shape).
    let p = on.prepare(&fp8).unwrap();
    let (mp, ls) = (p.moe.unwrap(), p.ls);
    let m = mp.ls.moe.unwrap();
    let tok = (ls.b * ls.sq) as f64;
    let l = ls.mla.unwrap();
    let elems = 2.0 * tok * ls.h as f64
        + tok * (l.q_rank + l.kv_rank + ls.a_dev * l.v) as f64
        + m.routed as f64 * (ls.h + m.f_dev) as f64
        + tok * m.shared_f_dev as f64;
    let q = p.act_shape;
    let narrow = 2.0 - (1.0 + 4.0 / 128.0);
    assert!((q.gemm_in - (1.0 + 4.0 / 128.0)).abs() < 1e-15);
    let saved = off.prepare(&fp8).unwrap().moe.unwrap().act.total().0 - mp.act.total().0;
    assert!((saved / (narrow * elems) - 1.0).abs() < 1e-12, "{saved}");
    assert!(b.memory.first_stage.activations.0 < a.memory.first_stage.activations.0);
    // A 16-bit plan keeps its inputs in 16 bits either way.
    let bf16 = plan(1, 64, 8);
    assert_eq!(
        off.evaluate(&bf16).unwrap().memory.peak.0,
        on.evaluate(&bf16).unwrap().memory.peak.0
    );
}

/// A stack that caches the quantised weights across a step's micro-batches (Transformer
/// Engine's `is_first_microbatch`) runs each weight's two casts once per step: the layer's
/// cast time falls by `(1 - 1/micro-batches)` of those casts, a step of one micro-batch and a
/// 16-bit plan do not change, and the fast path keys its layer cache on it.
#[test]
fn fp8_weight_cache_casts_the_weights_once_per_step() {
    let r = perfcast_builtins::registry().unwrap();
    let with = |cache: bool| {
        let options = TrainingOptions {
            engine: EngineParams {
                fp8_weight_cache: cache,
                ..EngineParams::default()
            },
            ..TrainingOptions::default()
        };
        Training::with_options(
            gpt(8, 4096, 32),
            perfcast_testkit::flat::h100(8),
            &r,
            &options,
        )
        .unwrap()
    };
    let (off, on) = (with(false), with(true));
    let fp8 = |mb_per_step: u32| TrainingPlan {
        precision: perfcast_core::DType::Fp8,
        tp: 2,
        dp: 4,
        micro_batch: 1,
        global_batch: 4 * mb_per_step,
        recompute: "none".into(),
        ..TrainingPlan::default()
    };
    let cast = |t: &Training, p: &TrainingPlan| {
        let r = t.evaluate(p).unwrap();
        (r.breakdown.compute.cast, r.iteration_time.0)
    };
    // One micro-batch per step: nothing to reuse.
    assert_eq!(cast(&off, &fp8(1)), cast(&on, &fp8(1)));
    // Eight: the weights' casts (forward quantisation and backward transpose, the only casts
    // of `k x n` elements) run for one of the eight.
    let (c_off, t_off) = cast(&off, &fp8(8));
    let (c_on, t_on) = cast(&on, &fp8(8));
    assert!(c_on < c_off && t_on < t_off);
    let weights = |t: &Training| {
        t.op_breakdown(&fp8(8))
            .unwrap()
            .into_iter()
            .filter(|o| o.part.starts_with("layer") && o.class == "cast")
            .map(|o| o.time.time.0 * o.count)
            .sum::<f64>()
    };
    let (w_off, w_on) = (weights(&off), weights(&on));
    assert!(w_on < w_off, "{w_on} {w_off}");
    // 16 bits: no casts, the same step.
    let bf16 = TrainingPlan {
        precision: perfcast_core::DType::Bf16,
        ..fp8(8)
    };
    assert_eq!(
        off.evaluate(&bf16).unwrap().iteration_time.0,
        on.evaluate(&bf16).unwrap().iteration_time.0
    );
    // The fast path agrees.
    let mut cache = LayerCache::new();
    for p in [fp8(8), fp8(2)] {
        let mut g = on.plan_group(&p, &mut cache).unwrap();
        let ri = on.recompute_names().iter().position(|r| *r == "none");
        let si = on
            .schedule_names()
            .iter()
            .position(|s| *s == p.schedule_name());
        g.set_variant(ri.unwrap(), None, si.unwrap()).unwrap();
        assert_eq!(on.evaluate(&p).unwrap().iteration_time.0, g.time().unwrap());
    }
    assert_eq!(cache.len(), 2);
}
