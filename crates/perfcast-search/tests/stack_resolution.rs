//! A command resolves its configuration's software stack and model once
//! (`perfcast_scenario::Scenario`): the search's scenario, its template and space, and the
//! error bars' class all read the one resolved stack and model, as do the predict, infer and
//! serve scenarios. Counted on this thread with `perfcast_scenario::stacks_resolved` and
//! `models_resolved` (each test runs on its own thread).

// A test target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_config::{Config, Plugins, Sources};
use perfcast_scenario::TrainingScenario;
use perfcast_scenario::{
    models_resolved, stacks_resolved, InferenceScenario, Scenario, ServingScenario,
};
use perfcast_search::config::SECTION;
use perfcast_search::load_scenario;
use perfcast_validation::cases::Kind;
use perfcast_validation::intervals::Class;
use std::path::PathBuf;

fn load(file: &str, sets: &[&str]) -> Config {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(file);
    let plugins = Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"));
    let mut s = Sources::files(&plugins, [path])
        .with_sets(sets.iter().copied())
        .without_env();
    s.sections.push(SECTION);
    s.sections.extend(perfcast_scenario::serving::SECTIONS);
    Config::load(&s).unwrap()
}

/// How many stacks `f` resolves (and that it resolves the model as often).
fn resolutions(f: impl FnOnce()) -> usize {
    let (stacks, models) = (stacks_resolved(), models_resolved());
    f();
    let n = stacks_resolved() - stacks;
    assert_eq!(models_resolved() - models, n, "model resolutions");
    n
}

#[test]
fn a_search_resolves_its_stack_once() {
    // The experiment's own stack (its family feeds the error bars) and the generic one.
    for sets in [&[][..], &["stack=\"generic\""]] {
        let cfg = load("configs/experiments/gpt3-175b-a100.toml", sets);
        let n = resolutions(|| {
            let resolved = Scenario::training(&cfg);
            let sc = load_scenario(&resolved).unwrap();
            assert!(!sc.trainings.is_empty());
            let class = Class::of_scenario(&resolved, Kind::Training);
            assert!(class.stack.is_some());
        });
        assert_eq!(n, 1, "stack resolutions for one search load with {sets:?}");
    }
}

#[test]
fn predict_infer_and_serve_resolve_their_stack_once() {
    let train = load("configs/experiments/gpt3-175b-a100.toml", &[]);
    assert_eq!(
        resolutions(|| {
            TrainingScenario::from_config(&train).unwrap();
        }),
        1
    );
    let infer = load("configs/experiments/llama2-70b-h100.toml", &[]);
    assert_eq!(
        resolutions(|| {
            InferenceScenario::from_config(&infer).unwrap();
        }),
        1
    );
    let serve = load("configs/serving/llama3.1-8b-h100.toml", &[]);
    assert_eq!(
        resolutions(|| {
            ServingScenario::from_config(&serve).unwrap();
        }),
        1
    );
}
