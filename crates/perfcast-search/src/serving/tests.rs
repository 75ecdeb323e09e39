//! Tests of the deployment search on a small space: the counts, the Pareto front against a
//! brute-force check, the best and closest deployments per SLO, independence from the
//! thread count, and bad inputs.

use super::*;
use perfcast_config::Sources;

fn config(sets: &[&str]) -> Config {
    let mut base = vec![
        "serving.input_len=256",
        "serving.output_len=32",
        "slo.ttft_ms=500.0",
        "slo.tpot_ms=20.0",
        "serving_search.gpus=4",
        "serving_search.tp=[1, 2]",
        "serving_search.max_batch=[16, 64]",
        "serving_search.max_num_tokens=[2048]",
        "serving_search.disaggregated=true",
        "serving_search.prefill_tp=[1]",
        "serving_search.decode_tp=[1, 2]",
        "serving_search.concurrency=[1, 8]",
        "serving_search.requests_per_client=2",
        "serving_search.min_requests=8",
    ];
    base.extend_from_slice(sets);
    let mut s = Sources::files(
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        ["preset:llama3.1-8b", "preset:dgx-h100"],
    )
    .without_env()
    .with_sets(base.iter().map(|x| x.to_string()));
    s.sections.extend(["serving", "slo", SECTION]);
    Config::load(&s).expect("config")
}

fn dominates(a: &SearchPoint, b: &SearchPoint) -> bool {
    a.tokens_per_s_per_gpu >= b.tokens_per_s_per_gpu
        && a.tokens_per_s_per_user >= b.tokens_per_s_per_user
        && (a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu
            || a.tokens_per_s_per_user > b.tokens_per_s_per_user)
}

#[test]
fn small_space_front_best_and_threads() {
    let s = load(&config(&[])).unwrap();
    let r = search(&s).unwrap();
    // Aggregated: 2 TP x 2 max_batch; disaggregated: (tp1, tp1) splits 1+3, 2+2, 3+1 and
    // (tp1, tp2) splits 1+1, 2+1, each at 2 max_batch.
    assert_eq!((r.configurations, r.refused), (14, 0));
    assert!(r.points >= 14);
    // The front: no point of it is dominated by another of it, and it is sorted by tokens/s
    // per user.
    for a in &r.pareto {
        for b in &r.pareto {
            assert!(!dominates(a, b), "{} dominates {}", a.label, b.label);
        }
    }
    assert!(r
        .pareto
        .windows(2)
        .all(|w| w[0].tokens_per_s_per_user >= w[1].tokens_per_s_per_user));
    // The best under [slo] meets it and is the top point.
    let b = &r.best[0];
    let best = b.best.as_ref().expect("a deployment meets the SLO");
    assert!(best.slo_met[0] && b.closest.is_none());
    assert_eq!(r.top[0].label, best.label);
    assert!(r
        .top
        .iter()
        .all(|p| p.slo_met[0] && p.tokens_per_s_per_gpu <= best.tokens_per_s_per_gpu));
    // Nothing depends on the thread count.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| search(&s).unwrap());
    let strip = |mut r: ServingSearchResult| {
        r.seconds = 0.0;
        r.threads = 0;
        serde_json::to_string(&r).unwrap()
    };
    assert_eq!(strip(one), strip(r));
}

#[test]
fn infeasible_slos_report_the_closest() {
    let s = load(&config(&[
        "slo.ttft_ms=0.001",
        "serving_search.slos=[{ tpot_ms = 1000.0 }]",
    ]))
    .unwrap();
    let r = search(&s).unwrap();
    assert_eq!(r.best.len(), 2);
    let none = &r.best[0];
    assert!(none.best.is_none());
    let c = none.closest.as_ref().expect("closest");
    let all = search(&load(&config(&["slo.ttft_ms=0.001"])).unwrap()).unwrap();
    let min = all
        .top
        .iter()
        .chain(all.pareto.iter())
        .map(|p| p.slo_factor[0])
        .fold(f64::INFINITY, f64::min);
    assert!(c.slo_factor[0] <= min + 1e-12 && c.slo_factor[0] > 1.0);
    // The loose second SLO is met; the top list follows the first (none meets it).
    assert!(r.best[1].best.is_some());
    assert!(r.top.is_empty());
}

#[test]
fn bad_inputs_name_the_key() {
    for (sets, want) in [
        (&["serving_search.gpus=0"][..], "serving_search.gpus"),
        (&["serving_search.gpus=64"], "more than system.devices"),
        (&["serving_search.tp=[]"], "serving_search.tp"),
        (
            &["serving_search.max_batch=[0, 4]"],
            "serving_search.max_batch",
        ),
        (
            &[
                "serving_search.aggregated=false",
                "serving_search.disaggregated=false",
            ],
            "nothing to search",
        ),
        (
            &["serving_search.slos=[{ ttft_ms = -1.0 }]"],
            "serving_search.slos[0]",
        ),
        (&["serving_search.colour=1"], "colour"),
    ] {
        let e = match load(&config(sets)) {
            Ok(_) => panic!("{sets:?} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{sets:?}: {e}");
    }
    // A space whose every deployment is larger than the budget is empty, with the reason.
    let s = load(&config(&[
        "serving_search.gpus=1",
        "serving_search.tp=[2]",
        "serving_search.decode_tp=[2]",
    ]))
    .unwrap();
    let e = search(&s).unwrap_err().to_string();
    assert!(e.contains("no deployment") && e.contains("1 GPUs"), "{e}");
}

/// A mixture-of-experts model's expert layouts are walked: with `tp = [8]` the default `ep`
/// `[1, tp]` and attention DP on and off give three layouts per scheduler setting (experts
/// split over the TP ranks, spread with TP attention, spread with DP attention); an `ep` that
/// does not divide the instance is skipped; a dense model walks none.
#[test]
fn moe_expert_layouts_are_walked() {
    let moe = |sets: &[&str]| {
        let mut base = vec![
            "serving.input_len=256",
            "serving.output_len=16",
            "serving.weight_dtype=\"fp8\"",
            "serving.activation_dtype=\"fp8\"",
            "serving_search.gpus=8",
            "serving_search.tp=[8]",
            "serving_search.max_batch=[64]",
            "serving_search.max_num_tokens=[4096]",
            "serving_search.concurrency=[8]",
            "serving_search.requests_per_client=1",
            "serving_search.min_requests=8",
        ];
        base.extend_from_slice(sets);
        let mut s = Sources::files(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            ["preset:qwen3-30b-a3b", "preset:dgx-h100"],
        )
        .without_env()
        .with_sets(base.iter().map(|x| x.to_string()));
        s.sections.extend(["serving", "slo", SECTION]);
        search(&load(&Config::load(&s).expect("config")).unwrap()).unwrap()
    };
    let r = moe(&[]);
    let mut layouts: Vec<(u32, bool)> = r.top.iter().map(|p| (p.ep, p.attention_dp)).collect();
    layouts.sort_unstable();
    layouts.dedup();
    assert_eq!(r.configurations, 3);
    assert_eq!(layouts, [(1, false), (8, false), (8, true)], "{:?}", r.top);
    assert!(r.top.iter().any(|p| p.label.contains("dep8")));
    let r = moe(&[
        "serving_search.ep=[3, 4]",
        "serving_search.attention_dp=[false]",
    ]);
    assert_eq!(r.configurations, 1);
    assert_eq!((r.top[0].ep, r.top[0].attention_dp), (4, false));
    // Disaggregated: each pool walks its own layouts (3 for the prefill pool x 3 for the
    // decode pool, one split of 4 + 4 GPUs), beside the 3 aggregated ones.
    let r = moe(&[
        "serving_search.disaggregated=true",
        "serving_search.prefill_tp=[4]",
        "serving_search.decode_tp=[4]",
    ]);
    assert_eq!(r.configurations, 3 + 9);
    let disagg: Vec<&str> = r
        .top
        .iter()
        .filter(|p| p.disaggregated)
        .map(|p| p.label.as_str())
        .collect();
    assert!(
        disagg.iter().any(|l| l.contains("tp4 ep4 + 1 x tp4 dep4")),
        "{disagg:?}"
    );
    let dense = search(&load(&config(&[])).unwrap()).unwrap();
    assert!(dense.top.iter().all(|p| p.ep == 1 && !p.attention_dp));
}
