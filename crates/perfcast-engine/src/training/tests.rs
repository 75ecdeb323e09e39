//! Tests of the training model: the papers' formulas as data-driven tables, behaviour of each
//! strategy/policy/schedule through `evaluate`, and bad input.

use super::*;
use perfcast_core::registry::Registry;
use perfcast_core::{DType, ModelError, Seconds};
use std::sync::Arc;

use perfcast_core::hardware::{ComputeUnit, MemoryHierarchy};
use perfcast_core::op::ComputeOp;
use perfcast_core::workload::{FfnAct, ModelSpec};
use perfcast_core::{AttentionKind, Bandwidth, FlopRate, Interconnect, OpTime};
use perfcast_testkit::systems::{tier, TestGpu};
use perfcast_testkit::{a100_system, gpt};
use serde_json::json;

fn llama(l: u64, h: u64, a: u64, kv: u64, f: u64) -> ModelSpec {
    ModelSpec {
        kv_heads: Some(kv),
        ffn_hidden: f,
        ffn_act: FfnAct::Swiglu,
        vocab: 128256,
        seq_len: 8192,
        tied_embeddings: false,
        ..gpt(l, h, a)
    }
}

fn registry() -> Registry {
    perfcast_testkit::registry()
}

fn training(m: ModelSpec, devices: u32) -> Training {
    Training::new(m, a100_system(devices), &registry()).unwrap()
}

fn plan(tp: u32, pp: u32, dp: u32, mb: u32, gb: u32, recompute: &str) -> TrainingPlan {
    TrainingPlan {
        tp,
        pp,
        dp,
        micro_batch: mb,
        global_batch: gb,
        recompute: recompute.into(),
        attention: AttentionKind::Plain,
        ..TrainingPlan::default()
    }
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// Megatron parameter counts (Narayanan 2021 Table 1 / §5.1): 175B 174.6e9, 530B 529.6e9,
/// 1T 1008e9 within 0.1 %.
#[test]
fn parameter_counts() {
    // (L, h, a, published, tolerance): 22B is quoted to three digits only.
    let table = [
        (96, 12288, 96, 174.6e9, 1e-3),
        (105, 20480, 128, 529.6e9, 1e-3),
        (128, 25600, 160, 1008.0e9, 1e-3),
        (48, 6144, 64, 22.1e9, 3e-3),
    ];
    for (l, h, a, want, tol) in table {
        let p = gpt(l, h, a).params() as f64;
        assert!(close(p, want, tol), "L={l}: {p}");
    }
}

/// Seed digest §2.6 (Korthikanti 2022 Table 2 forms x in-flight micro-batches): first-stage
/// activation totals in GB, 1F1B, micro-batch 1 (4 for 22B), TP 8, s = 2048; and the model
/// states at 16 B/param over t·p devices.
#[test]
fn seed_digest_first_stage_table() {
    // (L, h, a, p, b, states GB, TP only, TP+SP, selective+SP, full+SP, full no SP)
    let table = [
        (48, 6144, 64, 1, 4, 44.1, 63.6, 42.5, 10.3, 0.6, 4.8),
        (96, 12288, 96, 8, 1, 43.7, 55.6, 34.4, 10.3, 0.6, 4.8),
        (105, 20480, 128, 35, 1, 30.3, 92.5, 54.0, 18.7, 1.1, 8.8),
        (128, 25600, 160, 64, 1, 31.5, 140.9, 82.2, 28.5, 1.7, 13.4),
    ];
    for (l, h, a, p, b, states, tp_only, tp_sp, sel_sp, full_sp, full) in table {
        let m = gpt(l, h, a);
        let st = m.params() as f64 * 16.0 / (8.0 * p as f64) / 1e9;
        assert!((st - states).abs() < 0.06, "L={l} states {st}");
        let t = training(m, 8 * p);
        let gb = b * p; // p micro-batches: the first stage fills up to p in flight
        let cases = [
            ("none", false, tp_only),
            ("none", true, tp_sp),
            ("selective", true, sel_sp),
            ("full", true, full_sp),
            ("full", false, full),
        ];
        for (policy, sp, want) in cases {
            let mut pl = plan(8, p, 1, b, gb, policy);
            pl.sp = sp;
            let r = t.evaluate(&pl).unwrap();
            // The table counts transformer layers only; the engine adds the input-embedding
            // dropout mask (1 byte per element of s·b·h, ÷t with SP) per micro-batch in flight.
            let split = if sp { 8.0 } else { 1.0 };
            let mask = p as f64 * 2048.0 * b as f64 * h as f64 / split;
            let got = (r.memory.first_stage.activations.0 - mask) / 1e9;
            assert!(
                (got - want).abs() < 0.051,
                "L={l} {policy} sp={sp}: {got} vs {want}"
            );
            assert_eq!(r.memory.first_stage.in_flight, p as f64);
        }
    }
}

/// Narayanan 2021 eq. 3 through `evaluate`: hardware FLOPs with full recompute, model FLOPs
/// with the 72 coefficient, MFU/HFU consistent with the iteration time.
#[test]
fn step_flops_and_utilisation() {
    let m = gpt(96, 12288, 96);
    let t = training(m, 1024);
    let (b, s, l, h, v) = (1536.0, 2048.0, 96.0, 12288.0, 51200.0);
    let eq3 = 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
    let f72 = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
    let r = t.evaluate(&plan(8, 16, 8, 1, 1536, "full")).unwrap();
    assert!(close(r.hardware_flops.0, eq3, 1e-12));
    assert!(close(r.model_flops.0, f72, 1e-12));
    let r0 = t.evaluate(&plan(8, 16, 8, 1, 1536, "none")).unwrap();
    assert!(close(r0.hardware_flops.0, f72, 1e-12));
    let mfu = f72 / (r.iteration_time.0 * 1024.0 * 312e12);
    assert!(close(r.mfu, mfu, 1e-12));
    assert!(close(r.hfu / r.mfu, eq3 / f72, 1e-12));
    assert!(close(r.tokens_per_s, b * s / r.iteration_time.0, 1e-12));
}

/// Ring all-reduce volume 2(p-1)/p: a TP-only layer's exposed TP time is 4 all-reduces of
/// b·s·h·2 bytes at (2(t-1)/t)·S/B + 2(t-1)·α on the NVLink level.
#[test]
fn tp_all_reduce_volume() {
    let m = gpt(4, 4096, 32);
    for tp in [2u32, 4, 8] {
        let t = training(m.clone(), tp);
        let r = t.evaluate(&plan(tp, 1, 1, 1, 1, "none")).unwrap();
        let s_bytes = 2048.0 * 4096.0 * 2.0;
        let p = tp as f64;
        // NCCL-style auto: the ring's bandwidth term, the lower of ring (2(p-1)) and tree
        // (2·log2 p) latency steps.
        let steps = (2.0 * (p - 1.0)).min(2.0 * p.log2().ceil());
        let one = 2.0 * (p - 1.0) / p * s_bytes / 240e9 + steps * 5e-6;
        let want_layer = 4.0 * one;
        let got_layer = (r.layer.forward.0 - r.layer.forward_compute.0)
            + (r.layer.backward.0 - r.layer.backward_compute.0);
        assert!(
            close(got_layer, want_layer, 1e-9),
            "tp={tp}: {got_layer} vs {want_layer}"
        );
    }
}

/// The breakdown adds up to the iteration time, and per-layer x layers x micro-batches is
/// the compute.
#[test]
fn breakdown_adds_up_for_every_policy_and_schedule() {
    let t = training(gpt(96, 12288, 96), 1024);
    for policy in ["none", "selective", "full"] {
        for (sched, vpp) in [("1f1b", 1), ("gpipe", 1), ("interleaved-1f1b", 2)] {
            let mut pl = plan(8, 16, 8, 1, 1536, policy);
            pl.schedule = Some(sched.into());
            pl.vpp = vpp;
            pl.sp = true;
            let r = t.evaluate(&pl).unwrap();
            assert!(
                close(r.breakdown.total().0, r.iteration_time.0, 1e-9),
                "{policy} {sched}"
            );
            r.check_finite().unwrap();
        }
    }
}

/// Recompute trades memory for time: none < selective < full in time, the reverse in memory;
/// full recompute reruns the forward (backward = bwd + fwd compute).
#[test]
fn recompute_policies_order() {
    let t = training(gpt(48, 6144, 64), 8);
    let ev = |p: &str| {
        let mut pl = plan(8, 1, 1, 4, 4, p);
        pl.sp = true;
        t.evaluate(&pl).unwrap()
    };
    let (n, s, f) = (ev("none"), ev("selective"), ev("full"));
    assert!(n.iteration_time.0 < s.iteration_time.0);
    assert!(s.iteration_time.0 < f.iteration_time.0);
    let act = |r: &TrainingReport| r.memory.first_stage.activations.0;
    assert!(act(&n) > act(&s) && act(&s) > act(&f));
    assert!(close(f.layer.recompute.0, f.layer.forward.0, 1e-9));
    assert_eq!(n.layer.recompute.0, 0.0);
    assert!(s.layer.recompute.0 > 0.0 && s.layer.recompute.0 < 0.2 * s.layer.forward.0);
    // Full recompute of only some layers lies in between.
    let mut pl = plan(8, 1, 1, 4, 4, "full");
    pl.sp = true;
    pl.recompute_layers = Some(24);
    let half = t.evaluate(&pl).unwrap();
    assert!(
        half.iteration_time.0 > n.iteration_time.0 && half.iteration_time.0 < f.iteration_time.0
    );
    assert!(act(&half) > act(&f) && act(&half) < act(&n));
}

/// Schedules: GPipe and 1F1B take the same time, GPipe holds all micro-batches; interleaving
/// shrinks the bubble by v and holds 1 + (p-1)/(p·v) times more.
#[test]
fn schedules_time_and_memory() {
    let t = training(gpt(96, 12288, 96), 512);
    let ev = |sched: &str, vpp: u32| {
        let mut pl = plan(8, 8, 8, 1, 512, "selective");
        pl.sp = true;
        pl.schedule = Some(sched.into());
        pl.vpp = vpp;
        t.evaluate(&pl).unwrap()
    };
    let (a, g, i) = (ev("1f1b", 1), ev("gpipe", 1), ev("interleaved-1f1b", 2));
    assert!(close(a.breakdown.bubble.0, g.breakdown.bubble.0, 1e-12));
    assert_eq!(g.memory.first_stage.in_flight, 64.0);
    assert_eq!(a.memory.first_stage.in_flight, 8.0);
    assert!(close(
        i.breakdown.bubble.0,
        a.breakdown.bubble.0 / 2.0,
        0.02
    ));
    assert!(close(
        i.memory.first_stage.in_flight,
        8.0 * (1.0 + 7.0 / 16.0),
        1e-12
    ));
    assert!(i.breakdown.pp_comm.0 > a.breakdown.pp_comm.0);
    // Bubble fraction (p-1)/m of the steady state.
    let steady = a.iteration_time.0
        - a.breakdown.bubble.0
        - a.breakdown.pp_comm.0
        - a.breakdown.dp_comm.0
        - a.breakdown.zero_comm.0
        - a.breakdown.optimizer.0;
    assert!(close(a.breakdown.bubble.0 / steady, 7.0 / 64.0, 1e-9));
    // Memory of stage i under 1F1B: p - i micro-batches.
    assert_eq!(a.memory.second_stage.unwrap().in_flight, 7.0);
    assert_eq!(a.memory.last_stage.in_flight, 1.0);
}

/// ZeRO shards the state (16 B/param -> 2 + 2 + 12/d, 2 + 14/d, 16/d) and trades the
/// all-reduce for reduce-scatter + all-gather; ZeRO-3 gathers weights per layer.
#[test]
fn zero_stages_shard_state() {
    let mut m = gpt(24, 2304, 24);
    let ev = |m: &ModelSpec, z: u8| {
        let t = training(m.clone(), 32);
        let mut pl = plan(1, 1, 32, 4, 512, "none");
        pl.zero_stage = z;
        pl.overlap_grad_reduce = false;
        pl.overlap_param_gather = false;
        t.evaluate(&pl).unwrap()
    };
    let r: Vec<TrainingReport> = (0..=3).map(|z| ev(&m, z)).collect();
    // Bytes per parameter: unsharded weights are 2 B per parameter.
    let params = r[0].memory.first_stage.weights.0 / 2.0;
    let per_param = |x: &TrainingReport| {
        let f = &x.memory.first_stage;
        (f.weights.0 + f.grads.0 + f.optimizer.0) / params
    };
    let want = [16.0, 4.0 + 12.0 / 32.0, 2.0 + 14.0 / 32.0, 16.0 / 32.0];
    for (z, w) in want.into_iter().enumerate() {
        assert!(
            close(per_param(&r[z]), w, 1e-12),
            "stage {z}: {}",
            per_param(&r[z])
        );
    }
    assert_eq!(r[0].breakdown.zero_comm.0, 0.0);
    assert!(r[1].breakdown.zero_comm.0 > 0.0);
    // Ring volumes: all-reduce = reduce-scatter + all-gather.
    let total = |x: &TrainingReport| x.breakdown.dp_comm.0 + x.breakdown.zero_comm.0;
    assert!(close(total(&r[1]), total(&r[0]), 0.05));
    // ZeRO-3 gathers each layer's weights per micro-batch: with little compute to hide
    // behind (short sequences) it costs far more than one gather per step.
    m.seq_len = 128;
    let (z1, z3) = (ev(&m, 1), ev(&m, 3));
    assert!(z3.breakdown.zero_comm.0 > 5.0 * z1.breakdown.zero_comm.0);
    assert!(z3.memory.first_stage.temp.0 > 0.0);
    // The (tied) embedding table is gathered once per micro-batch: a larger vocabulary adds
    // its gather to the exposed ZeRO time and its table to the gathered buffers.
    let mut big = m.clone();
    big.vocab *= 4;
    let zb = ev(&big, 3);
    // Per vocabulary entry: the bf16 table row (2h) and the fp32 logits of the loss (4bs).
    let dv = (big.vocab - m.vocab) as f64;
    let want = dv * (2.0 * m.hidden as f64 + 4.0 * 4.0 * m.seq_len as f64);
    let dt = zb.memory.first_stage.temp.0 - z3.memory.first_stage.temp.0;
    assert!(close(dt, want, 1e-9), "{dt} vs {want}");
    assert!(zb.breakdown.zero_comm.0 > z3.breakdown.zero_comm.0);
}

/// Context parallelism splits the sequence: per-layer compute drops about cp-fold, the ring
/// K/V exchange appears (and hides behind attention when it can).
#[test]
fn context_parallel() {
    let m = llama(32, 4096, 32, 8, 14336);
    let t1 = training(m.clone(), 8);
    let t4 = training(m, 32);
    let mut pl = plan(8, 1, 1, 1, 4, "none");
    pl.sp = true;
    pl.attention = AttentionKind::Flash;
    let r1 = t1.evaluate(&pl).unwrap();
    pl.cp = 4;
    let r4 = t4.evaluate(&pl).unwrap();
    let ratio = r1.layer.forward_compute.0 / r4.layer.forward_compute.0;
    assert!(ratio > 3.0 && ratio < 4.5, "{ratio}");
    // The optimizer state is sharded over dp x cp only with ZeRO; weights per device equal.
    assert!(close(
        r1.memory.first_stage.weights.0,
        r4.memory.first_stage.weights.0,
        1e-12
    ));
    assert!(r4.memory.first_stage.activations.0 < r1.memory.first_stage.activations.0 / 3.0);

    // All-gather K/V (Llama 3) instead of the ring: three exposed collectives of the whole
    // sequence's K/V per layer (forward gather, backward gather and gradient reduce-scatter)
    // and the gathered buffers in temporary memory.
    let ring_cp = r4.breakdown.cp_comm.0;
    pl.cp_comm = perfcast_core::parallel::CpComm::AllGather;
    let ag = t4.evaluate(&pl).unwrap();
    assert!(ag.breakdown.cp_comm.0 > ring_cp);
    assert!(ag.iteration_time.0 > r4.iteration_time.0);
    // K and V of the whole 8,192-token sequence, 1 KV head of 128 per TP rank, bf16; and
    // their gradients.
    let kv = 2.0 * 8192.0 * 128.0 * 2.0;
    let dt = ag.memory.first_stage.temp.0 - r4.memory.first_stage.temp.0;
    assert!(close(dt, 2.0 * kv, 1e-9), "{dt}");
}

/// fp8 (Transformer Engine): GEMMs at the fp8 peak, casts as extra vector work, fp8 weight
/// copies in memory; MFU against the fp8 peak.
/// The test device with a 624 TFLOP/s fp8 matrix engine and, when `row_ratio` is set,
/// row-scaled linears measured whole at that ratio (every shape it is asked kept).
struct Fp8Gpu {
    gpu: TestGpu,
    row_ratio: Option<f64>,
    asked: std::sync::Mutex<Vec<[u64; 3]>>,
}

impl Fp8Gpu {
    fn new(row_ratio: Option<f64>) -> Self {
        let gpu = TestGpu {
            matmul_efficiency: 0.7,
            launch_overhead: Seconds::ZERO,
        };
        let asked = Default::default();
        Fp8Gpu {
            gpu,
            row_ratio,
            asked,
        }
    }
}

impl ComputeUnit for Fp8Gpu {
    fn kind(&self) -> &str {
        "fp8-test"
    }
    fn peak(&self, e: perfcast_core::Engine, d: DType) -> Option<FlopRate> {
        match (e, d) {
            (perfcast_core::Engine::Matrix, DType::Fp8) => Some(FlopRate::from_tflops(624.0)),
            _ => self.gpu.peak(e, d),
        }
    }
    fn efficiency(&self, op: &ComputeOp) -> f64 {
        self.gpu.efficiency(op)
    }
    fn quantised_linear_ratio(
        &self,
        scaling: perfcast_core::op::GemmScaling,
        gemm: [u64; 3],
        _: &MemoryHierarchy,
    ) -> Result<Option<f64>, ModelError> {
        self.asked.lock().unwrap().push(gemm);
        let row = scaling == perfcast_core::op::GemmScaling::Row;
        Ok(self.row_ratio.filter(|_| row))
    }
}

#[test]
fn fp8_gemms() {
    let mut sys = a100_system(8);
    sys.compute = Arc::new(Fp8Gpu::new(None));
    let t = Training::new(gpt(8, 8192, 64), sys, &registry()).unwrap();
    let mut pl = plan(8, 1, 1, 1, 8, "none");
    pl.sp = true;
    let bf = t.evaluate(&pl).unwrap();
    pl.precision = DType::Fp8;
    let f8 = t.evaluate(&pl).unwrap();
    assert!(f8.breakdown.compute.gemm < 0.6 * bf.breakdown.compute.gemm);
    assert!(f8.breakdown.compute.cast > 0.0 && bf.breakdown.compute.cast == 0.0);
    assert_eq!(f8.peak_tflops, 624.0);
    assert!(f8.memory.first_stage.weights.0 > bf.memory.first_stage.weights.0);

    // Recipes: the default is delayed scaling; dynamic per-tensor scaling adds an amax pass,
    // row-wise scaling the column-wise re-quantisation of the weight-gradient operands (more
    // cast traffic), and per-tensor recipes all-gather the sequence-parallel inputs in fp8.
    use crate::training::Fp8Recipe;
    assert_eq!(pl.recipe(), Some(Fp8Recipe::Delayed));
    let cast = |r: Fp8Recipe| {
        let mut p = pl.clone();
        p.fp8_recipe = Some(r);
        let e = t.evaluate(&p).unwrap();
        (e.breakdown.compute.cast, e.breakdown.tp_comm.0)
    };
    let (delayed, tp_delayed) = cast(Fp8Recipe::Delayed);
    let (current, tp_current) = cast(Fp8Recipe::Current);
    let (rowwise, tp_rowwise) = cast(Fp8Recipe::Rowwise);
    assert!(close(delayed, f8.breakdown.compute.cast, 1e-12));
    assert!(
        delayed < current && current < rowwise,
        "{delayed} {current} {rowwise}"
    );
    assert!(close(tp_delayed, tp_current, 1e-12));
    assert!(tp_rowwise > tp_delayed, "{tp_rowwise} {tp_delayed}");
    // A recipe of another format than the plan's precision is refused, naming both.
    let mut p = pl.clone();
    p.fp8_recipe = Some(Fp8Recipe::Nvfp4);
    let e = t.evaluate(&p).unwrap_err().to_string();
    assert!(
        e.contains("plan.fp8_recipe") && e.contains("fp4") && e.contains("fp8"),
        "{e}"
    );
    // fp4 on a device without an fp4 path: the dtypes it has.
    p.precision = DType::Fp4;
    let e = t.evaluate(&p).unwrap_err().to_string();
    assert!(
        e.contains("plan.precision") && e.contains("have: bf16, fp16, fp8"),
        "{e}"
    );
}

/// A unit that has measured row-scaled linears whole (`quantised_linear_ratio`): each of
/// the layer's linears is booked at its ratio times its 16-bit GEMMs, its quantisation
/// included (no cast ops); other recipes are timed op by op; a framework that keeps its
/// projections apart is asked each projection's own shape.
#[test]
fn a_measured_quantised_linear_is_timed_whole() {
    use crate::training::Fp8Recipe;
    let (h, tp) = (8192u64, 8u64);
    let run = |projections: bool, recipe: Option<Fp8Recipe>| {
        let unit = Arc::new(Fp8Gpu::new(Some(1.5)));
        let mut sys = a100_system(8);
        sys.compute = unit.clone();
        let opts: TrainingOptions =
            serde_json::from_value(json!({"engine": {"fused": {"projections": projections}}}))
                .unwrap();
        let t = Training::with_options(gpt(8, h, 64), sys, &registry(), &opts).unwrap();
        let mut pl = plan(tp as u32, 1, 1, 1, 8, "none");
        pl.sp = true;
        if let Some(r) = recipe {
            pl.precision = DType::Fp8;
            pl.fp8_recipe = Some(r);
        }
        let lines = t.op_breakdown(&pl).unwrap();
        let layer = |class: &str| -> f64 {
            let of = |l: &&OpLine| l.part.starts_with("layer") && l.class == class;
            lines
                .iter()
                .filter(of)
                .map(|l| l.time.time.0 * l.count)
                .sum()
        };
        let asked = std::mem::take(&mut *unit.asked.lock().unwrap());
        (layer("gemm"), layer("cast"), asked)
    };
    let (bf16, _, _) = run(true, None);
    let (row, row_cast, asked) = run(true, Some(Fp8Recipe::Rowwise));
    assert!(close(row, 1.5 * bf16, 1e-12), "{row} {bf16}");
    assert_eq!(row_cast, 0.0);
    // Fused QKV (MHA: 3h / tp columns) among the shapes asked.
    assert!(
        asked.iter().any(|g| g[1] == 3 * h / tp && g[2] == h),
        "{asked:?}"
    );
    // Another recipe: not measured, its casts timed.
    let (_, delayed_cast, _) = run(true, Some(Fp8Recipe::Delayed));
    assert!(delayed_cast > 0.0);
    // Projections apart: the QKV GEMM is asked as three of h / tp columns, never fused.
    let (apart, _, asked) = run(false, Some(Fp8Recipe::Rowwise));
    assert!(close(apart, row, 1e-12), "{apart} {row}");
    assert!(asked.iter().all(|g| g[1] != 3 * h / tp), "{asked:?}");
    assert!(asked.iter().filter(|g| g[1] == h / tp && g[2] == h).count() >= 3);
}

/// A plan that does not fit is still evaluated, flagged, and says by how much.
#[test]
fn does_not_fit_is_flagged() {
    let t = training(gpt(96, 12288, 96), 8);
    let r = t.evaluate(&plan(8, 1, 1, 1, 8, "none")).unwrap();
    assert!(!r.memory.fits);
    assert_eq!(r.feasibility, Feasibility::ExceedsMemory);
    assert!(close(
        r.memory.shortfall.0,
        r.memory.peak.0 - r.memory.capacity.0,
        1e-12
    ));
    let ok = t.evaluate(&plan(8, 1, 1, 1, 8, "full")).unwrap();
    let _ = ok; // 175B on 8 GPUs does not fit even with full recompute (2.8 TB of state)
}

/// Uneven pipelines (Llama 3 405B: 126 layers on 16 stages) take the surplus from the first
/// and last stage.
#[test]
fn uneven_pipeline_stages() {
    let m = llama(126, 16384, 128, 8, 53248);
    let t = training(m, 8192);
    let mut pl = plan(8, 16, 64, 1, 2048, "none");
    pl.sp = true;
    pl.attention = AttentionKind::Flash;
    pl.zero_stage = 2;
    let r = t.evaluate(&pl).unwrap();
    let w = |s: &StageMemory| s.weights.0;
    let second = r.memory.second_stage.unwrap();
    assert!(w(&second) > 0.0);
    // 7 layers + embedding on stage 0, 8 layers on stage 1.
    assert!(r.memory.peak.0 >= second.total.0);
    assert!(r.breakdown.bubble.0 > 0.0);

    // Llama 3's interleaving: 128 chunks of one layer, the first holding only the embedding
    // and the last only the LM head (Dubey et al. 2024 §3.3.2). The bubble shrinks by about
    // v = 8; the busiest stage holds (2(p-2) + (v-1)p + 1)/v micro-batches of its 8 layers.
    pl.vpp = 8;
    pl.schedule = Some("interleaved-1f1b".into());
    let i = t.evaluate(&pl).unwrap();
    let ratio = r.breakdown.bubble.0 / i.breakdown.bubble.0;
    assert!((6.0..=8.5).contains(&ratio), "bubble ratio {ratio}");
    let second8 = i.memory.second_stage.unwrap();
    assert_eq!(second8.in_flight, (2.0 * 14.0 + 7.0 * 16.0 + 1.0) / 8.0);
    // The first stage's extra warm-up forwards are all in its embedding-only chunk: each of
    // its 7 layers holds 16 micro-batches. The last stage's head-only chunk runs first in the
    // backward, so one forward into a layer chunk precedes the first freed one: 113 / 7.
    assert_eq!(i.memory.first_stage.in_flight, 16.0);
    assert_eq!(i.memory.last_stage.in_flight, 113.0 / 7.0);
    assert!(second8.activations.0 > second.activations.0);
    // A ninth chunk per stage would leave more than the two end chunks without a layer.
    pl.vpp = 9;
    let e = t.evaluate(&pl).unwrap_err().to_string();
    assert!(e.contains("plan.pp") && e.contains("16 x 9"), "{e}");
}

/// Llama 3's flexible interleaving runs micro-batch counts Megatron's interleaving refuses
/// (24 on 16 stages: one round of 24), with the interleaved bubble.
#[test]
fn flexible_interleaving_any_micro_batch_count() {
    let t = training(gpt(96, 12288, 96), 1024);
    let mut pl = plan(8, 16, 8, 1, 24 * 8, "selective");
    pl.sp = true;
    pl.vpp = 2;
    pl.schedule = Some("interleaved-1f1b".into());
    let e = t.evaluate(&pl).unwrap_err().to_string();
    assert!(e.contains("plan.global_batch"), "{e}");
    pl.schedule = Some("flexible-interleaved-1f1b".into());
    let f = t.evaluate(&pl).unwrap();
    pl.vpp = 1;
    pl.schedule = Some("1f1b".into());
    let o = t.evaluate(&pl).unwrap();
    // Bubble (p - 1)/(v·m): half of 1F1B's with two chunks.
    let ratio = o.breakdown.bubble.0 / f.breakdown.bubble.0;
    assert!((1.8..=2.2).contains(&ratio), "{ratio}");
}

/// Each bad input names its key.
#[test]
fn bad_input_names_the_key() {
    let t = training(gpt(96, 12288, 96), 1024);
    type Mutate = fn(&mut TrainingPlan);
    let table: [(Mutate, &str); 17] = [
        (|p| p.tp = 0, "plan.tp"),
        (|p| p.tp = 7, "plan.tp"),
        (|p| p.micro_batch = 0, "plan.micro_batch"),
        (|p| p.global_batch = 0, "plan.global_batch"),
        (|p| p.global_batch = 1537, "plan.global_batch"),
        (|p| p.dp = 4, "plan.tp*pp*dp*cp"),
        (
            |p| {
                p.pp = 128;
                p.dp = 1
            },
            "plan.pp",
        ),
        (|p| p.vpp = 7, "plan.pp"),
        (|p| p.vpp = 0, "plan.vpp"),
        (|p| p.ep = 2, "plan.ep"),
        (|p| p.zero_stage = 5, "plan.zero_stage"),
        (|p| p.recompute = "sometimes".into(), "plan.recompute"),
        (|p| p.schedule = Some("zigzag".into()), "plan.schedule"),
        (|p| p.vpp = 2, "plan.vpp"),
        (|p| p.precision = DType::Int4, "plan.precision"),
        (
            |p| {
                p.cp = 3;
                p.dp = 1;
                p.pp = 1;
                p.tp = 8
            },
            "plan",
        ),
        (|p| p.recompute_layers = Some(3), "plan.recompute_layers"),
    ];
    for (i, (mutate, key)) in table.into_iter().enumerate() {
        let mut pl = plan(8, 16, 8, 1, 1536, "none");
        pl.schedule = Some("1f1b".into());
        mutate(&mut pl);
        let e = t.evaluate(&pl).unwrap_err().to_string();
        assert!(e.contains(key), "case {i}: {e}");
    }
    // A precision the device has no peak for.
    let mut pl = plan(8, 16, 8, 1, 1536, "none");
    pl.precision = DType::Fp8;
    let e = t.evaluate(&pl).unwrap_err().to_string();
    assert!(e.contains("plan.precision") && e.contains("bf16"), "{e}");
    // Unknown names list the registered ones.
    let mut pl = plan(8, 16, 8, 1, 1536, "sometimes");
    let e = t.evaluate(&pl).unwrap_err().to_string();
    assert!(e.contains("selective") && e.contains("full"), "{e}");
    pl.recompute = "none".into();
    pl.schedule = Some("zigzag".into());
    let e = t.evaluate(&pl).unwrap_err().to_string();
    assert!(e.contains("interleaved-1f1b") && e.contains("gpipe"), "{e}");
    // Model and system errors at construction.
    let mut bad = gpt(96, 12288, 96);
    bad.hidden = 0;
    let e = Training::new(bad, a100_system(8), &registry())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("model.hidden"), "{e}");
    let mut sys = a100_system(8);
    sys.memory = MemoryHierarchy::new(vec![tier(
        "sram",
        json!({"capacity_mb": 40.0 * 1.048576, "bandwidth_tbs": 7.0, "efficiency": 1.0}),
    )]);
    let e = Training::new(gpt(2, 64, 4), sys, &registry())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("system.memory"), "{e}");
    let mut sys = a100_system(16);
    sys.network = vec![];
    assert!(Training::new(gpt(2, 64, 4), sys, &registry()).is_err());
    // A level answering NaN, as a dynamic plugin might (the built-ins check their parameters).
    struct NanLink;
    impl Interconnect for NanLink {
        fn kind(&self) -> &str {
            "nan-link"
        }
        fn domain_size(&self) -> u32 {
            8
        }
        fn bandwidth(&self) -> Bandwidth {
            Bandwidth(f64::NAN)
        }
        fn latency(&self) -> Seconds {
            Seconds::from_micros(1.0)
        }
    }
    let mut sys = a100_system(16);
    sys.network = vec![Arc::new(NanLink) as Arc<dyn Interconnect>];
    assert!(Training::new(gpt(2, 64, 4), sys, &registry()).is_err());
}

/// A device model that returns NaN never reaches a report.
#[test]
fn nan_from_a_plugin_is_an_error() {
    struct Broken;
    impl ComputeUnit for Broken {
        fn kind(&self) -> &str {
            "broken"
        }
        fn peak(&self, _: perfcast_core::Engine, _: DType) -> Option<FlopRate> {
            Some(FlopRate::from_tflops(100.0))
        }
        fn op_time(&self, op: &ComputeOp, _: &MemoryHierarchy) -> Result<OpTime, ModelError> {
            Ok(OpTime {
                time: Seconds(f64::NAN),
                compute: Seconds(f64::NAN),
                memory: Seconds::ZERO,
                overhead: Seconds::ZERO,
                bound: perfcast_core::TimeBound::Compute,
                flops: op.flops(),
                device_bytes: op.min_bytes(),
            })
        }
    }
    let mut sys = a100_system(8);
    sys.compute = Arc::new(Broken);
    let t = Training::new(gpt(8, 1024, 16), sys, &registry()).unwrap();
    let e = t.evaluate(&plan(8, 1, 1, 1, 1, "none")).unwrap_err();
    assert!(matches!(e, ModelError::NonFinite { .. }), "{e}");
}

/// JSON round-trips (the text renderings are `perfcast_report::training`'s, tested there).
#[test]
fn json_rendering() {
    let t = training(gpt(96, 12288, 96), 1024);
    let r = t.evaluate(&plan(8, 16, 8, 1, 1536, "full")).unwrap();
    let json = serde_json::to_value(r).unwrap();
    assert!(
        json["memory"]["first_stage"]["activations"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(json["bottleneck"], "matrix_compute");
}

/// Plans deserialise with defaults and reject unknown keys.
#[test]
fn plan_serde() {
    let p: TrainingPlan = serde_json::from_value(serde_json::json!({
        "tp": 8, "pp": 2, "global_batch": 64, "recompute": "selective", "precision": "fp8"
    }))
    .unwrap();
    assert_eq!((p.dp, p.vpp, p.micro_batch), (1, 1, 1));
    assert_eq!(p.schedule_name(), "1f1b");
    assert_eq!(p.precision, DType::Fp8);
    let e =
        serde_json::from_value::<TrainingPlan>(serde_json::json!({"global_batch": 1, "tpp": 2}))
            .unwrap_err()
            .to_string();
    assert!(e.contains("tpp"), "{e}");
    let v: TrainingPlan =
        serde_json::from_value(serde_json::json!({"global_batch": 8, "vpp": 2})).unwrap();
    assert_eq!(v.schedule_name(), "interleaved-1f1b");
}

/// Korthikanti 2022 Table 4 (22B, TP 8, b = 4, per-layer ms on A100) with the test device:
/// forward 7.7, backward 11.9 (no recompute); full recompute adds about one forward. The test
/// device is uncalibrated: this checks shape (ratios), not the calibration.
#[test]
fn korthikanti_table4_shape() {
    let t = training(gpt(48, 6144, 64), 8);
    let r = t.evaluate(&plan(8, 1, 1, 4, 4, "none")).unwrap();
    let (f, b) = (r.layer.forward.millis(), r.layer.backward.millis());
    assert!(f > 4.0 && f < 12.0, "{f}");
    assert!(b / f > 1.5 && b / f < 2.2, "{}", b / f);
    let full = t.evaluate(&plan(8, 1, 1, 4, 4, "full")).unwrap();
    let extra = full.layer.backward.millis() - b;
    assert!(close(extra, f, 1e-9), "{extra} vs {f}");
}

/// Strategy parameters reach the plugins; unknown names and bad values are errors.
#[test]
fn options_configure_strategies() {
    let m = gpt(24, 2304, 24);
    let ev = |opts: &TrainingOptions| {
        let t = Training::with_options(m.clone(), a100_system(32), &registry(), opts)?;
        let mut pl = plan(1, 1, 32, 4, 512, "none");
        pl.overlap_grad_reduce = true;
        t.evaluate(&pl)
    };
    let base = ev(&TrainingOptions::default()).unwrap();
    let opts: TrainingOptions = serde_json::from_value(serde_json::json!({
        "strategy_params": {"data": {"overlap_efficiency": 0.01}},
        "engine": {"runtime_reserve_gib": 2.0}
    }))
    .unwrap();
    let low = ev(&opts).unwrap();
    assert!(low.breakdown.dp_comm.0 > base.breakdown.dp_comm.0);
    assert!(close(
        low.memory.peak.0 - base.memory.peak.0,
        Bytes::from_gib(1.0).0,
        1e-9
    ));
    let bad: TrainingOptions = serde_json::from_value(serde_json::json!({
        "strategy_params": {"dataa": {}}
    }))
    .unwrap();
    let e = ev(&bad).unwrap_err().to_string();
    assert!(e.contains("options.strategy_params.dataa"), "{e}");
    let bad: TrainingOptions = serde_json::from_value(serde_json::json!({
        "strategy_params": {"data": {"overlap_efficiency": 2.0}}
    }))
    .unwrap();
    assert!(ev(&bad)
        .unwrap_err()
        .to_string()
        .contains("overlap_efficiency"));
    assert!(serde_json::from_value::<TrainingOptions>(serde_json::json!({"engin": {}})).is_err());
}

/// `memory` (for pruning) gives the same numbers as a full evaluation, and the same errors.
#[test]
fn memory_only_matches_evaluate() {
    let t = training(gpt(96, 12288, 96), 1024);
    for (policy, vpp, sp) in [
        ("none", 1, false),
        ("selective", 2, true),
        ("full", 3, true),
    ] {
        let mut pl = plan(8, 16, 8, 1, 1536, policy);
        pl.vpp = vpp;
        pl.sp = sp;
        pl.zero_stage = 1;
        let full = t.evaluate(&pl).unwrap().memory;
        assert_eq!(t.memory(&pl).unwrap(), full, "{policy} vpp={vpp}");
    }
    let e = t.memory(&plan(7, 16, 8, 1, 1536, "none")).unwrap_err();
    assert!(e.to_string().contains("plan.tp"), "{e}");
}

/// Megatron-Core's overlapped hand-offs (`pipeline.overlap_p2p`) hide them behind compute in
/// interleaved schedules; blocking hand-offs (the default) stay exposed.
#[test]
fn overlapped_p2p_in_interleaved_schedules() {
    let m = gpt(96, 12288, 96);
    let ev = |overlap: bool| {
        let opts: TrainingOptions = serde_json::from_value(serde_json::json!({
            "strategy_params": {"pipeline": {"overlap_p2p": overlap}}
        }))
        .unwrap();
        let t = Training::with_options(m.clone(), a100_system(1024), &registry(), &opts).unwrap();
        let mut pl = plan(8, 16, 8, 1, 1536, "selective");
        pl.sp = true;
        pl.vpp = 3;
        t.evaluate(&pl).unwrap()
    };
    let (blocking, overlapped) = (ev(false), ev(true));
    assert!(blocking.breakdown.pp_comm.0 > 0.0);
    assert!(overlapped.breakdown.pp_comm.0 < 0.5 * blocking.breakdown.pp_comm.0);
    assert!(overlapped.iteration_time.0 < blocking.iteration_time.0);
}

/// The op breakdown lists each op of the program with its time and bound; its layer parts add
/// up to the per-layer compute of the report.
#[test]
fn op_breakdown_adds_up() {
    let t = training(gpt(48, 6144, 64), 8);
    let pl = plan(8, 1, 1, 4, 4, "none");
    let ops = t.op_breakdown(&pl).unwrap();
    let r = t.evaluate(&pl).unwrap();
    let part = |name: &str| -> f64 {
        ops.iter()
            .filter(|o| o.part == name)
            .map(|o| o.time.time.0 * o.count)
            .sum()
    };
    assert!(close(
        part("layer forward"),
        r.layer.forward_compute.0,
        1e-12
    ));
    assert!(close(
        part("layer backward"),
        r.layer.backward_compute.0,
        1e-12
    ));
    assert!(part("head forward") > 0.0 && part("optimizer") > 0.0);
    // The big GEMMs are compute-bound; the pointwise ops are not.
    let gemm = ops.iter().find(|o| o.class == "gemm").unwrap();
    assert_eq!(gemm.time.bound, perfcast_core::TimeBound::Compute);
    let norm = ops.iter().find(|o| o.class == "norm").unwrap();
    assert!(matches!(
        norm.time.bound,
        perfcast_core::TimeBound::Memory(_)
    ));
    assert!(serde_json::to_string(&ops)
        .unwrap()
        .contains("layer backward"));
}

/// `fsdp` in place of `zero`: without resharding after the forward, ZeRO-3 gathers each
/// layer's weights once per micro-batch instead of twice.
#[test]
fn fsdp_without_resharding_gathers_once() {
    let mut m = gpt(24, 2304, 24);
    m.seq_len = 128; // little compute to hide the gathers behind
    let ev = |reshard: bool| {
        let opts: TrainingOptions = serde_json::from_value(serde_json::json!({
            "strategies": ["tensor", "sequence", "context", "pipeline", "data", "fsdp"],
            "strategy_params": {"fsdp": {"reshard_after_forward": reshard}}
        }))
        .unwrap();
        let t = Training::with_options(m.clone(), a100_system(32), &registry(), &opts).unwrap();
        let mut pl = plan(1, 1, 32, 4, 512, "none");
        pl.zero_stage = 3;
        t.evaluate(&pl).unwrap()
    };
    let (full_shard, no_reshard) = (ev(true), ev(false));
    let z = |r: &TrainingReport| r.breakdown.zero_comm.0;
    assert!(
        close(z(&no_reshard), z(&full_shard) / 2.0, 0.05),
        "{} vs {}",
        z(&no_reshard),
        z(&full_shard)
    );
}

/// Extreme sizes give errors or finite reports, never a panic (overflow) or NaN.
#[test]
fn extreme_sizes_never_panic() {
    let mut m = llama(2, 4096, 32, 8, 14336);
    m.seq_len = 1 << 20;
    let t = training(m, 8);
    for mb in [1u32, 1024, u32::MAX] {
        let mut pl = plan(8, 1, 1, mb, mb, "full");
        pl.attention = AttentionKind::Flash;
        match t.evaluate(&pl) {
            Ok(r) => r.check_finite().unwrap(),
            Err(e) => assert!(e.to_string().contains("plan.micro_batch"), "{e}"),
        }
    }
    let huge = gpt(2, 1 << 30, 1 << 20);
    let e = Training::new(huge, a100_system(8), &registry())
        .err()
        .unwrap();
    assert!(e.to_string().contains("model.hidden"), "{e}");
    // The count is given in scientific notation, not 20 digits and more.
    let e = e.to_string();
    assert!(
        !e.split(|c: char| !c.is_ascii_digit()).any(|w| w.len() > 12),
        "{e}"
    );
    let mut wide = gpt(2, 4096, 32);
    wide.vocab = 1 << 40;
    let t = training(wide, 8);
    let e = t.evaluate(&plan(8, 1, 1, 4096, 4096, "none")).unwrap_err();
    assert!(e.to_string().contains("plan.micro_batch"), "{e}");
}

/// A `Training` is shared across threads by the plan search.
#[test]
fn training_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Training>();
    check::<TrainingReport>();
    check::<TrainingPlan>();
}

/// Every stage's memory: 1F1B stage i holds p - i micro-batches; the report's first, second
/// and last stages are among them and the peak is their maximum.
#[test]
fn memory_per_stage_table() {
    let t = training(gpt(96, 12288, 96), 1024);
    let mut pl = plan(8, 16, 8, 1, 1536, "selective");
    pl.sp = true;
    let stages = t.memory_per_stage(&pl).unwrap();
    assert_eq!(stages.len(), 16);
    for (i, st) in stages.iter().enumerate() {
        assert_eq!(st.stage as usize, i);
        assert_eq!(st.in_flight, (16 - i) as f64);
    }
    let r = t.memory(&pl).unwrap();
    assert_eq!(stages[0], r.first_stage);
    assert_eq!(Some(stages[1]), r.second_stage);
    assert_eq!(stages[15], r.last_stage);
    let max = stages.iter().map(|s| s.total.0).fold(0.0, f64::max);
    assert_eq!(max, r.peak.0);
}

/// Many pseudo-random plans (a fixed LCG, so the test is deterministic): each is either a
/// finite report whose breakdown adds up and whose `memory()` agrees, or an error naming a
/// key. Never a panic.
#[test]
fn random_plans_are_reports_or_named_errors() {
    let models = [gpt(24, 2304, 24), llama(32, 4096, 32, 8, 14336), {
        let mut m = gpt(12, 1024, 16);
        m.ffn_act = FfnAct::Relu2;
        m.tied_embeddings = false;
        m
    }];
    let pick = |state: &mut u64, options: &[u32]| -> u32 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        options[((*state >> 33) % options.len() as u64) as usize]
    };
    let mut state = 42u64;
    let (mut ok, mut err) = (0, 0);
    for m in &models {
        let t = training(m.clone(), 64);
        for _ in 0..150 {
            let tp = pick(&mut state, &[1, 2, 4, 8, 3]);
            let cp = pick(&mut state, &[1, 1, 2]);
            let pp = pick(&mut state, &[1, 2, 4, 8]);
            let dp = (64 / (tp * cp * pp)).max(1);
            let mut pl = plan(tp, pp, dp, pick(&mut state, &[1, 2, 4]), 0, "none");
            pl.cp = cp;
            pl.global_batch = pl.micro_batch * dp * pick(&mut state, &[1, 4, 16, 7]);
            pl.vpp = pick(&mut state, &[1, 1, 2, 3]);
            pl.sp = pick(&mut state, &[0, 1]) == 1;
            pl.zero_stage = pick(&mut state, &[0, 1, 2, 3]) as u8;
            pl.recompute =
                ["none", "selective", "full"][pick(&mut state, &[0, 1, 2]) as usize].into();
            pl.attention = if pick(&mut state, &[0, 1]) == 1 {
                AttentionKind::Flash
            } else {
                AttentionKind::Plain
            };
            pl.schedule = Some(
                [
                    "1f1b",
                    "gpipe",
                    "interleaved-1f1b",
                    "flexible-interleaved-1f1b",
                ][pick(&mut state, &[0, 1, 2, 3]) as usize]
                    .into(),
            );
            if pick(&mut state, &[0, 1]) == 1 {
                pl.cp_comm = perfcast_core::parallel::CpComm::AllGather;
            }
            match t.evaluate(&pl) {
                Ok(r) => {
                    ok += 1;
                    r.check_finite().unwrap();
                    assert!(
                        close(r.breakdown.total().0, r.iteration_time.0, 1e-9),
                        "{pl:?}"
                    );
                    assert_eq!(t.memory(&pl).unwrap(), r.memory);
                }
                Err(e) => {
                    err += 1;
                    let s = e.to_string();
                    assert!(s.contains("plan") || s.contains("model."), "{pl:?}: {s}");
                }
            }
        }
    }
    assert!(ok > 50 && err > 50, "ok {ok}, err {err}");
}

/// `memory_floor` is below the peak memory of plans of every shape, and close to it for the
/// most-sharded one (ZeRO-3 over every device, full recompute, micro-batch 1).
#[test]
fn memory_floor_is_below_every_plan() {
    let t = training(gpt(8, 2048, 16), 8);
    let floor = t.memory_floor(8, Task::Pretrain).0;
    let lora_floor = t.memory_floor(8, Task::Lora).0;
    assert!(lora_floor < floor);
    for (tp, pp, dp, zero) in [
        (1, 1, 8, 3),
        (2, 2, 2, 3),
        (8, 1, 1, 0),
        (1, 8, 1, 0),
        (2, 1, 4, 1),
    ] {
        let p = TrainingPlan {
            zero_stage: zero,
            ..plan(tp, pp, dp, 1, 8, "full")
        };
        let m = t.memory(&p).unwrap().peak.0;
        assert!(floor <= m, "{tp} {pp} {dp} {zero}: floor {floor} > {m}");
        let lora = TrainingPlan {
            task: Task::Lora,
            ..p.clone()
        };
        let lm = t.memory(&lora).unwrap().peak.0;
        assert!(
            lora_floor <= lm,
            "{tp} {pp} {dp} {zero}: LoRA floor {lora_floor} > {lm}"
        );
        if zero == 3 && tp == 1 {
            assert!(floor > 0.5 * m, "floor {floor} far below {m}");
        }
    }
}
