//! For every public training case of configs/validation/cases.toml: search the plans of the
//! case's model, system and global batch, and compare the best with the published plan the
//! case used. The best must be at least as fast, or the exception must have a reason listed
//! here (printed with `--nocapture`).
//!
//! The release tier: a search per public case takes about two minutes unoptimised, so this
//! file is compiled only without debug assertions. `.ci/run` runs it as
//! `cargo test --release -p perfcast-search --test validation_cases`.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(not(debug_assertions))]

use perfcast_engine::training::{Training, TrainingPlan};
use perfcast_search::{search, Constraints, Objective, SearchSpace};
use perfcast_validation::cases::{CasesFile, Kind, Recompute};
use perfcast_validation::harness::{model_spec, system_for, training_plan, unsupported_reason};
use std::path::PathBuf;

/// Why a published plan may beat the search's best.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exception {
    /// The published plan does not fit in the model's device memory; the search only returns
    /// plans that fit.
    PublishedDoesNotFit,
    /// The published interleaving degree is outside the searched rule (layers divisible by
    /// pp x vpp, Megatron-LM's requirement).
    VppOutsideSpace,
    /// The published plan fits the device but not the search's memory headroom (the search
    /// keeps `search.memory_headroom` of each device free; e.g. NeMo's Llama 2 70B SFT on 16
    /// H100 at 74 GiB of 80).
    PublishedAboveHeadroom,
}

/// The published plan as the harness evaluates it: an unpublished recompute policy becomes
/// the least recompute that fits.
fn published(
    case: &perfcast_validation::cases::Case,
    t: &Training,
    stack: &perfcast_scenario::Stack,
) -> Option<TrainingPlan> {
    let policies: &[&str] = match case.training.as_ref()?.recompute {
        Recompute::None => &["none"],
        Recompute::Selective => &["selective"],
        Recompute::Full => &["full"],
        Recompute::Unknown => &["none", "selective", "full"],
    };
    let mut first = None;
    for p in policies {
        let plan = training_plan(case, p, stack).ok()?;
        if let Ok(r) = t.evaluate(&plan) {
            if r.memory.fits {
                return Some(plan);
            }
            first.get_or_insert(plan);
        }
    }
    first
}

/// What one case gave: its line of the report, whether it was compared, and its search's
/// time in seconds.
struct Outcome {
    line: String,
    compared: bool,
    seconds: f64,
}

/// Search the plans of one training case and compare the best with its published plan
/// (panics, naming the case, when the published plan wins without an exception).
fn check_case(
    case: &perfcast_validation::cases::Case,
    registry: &perfcast_core::Registry,
    stacks: &perfcast_validation::stacks::StackTable,
) -> Outcome {
    let skipped = |line: String| Outcome {
        line,
        compared: false,
        seconds: 0.0,
    };
    if let Some(why) = unsupported_reason(case) {
        return skipped(format!("{}: skipped ({why})", case.id));
    }
    let system = match system_for(
        case,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    ) {
        Ok(s) => s,
        Err(e) => return skipped(format!("{}: skipped (no system: {e})", case.id)),
    };
    let domain = system.network.first().map(|l| l.domain_size()).unwrap_or(1);
    let t = match Training::new(model_spec(case, stacks.of(case).1), system, registry) {
        Ok(t) => t,
        Err(e) => return skipped(format!("{}: skipped (the engine refuses it: {e})", case.id)),
    };
    let Some(plan) = published(case, &t, stacks.of(case).1) else {
        return skipped(format!(
            "{}: skipped (the engine refuses the published plan)",
            case.id
        ));
    };
    let rep = t.evaluate(&plan).expect("published plan");
    let layers = t.model().layers;
    // The published plan's own values are in the space: its precision, its CP, EP and ETP
    // degrees (each beside 1), a TP cap that admits its TP, micro-batches up to its own.
    let both = |published: u32| {
        let mut v = vec![1, published];
        v.dedup();
        Some(v)
    };
    // The published plans run in Megatron-LM's placement, and a mixture-of-experts plan with
    // its own expert layout: other placements and EP/ETP degrees would only add candidates
    // (and test time: every power of two up to 256 experts made DeepSeek-V3 and Qwen3-235B on
    // 256 GPUs 70-240 s each, 85% of the test's 28 minutes on a loaded 2-core machine).
    let space = SearchSpace {
        cp: both(plan.cp),
        ep: both(plan.ep),
        etp: both(plan.etp),
        placement: Some(vec!["tp-cp-pp-dp".into()]),
        precision: Some(vec![plan.precision]),
        ..SearchSpace::default()
    };
    let constraints = Constraints {
        global_batch: plan.global_batch,
        max_tp: Some(domain.max(plan.tp)),
        max_micro_batch: 16.max(plan.micro_batch),
        ..Constraints::default()
    };
    let started = std::time::Instant::now();
    let res = search(
        std::slice::from_ref(&t),
        &space,
        &constraints,
        &plan,
        Objective::Time,
        1,
    );
    let seconds = started.elapsed().as_secs_f64();
    let best = match res {
        Ok(r) => r.plans.into_iter().next().expect("a plan"),
        Err(e) => {
            let limit = rep.memory.capacity.gib() * (1.0 - constraints.memory_headroom);
            let exception = if !rep.memory.fits {
                Exception::PublishedDoesNotFit
            } else if rep.memory.peak.gib() > limit {
                Exception::PublishedAboveHeadroom
            } else {
                panic!(
                    "{}: the search found nothing ({e}) but the published plan fits, \
                     within the headroom ({:.2} of {limit:.2} GiB)",
                    case.id,
                    rep.memory.peak.gib()
                )
            };
            return Outcome {
                line: format!("{}: exception {exception:?} ({e})", case.id),
                compared: false,
                seconds,
            };
        }
    };
    let (tb, tp) = (best.report.iteration_time.0, rep.iteration_time.0);
    if tb <= tp * (1.0 + 1e-9) {
        return Outcome {
            line: format!(
                "{}: best {tb:.3} s <= published {tp:.3} s ({:.2}x)",
                case.id,
                tp / tb
            ),
            compared: true,
            seconds,
        };
    }
    let limit = rep.memory.capacity.gib() * (1.0 - constraints.memory_headroom);
    let exception = if !rep.memory.fits {
        Exception::PublishedDoesNotFit
    } else if rep.memory.peak.gib() > limit {
        Exception::PublishedAboveHeadroom
    } else if plan.pp > 1
        && plan.vpp > 1
        && !layers.is_multiple_of(plan.pp as u64 * plan.vpp as u64)
    {
        Exception::VppOutsideSpace
    } else {
        panic!(
            "{}: the best plan found ({:?}, {tb} s) is slower than the published one \
             ({plan:?}, {tp} s), which fits and is in the space",
            case.id, best.plan
        );
    };
    Outcome {
        line: format!(
            "{}: exception {exception:?}: best {tb:.3} s > published {tp:.3} s",
            case.id
        ),
        compared: true,
        seconds,
    }
}

/// Every training case, on every core (a case a thread at a time; the report in file order).
#[test]
fn best_plan_at_least_as_fast_as_published() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = CasesFile::load(&root.join("configs/validation/cases.toml")).expect("cases");
    let registry = perfcast_builtins::registry().expect("registry");
    let stacks = perfcast_validation::stacks::StackTable::builtin().expect("stack rules");
    let cases: Vec<_> = file
        .cases
        .iter()
        .filter(|c| c.kind == Kind::Training)
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut outcomes: Vec<(usize, Outcome)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(case) = cases.get(i) else {
                            return mine;
                        };
                        mine.push((i, check_case(case, &registry, &stacks)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    outcomes.sort_by_key(|(i, _)| *i);
    let lines: Vec<&str> = outcomes.iter().map(|(_, o)| o.line.as_str()).collect();
    println!("{}", lines.join("\n"));
    let compared = outcomes.iter().filter(|(_, o)| o.compared).count();
    let mut times: Vec<(f64, &str)> = outcomes
        .iter()
        .map(|(i, o)| (o.seconds, cases[*i].id.as_str()))
        .collect();
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = times.iter().map(|t| t.0).sum();
    println!("searches: {total:.1} s in all; the slowest:");
    for (s, id) in times.iter().take(10) {
        println!("  {s:7.2} s  {id}");
    }
    assert!(compared >= 20, "only {compared} cases compared");
}
