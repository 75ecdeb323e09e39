//! The collective model against every published measurement of
//! configs/validation/collectives.toml (data-driven: one prediction per entry), and the
//! collectives file's parser on broken variants.
//!
//! Targets (issue 15): bus bandwidth within 15% for large messages (the `bandwidth` regime:
//! 256 MiB and more, DeepEP's throughput kernels), the latency-bound regime (1 MiB and less,
//! DeepEP's low-latency kernels) within 2x; the messages between are held to 2x too. The
//! entries that miss are listed with the reason in `KNOWN_MISSES`: a new miss fails, and so
//! does a listed entry that starts to pass (remove it then).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_validation::collectives::predict::Regime;
use perfcast_validation::collectives::CollectivesFile;
use perfcast_validation::Validated;
use std::path::Path;

fn repo_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/validation/collectives.toml")
}

/// (entry id, why the model misses it).
const KNOWN_MISSES: &[(&str, &str)] = &[
    (
        "mleng_b200_p6_1n_allreduce_1gib",
        "PyTorch all_reduce_bench on AWS P6: ~0.4 ms per call beyond NCCL's model (its 16 GiB \
         point is within 6%); the benchmark harness's overhead is not modelled",
    ),
    (
        "mleng_b200_p6_4n_allreduce_256mib",
        "same harness over EFA: the approach to the bandwidth plateau is slower than NCCL's \
         latency model says",
    ),
    (
        "mleng_b200_p6_4n_allreduce_32kib",
        "EFA small messages take milliseconds (0.01 GB/s busbw at 32 KiB); EFA's SRD \
         latencies are not modelled",
    ),
    (
        "mleng_b200_p6_4n_allreduce_1mib",
        "as above (EFA small messages)",
    ),
    (
        "mleng_b200_p6_4n_allreduce_16mib",
        "as above (EFA mid-size messages)",
    ),
    (
        "together_b200_ib_16n_sendrecv",
        "16 cross-rail send/recv flows reach a third of a NIC: ECMP hash collisions on the \
         spine are not modelled (routing is taken as ideal)",
    ),
    (
        "deepep_v1_normal_ep32_dispatch",
        "DeepEP's RDMA 'bottleneck bandwidth' exceeds the 50 GB/s NIC here (58 GB/s): it counts \
         logical bytes that node-level deduplication does not send",
    ),
    (
        "deepep_v1_normal_ep32_combine",
        "as above (57 GB/s logical)",
    ),
    (
        "deepep_v1_normal_ep64_dispatch",
        "as above (51 GB/s logical)",
    ),
];

#[test]
fn every_collective_is_predicted_and_meets_its_target_or_is_a_known_miss() {
    let file = CollectivesFile::load(&repo_file()).unwrap();
    assert_eq!(file.entries.len(), 127);
    let report = perfcast_validation::collectives::report::run(
        &file,
        None,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    );
    eprintln!(
        "{}",
        perfcast_report::validation::collectives_table(&report)
    );
    assert_eq!(report.errors(), 0, "every entry is predicted");
    let mut new_misses = Vec::new();
    let mut fixed = Vec::new();
    for e in &report.entries {
        let p = e.outcome.as_ref().unwrap();
        for m in &p.metrics {
            assert!(
                m.predicted.is_finite() && m.predicted > 0.0,
                "{}: {m:?}",
                e.id
            );
        }
        let known = KNOWN_MISSES.iter().any(|(id, _)| *id == e.id);
        match (e.passes(), known) {
            (false, false) => new_misses.push(format!("{} ({:.2}x)", e.id, e.ratio().unwrap())),
            (true, true) => fixed.push(e.id.clone()),
            _ => {}
        }
    }
    assert!(new_misses.is_empty(), "new misses: {new_misses:?}");
    assert!(
        fixed.is_empty(),
        "now passing, remove from KNOWN_MISSES: {fixed:?}"
    );
    let (pass, of) = report.regime_counts(Regime::Bandwidth);
    assert!(of >= 79 && pass as f64 >= 0.9 * of as f64, "{pass}/{of}");
    // Every group is reported, with its error.
    let groups = report.groups();
    assert_eq!(groups.len(), file.groups().len());
    assert!(groups.iter().all(|g| g.mean_abs_error_pct.is_finite()));
}

/// The same run through `perfcast validate`'s entry point, by group, as JSON and as a table; a
/// group that has no entry is an error naming the groups.
#[test]
fn validate_selects_the_collectives_mode_by_schema() {
    let p = repo_file();
    let plugins = perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"));
    let opts = perfcast_validation::ValidateOptions::standard().unwrap();
    let run = |group| perfcast_validation::validate_file(Some(&p), Some(group), &plugins, &opts);
    let out = run("mleng-h200-nvls-gpucount").unwrap();
    assert_eq!(out.to_json()["entries"].as_array().unwrap().len(), 5);
    let Validated::Collectives(r) = run("deepep-v2").unwrap() else {
        panic!("a collectives file validated as cases");
    };
    let table = perfcast_report::validation::collectives_table(&r);
    assert!(
        table.contains("ep_bw_gbs") && table.contains("bandwidth"),
        "{table}"
    );
    let e = run("nope").unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("deepep-v1-normal"), "{e}");
}

const ONE: &str = r#"
schema = "perfcast-collectives/1"

[[collective]]
id = "x"
group = "g"
source = "s"
software = "nccl-tests"
system = "node"
gpu = "H100-SXM5-80GB"
gpus = 8
gpus_per_node = 8
nodes = 1
topology = "single node"
collective = "all_reduce"
dtype = "float32"
message_bytes = 1073741824
busbw_gbs = 400.0
"#;

#[test]
fn broken_files_name_the_entry_and_the_key() {
    assert!(CollectivesFile::parse(ONE, "f.toml").is_ok());
    let cases = [
        (ONE.replace("busbw_gbs", "busbw_gb"), "busbw_gb"),
        (
            ONE.replace("gpus = 8", "gpus = 16"),
            "gpus_per_node x nodes",
        ),
        (
            ONE.replace("all_reduce", "allreduce"),
            "collective = \"allreduce\"",
        ),
        (
            ONE.replace("message_bytes = 1073741824", "message_bytes = \"1G\""),
            "message_bytes",
        ),
        (
            ONE.replace("busbw_gbs = 400.0", "busbw_gbs = -1.0"),
            "busbw_gbs = -1",
        ),
        (ONE.replace("perfcast-collectives/1", "v2"), "schema"),
        (
            format!(
                "{ONE}{}",
                ONE.replace("schema = \"perfcast-collectives/1\"", "")
            ),
            "not unique",
        ),
    ];
    for (text, want) in cases {
        let e = CollectivesFile::parse(&text, "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.toml") && e.contains(want), "{want}: {e}");
        if want != "schema" {
            assert!(e.contains("`x`") || e.contains("id `x`"), "{e}");
        }
    }
    // An accelerator the catalog does not know is an error for that entry, not an abort.
    let f = CollectivesFile::parse(&ONE.replace("H100-SXM5-80GB", "X-9000"), "f.toml").unwrap();
    let r = perfcast_validation::collectives::report::run(
        &f,
        None,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    );
    assert_eq!(r.errors(), 1);
    let msg = r.entries[0].outcome.as_ref().unwrap_err();
    assert!(msg.contains("X-9000"), "{msg}");
}
