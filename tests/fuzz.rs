//! The fuzz harness (`fuzz/harness.rs`), bounded so that `cargo test` stays quick: a few
//! thousand config inputs and a few hundred plugin-answer sequences, each of which must end
//! in an error or a report of finite numbers, never a panic; and a few dozen mutated inputs
//! through the commands (`fuzz/commands.rs`). The long run is
//! `cargo run --release -p perfcast-tests --example fuzz -- CONFIGS PLUGINS [SEED] [COMMANDS]`
//! (docs/testing.md, "Property tests and fuzzing").

#[path = "fuzz/commands.rs"]
mod commands;
#[path = "fuzz/harness.rs"]
mod harness;

use perfcast_testkit::{plugins::build_rust, tmpdir, workspace_root};

/// No panic, non-finite number or broken law: the findings, if any, in the message.
fn assert_no_finding(f: &harness::Findings) {
    let failures = f.failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{}\n{}",
        f.summary(),
        failures.join("\n---\n")
    );
}

#[test]
fn config_inputs_end_in_an_error_or_a_finite_report() {
    let dir = tmpdir("perfcast-fuzz-configs");
    let f = harness::fuzz_configs(&workspace_root(), &dir, 150, 13, 2);
    assert_no_finding(&f);
    // The mutations reach the engine, not only the parser.
    assert!(
        f.reports.load(std::sync::atomic::Ordering::Relaxed) > 5,
        "{}",
        f.summary()
    );
}

#[test]
fn random_plugin_answers_end_in_an_error_or_a_finite_report() {
    let dir = tmpdir("perfcast-fuzz-plugin");
    let lib = build_rust(&["fuzz-fixture"], &dir).remove(0);
    let f = harness::fuzz_plugin(&lib, 0, 300, 2);
    assert_no_finding(&f);
    let reports = f.reports.load(std::sync::atomic::Ordering::Relaxed);
    let errors = f.errors.load(std::sync::atomic::Ordering::Relaxed);
    assert!(reports > 30 && errors > 30, "{}", f.summary());
}

#[test]
fn mutated_inputs_through_the_commands_end_in_an_error_or_a_finite_report() {
    let dir = tmpdir("perfcast-fuzz-commands");
    let f = commands::campaign(&workspace_root(), &dir, 60, 7, 2, None);
    assert_no_finding(&f);
    assert!(
        f.reports.load(std::sync::atomic::Ordering::Relaxed) > 3,
        "{}",
        f.summary()
    );
}
