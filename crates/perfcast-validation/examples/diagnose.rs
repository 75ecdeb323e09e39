//! `cargo run -p perfcast-validation --example diagnose -- CASE_ID...`: the engine's own report
//! for cases of the repository's cases file, as the harness maps them
//! (`PERFCAST_DIAGNOSE_OPS=1`: also every op of one layer, timed).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use perfcast_validation::cases::{CasesFile, Kind, Recompute};
use perfcast_validation::harness::{self, Harness};

fn main() {
    let path = perfcast_validation::locate_cases(None).expect("cases file");
    let file = CasesFile::load(&path).expect("valid cases file");
    let h = Harness::new(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    )
    .expect("registry");
    for arg in std::env::args().skip(1) {
        // `ID` or `ID:VPP` (override the interleaving).
        let (id, vpp) = match arg.split_once(':') {
            Some((i, v)) => (i.to_string(), v.parse::<u32>().ok()),
            None => (arg.clone(), None),
        };
        let Some(case) = file.cases.iter().find(|c| c.id == id) else {
            eprintln!("no case {id}");
            continue;
        };
        println!("=== {id}");
        let (matched, stack) = h.stacks().of(case);
        let model = harness::model_spec(case, stack);
        let system = harness::system_for(case, h.plugins()).expect("system");
        println!("stack: {}", matched.describe());
        match case.kind {
            Kind::Training => {
                let mut options = perfcast_engine::TrainingOptions::default();
                stack.apply_training_options(&mut options, &|_| false);
                let t = perfcast_engine::training::Training::with_options(
                    model,
                    system,
                    h.registry(),
                    &options,
                )
                .expect("engine");
                let policy = match case.training.as_ref().unwrap().recompute {
                    Recompute::None | Recompute::Unknown => "none",
                    Recompute::Selective => "selective",
                    Recompute::Full => "full",
                };
                let mut plan = harness::training_plan(case, policy, stack).expect("plan");
                if let Some(v) = vpp {
                    plan.vpp = v;
                }
                match t.evaluate_placed(&plan, &harness::placement(&plan)) {
                    Ok(r) => println!("{}", perfcast_report::training::table(&r)),
                    Err(e) => println!("error: {e}"),
                }
                // `--ops`: every op of one layer, the ends and the optimizer, timed.
                if std::env::var("PERFCAST_DIAGNOSE_OPS").is_ok() {
                    for l in t.op_breakdown(&plan).unwrap_or_default() {
                        println!(
                            "  {:<18} {:<12} {:>10.1} us x{} {:?}",
                            l.part,
                            l.class,
                            l.time.time.0 * 1e6,
                            l.count,
                            l.op
                        );
                    }
                }
            }
            Kind::Inference => {
                let plan = harness::inference_plan(case, stack).expect("plan");
                let mut options = h.inference_options.clone();
                stack.apply_inference_options(&mut options, &|_| false);
                let e = perfcast_engine::inference::Inference::new(model, system, options)
                    .expect("engine");
                match e.evaluate(&plan) {
                    Ok(r) => println!(
                        "{}",
                        perfcast_report::inference::table(
                            &r,
                            &perfcast_report::inference::notes(&r)
                        )
                    ),
                    Err(e) => println!("error: {e}"),
                }
            }
        }
    }
}
