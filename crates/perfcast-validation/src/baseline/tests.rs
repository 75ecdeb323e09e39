use super::*;

/// A file of one case: `model`, `system`, `parallel`, `run` and `measured` are the bodies of
/// those tables (`run` of `[case.training]` or `[case.inference]` by `kind`).
fn case(kind: &str, model: &str, system: &str, parallel: &str, run: &str, measured: &str) -> Case {
    let text = format!(
        "[meta]\nschema = \"perfcast-validation/1\"\n[[case]]\nid = \"c\"\nkind = \"{kind}\"\n\
         group = \"g\"\nsource = \"test\"\n[case.model]\n{model}\n[case.system]\n{system}\n\
         [case.parallel]\n{parallel}\n[case.{kind}]\n{run}\n[case.measured]\n{measured}\n"
    );
    CasesFile::parse(&text, "test.toml")
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .cases
        .remove(0)
}

/// A dense model of `P_mm` = 12 h^2 per layer (h = 1024, MHA, gelu 4h) and no logits to speak
/// of (vocab 1): 2 layers.
const MODEL: &str = "name = \"m\"\nlayers = 2\nhidden = 1024\nheads = 8\nkv_heads = 8\n\
                     ffn_hidden = 4096\nffn_act = \"gelu\"\nvocab = 1\nseq_len = 1024";

fn training_case(parallel: &str, gpus: u64, precision: &str, gpu: &str) -> Case {
    case(
        "training",
        MODEL,
        &format!("gpu = \"{gpu}\"\nnum_gpus = {gpus}\ngpus_per_node = 8"),
        parallel,
        &format!("recompute = \"none\"\nprecision = \"{precision}\"\noptimizer = \"adam\""),
        "iteration_time_s = 1.0",
    )
}

/// A `[case.parallel]` body: TP, PP and DP degrees and the global batch, micro-batches of 1,
/// nothing else split.
fn plan(tp: u64, pp: u64, dp: u64, global_batch: u64) -> String {
    format!(
        "tp = {tp}\npp = {pp}\ndp = {dp}\ncp = 1\nep = 1\nsp = false\nvpp = 1\nzero_stage = 0\n\
         micro_batch = 1\nglobal_batch = {global_batch}"
    )
}

fn params(e16: f64, e8: f64, net: f64) -> Params {
    [e16, e8, 0.3, 0.8, net, 0.0]
}

/// One GPU, no communication: the step is its FLOPs at the efficiency of its precision, on
/// the catalog's peak (A100: 312 TFLOP/s bf16, no FP8, so FP8 runs at 16 bits there; H100:
/// 989.4 bf16, 1978.9 fp8).
#[test]
fn a_training_step_is_its_flops_at_the_precisions_efficiency() {
    let table: &[(&str, &str, f64, f64)] = &[
        // (gpu, precision, peak TFLOP/s, efficiency used)
        ("A100-SXM4-80GB", "bf16", 312.0, 0.5),
        ("A100-SXM4-80GB", "fp8", 312.0, 0.5),
        ("H100-SXM5-80GB", "bf16", 989.4, 0.5),
        ("H100-SXM5-80GB", "fp8", 1978.9, 0.25),
    ];
    for &(gpu, precision, peak, e) in table {
        let c = training_case(&plan(1, 1, 1, 8), 1, precision, gpu);
        let s = Shape::of(&c).unwrap();
        let Body::Training(t) = &s.body else { panic!() };
        let want = t.flops_per_gpu / (peak * 1e12 * e);
        let got = s.predict(&params(0.5, 0.25, 0.5)).unwrap();
        assert!(
            (got / want - 1.0).abs() < 1e-12,
            "{gpu} {precision}: {got} vs {want}"
        );
        // 6 x tokens x P_mm + attention: 8 x 1024 tokens, P_mm = 2 x 12 x 1024^2 (+ 1024 of
        // the unit vocabulary), the attention's full score matrix counted (the source's
        // convention, non-causal by default, and the baseline's work whatever it is).
        let pmm = 2.0 * 12.0 * 1024.0f64.powi(2) + 1024.0;
        let attn = 2.0 * 2.0 * 1024.0 * 8.0 * 256.0;
        assert!((t.f_hw / (8.0 * 1024.0 * (6.0 * pmm + 3.0 * attn)) - 1.0).abs() < 1e-12);
        assert_eq!(t.flops_per_gpu, t.f_hw);
    }
}

/// The bubble and the collectives, each alone: (parallel, gpus, predicted step / one GPU's
/// compute share, or the communication term in seconds).
#[test]
fn the_bubble_and_ring_collectives_add_to_the_compute() {
    let p = params(0.5, 0.25, 0.5);
    let compute = |c: &Case| {
        let Body::Training(t) = &Shape::of(c).unwrap().body else {
            panic!()
        };
        (
            t.flops_per_gpu / (312e12 * 0.5),
            t.exposed_s + t.gradients_s,
        )
    };
    // PP 2 with 8 micro-batches: (2 - 1) / 8 of the compute on top.
    let pp = training_case(&plan(1, 2, 1, 8), 2, "bf16", "A100-SXM4-80GB");
    let (c, comm) = compute(&pp);
    assert_eq!(comm, 0.0);
    let got = Shape::of(&pp).unwrap().predict(&p).unwrap();
    assert!((got / (c * (1.0 + 1.0 / 8.0)) - 1.0).abs() < 1e-12);
    // TP 2 on NVLink (300 GB/s a direction): 4 all-reduces per layer and micro-batch of
    // 1024 tokens x 1024 x 2 bytes, each 2 (2-1)/2 = 1 times its size on the ring.
    let tp = training_case(&plan(2, 1, 1, 8), 2, "bf16", "A100-SXM4-80GB");
    let (_, comm) = compute(&tp);
    let want = 2.0 * 8.0 * 4.0 * (1024.0 * 1024.0 * 2.0) / 300e9;
    assert!((comm / want - 1.0).abs() < 1e-12, "{comm} vs {want}");
    // DP 16 over two nodes: the gradients (2 bytes a parameter) reduced in each node over
    // NVLink, then each node's eighth between the two nodes on the 200 Gb/s NICs.
    let dp = training_case(&plan(1, 1, 16, 16), 16, "bf16", "A100-SXM4-80GB");
    let (_, comm) = compute(&dp);
    let pmm = 2.0 * 12.0 * 1024.0f64.powi(2) + 1024.0;
    let g = 2.0 * pmm;
    let want = 2.0 * 7.0 / 8.0 * g / 300e9 + g / 8.0 / 25e9;
    assert!((comm / want - 1.0).abs() < 1e-12, "{comm} vs {want}");
}

/// Decode at batch 1 reads the weights and the KV cache: memory-bound, so TPOT is the bytes
/// over the bandwidth at its efficiency, plus the step cost; prefill of 1,024 tokens is
/// compute-bound.
#[test]
fn an_inference_step_is_the_larger_of_its_flops_and_its_bytes() {
    let c = case(
        "inference",
        MODEL,
        "gpu = \"H100-SXM5-80GB\"\nnum_gpus = 1\ngpus_per_node = 8",
        "tp = 1\npp = 1\ndp = 1",
        "batch = 1\ninput_len = 1024\noutput_len = 3\nprecision = \"bf16\"\nmode = \"static\"",
        "tpot_ms = 1.0",
    );
    let s = Shape::of(&c).unwrap();
    assert_eq!(s.metric, Metric::TpotMs);
    let p: Params = [0.5, 0.5, 0.5, 0.8, 1.0, 0.01];
    let pmm = 2.0 * 12.0 * 1024.0f64.powi(2) + 1024.0;
    // KV: 2 layers x 2 x 8 heads x 128 x 2 bytes per token, at the mean context 1024 + 1.5.
    let kv = 2.0 * 2.0 * 8.0 * 128.0 * 2.0 * 1025.5;
    let want = (pmm * 2.0 + kv) / (3.35e12 * 0.8) * 1e3 + 0.01;
    let got = s.predict(&p).unwrap();
    assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    let Body::Inference(i) = &s.body else {
        panic!()
    };
    let prefill = i.step(&i.prefill, 1.0, 1024.0, &p);
    let want = i.prefill[0] / (989.4e12 * 0.5) + 1e-5;
    assert!((prefill / want - 1.0).abs() < 1e-12, "{prefill} vs {want}");
}

/// Fitting recovers parameters from measurements the baseline itself made (the public
/// file's covered cases, with every parameter reached), to the objective's floor.
#[test]
fn the_fit_recovers_parameters_it_generated() {
    let file = CasesFile::parse(crate::BUILTIN_CASES, "cases.toml").unwrap();
    let truth: Params = [0.55, 0.4, 0.3, 0.75, 0.5, 0.2];
    let shapes: Vec<Shape> = file
        .cases
        .iter()
        .filter_map(Shape::of)
        .filter(|s| !s.group.starts_with("aic-sample"))
        .filter_map(|mut s| {
            s.measured = s.predict(&truth)?;
            Some(s)
        })
        .collect();
    assert!(shapes.len() > 300, "{}", shapes.len());
    let refs: Vec<&Shape> = shapes.iter().collect();
    let fitted = fit(&refs);
    assert!(objective(&refs, &fitted) < 2e-3, "{fitted:?}");
    for (i, (name, ..)) in PARAMS.iter().enumerate().take(5) {
        assert!(
            (fitted[i] / truth[i] - 1.0).abs() < 0.05,
            "{name}: {fitted:?}"
        );
    }
}

/// The baseline covers what it has a formula for: every training case whose first metric is
/// a time, a rate or a utilisation, on a catalogued accelerator; a case whose first metric
/// is a per-layer time is not covered.
#[test]
fn coverage_of_the_public_file() {
    let file = CasesFile::parse(crate::BUILTIN_CASES, "cases.toml").unwrap();
    let p: Params = PARAMS.map(|(_, v, ..)| v);
    let covered = |kind: Kind| {
        file.cases
            .iter()
            .filter(|c| c.kind == kind)
            .filter(|c| Shape::of(c).and_then(|s| s.predict(&p)).is_some())
            .count()
    };
    let training = file
        .cases
        .iter()
        .filter(|c| c.kind == Kind::Training)
        .count();
    assert!(
        covered(Kind::Training) * 10 >= training * 9,
        "{} of {training}",
        covered(Kind::Training)
    );
    assert!(covered(Kind::Inference) > 1500);
    let layer = file
        .cases
        .iter()
        .find(|c| c.group == "korthikanti2022-table4")
        .unwrap();
    assert!(Shape::of(layer).is_none());
}

/// perfcast beside the baseline: MAPEs over the cases both score, counts of each.
#[test]
fn the_comparison_is_over_the_cases_both_score() {
    let case = |id: &str, group: &str, b: f64, logo: f64| BaselineCase {
        id: id.into(),
        group: group.into(),
        kind: Kind::Training,
        metric: "iteration_time_s".into(),
        measured: 1.0,
        in_sample: b,
        leave_group_out: logo,
    };
    let run = BaselineRun {
        params: BTreeMap::new(),
        cases: vec![
            case("a", "g", 0.2, -0.3),
            case("b", "g", -0.1, 0.1),
            case("c", "h", 0.5, 0.5),
        ],
    };
    let perfcast = HashMap::from([("a", 0.1), ("d", 0.4), ("c", -0.2)]);
    let cases = [
        ("a", "g", Kind::Training),
        ("b", "g", Kind::Training),
        ("c", "h", Kind::Training),
        ("d", "h", Kind::Training),
    ];
    let c = compare(&perfcast, &cases, &run);
    let g = &c.groups["g"];
    assert_eq!((g.perfcast_scored, g.baseline_scored, g.both), (1, 2, 1));
    assert_eq!(
        (
            g.perfcast_mape,
            g.baseline_mape,
            g.baseline_leave_group_out_mape
        ),
        (Some(0.1), Some(0.2), Some(0.3))
    );
    let o = &c.overall;
    assert_eq!((o.perfcast_scored, o.baseline_scored, o.both), (3, 3, 2));
    assert!((o.baseline_mape.unwrap() - 0.35).abs() < 1e-12);
    assert_eq!(c.inference, Versus::default());
}

/// One group's run is fitted as the whole file's (the same parameters) and reports that
/// group's cases alone, each refitted without the group.
#[test]
fn a_groups_run_is_fitted_on_the_whole_file() {
    let file = CasesFile::parse(crate::BUILTIN_CASES, "cases.toml").unwrap();
    let fitted_on = |id: &str| !id.starts_with("aic_");
    let group = "narayanan2021-table1";
    let one = run(&file, Some(group), &fitted_on);
    let all = run(&file, None, &fitted_on);
    assert_eq!(one.params, all.params);
    assert_eq!(one.cases.len(), 10);
    for c in &one.cases {
        assert_eq!(c.group, group);
        let same = all.cases.iter().find(|a| a.id == c.id).unwrap();
        assert_eq!(c, same);
    }
}
