//! `perfcast calibrate` end to end on the synthetic cases (measured at a known H100 power
//! limit): the fit, the overlay and residuals it writes and `validate --overlay` on them; and
//! every bad input: a key in no configuration, empty or non-numeric bounds, a file with no
//! supported case, a calibration that does not converge, an overlay key that applies nowhere,
//! a bad interval level or residuals file. Each exits non-zero with a message saying what is
//! wrong, and nothing panics.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::{repo, Out};
use perfcast_validation::calibrate::synthetic::remeasured;
use perfcast_validation::harness::Harness;
use perfcast_validation::overlay::Overlay;
use serde_json::Value;
use std::path::{Path, PathBuf};

const POWER: &str = "components.h100_sxm5_80gb.power_limit_w";

fn perfcast(dir: &Path, args: &[&str]) -> Out {
    let out = common::output(&mut common::command(dir, args));
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("internal error"),
        "perfcast {args:?} panicked:\n{}",
        out.stderr
    );
    out
}

/// A directory with `cases.toml`: the synthetic cases measured at a 450 W power limit.
fn setup() -> PathBuf {
    let dir = common::tmpdir("perfcast-calibrate");
    let text = std::fs::read_to_string(
        repo().join("crates/perfcast-validation/tests/data/synthetic-cases.toml"),
    )
    .unwrap();
    let truth = Overlay::from_sets(&[format!("{POWER}=450")]).unwrap();
    let h = Harness::new(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    )
    .unwrap()
    .with_overlay(truth);
    std::fs::write(
        dir.join("cases.toml"),
        remeasured(&text, "cases.toml", &h).unwrap(),
    )
    .unwrap();
    dir
}

#[test]
fn calibrate_writes_a_layer_that_validate_reproduces() {
    let dir = setup();
    let param = format!("--param={POWER}=300..700");
    let out = perfcast(
        &dir,
        &[
            "calibrate",
            "cases.toml",
            &param,
            "--out",
            "fitted.toml",
            "--residuals",
            "residuals.toml",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j: Value = serde_json::from_str(&out.stdout).unwrap();
    let fitted = j["params"][POWER].as_f64().unwrap();
    assert!((fitted - 450.0).abs() < 1.0, "{fitted}");
    assert!(j["in_sample"]["mape"].as_f64().unwrap() < 1e-3);
    assert!(j["cross_validated"]["groups"]["g-a"].is_number());
    assert_eq!(j["folds"].as_array().unwrap().len(), 4);
    assert!(out
        .stderr
        .contains("wrote the fitted parameters to fitted.toml"));
    let layer = std::fs::read_to_string(dir.join("fitted.toml")).unwrap();
    assert!(layer.contains("# cases sha256: ") && layer.contains("power_limit_w = "));
    let out = perfcast(
        &dir,
        &[
            "validate",
            "cases.toml",
            "--overlay",
            "fitted.toml",
            "--residuals",
            "residuals.toml",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v["summary"]["overall"]["mape"].as_f64().unwrap() < 1e-3);
    // The table: the same fit, each parameter's spread over the four folds (each recovers
    // the truth), and the roofline baseline's columns; without folds, no spread.
    let out = perfcast(&dir, &["calibrate", "cases.toml", &param]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("fit: converged") && out.stdout.contains("in-sample"));
    assert!(out.stdout.contains("folds (min..max)"), "{}", out.stdout);
    let row = out.stdout.lines().find(|l| l.contains(POWER)).unwrap();
    assert!(row.trim_end().ends_with("450..450"), "{row}");
    assert!(out.stdout.contains("roofline cv"), "{}", out.stdout);
    let out = perfcast(&dir, &["calibrate", "cases.toml", &param, "--cv", "none"]);
    let row = out.stdout.lines().find(|l| l.contains(POWER)).unwrap();
    assert!(row.trim_end().ends_with(" -"), "{row}");
}

#[test]
fn bad_calibrations_exit_non_zero_with_a_reason() {
    let dir = setup();
    std::fs::write(
        dir.join("typo.toml"),
        "[components.h100_sxm5_80gb]\npower_limit_ww = 500\n",
    )
    .unwrap();
    std::fs::write(dir.join("bad-residuals.toml"), "[meta]\nschema = \"x\"\n").unwrap();
    // The public static-batch cases on an accelerator no catalog holds: none whose system can
    // be built, so none the engines support.
    let public = std::fs::read_to_string(repo().join("configs/validation/cases.toml")).unwrap();
    let unsupported: Vec<String> = public
        .split("\n[[case]]")
        .enumerate()
        .filter(|(i, c)| *i == 0 || c.contains("group = \"trtllm-v061-static\""))
        .map(|(i, c)| {
            if i == 0 {
                return c.to_string();
            }
            c.lines()
                .map(|l| {
                    if l.starts_with("gpu = ") {
                        "gpu = \"NoSuch-GPU\"".to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    std::fs::write(dir.join("unsupported.toml"), unsupported.join("\n[[case]]")).unwrap();
    let experiment = repo().join("configs/experiments/llama3-8b-h100.toml");
    let experiment = experiment.to_str().unwrap();
    let collectives = repo().join("configs/validation/collectives.toml");
    let collectives = collectives.to_str().unwrap();
    // (arguments, exit code, what stderr says)
    let table: &[(&[&str], i32, &str)] = &[
        (
            &[
                "calibrate",
                "cases.toml",
                "--param",
                "components.nosuch.x=0..1",
            ],
            1,
            "exists in no case",
        ),
        (
            &["calibrate", "cases.toml", "--param", "options.nosuch"],
            1,
            "needs bounds",
        ),
        (
            &["calibrate", "cases.toml", "--param", "x.y=0.9..0.5"],
            2,
            "are empty",
        ),
        (
            &["calibrate", "cases.toml", "--param", "x.y=low..1"],
            2,
            "`low` is not a number",
        ),
        (&["calibrate", "cases.toml", "--cv", "folds"], 2, "`groups`"),
        (
            &["calibrate", "unsupported.toml", "--cv", "none"],
            1,
            "no case the engines support",
        ),
        (
            &[
                "calibrate",
                "cases.toml",
                "--param",
                "components.h100_sxm5_80gb.power_limit_w=300..700",
                "--max-evals",
                "3",
                "--out",
                "never.toml",
            ],
            1,
            "did not converge",
        ),
        (
            &[
                "calibrate",
                "cases.toml",
                "--cv",
                "none",
                "--residuals",
                "r.toml",
            ],
            1,
            "--cv groups",
        ),
        (
            &["validate", "cases.toml", "--overlay", "typo.toml"],
            1,
            "power_limit_ww` applies to no case",
        ),
        (
            &["validate", collectives, "--overlay", "typo.toml"],
            1,
            "not to collective benchmarks",
        ),
        (
            &["validate", "cases.toml", "--interval", "120"],
            2,
            "between 0 and 100",
        ),
        (
            &[
                "validate",
                "cases.toml",
                "--residuals",
                "bad-residuals.toml",
            ],
            1,
            "perfcast-residuals/1",
        ),
        (
            &["predict", experiment, "--residuals", "no-such-file.toml"],
            1,
            "no-such-file.toml",
        ),
        (
            &["calibrate", "cases.toml", "--serving", "all"],
            2,
            "`score`",
        ),
        (
            &[
                "calibrate",
                "cases.toml",
                "--serving",
                "fit",
                "--exclude-serving",
            ],
            2,
            "cannot be used with",
        ),
    ];
    for (args, code, want) in table {
        let out = perfcast(&dir, args);
        assert_eq!(out.code, *code, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
    // The non-converged run printed its best point and wrote it, flagged.
    std::fs::remove_file(dir.join("never.toml")).unwrap();
    let out = perfcast(&dir, table[6].0);
    assert!(
        out.stderr.contains("best point: components.h100_sxm5_80gb")
            && out.stderr.contains("flagged DID NOT CONVERGE"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("NOT CONVERGED"));
    let overlay = std::fs::read_to_string(dir.join("never.toml")).unwrap();
    assert!(overlay.contains("# DID NOT CONVERGE"), "{overlay}");
    assert!(overlay.contains("power_limit_w"), "{overlay}");
}

/// `calibrate` without a cases file reads the built-in cases, from any directory, as
/// `validate` does (it looked for configs/validation/cases.toml above the working directory
/// and failed with "no such file"): a parameter no case has is then judged against them.
#[test]
fn calibrate_reads_the_built_in_cases_anywhere() {
    let dir = common::tmpdir("perfcast-calibrate-anywhere");
    let out = perfcast(
        &dir,
        &["calibrate", "--param", "nosuch.key=1..2", "--cv", "none"],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`nosuch.key` exists in no case's configuration"),
        "{}",
        out.stderr
    );
}
