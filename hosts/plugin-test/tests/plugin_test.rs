//! The public test support on the shipped examples: every built-in strategy, the C example
//! `example/tp2d` and the Rust example `example/hsdp` keep the rules `check_strategy` checks; a strategy that splits at degree 1,
//! or names an axis it did not declare, fails them with a message naming it; `predict` and
//! `same_report` give what the command line gives and name the first field that differs.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_plugin_test::{check_strategy, PluginTest};
use perfcast_testkit::plugins::{build_rust, c_one_component, cc_plugin_source, cc_shared};
use perfcast_testkit::process::workspace_root;
use serde_json::json;
use std::path::PathBuf;

fn tp2d() -> PluginTest {
    let dir = perfcast_testkit::tmpdir("perfcast-plugin-test-tp2d");
    let src = workspace_root().join("plugins/examples/tp2d/tp2d.c");
    PluginTest::new(cc_shared(&dir, &src, "libtp2d.so", &[]))
}

fn gpt3() -> PathBuf {
    workspace_root().join("configs/experiments/gpt3-175b-a100.toml")
}

const TP2D: &str =
    r#"options.strategies=["example/tp2d","sequence","context","expert","pipeline","data","zero"]"#;

#[test]
fn the_builtin_strategies_and_the_examples_keep_the_rules() {
    let r = perfcast_builtins::registry().unwrap();
    for name in [
        "tensor", "sequence", "context", "expert", "pipeline", "data", "zero",
    ] {
        let s = r.parallel_strategy(name, &json!({})).unwrap();
        let n = check_strategy(&*s).unwrap();
        assert!(n > 0, "{name}: no plan answered");
    }
    let n = tp2d().check_strategy("example/tp2d", &json!({})).unwrap();
    assert!(n > 0);
    let dir = perfcast_testkit::tmpdir("perfcast-plugin-test-hsdp");
    let lib = build_rust(&["hsdp"], &dir).remove(0);
    let n = PluginTest::new(lib)
        .check_strategy("example/hsdp", &json!({}))
        .unwrap();
    assert!(n > 0);
}

#[test]
fn predict_and_same_report_are_the_command_line_s() {
    let t = tp2d();
    let grid = [TP2D, "plan.tp=2", "plan.axes.col=2", "plan.dp=16"];
    let r = t.predict(gpt3(), &grid).unwrap();
    // As `perfcast predict ... --set plan.tp=2 --set plan.axes.col=2 --set plan.dp=16`
    // prints it (plugins/examples/tp2d/README.md).
    assert!(
        (r.iteration_time.0 - 38.876).abs() < 5e-3,
        "{}",
        r.iteration_time.0
    );
    // A 1 x 1 grid is the built-in at tp 1.
    t.same_report(
        gpt3(),
        &["plan.tp=1", "plan.dp=64"],
        &[TP2D, "plan.tp=1", "plan.axes.col=1", "plan.dp=64"],
    )
    .unwrap();
    let e = t
        .same_report(gpt3(), &[], &["plan.micro_batch=2"])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("report.") && e.contains(" / "), "{e}");
    // A bad key is the configuration's error, naming it.
    let e = t
        .predict(gpt3(), &["plan.axes.row=2"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("plan.axes.row"), "{e}");
}

/// A C strategy on the tensor axis whose `split_layer` runs `split` and whose `comms` names
/// the group `group`.
fn broken(name: &str, split: &str, group: &str) -> PluginTest {
    let dir = perfcast_testkit::tmpdir(&format!("perfcast-plugin-test-{name}"));
    let src = format!(
        r#"
static int32_t axis(const void *self, uint32_t *out, char *err, size_t cap) {{
    (void)self; (void)err; (void)cap; *out = PERFCAST_AXIS_TENSOR; return PERFCAST_OK;
}}
static int32_t split_layer(const void *self, const perfcast_plan *plan,
                           perfcast_layer_split *split, char *err, size_t cap) {{
    (void)self; (void)plan; (void)err; (void)cap; {split}; return PERFCAST_OK;
}}
static int32_t comms(const void *self, const perfcast_plan *plan, const perfcast_layer_dims *d,
                     perfcast_comm_op *out, size_t cap, size_t *n, char *err, size_t ecap) {{
    (void)self; (void)plan; (void)d; (void)cap; (void)err; (void)ecap;
    out[0].klass = PERFCAST_CLASS_TENSOR; out[0].phase = PERFCAST_PHASE_FORWARD;
    out[0].kind = PERFCAST_COLLECTIVE_ALL_REDUCE; out[0].group = {group};
    out[0].exposed = 1; out[0].bytes = 1e6; out[0].count = 1.0;
    *n = 1;
    return PERFCAST_OK;
}}
static const perfcast_parallel_strategy_vtable vt = {{
    .struct_size = sizeof(perfcast_parallel_strategy_vtable), .axis = axis,
    .split_layer = split_layer, .comms = comms,
}};
"#
    ) + &c_one_component("PERFCAST_CATEGORY_PARALLEL_STRATEGY", "bad/tp", "bad");
    PluginTest::new(cc_plugin_source(&dir, name, &src))
}

#[test]
fn a_strategy_that_breaks_a_rule_fails_naming_it() {
    let cases = [
        (
            "split-at-one",
            "split->weights *= 2",
            "PERFCAST_GROUP_TENSOR",
            "at degree 1 it still splits",
        ),
        (
            "undeclared-axis",
            "split->weights *= plan->tp",
            "PERFCAST_GROUP_DECLARED(0)",
            "group 0x100",
        ),
    ];
    for (name, split, group, want) in cases {
        let e = broken(name, split, group)
            .check_strategy("bad/tp", &json!({}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad/tp") && e.contains(want), "{name}: {e}");
    }
    // A library that is not there.
    let e = PluginTest::new("/nonexistent/libnothing.so")
        .check_strategy("bad/tp", &json!({}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/libnothing.so"), "{e}");
}
