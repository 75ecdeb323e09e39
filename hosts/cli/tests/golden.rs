//! Golden (snapshot) tests: the table, JSON and CSV output of `perfcast predict`, `infer` and
//! `search` on every shipped experiment config they apply to, and of `perfcast validate` on the
//! public validation cases, compared byte for byte with the files under `tests/golden/`, so
//! that a change in output is reviewed, not accidental.
//!
//! Only what legitimately varies between runs is masked before comparing (`search`'s summary):
//! the time taken and the rates, the thread count, and the split of plans pruned by the time
//! bound vs evaluated (workers share the N-th best time as they go, docs/commands/search.md);
//! the counts refused and over memory, the plans and the Pareto front are compared exactly.
//!
//! After an intended change, update the files and commit them with it:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test -p perfcast-cli --test e2e golden::
//! ```
//!
//! (Not a `PERFCAST_*` variable: the configuration loader reads those as config keys, and the
//! binary runs without the test's own `PERFCAST_*` environment.) The test lives beside the
//! binary for `CARGO_BIN_EXE_perfcast` (ARCHITECTURE.md, "End-to-end tests live beside the
//! binary"); the golden files live in the top-level `tests/` folder with the other cross-crate
//! checks.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_testkit::golden;
use std::path::PathBuf;

use crate::common;
use crate::common::repo;

const UPDATE: &str = "UPDATE_GOLDEN=1 cargo test -p perfcast-cli --test e2e golden::";

/// Every config of `configs/experiments/` and the commands whose golden outputs are kept for
/// it (the others refuse it: no `[plan]`, no `[inference]`, no model). A new config must be
/// added here (the test checks), which decides what of it is compared.
const EXPERIMENTS: &[(&str, &[&str])] = &[
    ("deepseek-v3-h100-search", &["predict", "search"]),
    ("gpt3-175b-a100", &["predict", "search"]),
    ("korthikanti-175b-selective", &["predict", "search"]),
    ("llama2-70b-h100", &["infer"]),
    ("llama2-70b-lora-h100", &["predict", "search"]),
    ("llama3-8b-h100", &["predict", "search"]),
    ("llama3.1-70b-a100-search", &["predict", "search"]),
    ("llama3.1-70b-h100-search", &["predict", "search"]),
    ("roofline-a100", &[]),
    ("roofline-llama2-70b", &["infer"]),
];

const ALL_FORMATS: &[&str] = &["table", "json", "csv"];

fn golden_dir() -> PathBuf {
    repo().join("tests/golden")
}

fn extension(format: &str) -> &str {
    match format {
        "table" => "txt",
        other => other,
    }
}

/// Run `perfcast args` in the repository root (paths in the output stay relative) and compare
/// its normalised output with `tests/golden/<command>/<name>.<ext>`. A failure to run is a
/// mismatch too, with the command's stderr.
fn check(command: &str, name: &str, config: &str, formats: &[&str], failures: &mut Vec<String>) {
    for format in formats {
        let args = [command, config, "--format", format];
        let out = common::output(&mut common::command(&repo(), &args));
        if out.code != 0 {
            failures.push(format!(
                "perfcast {}: exit {}\n{}",
                args.join(" "),
                out.code,
                out.stderr
            ));
            continue;
        }
        let mut text = normalise(command, format, &out.stdout);
        if !out.stderr.is_empty() {
            text.push_str("--- stderr ---\n");
            text.push_str(&out.stderr);
        }
        let file = golden_dir()
            .join(command)
            .join(format!("{name}.{}", extension(format)));
        if let Err(e) = golden::compare(&file, &text) {
            failures.push(format!("perfcast {}\n{e}", args.join(" ")));
        }
    }
}

fn experiments(command: &str) {
    let mut failures = Vec::new();
    for (name, commands) in EXPERIMENTS {
        if commands.contains(&command) {
            let config = format!("configs/experiments/{name}.toml");
            check(command, name, &config, ALL_FORMATS, &mut failures);
        }
    }
    golden::assert_none_failed(&failures, UPDATE);
}

/// What varies between runs of the same search, masked: see the module documentation.
fn normalise(command: &str, format: &str, text: &str) -> String {
    if command != "search" {
        return text.to_string();
    }
    match format {
        "table" => text
            .split_inclusive('\n')
            .map(|line| {
                if line.contains(" plans enumerated, ") {
                    mask_numbers_before(
                        line,
                        &[
                            " pruned (",
                            " by the time bound)",
                            " evaluated in ",
                            " s on ",
                            " threads (",
                            " plans/s, ",
                            " evaluations/s)",
                        ],
                    )
                } else {
                    line.to_string()
                }
            })
            .collect(),
        "json" => mask_json_summary(text),
        _ => text.to_string(),
    }
}

/// Replace the number that ends right before each `marker` in `line` by `<varies>`.
fn mask_numbers_before(line: &str, markers: &[&str]) -> String {
    let mut out = line.to_string();
    for marker in markers {
        if let Some(at) = out.find(marker) {
            let start = out[..at]
                .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
                .map_or(0, |i| i + 1);
            out.replace_range(start..at, "<varies>");
        }
    }
    out
}

/// In the pretty-printed JSON's `"summary"` object, the values of the keys that vary.
fn mask_json_summary(text: &str) -> String {
    const VARYING: [&str; 7] = [
        "pruned",
        "evaluated",
        "seconds",
        "pruned_bound",
        "plans_per_s",
        "evaluations_per_s",
        "threads",
    ];
    let mut in_summary = false;
    text.split_inclusive('\n')
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("\"summary\": {") {
                in_summary = true;
            } else if in_summary && trimmed.starts_with('}') {
                in_summary = false;
            } else if in_summary {
                let key = trimmed.split('"').nth(1).unwrap_or_default();
                if VARYING.contains(&key) {
                    let indent = &line[..line.len() - trimmed.len()];
                    let comma = if line.trim_end().ends_with(',') {
                        ","
                    } else {
                        ""
                    };
                    let newline = if line.ends_with('\n') { "\n" } else { "" };
                    return format!("{indent}\"{key}\": \"<varies>\"{comma}{newline}");
                }
            }
            line.to_string()
        })
        .collect()
}

#[test]
fn golden_predict() {
    experiments("predict");
}

#[test]
fn golden_infer() {
    experiments("infer");
}

#[test]
fn golden_search() {
    experiments("search");
}

/// `perfcast validate` on a fixed sample of the public cases, in the main (debug) tier: the
/// first [`SAMPLE_PER_GROUP`] cases of every group in file order, so every group (each
/// publisher's table, each serving engine and GPU) is seen while the run stays seconds
/// unoptimised. The whole file is the release tier's ([`golden_validate_whole_file`]).
#[test]
fn golden_validate() {
    let sample = common::tmpdir("perfcast-golden-validate").join("validation-sample.toml");
    std::fs::write(&sample, validation_sample()).unwrap();
    let mut failures = Vec::new();
    check(
        "validate",
        "sample",
        sample.to_str().unwrap(),
        &["table", "json"],
        &mut failures,
    );
    golden::assert_none_failed(&failures, UPDATE);
}

/// `perfcast validate` on the whole public file (1,834 cases): the release tier, run by
/// `.ci/run` (`cargo test --release -p perfcast-cli --test e2e golden::`; with `UPDATE_GOLDEN=1` it
/// rewrites these files too).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release tier: the whole validation file, run optimised by .ci/run"
)]
fn golden_validate_whole_file() {
    let mut failures = Vec::new();
    check(
        "validate",
        "cases",
        "configs/validation/cases.toml",
        &["table", "json"],
        &mut failures,
    );
    golden::assert_none_failed(&failures, UPDATE);
}

/// How many cases of each group the debug tier's validation sample takes.
const SAMPLE_PER_GROUP: usize = 3;

/// The public cases file cut to its header and the first [`SAMPLE_PER_GROUP`] cases of each
/// group (the text of each case kept as it is).
fn validation_sample() -> String {
    let text = std::fs::read_to_string(repo().join("configs/validation/cases.toml")).unwrap();
    let mut parts = text.split("\n[[case]]\n");
    let mut out = parts.next().unwrap().to_string();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for case in parts {
        let group = case
            .lines()
            .find_map(|l| l.strip_prefix("group = "))
            .unwrap_or_else(|| panic!("a case without a group: {}", &case[..80.min(case.len())]));
        let n = seen.entry(group.to_string()).or_default();
        *n += 1;
        if *n <= SAMPLE_PER_GROUP {
            out.push_str("\n[[case]]\n");
            out.push_str(case);
        }
    }
    assert!(seen.len() > 50, "{} groups", seen.len());
    out
}

/// Every shipped experiment is listed in `EXPERIMENTS` (so a new one gets golden outputs), and
/// the search summary masking leaves the rest of a line alone.
#[test]
fn every_experiment_is_listed_and_masking_is_narrow() {
    let mut shipped: Vec<String> = std::fs::read_dir(repo().join("configs/experiments"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    shipped.sort();
    let listed: Vec<&str> = EXPERIMENTS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        shipped,
        listed,
        "add the new config to EXPERIMENTS in {}",
        file!()
    );
    let line = "\n10 plans enumerated, 7 pruned (1 refused, 2 over memory, 4 by the time bound), \
                3 evaluated in 0.123 s on 2 threads (81 plans/s, 24 evaluations/s)\n";
    assert_eq!(
        normalise("search", "table", line),
        "\n10 plans enumerated, <varies> pruned (1 refused, 2 over memory, <varies> by the time \
         bound), <varies> evaluated in <varies> s on <varies> threads (<varies> plans/s, \
         <varies> evaluations/s)\n"
    );
    let json = "{\n  \"plans\": [],\n  \"summary\": {\n    \"enumerated\": 10,\n    \
                \"pruned\": 7,\n    \"threads\": 2\n  },\n  \"evaluated\": 1\n}";
    assert_eq!(
        normalise("search", "json", json),
        "{\n  \"plans\": [],\n  \"summary\": {\n    \"enumerated\": 10,\n    \
         \"pruned\": \"<varies>\",\n    \"threads\": \"<varies>\"\n  },\n  \"evaluated\": 1\n}"
    );
}

/// The user guide's figures of shipped configs (docs/concepts.md) are those outputs, not
/// typed from memory: each phrase of the page (whitespace folded) must hold the figures the
/// golden output (or, for a variant no golden keeps, a run of the binary) prints, rounded as
/// the page rounds them.
#[test]
fn guide_figures_are_the_outputs() {
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let guide = fold(&std::fs::read_to_string(repo().join("docs/concepts.md")).unwrap());
    let golden = |f: &str| fold(&std::fs::read_to_string(golden_dir().join(f)).unwrap());
    let no_tables = {
        let o = common::output(&mut common::command(
            &repo(),
            &[
                "predict",
                "configs/experiments/llama3-8b-h100.toml",
                "--set",
                "device.kernels=\"none\"",
            ],
        ));
        assert_eq!(o.code, 0, "{}", o.stderr);
        fold(&o.stdout)
    };
    // The number the output prints right after `label`, rounded to `decimals`.
    let figure = |output: &str, label: &str, decimals: usize| -> String {
        let at = output
            .find(label)
            .unwrap_or_else(|| panic!("`{label}` not in the output"));
        let n: f64 = output[at + label.len()..]
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no number after `{label}`"));
        format!("{n:.decimals$}")
    };
    // (the guide's phrase, the output, (label in the output, decimals) of each figure the
    // phrase states, in order)
    type Case<'a> = (&'a str, String, &'a [(&'a str, usize)]);
    let cases: [Case; 3] = [
        (
            "e.g. `iteration time 29.5153 s (27.96–32.29, 80%)` (the shipped GPT-3 experiment)",
            golden("predict/gpt3-175b-a100.txt"),
            &[("iteration time ", 4), ("s (", 2), ("–", 2)],
        ),
        (
            "the shipped Llama 3 8B on H100 runs 16.39 s per step (46.8% MFU) from the table",
            golden("predict/llama3-8b-h100.txt"),
            &[("iteration time ", 2), ("MFU / HFU ", 1)],
        ),
        (
            "16.30 s (47.1%) from the model",
            no_tables,
            &[("iteration time ", 2), ("MFU / HFU ", 1)],
        ),
    ];
    for (phrase, output, labels) in cases {
        assert!(
            guide.contains(phrase),
            "docs/concepts.md no longer says: {phrase}"
        );
        let mut rest = phrase;
        for (label, decimals) in labels {
            let f = figure(&output, label, *decimals);
            let at = rest
                .find(&f)
                .unwrap_or_else(|| panic!("the guide says `{phrase}`; the output prints {f}"));
            rest = &rest[at + f.len()..];
        }
    }
}
