//! Execution plugins loaded from C libraries (C ABI 1.3; a schedule's properties 1.6). A
//! pipeline schedule: the example `plugins/examples/zb-h1/zb_h1.c` built with the system C compiler. Its `example/1f1b-c`
//! (perfcast's 1F1B written in C) gives bit-identical results to the compiled-in `1f1b`; its
//! `example/zb-h1` gives Qi et al.'s bubble; bad parameters, plans and answers are errors that
//! name the plugin. A recompute policy: `plugins/examples/sqrt-checkpoint/sqrt_checkpoint.c`,
//! whose `example/full-c` matches the built-in `full` bit for bit and whose
//! `example/sqrt-checkpoint` keeps one input per segment.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_testkit::plugins::{
    c_one_component, cc_plugin_source, cc_plugin_source_with, cc_shared,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::common;
use crate::common::{repo, Out};

const EXPERIMENT: &str = "configs/experiments/gpt3-175b-a100.toml";

fn lib() -> &'static PathBuf {
    static L: OnceLock<PathBuf> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-schedule-plugins");
        let src = repo().join("plugins/examples/zb-h1/zb_h1.c");
        cc_shared(&dir, &src, "libzb_h1.so", &[])
    })
}

fn perfcast(args: &[&str]) -> Out {
    let out = common::output(&mut common::command(&repo(), args));
    assert!(!out.stderr.contains("panicked at"), "{}", out.stderr);
    out
}

/// The experiment with the schedule's parameters `params` (a TOML inline table's body).
fn with_params(name: &str, params: &str) -> String {
    let dir = common::tmpdir(&format!("perfcast-cli-schedule-cfg-{name}"));
    let cfg = dir.join("cfg.toml");
    let text = format!(
        "include = [\"{}\"]\n[options.schedule_params]\n\"example/zb-h1\" = {{ {params} }}\n",
        repo().join(EXPERIMENT).display()
    );
    std::fs::write(&cfg, text).unwrap();
    cfg.to_str().unwrap().to_string()
}

/// `predict` of the experiment with `plan.schedule = schedule` and `sets`, as JSON.
fn predict(schedule: &str, sets: &[&str]) -> Value {
    predict_config(EXPERIMENT, schedule, sets)
}

fn predict_config(config: &str, schedule: &str, sets: &[&str]) -> Value {
    let l = lib().to_str().unwrap().to_string();
    let s = format!("plan.schedule=\"{schedule}\"");
    let mut args = vec!["predict", config, "--load", &l, "--set", &s];
    for x in sets {
        args.extend(["--set", x]);
    }
    args.extend(["--format", "json"]);
    let o = perfcast(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

fn field(v: &Value, path: &[&str]) -> f64 {
    let mut x = &v["report"];
    for k in path {
        x = &x[*k];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path:?} missing in {}", v["report"]))
}

#[test]
fn a_c_schedule_matches_the_compiled_in_one_bit_for_bit() {
    for plan in [
        &[][..],
        &["plan.recompute=\"selective\"", "plan.pp=8", "plan.dp=16"][..],
    ] {
        let builtin = predict("1f1b", plan);
        let c = predict("example/1f1b-c", plan);
        for path in [
            &["iteration_time"][..],
            &["breakdown", "bubble"],
            &["breakdown", "pp_comm"],
            &["memory", "peak"],
            &["mfu"],
        ] {
            assert_eq!(
                field(&builtin, path).to_bits(),
                field(&c, path).to_bits(),
                "{path:?} {plan:?}"
            );
        }
    }
}

#[test]
fn zb_h1_shrinks_the_bubble_as_qi_et_al_say() {
    // weight_grad_share = 0: no W to move, 1F1B's bubble (p-1)(T_F + T_B).
    let ofob = predict("1f1b", &[]);
    let none = predict_config(
        &with_params("none", "weight_grad_share = 0.0"),
        "example/zb-h1",
        &[],
    );
    let half = predict("example/zb-h1", &[]);
    let b = |v: &Value| field(v, &["breakdown", "bubble"]);
    let t = |v: &Value| field(v, &["iteration_time"]);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    assert!(close(b(&none), b(&ofob)), "{} vs {}", b(&none), b(&ofob));
    // With W half of the backward: (p - 1)(T_F + T_B - T_W) = (p - 1) T_F; the 1F1B bubble
    // is (p - 1)(T_F + T_bwd), and the step shortens by exactly the difference.
    assert!(b(&half) < b(&ofob) && b(&half) > 0.0);
    assert!(close(t(&ofob) - t(&half), b(&ofob) - b(&half)));
    // Same memory as 1F1B (the point of ZB-H1).
    assert_eq!(
        field(&half, &["memory", "peak"]),
        field(&ofob, &["memory", "peak"])
    );
    // Listed, with its parameter declared.
    let l = lib().to_str().unwrap();
    let o = perfcast(&["plugins", "--load", l, "--describe", "example/zb-h1"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("weight_grad_share"), "{}", o.stdout);
    let o = perfcast(&["plugins", "--load", l]);
    assert!(
        o.stdout.contains("pipeline_schedule") && o.stdout.contains("c 1.7"),
        "{}",
        o.stdout
    );
}

/// A schedule whose `step` answers `body` (C statements before the return), built here.
fn misbehaving(name: &str, body: &str) -> PathBuf {
    schedule_lib(name, body, None, &[])
}

/// A schedule `bad/sched` built here: `step` runs `body` before it returns; with `props`, a
/// `properties` function (C ABI 1.6) runs those statements on `out`, which holds the
/// defaults; `flags` go to the compiler (e.g. an older minor).
fn schedule_lib(name: &str, body: &str, props: Option<&str>, flags: &[&str]) -> PathBuf {
    let dir = common::tmpdir(&format!("perfcast-cli-schedule-{name}"));
    let (props_fn, props_field) = match props {
        Some(p) => (
            format!(
                r#"
#if PERFCAST_PLUGIN_ABI_MINOR >= 6
static int32_t props(const void *self, perfcast_schedule_properties *out, char *err,
                     size_t cap) {{
    (void)self; (void)out; (void)err; (void)cap;
    {p}
    return PERFCAST_OK;
}}
#endif
"#
            ),
            "\n#if PERFCAST_PLUGIN_ABI_MINOR >= 6\n    .properties = props,\n#endif\n",
        ),
        None => (String::new(), ""),
    };
    let src = format!(
        r#"#include <stdio.h>
static int32_t step(const void *self, const perfcast_schedule_input *in,
                    perfcast_schedule_result *out, char *err, size_t cap) {{
    (void)self; (void)in; (void)err; (void)cap;
    out->time = 1.0; out->bubble = 0.1; out->p2p = 0.0; out->peak_in_flight = 1.0;
    {body}
    return PERFCAST_OK;
}}
static int32_t in_flight(const void *self, const perfcast_schedule_input *in, uint32_t stage,
                         double *out, char *err, size_t cap) {{
    (void)self; (void)in; (void)stage; (void)err; (void)cap; *out = 1.0; return PERFCAST_OK;
}}
{props_fn}
static const perfcast_pipeline_schedule_vtable vt = {{
    .struct_size = sizeof(perfcast_pipeline_schedule_vtable), .step = step,
    .in_flight = in_flight,{props_field}
}};
"#
    ) + &c_one_component("PERFCAST_CATEGORY_PIPELINE_SCHEDULE", "bad/sched", "bad");
    cc_plugin_source_with(&dir, name, &src, flags)
}

/// A schedule declares what it is (C ABI 1.6): two model copies (as DualPipe holds) double
/// the weights, gradients and optimizer state of a stage; the same source built for 1.5 has
/// no `properties` and loads with the defaults; a bad answer is an error naming the plugin.
#[test]
fn a_schedule_declares_its_model_copies_and_older_minors_get_the_defaults() {
    let two = "out->model_copies = 2.0;";
    let state = |lib: &PathBuf, isolate: bool| {
        let l = lib.to_str().unwrap();
        let mut args = vec!["predict", EXPERIMENT, "--load", l];
        args.extend(["--set", "plan.schedule=\"bad/sched\"", "--format", "json"]);
        if isolate {
            args.push("--isolate");
        }
        let o = perfcast(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        ["weights", "grads", "optimizer"].map(|k| field(&v, &["memory", "first_stage", k]))
    };
    let defaults = state(&schedule_lib("one-copy", "", Some(""), &[]), false);
    let doubled = schedule_lib("two-copies", "", Some(two), &[]);
    let older = schedule_lib(
        "two-copies-1-5",
        "",
        Some(two),
        &["-DPERFCAST_PLUGIN_ABI_MINOR=5"],
    );
    for (i, d) in defaults.iter().enumerate() {
        assert!(*d > 0.0);
        assert_eq!(state(&doubled, false)[i], 2.0 * d);
        // An isolated library answers the same: the child reports the properties.
        assert_eq!(state(&doubled, true)[i], 2.0 * d);
        assert_eq!(state(&older, false)[i], *d);
    }
    let o = perfcast(&["plugins", "--load", older.to_str().unwrap()]);
    assert!(o.stdout.contains("c 1.5"), "{}", o.stdout);
    // (properties, what stderr says besides the plugin's name)
    let table = [
        ("out->model_copies = 0.5;", "model_copies 0.5"),
        ("out->model_copies = 0.0 / 0.0;", "model_copies NaN"),
        ("out->overlaps_expert_comm = 7;", "overlaps_expert_comm 7"),
        (
            "snprintf(err, cap, \"no properties today\"); return PERFCAST_ERR_FAILED;",
            "no properties today",
        ),
    ];
    for (i, (props, want)) in table.into_iter().enumerate() {
        let lib = schedule_lib(&format!("bad-props-{i}"), "", Some(props), &[]);
        let l = lib.to_str().unwrap();
        let set = "plan.schedule=\"bad/sched\"";
        let o = perfcast(&["predict", EXPERIMENT, "--load", l, "--set", set]);
        assert_eq!(o.code, 1, "{props}: {}", o.stderr);
        assert!(
            o.stderr.contains(want) && o.stderr.contains("bad/sched"),
            "{props}: want {want:?} in {}",
            o.stderr
        );
    }
}

#[test]
fn bad_schedules_parameters_and_plans_are_errors_naming_the_plugin() {
    let l = lib().to_str().unwrap();
    let run = |lib: &str, sets: &[&str]| {
        let mut args = vec!["predict", sets[0], "--load", lib];
        let sets = &sets[1..];
        for s in sets {
            args.extend(["--set", s]);
        }
        perfcast(&args)
    };
    // (library, sets, what stderr says)
    let neg = misbehaving("negative", "out->time = -1.0;");
    let nan = misbehaving("nan", "out->bubble = 0.0 / 0.0;");
    let big = misbehaving("bubble", "out->bubble = 5.0;");
    let fails = misbehaving(
        "fails",
        "snprintf(err, cap, \"no such schedule\"); return PERFCAST_ERR_FAILED;",
    );
    let bad = "plan.schedule=\"bad/sched\"";
    let zb = "plan.schedule=\"example/zb-h1\"";
    let too_big = with_params("too-big", "weight_grad_share = 2.0");
    let typo = with_params("typo", "weight_grad_shar = 0.2");
    let dir = common::tmpdir("perfcast-cli-schedule-cfg-unknown");
    let unknown = dir.join("cfg.toml");
    std::fs::write(
        &unknown,
        format!(
            "include = [\"{}\"]\n[options.schedule_params]\n\"example/zb-h2\" = {{}}\n",
            repo().join(EXPERIMENT).display()
        ),
    )
    .unwrap();
    let table: Vec<(&str, Vec<&str>, &str)> = vec![
        (l, vec![&too_big, zb], "weight_grad_share"),
        (l, vec![&typo, zb], "unknown key"),
        (
            l,
            vec![unknown.to_str().unwrap(), zb],
            "did you mean `example/zb-h1`?",
        ),
        (
            l,
            vec![EXPERIMENT, zb, "plan.vpp=2"],
            "one model chunk per device",
        ),
        (neg.to_str().unwrap(), vec![EXPERIMENT, bad], "bad/sched"),
        (
            nan.to_str().unwrap(),
            vec![EXPERIMENT, bad],
            "bubble of pipeline schedule `bad/sched`",
        ),
        (
            big.to_str().unwrap(),
            vec![EXPERIMENT, bad],
            "exceed the step time",
        ),
        (
            fails.to_str().unwrap(),
            vec![EXPERIMENT, bad],
            "no such schedule",
        ),
    ];
    for (lib, sets, want) in table {
        let o = run(lib, &sets);
        assert_eq!(o.code, 1, "{sets:?}: {}", o.stderr);
        assert!(
            o.stderr.contains(want),
            "{sets:?}: want {want:?} in {}",
            o.stderr
        );
    }
}

fn recompute_lib() -> &'static PathBuf {
    static L: OnceLock<PathBuf> = OnceLock::new();
    L.get_or_init(|| {
        let dir = common::tmpdir("perfcast-cli-recompute-plugins");
        let src = repo().join("plugins/examples/sqrt-checkpoint/sqrt_checkpoint.c");
        cc_shared(&dir, &src, "libsqrt_checkpoint.so", &[])
    })
}

/// `predict` of `config` with `plan.recompute = policy` and `sets`, the recompute example
/// loaded; the raw output.
fn with_policy(config: &str, lib: &str, policy: &str, sets: &[&str]) -> Out {
    let r = format!("plan.recompute=\"{policy}\"");
    let mut args = vec!["predict", config, "--load", lib, "--set", &r];
    for x in sets {
        args.extend(["--set", x]);
    }
    args.extend(["--format", "json"]);
    perfcast(&args)
}

fn ok_json(o: Out) -> Value {
    assert_eq!(o.code, 0, "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

#[test]
fn a_c_recompute_policy_matches_the_compiled_in_one_and_checkpoints_segments() {
    let l = recompute_lib().to_str().unwrap();
    for sets in [&[][..], &["plan.recompute_layers=3"][..]] {
        let builtin = ok_json(with_policy(EXPERIMENT, l, "full", sets));
        let c = ok_json(with_policy(EXPERIMENT, l, "example/full-c", sets));
        for path in [&["iteration_time"][..], &["memory", "peak"], &["hfu"]] {
            assert_eq!(
                field(&builtin, path).to_bits(),
                field(&c, path).to_bits(),
                "{path:?} {sets:?}"
            );
        }
    }
    // Segment checkpointing: full recompute's time (one extra forward), less memory than full
    // recompute's one input per layer (6 layers per stage here: segments of 3 keep 2 inputs
    // and rebuild 3 layers).
    let full = ok_json(with_policy(EXPERIMENT, l, "full", &[]));
    let seg = ok_json(with_policy(EXPERIMENT, l, "example/sqrt-checkpoint", &[]));
    assert_eq!(
        field(&seg, &["iteration_time"]),
        field(&full, &["iteration_time"])
    );
    let mem = |v: &Value| field(v, &["memory", "peak"]);
    assert!(mem(&seg) < mem(&full), "{} vs {}", mem(&seg), mem(&full));
    let o = perfcast(&[
        "plugins",
        "--load",
        l,
        "--describe",
        "example/sqrt-checkpoint",
    ]);
    assert!(o.stdout.contains("segment_layers"), "{}", o.stdout);
}

/// A recompute policy whose `plan` runs `body` after writing a valid answer, built here.
fn misbehaving_policy(name: &str, body: &str) -> PathBuf {
    let dir = common::tmpdir(&format!("perfcast-cli-recompute-{name}"));
    let src = format!(
        r#"
static int32_t plan(const void *self, const perfcast_layer_activations *act, uint32_t layers,
                    uint32_t rl, perfcast_recompute_plan *out, char *err, size_t cap) {{
    (void)self; (void)rl; (void)err; (void)cap;
    out->full_layers = layers; out->attention_layers = 0.0; out->kept = act->input * layers;
    out->working = act->input;
    {body}
    return PERFCAST_OK;
}}
static const perfcast_recompute_policy_vtable vt = {{
    .struct_size = sizeof(perfcast_recompute_policy_vtable), .plan = plan,
}};
"#
    ) + &c_one_component(
        "PERFCAST_CATEGORY_RECOMPUTE_POLICY",
        "bad/policy",
        "badpolicy",
    );
    cc_plugin_source(&dir, name, &src)
}

#[test]
fn bad_recompute_policies_and_parameters_are_errors_naming_the_plugin() {
    let l = recompute_lib().to_str().unwrap();
    let dir = common::tmpdir("perfcast-cli-recompute-cfg");
    let zero = dir.join("zero.toml");
    std::fs::write(
        &zero,
        format!(
            "include = [\"{}\"]\n[options.recompute_params]\n\"example/sqrt-checkpoint\" = {{ segment_layers = 0 }}\n",
            repo().join(EXPERIMENT).display()
        ),
    )
    .unwrap();
    let too_many = misbehaving_policy("too-many", "out->full_layers = layers + 1.0;");
    let nan = misbehaving_policy("nan", "out->kept = 0.0 / 0.0;");
    let table: Vec<(&str, &str, &str, Vec<&str>, &str)> = vec![
        (
            zero.to_str().unwrap(),
            l,
            "example/sqrt-checkpoint",
            vec![],
            "segment_layers",
        ),
        (
            EXPERIMENT,
            l,
            "example/sqrt-checkpoint",
            vec!["plan.recompute_layers=2"],
            "leave plan.recompute_layers unset",
        ),
        (
            EXPERIMENT,
            too_many.to_str().unwrap(),
            "bad/policy",
            vec![],
            "full_layers of recompute policy `bad/policy`",
        ),
        (
            EXPERIMENT,
            nan.to_str().unwrap(),
            "bad/policy",
            vec![],
            "kept of recompute policy `bad/policy`",
        ),
    ];
    for (cfg, lib, policy, sets, want) in table {
        let o = with_policy(cfg, lib, policy, &sets);
        assert_eq!(o.code, 1, "{policy} {sets:?}: {}", o.stderr);
        assert!(o.stderr.contains(want), "want {want:?} in {}", o.stderr);
    }
}
