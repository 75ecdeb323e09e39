//! `perfcast kernels`: the built-in tables listed and shown, an import of a vendor's CSV and
//! Parquet written and read back, and every bad input a clear error naming what is wrong.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::Out;
use std::path::Path;

fn perfcast(dir: &Path, args: &[&str]) -> Out {
    let out = common::output(&mut common::command(dir, args));
    assert!(
        !out.stderr.contains("panicked"),
        "{args:?}:\n{}",
        out.stderr
    );
    out
}

fn fails(o: &Out, want: &[&str]) {
    assert_eq!(o.code, 1, "expected exit 1; stderr:\n{}", o.stderr);
    for w in want {
        assert!(o.stderr.contains(w), "missing {w:?} in:\n{}", o.stderr);
    }
}

#[test]
fn built_in_tables_list_and_show_with_their_provenance() {
    let dir = common::tmpdir("perfcast-kernels");
    let o = perfcast(&dir, &["kernels", "list", "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    // Seven GPUs, five tables each.
    assert_eq!(rows.len(), 35);
    for r in rows {
        assert!(r["source"]
            .as_str()
            .unwrap()
            .contains("aiconfigurator-core 0.12.0"));
        assert!(r["rows"].as_u64().unwrap() > 0);
    }
    let o = perfcast(
        &dir,
        &["kernels", "show", "h100_sxm", "gemm", "--rows", "2"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in [
        "100668 rows",
        "gemm_perf.parquet",
        "bfloat16 / torch_flow",
        "TensorRT-LLM 1.3.0rc20",
    ] {
        assert!(o.stdout.contains(want), "{want}:\n{}", o.stdout);
    }
}

#[test]
fn a_vendor_csv_imports_and_reads_back() {
    let dir = common::tmpdir("perfcast-kernels");
    std::fs::write(
        dir.join("npu.csv"),
        "op,dtype,kernel,m,n,k,latency_ms\n\
         gemm,bfloat16,vendor,128,256,512,0.010\n\
         gemm,bfloat16,vendor,256,256,512,0.018\n\
         op,dtype,kernel,m,n,k,latency_ms\n",
    )
    .unwrap();
    // The repeated header line is a row with a bad op.
    fails(
        &perfcast(&dir, &["kernels", "import", "npu.csv", "--gpu", "acme_npu"]),
        &["npu.csv", "row 4", "unknown op `op`"],
    );
    std::fs::write(
        dir.join("npu.csv"),
        "op,dtype,kernel,m,n,k,latency_ms\n\
         gemm,bfloat16,vendor,128,256,512,0.010\n\
         gemm,bfloat16,vendor,256,256,512,0.018\n",
    )
    .unwrap();
    let o = perfcast(
        &dir,
        &[
            "kernels", "import", "npu.csv", "--gpu", "acme_npu", "--out", "t",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(dir.join("t/acme_npu/gemm.parquet").is_file());
    let o = perfcast(
        &dir,
        &[
            "kernels", "show", "acme_npu", "gemm", "--dir", "t", "--rows", "5",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("2 rows") && o.stdout.contains("0.018000"),
        "{}",
        o.stdout
    );
    // A perfcast table file re-imports as it is.
    let o = perfcast(
        &dir,
        &["kernels", "import", "t/acme_npu/gemm.parquet", "--out", "u"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(dir.join("u/acme_npu/gemm.parquet").is_file());
}

#[test]
fn bad_inputs_name_what_is_wrong() {
    let dir = common::tmpdir("perfcast-kernels");
    std::fs::write(dir.join("bad.parquet"), "not parquet").unwrap();
    std::fs::write(
        dir.join("neg.csv"),
        "op,dtype,kernel,m,n,k,latency_ms\ngemm,bf16,v,1,1,1,-2\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("dup.csv"),
        "op,dtype,kernel,m,n,k,latency_ms\ngemm,bf16,v,1,1,1,2\ngemm,bf16,v,1,1,1,3\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("nocol.csv"),
        "op,dtype,m,n,k,latency_ms\ngemm,bf16,1,1,1,2\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let table: &[(&[&str], &[&str])] = &[
        (
            &["kernels", "show", "h100", "gemm"],
            &["no kernel table for GPU `h100`", "h100_sxm"],
        ),
        (
            &["kernels", "show", "h100_sxm", "gemv"],
            &["unknown op `gemv`", "generation_attention"],
        ),
        (
            &["kernels", "import", "neg.csv", "--gpu", "x"],
            &["neg.csv", "row 2", "latency_ms", "positive"],
        ),
        (
            &["kernels", "import", "dup.csv", "--gpu", "x"],
            &["dup.csv", "row 3", "row 2", "another latency"],
        ),
        (
            &["kernels", "import", "nocol.csv", "--gpu", "x"],
            &["nocol.csv", "missing column `kernel`"],
        ),
        (&["kernels", "import", "neg.csv"], &["--gpu"]),
        (
            &["kernels", "import", "bad.parquet"],
            &["bad.parquet", "not a readable Parquet file"],
        ),
        (
            &["kernels", "import", "empty"],
            &["empty", "no AIConfigurator data"],
        ),
        (&["kernels", "list", "--dir", "missing"], &["missing"]),
    ];
    for (args, want) in table {
        fails(&perfcast(&dir, args), want);
    }
}

/// The iteration time `perfcast predict` reports for the shipped Llama 3 8B on H100 with
/// `extra` settings.
fn iteration_s(dir: &Path, extra: &[&str]) -> Out {
    let cfg = common::repo().join("configs/experiments/llama3-8b-h100.toml");
    let mut args = vec!["predict", cfg.to_str().unwrap(), "--format", "json"];
    for s in extra {
        args.extend(["--set", s]);
    }
    perfcast(dir, &args)
}

#[test]
fn a_device_naming_tables_times_its_gemms_from_them() {
    let dir = common::tmpdir("perfcast-kernels");
    let time = |o: &Out| -> f64 {
        assert_eq!(o.code, 0, "{}", o.stderr);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        v["report"]["iteration_time"].as_f64().unwrap()
    };
    // The H100 preset names its table: the measured GEMMs time the step, not the
    // analytical model's.
    let measured = time(&iteration_s(&dir, &[]));
    assert_eq!(
        time(&iteration_s(&dir, &["device.kernels=\"h100_sxm\""])),
        measured
    );
    let analytical = time(&iteration_s(&dir, &["device.kernels=\"none\""]));
    assert!(
        (measured / analytical - 1.0).abs() > 3e-3,
        "{measured} vs {analytical}"
    );
    // Under a power limit the measured kernels run at the lower clock: the step is longer.
    let capped = time(&iteration_s(
        &dir,
        &[
            "device.kernels=\"h100_sxm\"",
            "components.h100_sxm5_80gb.power_limit_w=500",
        ],
    ));
    assert!(capped > 1.08 * measured, "{capped} vs {measured}");
    fails(
        &iteration_s(&dir, &["device.kernels=\"h100\""]),
        &[
            "device.kernels",
            "no kernel table for GPU `h100`",
            "h100_sxm",
        ],
    );
    fails(
        &iteration_s(&dir, &["device.kernels=\"tables#npu\""]),
        &["device.kernels", "tables"],
    );
}

/// Qwen3-235B-A22B on one H200 node with attention data parallelism and EP 8, in FP8: its
/// routed experts are a shape the H200's MoE table holds.
const QWEN3_DEP8: &str = r#"
include = ["preset:qwen3-235b-a22b", "preset:h200-sxm-141gb"]
stack = "tensorrt-llm-1.x"
[system]
devices = 8
[inference]
tp = 8
ep = 8
attention_dp = true
batch = 256
input_len = 1024
output_len = 256
weight_dtype = "fp8"
activation_dtype = "fp8"
kv_dtype = "fp8"
"#;

#[test]
fn a_device_with_moe_and_attention_tables_times_experts_and_attention_from_them() {
    let dir = common::tmpdir("perfcast-kernels");
    std::fs::write(dir.join("qwen3.toml"), QWEN3_DEP8).unwrap();
    let tpot = |extra: &[&str]| -> f64 {
        let mut args = vec!["infer", "qwen3.toml", "--format", "json"];
        for s in extra {
            args.extend(["--set", s]);
        }
        let o = perfcast(&dir, &args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        v["tpot"].as_f64().unwrap()
    };
    let measured = tpot(&[]);
    let op_by_op = tpot(&["options.measured_moe=false"]);
    assert!(
        (measured / op_by_op - 1.0).abs() > 1e-3,
        "{measured} vs {op_by_op}"
    );
    // Its grouped-query attention comes from the attention tables.
    let analytical = tpot(&["options.measured_attention=false"]);
    assert!(
        (measured / analytical - 1.0).abs() > 1e-3,
        "{measured} vs {analytical}"
    );
    // A folder whose MoE table cannot be read: the error names the key and the table.
    let gpu = dir.join("tables/h200_sxm");
    std::fs::create_dir_all(&gpu).unwrap();
    std::fs::copy(
        common::repo().join("crates/perfcast-kernel-data/tables/h200_sxm/gemm.parquet"),
        gpu.join("gemm.parquet"),
    )
    .unwrap();
    std::fs::write(gpu.join("moe.parquet"), "not parquet").unwrap();
    let o = perfcast(
        &dir,
        &[
            "infer",
            "qwen3.toml",
            "--set",
            "device.kernels=\"tables#h200_sxm\"",
        ],
    );
    fails(
        &o,
        &["device.kernels", "moe table cannot be read", "moe.parquet"],
    );
    // With only the GEMM table in the folder, the experts and attention come from the model.
    std::fs::remove_file(gpu.join("moe.parquet")).unwrap();
    let folder = tpot(&["device.kernels=\"tables#h200_sxm\""]);
    let neither = tpot(&[
        "options.measured_moe=false",
        "options.measured_attention=false",
    ]);
    assert!(
        (folder / neither - 1.0).abs() < 1e-9,
        "{folder} vs {neither}"
    );
}
