//! `perfcast calibrate` on small synthetic cases files whose measurements are the model's own
//! predictions at known parameter values ([`remeasured`]): the values are recovered, the
//! leave-one-group-out folds hold out whole groups, the overlay round-trips, and every bad
//! input is an error naming what is wrong.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_report::validation::calibration_table;
use perfcast_validation::calibrate::synthetic::remeasured;
use perfcast_validation::calibrate::{
    self, Calibration, Cv, Options, ParamSpec, ServingCases, Settings,
};
use perfcast_validation::cases::CasesFile;
use perfcast_validation::harness::Harness;
use perfcast_validation::overlay::Overlay;
use perfcast_validation::report::first_metric;
use perfcast_validation::Error;

/// The H100's power limit: its clock, hence every H100 case's time (the cube law of
/// `plugins/gpu/src/power.rs`; 700 W rated).
const H100_POWER: &str = "components.h100_sxm5_80gb.power_limit_w";

/// The synthetic cases (`tests/data/synthetic-cases.toml`) of `groups`, remeasured at
/// `truth` (`key=value` overrides).
fn synthetic(groups: &[&str], truth: &[&str]) -> CasesFile {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/synthetic-cases.toml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let h = harness().with_overlay(Overlay::from_sets(truth).unwrap());
    let text = remeasured(&text, "synthetic-cases.toml", &h).unwrap();
    let mut f = CasesFile::parse(&text, "synthetic-cases.toml").unwrap();
    f.cases.retain(|c| groups.contains(&c.group.as_str()));
    f
}

/// The harness `validate` runs: the built-in plugins with the project's kernel tables.
fn harness() -> Harness {
    Harness::new(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    )
    .unwrap()
}

const TRAINING: &[&str] = &["g-a", "g-b", "g-c"];

fn param(s: &str) -> ParamSpec {
    s.parse().unwrap()
}

/// `params` fitted under `cv` with the serving cases, at most `max_evals` evaluations a block.
fn options(params: &[&str], cv: Cv, max_evals: usize) -> Options {
    Options {
        params: params.iter().map(|p| param(p)).collect(),
        cv,
        also: Vec::new(),
        serving: ServingCases::Score,
        settings: Settings {
            max_evals,
            ..Settings::default()
        },
    }
}

fn run(file: &CasesFile, params: &[&str], cv: Cv) -> perfcast_validation::Result<Calibration> {
    let opts = options(params, cv, Settings::default().max_evals);
    calibrate::calibrate(&harness(), file, "0", &opts)
}

/// The H100 power limit the measurements were made with (450 W; the preset has none) is
/// recovered, with an in-sample error of ~0; it applies to the H100 cases only.
#[test]
fn a_parameter_that_moves_predictions_is_recovered() {
    let file = synthetic(TRAINING, &[&format!("{H100_POWER}=450")]);
    let c = run(&file, &[&format!("{H100_POWER}=300..700")], Cv::None).unwrap();
    assert!(c.converged(), "{}", calibration_table(&c));
    let p = &c.params[0];
    assert!((p.start - 450.0).abs() > 25.0, "{p:?}");
    assert!((p.fitted - 450.0).abs() < 1.0, "{}", calibration_table(&c));
    assert_eq!(p.cases, 4, "the A100 cases are not reached");
    assert!(c.fit.f < 1e-3, "{}", calibration_table(&c));
    let before = c.group_mapes()["g-a"][0].unwrap();
    assert!(before > 0.03, "the start is off: {before}");
    assert_eq!(c.group_mapes()["g-c"][0], Some(0.0));
}

/// A stack's own value (`stacks.NAME.KEY`) is fitted on the cases mapped to that stack alone:
/// the Megatron-Core cases (H100 and A100) reach it, the TensorRT-LLM ones do not; a stack
/// key that lands on no single option, or names no stack of a case, applies to no case.
#[test]
fn a_stack_parameter_is_recovered_on_its_stack_alone() {
    const GEMM: &str = "stacks.megatron-core-2024.efficiency.gemm";
    let file = synthetic(&["g-a", "g-c", "g-i"], &[&format!("{GEMM}=0.8")]);
    let c = run(&file, &[&format!("{GEMM}=0.5..1")], Cv::None).unwrap();
    assert!(c.converged(), "{}", calibration_table(&c));
    let own = perfcast_validation::stacks::resolve("megatron-core-2024")
        .unwrap()
        .efficiency
        .gemm;
    assert_eq!(c.params[0].start, own, "the stack's own value");
    assert!(
        (c.params[0].fitted - 0.8).abs() < 2e-3,
        "{}",
        calibration_table(&c)
    );
    assert_eq!(c.params[0].cases, 4, "the inference cases are not reached");
    assert_eq!(c.group_mapes()["g-i"][0], Some(0.0));
    for bad in [
        "stacks.megatron-core-2024.attention.kernel=0..1",
        "stacks.megatron-core-2099.efficiency.gemm=0..1",
    ] {
        let e = run(&file, &[bad], Cv::None).unwrap_err().to_string();
        assert!(
            e.contains("exists in no case's configuration"),
            "{bad}: {e}"
        );
    }
}

/// Two parameters of different kinds (a plugin parameter and an inference option, each
/// reaching other cases) are recovered together.
#[test]
fn two_parameters_are_recovered_together() {
    let truth = [
        format!("{H100_POWER}=480"),
        "options.step_overhead_us=200.0".to_string(),
    ];
    let truth: Vec<&str> = truth.iter().map(String::as_str).collect();
    let file = synthetic(&["g-a", "g-b", "g-i"], &truth);
    let c = run(
        &file,
        &[
            &format!("{H100_POWER}=300..700"),
            "options.step_overhead_us=0..1000",
        ],
        Cv::None,
    )
    .unwrap();
    assert!(c.converged(), "{}", calibration_table(&c));
    assert!(
        (c.params[0].fitted - 480.0).abs() < 1.5,
        "{}",
        calibration_table(&c)
    );
    assert!(
        (c.params[1].fitted - 200.0).abs() < 10.0,
        "{}",
        calibration_table(&c)
    );
    assert_eq!((c.params[0].cases, c.params[1].cases), (6, 2));
}

/// Leave-one-group-out: one fold per group holding out exactly its cases, each fitted on the
/// others alone (the same as calibrating a file without the group); the held-out group is
/// predicted with the fold's values. The groups are measured at different efficiencies, so
/// what a fold sees matters.
#[test]
fn logo_folds_hold_out_whole_groups() {
    let a = synthetic(&["g-a"], &[&format!("{H100_POWER}=400")]);
    let b = synthetic(&["g-b"], &[&format!("{H100_POWER}=450")]);
    let mut all = a.clone();
    all.cases.extend(b.cases.clone());
    let spec = format!("{H100_POWER}=300..700");
    let c = run(&all, &[&spec], Cv::Groups).unwrap();
    assert_eq!(c.folds.len(), 2);
    for f in &c.folds {
        let ids: Vec<&str> = f.members.iter().map(|&m| c.cases[m].id.as_str()).collect();
        let group = &c.cases[f.members[0]].group;
        assert_eq!(&f.held_out, group);
        assert!(
            f.members.iter().all(|&m| &c.cases[m].group == group),
            "{ids:?}"
        );
    }
    // Without g-a, the fit sees only g-b (truth 450 W), and vice versa.
    let without_a = run(&b, &[&spec], Cv::None).unwrap();
    assert_eq!(c.folds[0].fitted, vec![without_a.params[0].fitted]);
    assert!((c.folds[0].fitted[0] - 450.0).abs() < 1.0);
    assert!((c.folds[1].fitted[0] - 400.0).abs() < 1.0);
    // g-a predicted at 450 W is off; in sample (between 400 and 450 W) less so.
    let [_, ins, cv] = c.group_mapes()["g-a"];
    assert!(
        cv.unwrap() > ins.unwrap() && cv.unwrap() > 0.02,
        "{}",
        calibration_table(&c)
    );
    let r = c.residuals().unwrap();
    assert_eq!(r.residuals.len(), 4);
    assert_eq!(r.meta.cv.as_deref(), Some("groups"));
}

/// Leave one stack family out: the Megatron-Core cases (H100 and A100) and the TensorRT-LLM
/// ones are the two folds, and a held-out family is predicted on the fallback stack whose
/// fitted key is the middle of the other stacks' (here the TensorRT-LLM fold fits the
/// Megatron-Core value, and the TensorRT-LLM cases, whose stack has it too, take it on the
/// fallback). Leave one GPU generation out: Hopper and Ampere are the folds.
#[test]
fn stack_and_hardware_folds() {
    use perfcast_validation::overlay::Entry;
    const GEMM: &str = "stacks.megatron-core-2024.efficiency.gemm";
    let file = synthetic(&["g-a", "g-c", "g-i"], &[&format!("{GEMM}=0.8")]);
    let spec = format!("{GEMM}=0.5..1");
    let c = run(&file, &[&spec], Cv::Stacks).unwrap();
    let folds: Vec<(&str, usize)> = c
        .folds
        .iter()
        .map(|f| (f.held_out.as_str(), f.members.len()))
        .collect();
    assert_eq!(folds, [("megatron", 4), ("tensorrt-llm", 2)]);
    // Without Megatron-Core, no case reaches the parameter: the fold keeps the start.
    assert_eq!(c.folds[0].fitted, vec![c.params[0].start]);
    assert!(
        (c.folds[1].fitted[0] - 0.8).abs() < 2e-3,
        "{:?}",
        c.folds[1]
    );
    // Held out, each case is predicted as on the fallback stack with the fold's middle.
    let h = harness().on_fallback_stack().unwrap();
    for f in &c.folds {
        for &m in &f.members {
            let case = file.cases.iter().find(|x| x.id == c.cases[m].id).unwrap();
            let p = h.prepare(case);
            let e = [Entry::number("stacks.generic.efficiency.gemm", f.fitted[0])];
            let e = h.applicable(&p, &e);
            let want = first_metric(&h.evaluate(&p, &e)).unwrap();
            assert_eq!(c.out_of_fold[m].as_ref().unwrap(), &want, "{}", case.id);
        }
    }
    assert_eq!(c.residuals().unwrap().meta.cv.as_deref(), Some("stacks"));
    let hw = run(&file, &[&spec], Cv::Hardware).unwrap();
    let folds: Vec<(&str, usize)> = hw
        .folds
        .iter()
        .map(|f| (f.held_out.as_str(), f.members.len()))
        .collect();
    assert_eq!(folds, [("hopper", 4), ("ampere", 2)]);
    let one = synthetic(&["g-a"], &[]);
    let e = run(&one, &[&spec], Cv::Stacks).unwrap_err();
    assert!(matches!(e, Error::CrossValidation(_)), "{e:?}");
    assert!(e.to_string().contains("at least two stack families"), "{e}");
}

/// The overlay written by a calibration, read back and applied by the harness, reproduces the
/// in-sample predictions exactly.
#[test]
fn the_overlay_round_trips() {
    let file = synthetic(
        &["g-a", "g-b", "g-i"],
        &[
            &format!("{H100_POWER}=450"),
            "options.compute_memory_overlap=0.7",
        ],
    );
    let c = run(
        &file,
        &[
            &format!("{H100_POWER}=300..700"),
            "options.compute_memory_overlap",
        ],
        Cv::None,
    )
    .unwrap();
    let text = c.overlay_toml();
    assert!(text.contains("# cases sha256: 0") && text.contains("[components.h100_sxm5_80gb]"));
    let o = Overlay::parse(&text, "fitted.toml").unwrap();
    assert_eq!(o.entries.len(), 2);
    let h = harness().with_overlay(o);
    for (case, want) in file.cases.iter().zip(&c.in_sample) {
        let mut r = h.run_case(case);
        r.first = first_metric(&r);
        assert_eq!(
            r.first.map(|f| f.predicted),
            want.as_ref().map(|f| f.predicted)
        );
    }
    // Default bounds: half to twice the configured value, narrowed to the engine's [0, 1].
    assert_eq!(c.params[1].lo, c.params[1].start / 2.0);
    assert!(
        c.params[1].hi > 0.999 && c.params[1].hi <= 1.0,
        "{:?}",
        c.params[1]
    );
    assert!(
        c.notes.iter().any(|n| n.contains("narrowed")),
        "{:?}",
        c.notes
    );
}

/// Bad input: each an error that says what is wrong.
#[test]
fn bad_parameters_and_files_are_errors() {
    let file = synthetic(&["g-a"], &[]);
    // (parameter, what the message says)
    let table = [
        (
            "components.h100_sxm5_80gb.matmul_efficency=0.4..0.8",
            "refuses it",
        ),
        ("components.h100_sxm5_80gb.nosuch", "needs bounds"),
        ("components.nosuch.x=0..1", "exists in no case"),
        ("components.h100_sxm5_80gb.kind", "not a number"),
        (
            "components.h100_sxm5_80gb.matmul_efficiency=0.5..1.5",
            "narrow the bounds",
        ),
        ("options.engine.runtime_reserve_gib=0.5..2", "moves none"),
        ("options.host_launch_us=1..20", "exists in no case"),
    ];
    for (p, want) in table {
        let e = run(&file, &[p], Cv::None).unwrap_err();
        assert!(matches!(e, Error::Param { .. }), "{p}: {e:?}");
        assert!(e.to_string().contains(want), "{p}: {e}");
    }
    let e = run(
        &file,
        &["components.h100_sxm5_80gb.matmul_efficency=0.4..0.8"],
        Cv::None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("matmul_efficiency"), "nearest key named: {e}");
    // One group: no leave-one-group-out.
    let e = run(&file, &[&format!("{H100_POWER}=300..700")], Cv::Groups)
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least two groups"), "{e}");
    // A file of cases the engines do not support: static-batch cases on an accelerator no
    // catalog holds.
    let public = CasesFile::load(&perfcast_validation::locate_cases(None).unwrap()).unwrap();
    let unsupported = CasesFile {
        file: "unsupported.toml".into(),
        cases: public
            .cases
            .into_iter()
            .filter(|c| c.group == "trtllm-v061-static")
            .take(3)
            .map(|mut c| {
                c.system.gpu = "NoSuch-GPU".into();
                c
            })
            .collect(),
    };
    let e = run(&unsupported, &[], Cv::None).unwrap_err().to_string();
    assert!(
        e.contains("no case the engines support") && e.contains("NoSuch-GPU"),
        "{e}"
    );
    // Out of evaluations: not converged, the best point so far.
    let opts = options(&[&format!("{H100_POWER}=300..700")], Cv::None, 3);
    let c = calibrate::calibrate(&harness(), &file, "0", &opts).unwrap();
    assert!(!c.converged());
    assert!(calibration_table(&c).contains("NOT CONVERGED"));
}

/// The serving runs of a cases file are scored but not fitted on by default: the fit is the
/// one without them, and they are predicted in sample and out of fold. `--serving fit` puts
/// them in the objective; `--serving exclude` leaves them out before anything is prepared (a
/// serving copy of a static case with nothing a simulation needs is not even an error). Each
/// says so where the fit's provenance is written.
#[test]
fn serving_runs_are_scored_fitted_or_left_out() {
    let mut file = synthetic(&["g-a", "g-i"], &[&format!("{H100_POWER}=450")]);
    let scored = file.cases.len();
    let mut serving = file
        .cases
        .iter()
        .find(|c| c.inference.is_some())
        .unwrap()
        .clone();
    serving.id.push_str("-served");
    serving.inference.as_mut().unwrap().mode = perfcast_validation::cases::Mode::Server;
    file.cases.push(serving);
    let opts = |serving| Options {
        serving,
        ..options(
            &[&format!("{H100_POWER}=300..700")],
            Cv::Groups,
            Settings::default().max_evals,
        )
    };
    let h = harness();
    let excluded = calibrate::calibrate(&h, &file, "0", &opts(ServingCases::Exclude)).unwrap();
    assert_eq!(excluded.cases.len(), scored);
    assert_eq!(excluded.skipped, (0, 0, 0));
    assert!(
        excluded
            .notes
            .iter()
            .any(|n| n.starts_with("1 cases simulated as serving runs") && n.contains("left out")),
        "{:?}",
        excluded.notes
    );
    assert!(calibration_table(&excluded).contains("without its serving runs (--serving exclude)"));
    let residuals = excluded.residuals_toml().unwrap().unwrap();
    assert!(
        residuals.contains("--serving exclude --cv groups"),
        "{residuals}"
    );
    assert!(
        residuals.contains("without its serving runs"),
        "{residuals}"
    );
    // Scored only (the default): the same fit, the serving copy (its engine unknown: the
    // fallback profile) predicted at it and out of fold.
    let scored_only = calibrate::calibrate(&h, &file, "0", &opts(ServingCases::default())).unwrap();
    assert_eq!(scored_only.cases.len(), scored + 1);
    assert_eq!(scored_only.skipped, (0, 0, 0));
    assert_eq!(scored_only.params[0].fitted, excluded.params[0].fitted);
    assert_eq!(scored_only.params[0].cases, excluded.params[0].cases);
    assert_eq!(scored_only.fit.f, excluded.fit.f);
    let served = scored_only
        .cases
        .iter()
        .position(|c| c.id.ends_with("-served"))
        .unwrap();
    assert!(scored_only.in_sample[served].is_some());
    assert!(scored_only.out_of_fold[served].is_some());
    assert!(
        scored_only
            .notes
            .iter()
            .any(|n| n.contains("scored, not fitted on (--serving fit")),
        "{:?}",
        scored_only.notes
    );
    let table = calibration_table(&scored_only);
    assert!(!table.contains("without its serving runs") && !table.contains("runs fitted on"));
    // Fitted on: one more case in the objective.
    let fitted = calibrate::calibrate(&h, &file, "0", &opts(ServingCases::Fit)).unwrap();
    assert_eq!(fitted.cases.len(), scored + 1);
    assert_eq!(fitted.params[0].cases, excluded.params[0].cases + 1);
    assert!(calibration_table(&fitted).contains("with its serving runs fitted on (--serving fit)"));
    // Nothing but serving runs, scored only: nothing to fit on, said with the way out.
    let mut only = file.clone();
    only.cases.retain(|c| c.id.ends_with("-served"));
    let e = calibrate::calibrate(&h, &only, "0", &opts(ServingCases::Score))
        .unwrap_err()
        .to_string();
    assert!(e.contains("use --serving fit"), "{e}");
}

/// What calibrate shares between cases (one composition per system key; only the compute
/// unit when the key is the compute unit's) changes no prediction: every public case
/// evaluates the same with a shared system as with its own, and as `validate` runs it. In
/// debug, on a fixed sample (the first three cases of each group: every group, in seconds);
/// optimised (`cargo test --release`), on every case.
#[test]
fn shared_systems_change_no_prediction() {
    use perfcast_validation::overlay::Entry;
    let file = CasesFile::load(&perfcast_validation::locate_cases(None).unwrap()).unwrap();
    let h = harness();
    let mut per_group = std::collections::HashMap::<&str, usize>::new();
    let prepared: Vec<_> = file
        .cases
        .iter()
        .filter(|c| {
            let n = per_group.entry(c.group.as_str()).or_default();
            *n += 1;
            !cfg!(debug_assertions) || *n <= 3
        })
        .map(|c| h.prepare(c))
        .collect();
    let mut shared: Vec<(String, perfcast_validation::Result<perfcast_core::System>)> = Vec::new();
    let mut compared = 0;
    for p in prepared.iter().filter(|p| p.runnable()) {
        // The case's own value of its compute unit's GEMM efficiency, set as an overlay key
        // (the compute unit is rebuilt, wrapped in the kernel tables its preset names).
        let keys = p.keys().unwrap();
        let Some(key) = keys
            .keys()
            .find(|k| k.starts_with("components.") && k.ends_with(".matmul_efficiency"))
            .map(str::to_string)
        else {
            continue;
        };
        let entries = vec![Entry::number(&key, keys.number(&key).unwrap())];
        let k = h.system_key(p, &entries).unwrap();
        if !shared.iter().any(|(x, _)| *x == k) {
            shared.push((k.clone(), h.compose(p, &entries)));
        }
        let system = shared.iter().find(|(x, _)| *x == k).unwrap().1.clone();
        let with_shared = h.evaluate_on(p, &entries, Some(system));
        assert_eq!(with_shared, h.evaluate(p, &entries), "{}", p.case.id);
        assert_eq!(with_shared, h.run_case(p.case), "{}", p.case.id);
        compared += 1;
    }
    assert!(
        compared > 50 && shared.len() < compared / 4,
        "{compared} {}",
        shared.len()
    );
}

/// What calibrate re-times instead of simulating (the schedule of an offline serving run,
/// recorded at one set of values) predicts what the simulation does at others; a run
/// under a rate records no schedule. The cheapest offline case of each public serving group
/// (dense and MoE) and one server case, at the configuration's values and at other hosts.
#[test]
fn a_recorded_serving_schedule_predicts_as_the_simulation() {
    use perfcast_validation::cases::Mode;
    use perfcast_validation::overlay::Entry;
    use perfcast_validation::serving::ServingRun;
    let file = CasesFile::load(&perfcast_validation::locate_cases(None).unwrap()).unwrap();
    let h = harness();
    let work = |c: &&perfcast_validation::cases::Case| {
        let i = c.inference.as_ref().unwrap();
        i.num_requests.unwrap_or(500) * (i.input_len + i.output_len)
    };
    let mode_of = |c: &perfcast_validation::cases::Case| c.inference.as_ref().map(|i| i.mode);
    // Runs of 6 M tokens at most, for a quick debug build (the closed loops of
    // `trtllm-dsr1-blog`, 16 M tokens each, are covered by the serving crate's closed-loop
    // test): the cheapest offline run of each group, the cheapest server-mode run (a closed
    // loop).
    let mut picked: Vec<&perfcast_validation::cases::Case> = Vec::new();
    for mode in [Mode::OfflineMaxThroughput, Mode::Server] {
        let mut of_mode: Vec<_> = file
            .cases
            .iter()
            .filter(|c| mode_of(c) == Some(mode) && work(c) <= 6_000_000)
            .collect();
        of_mode.sort_by_key(work);
        for c in of_mode {
            let seen = picked
                .iter()
                .any(|p| mode_of(p) == Some(mode) && (mode == Mode::Server || p.group == c.group));
            if !seen {
                picked.push(c);
            }
        }
    }
    assert!(picked.len() >= 4, "{}", picked.len());
    let slower = [
        Entry::number("options.step_overhead_us", 5000.0),
        Entry::number("options.host_launch_us", 30.0),
    ];
    for case in picked {
        let p = h.prepare(case);
        let mut how = ServingRun::Record(None);
        let recorded = h.evaluate_with(&p, &[], None, &mut how);
        assert_eq!(recorded, h.evaluate(&p, &[]), "{}", case.id);
        let ServingRun::Record(schedule) = how else {
            unreachable!()
        };
        // Offline runs and closed loops on one instance are recorded; a rate is simulated.
        let i = case.inference.as_ref().unwrap();
        let one_instance = case.parallel.dp.unwrap_or(1) == 1;
        let replayable = i.mode == Mode::OfflineMaxThroughput
            || (i.concurrency.is_some() && i.request_rate.is_none() && one_instance);
        assert_eq!(schedule.is_some(), replayable, "{}", case.id);
        let Some(schedule) = schedule else { continue };
        let entries = h.applicable(&p, &slower);
        assert_eq!(entries.len(), 2, "{}", case.id);
        let replayed = h.evaluate_with(&p, &entries, None, &mut ServingRun::Replay(&schedule));
        let simulated = h.evaluate(&p, &entries);
        assert_eq!(replayed.status, perfcast_validation::report::Status::Ok);
        let (a, b) = (
            first_metric(&replayed).unwrap(),
            first_metric(&simulated).unwrap(),
        );
        let at_start = first_metric(&recorded).unwrap();
        assert!(
            (a.predicted / at_start.predicted - 1.0).abs() > 0.005,
            "{}: the hosts moved nothing: {} {}",
            case.id,
            a.predicted,
            at_start.predicted
        );
        assert!(
            (a.predicted - b.predicted).abs() <= 1e-9 * b.predicted.abs(),
            "{}: {} vs {}",
            case.id,
            a.predicted,
            b.predicted
        );
    }
}

/// Each default parameter that applies to no case of the file is noted once, however many
/// keys it ties (a stack parameter ties eight); one that applies through some of its keys
/// names the others in one note.
#[test]
fn default_parameters_left_out_are_noted_once_each() {
    let file = synthetic(&["g-a", "g-i"], &[]);
    let opts = options(&[], Cv::None, 20);
    let c = calibrate::calibrate(&harness(), &file, "0", &opts).unwrap();
    let left_out: Vec<&String> = c.notes.iter().filter(|n| n.contains("left out")).collect();
    assert!(!left_out.is_empty(), "{:?}", c.notes);
    for d in calibrate::DEFAULT_PARAMS {
        let label = d.keys.join(",");
        let about = left_out.iter().filter(|n| n.contains(&label)).count();
        assert!(about <= 1, "{label}: {left_out:#?}");
    }
    for n in &left_out {
        assert!(
            n.ends_with("applies to no case of synthetic-cases.toml: left out")
                || n.ends_with("to no case: left out"),
            "{n}"
        );
    }
}
