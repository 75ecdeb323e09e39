//! The search checks the memory of a run of partial recompute counts by bisection (memory
//! does not grow with the layers recomputed): the same result as checking every count, plans
//! and counts alike, on every shipped training experiment searched (its stack and the generic
//! one; 5 s in all in a debug build).

// A test target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_config::{Config, Plugins, Sources};
use perfcast_scenario::Scenario;
use perfcast_search::config::SECTION;
use perfcast_search::load_scenario;
use std::path::{Path, PathBuf};

fn load(path: &Path, sets: &[&str]) -> Config {
    let plugins = Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"));
    let mut s = Sources::files(&plugins, [path.to_path_buf()])
        .with_sets(sets.iter().copied())
        .without_env();
    s.sections.push(SECTION);
    Config::load(&s).unwrap()
}

#[test]
fn bisected_memory_checks_equal_the_scan() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut compared = 0;
    for f in &files {
        for sets in [&[][..], &["stack=\"generic\""]] {
            let cfg = load(f, sets);
            let resolved = Scenario::training(&cfg);
            // Inference-only experiments have no training scenario.
            let Ok(sc) = load_scenario(&resolved) else {
                continue;
            };
            // One thread: the counts of pruning by the bound depend on the order plans are
            // timed in, which threads change.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap();
            let (bisected, scanned) = pool.install(|| (sc.search(), sc.search_scanning_memory()));
            let name = format!("{} {sets:?}", f.display());
            match (bisected, scanned) {
                (Ok(a), Ok(b)) => {
                    let counts = |r: &perfcast_search::SearchResult| {
                        let s = &r.summary;
                        [
                            s.enumerated,
                            s.pruned,
                            s.evaluated,
                            s.pruned_invalid,
                            s.pruned_memory,
                            s.pruned_bound,
                            s.groups,
                            s.layer_programs,
                        ]
                    };
                    assert_eq!(counts(&a), counts(&b), "{name}: counts");
                    let plans = |r: &perfcast_search::SearchResult| {
                        r.plans
                            .iter()
                            .map(|p| (p.plan.clone(), p.objective.to_bits(), p.placement.clone()))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(plans(&a), plans(&b), "{name}: plans");
                    let fronts = |r: &perfcast_search::SearchResult| {
                        serde_json::to_string(&(&r.pareto, &r.pareto_devices, &r.fastest)).unwrap()
                    };
                    assert_eq!(fronts(&a), fronts(&b), "{name}: fronts");
                    assert!(!a.plans.is_empty(), "{name}");
                    compared += 1;
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}"),
                (a, b) => panic!("{name}: bisected {:?}, scanned {:?}", a.is_ok(), b.is_ok()),
            }
        }
    }
    eprintln!("{compared} searches compared");
    assert!(compared >= 12, "{compared} searches compared");
}
