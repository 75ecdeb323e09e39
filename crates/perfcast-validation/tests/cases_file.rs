//! The cases-file parser on the repository's file and on broken variants of it.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_validation::cases::{
    Batch, CaseSchedule, CasesFile, Kind, Mode, MoeRouting, Precision, Recompute,
};
use std::path::Path;

fn repo_cases_text() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/validation/cases.toml");
    std::fs::read_to_string(p).expect("configs/validation/cases.toml")
}

/// One small valid file: a training and an inference case.
const GOOD: &str = r#"
[meta]
schema = "perfcast-validation/1"

[[case]]
id = "t1"
kind = "training"
group = "g"
source = "test"
[case.model]
name = "m"
layers = 2
hidden = 64
heads = 4
kv_heads = 4
ffn_hidden = 256
ffn_act = "gelu"
vocab = 1000
seq_len = 128
[case.system]
gpu = "A100-SXM4-80GB"
num_gpus = 8
gpus_per_node = 8
[case.parallel]
tp = 2
pp = 2
dp = 2
cp = 1
ep = 1
sp = true
vpp = 1
zero_stage = 1
micro_batch = 1
global_batch = 8
[case.training]
recompute = "selective"
precision = "bf16"
optimizer = "adam"
[case.measured]
iteration_time_s = 1.0
mfu = 0.4
flops_convention = "model"
peak_tflops_basis = 312.0

[[case]]
id = "i1"
kind = "inference"
group = "h"
source = "test"
[case.model]
name = "m"
layers = 2
hidden = 64
heads = 4
kv_heads = 2
ffn_hidden = 256
ffn_act = "swiglu"
vocab = 1000
[case.system]
gpu = "H100-SXM5-80GB"
num_gpus = 2
gpus_per_node = 8
[case.parallel]
tp = 2
pp = 1
dp = 1
[case.inference]
batch = "max"
input_len = 128
output_len = 128
precision = "fp8"
mode = "offline-max-throughput"
[case.measured]
tokens_per_s = 1000.0
"#;

#[test]
fn repository_file_parses_completely() {
    let f = CasesFile::parse(&repo_cases_text(), "cases.toml").unwrap();
    // The shared set's counts (configs/validation/README.md, 2026-12-06): 1,834 cases, 229
    // training, in 73 groups.
    assert_eq!(f.cases.len(), 1834);
    assert_eq!(
        f.cases.iter().filter(|c| c.kind == Kind::Training).count(),
        229
    );
    assert_eq!(f.groups().len(), 73);
    // The four optional `[case.parallel]` facts of SCHEMA.md.
    let by_id = |id: &str| f.cases.iter().find(|c| c.id == id).unwrap();
    let v3 = &by_id("deepseek_v3_report_2048xh800").parallel;
    assert_eq!(
        (v3.schedule, v3.ep_comm_overlap),
        (Some(CaseSchedule::DualPipe), Some(true))
    );
    let layer = &by_id("mcore_moe_layer_h100_mixtral_a2a_tp1ep8_bf16").parallel;
    assert_eq!(layer.moe_routing, Some(MoeRouting::Balanced));
    assert_eq!(
        f.cases
            .iter()
            .filter(|c| c.parallel.tp_comm_overlap == Some(true))
            .count(),
        10
    );
    let c = f
        .cases
        .iter()
        .find(|c| c.id == "llama3_405b_8k_8192gpu")
        .unwrap();
    assert_eq!(c.system.scaleout_gbps_per_gpu, Some(400.0));
    assert_eq!(c.training_parallel().unwrap().zero_stage, 2);
}

#[test]
fn small_file_parses_with_defaults() {
    let f = CasesFile::parse(GOOD, "good.toml").unwrap();
    let t = &f.cases[0];
    assert_eq!(t.training.as_ref().unwrap().recompute, Recompute::Selective);
    assert_eq!(t.tokens_per_step(), Some(8.0 * 128.0));
    assert!(t.inference_parallel().is_none());
    let i = &f.cases[1];
    let inf = i.inference.as_ref().unwrap();
    assert_eq!(
        (inf.batch, inf.mode, inf.precision),
        (Batch::Max, Mode::OfflineMaxThroughput, Precision::Fp8)
    );
    assert_eq!(i.inference_parallel().unwrap().ep, 1);
    assert_eq!(f.group(Some("h")).count(), 1);
}

/// (edit of GOOD: (from, to), substrings every one of which the error must contain)
#[test]
fn bad_files_name_case_and_key() {
    let table: &[(&str, &str, &[&str])] = &[
        // Unknown keys, at every level.
        (
            "layers = 2\n",
            "layers = 2\nlayrs = 3\n",
            &["case `t1`", "model.layrs", "unknown field"],
        ),
        (
            "id = \"t1\"\n",
            "id = \"t1\"\ncolour = 1\n",
            &["case `t1`", "colour"],
        ),
        (
            "ep = 1\nsp",
            "ep = 1\nxp = 2\nsp",
            &["case `t1`", "parallel.xp"],
        ),
        // The optional parallel facts take only their documented values.
        (
            "ep = 1\nsp",
            "ep = 1\nschedule = \"zigzag\"\nsp",
            &["case `t1`", "parallel.schedule", "zigzag", "dualpipe"],
        ),
        (
            "ep = 1\nsp",
            "ep = 1\nmoe_routing = \"random\"\nsp",
            &["case `t1`", "parallel.moe_routing", "balanced"],
        ),
        (
            "ep = 1\nsp",
            "ep = 1\ntp_comm_overlap = \"yes\"\nsp",
            &["case `t1`", "parallel.tp_comm_overlap"],
        ),
        (
            "ep = 1\nsp",
            "ep = 1\nmoe_routing = \"balanced\"\nsp",
            &["case `t1`", "parallel.moe_routing", "dense model"],
        ),
        (
            "tokens_per_s = 1000.0",
            "tokens_per_s = 1000.0\nqps = 3",
            &["case `i1`", "measured.qps"],
        ),
        (
            "schema = \"perfcast-validation/1\"",
            "schema = \"perfcast-validation/1\"\nversion = 2",
            &["meta.version"],
        ),
        // Attention TP is the TP inside attention data parallelism: only with it, dividing tp.
        (
            "dp = 1\n[case.inference]",
            "dp = 1\nattention_tp = 2\n[case.inference]",
            &[
                "case `i1`",
                "parallel.attention_tp = 2 without parallel.attention_dp",
            ],
        ),
        (
            "dp = 1\n[case.inference]",
            "dp = 1\nattention_dp = true\nattention_tp = 3\n[case.inference]",
            &[
                "case `i1`",
                "parallel.attention_tp = 3",
                "divisor of parallel.tp = 2",
            ],
        ),
        // A closed loop of more clients than requests.
        (
            "mode = \"offline-max-throughput\"",
            "mode = \"server\"\nconcurrency = 8\nnum_requests = 4",
            &[
                "case `i1`",
                "inference.concurrency = 8 is above inference.num_requests = 4",
            ],
        ),
        // More requests than the simulator runs, said or implied by the clients (once an
        // allocation of 64 GB and an abort: the command campaign of fuzz/commands.rs).
        (
            "mode = \"offline-max-throughput\"",
            "mode = \"server\"\nconcurrency = 2147483648",
            &[
                "case `i1`",
                "inference.concurrency = 2147483648",
                "num_requests",
            ],
        ),
        (
            "mode = \"offline-max-throughput\"",
            "mode = \"server\"\nnum_requests = 10000001",
            &[
                "case `i1`",
                "inference.num_requests = 10000001",
                "at most 10000000",
            ],
        ),
        // A rate the simulator refuses (1e-320 simulated an infinite run: the campaign).
        (
            "mode = \"offline-max-throughput\"",
            "mode = \"server\"\nrequest_rate = 1e-320",
            &[
                "case `i1`",
                "inference.request_rate = 1e-320",
                "at least 0.001",
            ],
        ),
        // Missing required fields.
        (
            "vocab = 1000\nseq_len = 128\n",
            "vocab = 1000\n",
            &["case `t1`", "model.seq_len missing"],
        ),
        (
            "recompute = \"selective\"\n",
            "",
            &["case `t1`", "training", "recompute"],
        ),
        (
            "global_batch = 8\n",
            "",
            &["case `t1`", "parallel.global_batch missing"],
        ),
        (
            "[case.inference]\nbatch",
            "[case.inferencex]\nbatch",
            &["case `i1`", "inferencex"],
        ),
        (
            "flops_convention = \"model\"\n",
            "",
            &["case `t1`", "flops_convention missing"],
        ),
        // Bad enums and values.
        (
            "ffn_act = \"gelu\"",
            "ffn_act = \"geglu\"",
            &["case `t1`", "model.ffn_act", "geglu"],
        ),
        (
            "recompute = \"selective\"",
            "recompute = \"some\"",
            &["case `t1`", "training.recompute", "some"],
        ),
        (
            "mode = \"offline-max-throughput\"",
            "mode = \"batch\"",
            &["case `i1`", "inference.mode"],
        ),
        (
            "batch = \"max\"",
            "batch = \"all\"",
            &["case `i1`", "inference.batch", "max"],
        ),
        (
            "batch = \"max\"",
            "batch = 0",
            &["case `i1`", "inference.batch"],
        ),
        (
            "kind = \"training\"",
            "kind = \"train\"",
            &["case `t1`", "kind"],
        ),
        (
            "layers = 2\n",
            "layers = -2\n",
            &["case `t1`", "model.layers"],
        ),
        (
            "mfu = 0.4",
            "mfu = 40.0",
            &["case `t1`", "measured.mfu", "fraction"],
        ),
        // Rules across fields.
        (
            "num_gpus = 8",
            "num_gpus = 16",
            &["case `t1`", "num_gpus = 16"],
        ),
        ("kv_heads = 2", "kv_heads = 3", &["case `i1`", "kv_heads"]),
        ("id = \"i1\"", "id = \"t1\"", &["case `t1`", "duplicate id"]),
        ("id = \"i1\"", "id = \"I 1\"", &["id = \"I 1\""]),
        (
            "tokens_per_s = 1000.0",
            "iteration_time_s = 1.0",
            &[
                "case `i1`",
                "iteration_time_s is not a metric of a inference case",
            ],
        ),
        (
            "schema = \"perfcast-validation/1\"",
            "schema = \"perfcast-validation/2\"",
            &["meta.schema"],
        ),
    ];
    for (from, to, want) in table {
        assert!(GOOD.contains(from), "fixture lacks {from:?}");
        let text = GOOD.replacen(from, to, 1);
        let e = CasesFile::parse(&text, "bad.toml").unwrap_err().to_string();
        assert!(e.contains("bad.toml"), "{e}");
        for w in *want {
            assert!(
                e.contains(w),
                "edit {from:?} -> {to:?}: error lacks {w:?}:\n{e}"
            );
        }
    }
    let e = CasesFile::parse("not = [toml", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.toml") && e.contains("TOML"), "{e}");
    let e = CasesFile::load(Path::new("/nonexistent/cases.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/cases.toml"), "{e}");
}
