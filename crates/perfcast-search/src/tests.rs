//! Search tests: the fast path equals `evaluate`, the search equals a brute-force walk of the
//! same space, results do not depend on the thread count, bad input names its key.

use crate::search::search;
use crate::space::{Constraints, Objective, SearchSpace};
use crate::SearchError;
use perfcast_core::workload::{FfnAct, ModelSpec};
use perfcast_core::DType;
use perfcast_engine::training::{LayerCache, Placement, Training, TrainingPlan};
use perfcast_testkit::a100_from_registry;

fn small_model() -> ModelSpec {
    ModelSpec {
        name: "small".into(),
        tied_embeddings: true,
        ..ModelSpec::dense(8, 1024, 16, 4096, FfnAct::Gelu, 32000, 1024)
    }
}

fn training(devices: u32) -> Training {
    let registry = perfcast_builtins::registry().expect("registry");
    let sys = a100_from_registry(&registry, devices).expect("system");
    Training::new(small_model(), sys, &registry).expect("training")
}

/// A small space with every list explicit (the brute force walks the same lists).
fn small_space() -> SearchSpace {
    SearchSpace {
        tp: Some(vec![1, 2, 4]),
        pp: Some(vec![1, 2, 4]),
        dp: None,
        cp: Some(vec![1, 2]),
        ep: None,
        etp: None,
        vpp: Some(vec![1, 2]),
        micro_batch: Some(vec![1, 2, 4]),
        sp: Some(vec![false, true]),
        recompute: Some(vec!["none".into(), "selective".into(), "full".into()]),
        partial_recompute: Some(true),
        zero_stage: Some(vec![0, 1, 3]),
        schedule: Some(vec![
            "1f1b".into(),
            "interleaved-1f1b".into(),
            "gpipe".into(),
        ]),
        precision: Some(vec![DType::Bf16]),
        tp_comm_overlap: Some(vec![false, true]),
        overlap_grad_reduce: None,
        overlap_param_gather: None,
        placement: None,
        axes: None,
    }
}

fn constraints(gb: u32) -> Constraints {
    Constraints {
        global_batch: gb,
        ..Constraints::default()
    }
}

/// Every plan of `small_space` at every placement that places it differently.
fn brute_placed(devices: u32, gb: u32) -> Vec<(TrainingPlan, Placement)> {
    let mut out = Vec::new();
    for plan in brute_plans(devices, gb) {
        let mut seen = Vec::new();
        for pl in Placement::all() {
            let e = pl.effective(plan.tp, plan.cp, plan.pp, plan.dp);
            if !seen.contains(&e) {
                seen.push(e);
                out.push((plan.clone(), pl));
            }
        }
    }
    out
}

/// Every plan of `small_space` on `devices`, the way the search folds redundant switches.
fn brute_plans(devices: u32, gb: u32) -> Vec<TrainingPlan> {
    let s = small_space();
    let mut out = Vec::new();
    let layers = small_model().layers as u32;
    for &tp in s.tp.as_ref().unwrap() {
        for &cp in s.cp.as_ref().unwrap() {
            for &pp in s.pp.as_ref().unwrap() {
                let used = tp * cp * pp;
                if !devices.is_multiple_of(used) {
                    continue;
                }
                let dp = devices / used;
                for &vpp in s.vpp.as_ref().unwrap() {
                    if pp == 1 && vpp > 1 {
                        continue;
                    }
                    let scheds: Vec<&str> = if pp == 1 {
                        vec!["1f1b"]
                    } else if vpp > 1 {
                        vec!["interleaved-1f1b"]
                    } else {
                        vec!["1f1b", "gpipe"]
                    };
                    let stage = vpp * layers.div_ceil(pp * vpp);
                    for &mb in s.micro_batch.as_ref().unwrap() {
                        for &sp in if tp > 1 {
                            &[false, true][..]
                        } else {
                            &[false][..]
                        } {
                            for &zero in if dp * cp > 1 {
                                &[0u8, 1, 3][..]
                            } else {
                                &[0u8][..]
                            } {
                                for &tpo in if tp > 1 {
                                    &[false, true][..]
                                } else {
                                    &[false][..]
                                } {
                                    for sched in &scheds {
                                        let mut rcs: Vec<(&str, Option<u32>)> = vec![
                                            ("none", None),
                                            ("selective", None),
                                            ("full", None),
                                        ];
                                        for k in 1..stage {
                                            rcs.push(("full", Some(k)));
                                        }
                                        for (rc, k) in rcs {
                                            out.push(TrainingPlan {
                                                tp,
                                                pp,
                                                dp,
                                                cp,
                                                vpp,
                                                sp,
                                                zero_stage: zero,
                                                micro_batch: mb,
                                                global_batch: gb,
                                                recompute: rc.into(),
                                                recompute_layers: k,
                                                schedule: Some(sched.to_string()),
                                                tp_comm_overlap: tpo,
                                                ..TrainingPlan::default()
                                            });
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

/// The fast path gives `evaluate`'s step time and peak memory (within 1e-9 relative; in fact
/// bit for bit) on every plan of the space, and refuses exactly the plans `evaluate` refuses.
#[test]
fn fast_path_equals_evaluate() {
    let t = training(16);
    let rnames = t.recompute_names();
    let snames = t.schedule_names();
    let mut cache = LayerCache::new();
    let mut checked = 0;
    for (i, plan) in brute_plans(16, 64).into_iter().enumerate() {
        if i % 7 != 0 {
            continue; // a sample keeps the test quick
        }
        let full = t.evaluate(&plan);
        let fast = t.plan_group(&plan, &mut cache).and_then(|mut g| {
            let r = rnames.iter().position(|n| *n == plan.recompute).unwrap();
            let s = snames
                .iter()
                .position(|n| *n == plan.schedule_name())
                .unwrap();
            g.set_variant(r, plan.recompute_layers, s)?;
            Ok((g.time()?, g.memory_peak()?))
        });
        match (full, fast) {
            (Ok(rep), Ok((time, mem))) => {
                assert!(rel(rep.iteration_time.0, time) < 1e-9, "{plan:?}");
                assert!(rel(rep.memory.peak.0, mem) < 1e-9, "{plan:?}");
                checked += 1;
            }
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "evaluate {:?} vs fast path {:?} for {plan:?}",
                a.err(),
                b.err()
            ),
        }
    }
    assert!(checked > 100, "only {checked} plans compared");
}

/// The search's top N and Pareto front equal those of a brute-force `evaluate` of every plan.
#[test]
fn search_equals_brute_force() {
    let t = training(16);
    let gb = 64;
    let limit = t.capacity().0;
    let mut all: Vec<(f64, f64)> = Vec::new();
    for (plan, pl) in brute_placed(16, gb) {
        if let Ok(r) = t.evaluate_placed(&plan, &pl) {
            if r.memory.peak.0 <= limit {
                all.push((r.iteration_time.0, r.memory.peak.0));
            }
        }
    }
    assert!(all.len() > 1000, "{}", all.len());
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let top = 7;
    let res = search(
        std::slice::from_ref(&t),
        &small_space(),
        &constraints(gb),
        &TrainingPlan::default(),
        Objective::Time,
        top,
    )
    .expect("search");
    let got: Vec<f64> = res
        .plans
        .iter()
        .map(|p| p.report.iteration_time.0)
        .collect();
    let want: Vec<f64> = all.iter().take(top).map(|a| a.0).collect();
    assert_eq!(got, want);
    for p in &res.plans {
        assert!(p.report.memory.fits);
    }
    let s = &res.summary;
    assert_eq!(s.enumerated, s.pruned + s.evaluated);
    assert_eq!(s.evaluated + s.pruned_bound, all.len() as u64);
    // Pareto front by brute force: sort by memory, keep strictly faster ones.
    let mut by_mem = all.clone();
    by_mem.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.total_cmp(&b.0)));
    let mut front: Vec<(f64, f64)> = Vec::new();
    for p in by_mem {
        if front.last().is_none_or(|l| p.0 < l.0) {
            front.push(p);
        }
    }
    let gib = 1024.0 * 1024.0 * 1024.0;
    let got: Vec<(f64, f64)> = res
        .pareto
        .iter()
        .map(|p| (p.time_s, p.memory_gib * gib))
        .collect();
    assert_eq!(got.len(), front.len());
    for (g, w) in got.iter().zip(&front) {
        assert!(
            rel(g.0, w.0) < 1e-12 && rel(g.1, w.1) < 1e-12,
            "{g:?} vs {w:?}"
        );
    }
    // The memory objective ranks by peak memory.
    let res = search(
        std::slice::from_ref(&t),
        &small_space(),
        &constraints(gb),
        &TrainingPlan::default(),
        Objective::Memory,
        3,
    )
    .expect("search");
    let mut mems: Vec<f64> = all.iter().map(|a| a.1).collect();
    mems.sort_by(f64::total_cmp);
    let got: Vec<f64> = res.plans.iter().map(|p| p.report.memory.peak.0).collect();
    assert_eq!(got, mems[..3].to_vec());
}

/// One thread or two: the same plans, in the same order, and the same Pareto front.
#[test]
fn deterministic_across_thread_counts() {
    let t = training(16);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            search(
                std::slice::from_ref(&t),
                &small_space(),
                &constraints(64),
                &TrainingPlan::default(),
                Objective::Time,
                5,
            )
            .unwrap()
        })
    };
    let (a, b) = (run(1), run(2));
    let key = |r: &crate::SearchResult| {
        (
            serde_json::to_string(&r.plans).unwrap(),
            serde_json::to_string(&r.pareto).unwrap(),
        )
    };
    assert_eq!(key(&a), key(&b));
}

/// Several device counts: the front of time vs GPU count keeps only counts that are faster.
#[test]
fn device_counts_front() {
    let ts = vec![training(8), training(16)];
    let res = search(
        &ts,
        &small_space(),
        &constraints(64),
        &TrainingPlan::default(),
        Objective::Cost,
        3,
    )
    .unwrap();
    assert!(!res.pareto_devices.is_empty());
    for w in res.pareto_devices.windows(2) {
        assert!(w[0].devices < w[1].devices && w[1].time_s < w[0].time_s);
    }
    for w in res.plans.windows(2) {
        assert!(w[0].objective <= w[1].objective);
    }
}

fn err_of(space: SearchSpace, c: Constraints, top: usize) -> SearchError {
    let t = training(16);
    search(
        std::slice::from_ref(&t),
        &space,
        &c,
        &TrainingPlan::default(),
        Objective::Time,
        top,
    )
    .expect_err("must fail")
}

#[test]
fn bad_input_names_the_constraint() {
    // (space, constraints, top, words the message must contain)
    let table: Vec<(SearchSpace, Constraints, usize, &[&str])> = vec![
        (
            SearchSpace {
                tp: Some(vec![3]),
                ..small_space()
            },
            constraints(64),
            3,
            &["empty plan space", "search.tp", "[3]"],
        ),
        (
            SearchSpace {
                pp: Some(vec![32]),
                ..small_space()
            },
            constraints(64),
            3,
            &["empty plan space", "search.pp"],
        ),
        (
            small_space(),
            Constraints {
                memory_headroom: 0.9999,
                ..constraints(64)
            },
            3,
            &["fit in memory", "memory_headroom", "GiB"],
        ),
        (
            SearchSpace {
                tp: Some(vec![1]),
                pp: Some(vec![1]),
                cp: Some(vec![1]),
                ..small_space()
            },
            constraints(63),
            3,
            &["empty plan space", "refused on `plan.global_batch`", "63"],
        ),
        (
            small_space(),
            Constraints {
                memory_headroom: 1.5,
                ..constraints(64)
            },
            3,
            &["search.memory_headroom", "[0, 1)"],
        ),
        (small_space(), constraints(64), 0, &["top", "1 to 10000"]),
        (small_space(), constraints(64), 20_000, &["top", "20000"]),
        (
            SearchSpace {
                recompute: Some(vec!["sometimes".into()]),
                ..small_space()
            },
            constraints(64),
            3,
            &["search.recompute", "sometimes", "registered"],
        ),
        (
            SearchSpace {
                micro_batch: Some(vec![0]),
                ..small_space()
            },
            constraints(64),
            3,
            &["search.micro_batch", "positive"],
        ),
        (
            SearchSpace {
                zero_stage: Some(vec![4]),
                ..small_space()
            },
            constraints(64),
            3,
            &["search.zero_stage", "0, 1, 2, 3"],
        ),
        (
            SearchSpace {
                placement: Some(vec!["tp-dp-cp-pp".into()]),
                ..small_space()
            },
            constraints(64),
            3,
            &["search.placement", "pp must be the third axis"],
        ),
        (
            SearchSpace {
                precision: Some(vec![DType::Fp32]),
                ..small_space()
            },
            constraints(64),
            3,
            &["search.precision", "bf16"],
        ),
    ];
    for (i, (space, c, top, words)) in table.into_iter().enumerate() {
        let msg = err_of(space, c, top).to_string();
        for w in words {
            assert!(msg.contains(w), "case {i}: `{w}` not in: {msg}");
        }
    }
}

/// The space is counted before the walk: a complete search visits exactly that many plans
/// (its `enumerated` leaves out the partial counts beyond a group's real stage size).
#[test]
fn the_space_is_estimated_before_the_walk() {
    let t = training(16);
    let r = search(
        std::slice::from_ref(&t),
        &small_space(),
        &constraints(64),
        &TrainingPlan::default(),
        Objective::Time,
        3,
    )
    .unwrap();
    let s = &r.summary;
    assert!(s.complete && s.not_visited == 0 && s.not_visited_tuples.is_empty());
    assert!(s.estimated >= s.enumerated && s.enumerated > 0, "{s:?}");
    let brute = brute_placed(16, 64).len() as u64;
    assert_eq!(s.enumerated, brute);
}

/// A time limit that has passed before the walk begins visits nothing and says so; a
/// model whose state cannot fit even sharded over every device is refused at once.
#[test]
fn a_search_is_bounded_in_time_and_refused_when_hopeless() {
    use crate::search::search_within;
    use crate::space::Budget;
    let t = training(16);
    let run = |t: &Training, max_seconds: f64| {
        search_within(
            std::slice::from_ref(t),
            &small_space(),
            &constraints(64),
            &TrainingPlan::default(),
            Objective::Time,
            3,
            Budget {
                max_seconds: Some(max_seconds),
            },
        )
    };
    let e = run(&t, 1e-9).unwrap_err().to_string();
    assert!(
        e.contains("search.max_seconds") && e.contains("not visited"),
        "{e}"
    );
    assert!(run(&t, 60.0).unwrap().summary.complete);
    let e = run(&t, -1.0).unwrap_err().to_string();
    assert!(e.contains("search.max_seconds"), "{e}");
    // 65,536 layers of 1024 wide: 8.2e11 parameters, 16 B each over 16 devices > 80 GiB.
    let registry = perfcast_builtins::registry().unwrap();
    let sys = a100_from_registry(&registry, 16).unwrap();
    let deep = ModelSpec {
        layers: 65536,
        ..small_model()
    };
    let deep = Training::new(deep, sys, &registry).unwrap();
    let start = std::time::Instant::now();
    let e = run(&deep, 60.0).unwrap_err().to_string();
    assert!(
        e.contains("no plan can fit in memory") && e.contains("GiB per device"),
        "{e}"
    );
    assert!(start.elapsed().as_secs_f64() < 1.0);
}

/// A mixture-of-experts model's search walks the expert layouts: its best plan is the best
/// of the searches pinned to each layout, every ranked plan's layout follows the expert
/// strategy's rules, and a layout survives into the label; a dense model keeps EP 1 and
/// refuses `search.ep` above 1.
#[test]
fn moe_search_walks_expert_layouts() {
    use perfcast_core::workload::MoeSpec;
    let registry = perfcast_builtins::registry().expect("registry");
    let sys = a100_from_registry(&registry, 16).expect("system");
    let model = ModelSpec {
        name: "small-moe".into(),
        moe: Some(MoeSpec::new(16, 2, 1024)),
        ..ModelSpec::dense(4, 1024, 16, 4096, FfnAct::Swiglu, 32000, 1024)
    };
    let t = Training::new(model, sys, &registry).expect("training");
    let space = SearchSpace {
        tp: Some(vec![1, 2]),
        pp: Some(vec![1, 2]),
        cp: Some(vec![1]),
        vpp: Some(vec![1]),
        micro_batch: Some(vec![1, 2]),
        sp: Some(vec![true]),
        recompute: Some(vec!["none".into(), "full".into()]),
        partial_recompute: Some(false),
        zero_stage: Some(vec![0, 1]),
        schedule: Some(vec!["1f1b".into()]),
        tp_comm_overlap: Some(vec![false]),
        ..SearchSpace::default()
    };
    let run = |space: &SearchSpace| {
        search(
            std::slice::from_ref(&t),
            space,
            &constraints(64),
            &TrainingPlan::default(),
            Objective::Time,
            5,
        )
    };
    let all = run(&space).expect("search");
    let best = all.plans[0].report.iteration_time.0;
    assert!(
        all.plans.iter().any(|p| p.plan.ep > 1),
        "no expert-parallel plan ranked"
    );
    for p in &all.plans {
        let (ep, etp) = (p.plan.ep as u64, p.plan.etp as u64);
        assert!(16 % ep == 0 && 1024 % etp == 0);
        assert_eq!(
            (p.plan.tp * p.plan.dp) as u64 % (ep * etp),
            0,
            "{:?}",
            p.plan
        );
    }
    let mut pinned_best = f64::INFINITY;
    for ep in [1, 2, 4, 8, 16] {
        for etp in [1, 2] {
            let pinned = SearchSpace {
                ep: Some(vec![ep]),
                etp: Some(vec![etp]),
                ..space.clone()
            };
            if let Ok(r) = run(&pinned) {
                assert!(r.plans.iter().all(|p| (p.plan.ep, p.plan.etp) == (ep, etp)));
                pinned_best = pinned_best.min(r.plans[0].report.iteration_time.0);
            }
        }
    }
    assert_eq!(best, pinned_best);
    let label =
        perfcast_render::plan_label(&all.plans[0].plan, perfcast_render::PlanStyle::Compact);
    let p = &all.plans[0].plan;
    assert_eq!(label.contains(&format!(" ep{}", p.ep)), p.ep > 1, "{label}");
    // Dense: EP stays 1; listing it is an error naming the key.
    let dense = run_dense(&SearchSpace {
        ep: Some(vec![1, 2]),
        ..small_space()
    });
    assert!(
        dense.contains("search.ep") && dense.contains("mixture-of-experts"),
        "{dense}"
    );
}

fn run_dense(space: &SearchSpace) -> String {
    err_of(space.clone(), constraints(64), 5).to_string()
}

/// A mixture-of-experts model searched over the example `hsdp`'s shard group and EP: the
/// expert groups are carved out of the shard's ranks too, so plans with a shard group and
/// EP across it are found (EP 8 on 8 GPUs with no data-parallel replica), and each is what
/// `evaluate` says of it.
#[test]
fn search_walks_expert_parallelism_over_a_declared_axis() {
    let mut registry = perfcast_builtins::registry().expect("registry");
    hsdp::register(&mut registry).expect("hsdp");
    let opts = perfcast_engine::TrainingOptions {
        strategies: Some(hsdp::STRATEGIES.map(String::from).to_vec()),
        ..Default::default()
    };
    let moe = ModelSpec {
        moe: Some(perfcast_core::workload::MoeSpec::new(8, 2, 2048)),
        ..small_model()
    };
    let sys = a100_from_registry(&registry, 8).expect("system");
    let t = Training::with_options(moe, sys, &registry, &opts).expect("training");
    let space = SearchSpace {
        tp: Some(vec![1]),
        pp: Some(vec![1]),
        cp: Some(vec![1]),
        sp: Some(vec![false]),
        ep: Some(vec![1, 2, 8]),
        zero_stage: Some(vec![3]),
        micro_batch: Some(vec![1]),
        axes: Some([("shard".to_string(), vec![1, 2, 8])].into()),
        ..small_space()
    };
    let r = crate::best_plans(&t, &space, &constraints(64), 100).unwrap();
    let shard = |p: &TrainingPlan| p.axes.get("shard").copied().unwrap_or(1);
    assert!(
        r.plans
            .iter()
            .any(|p| shard(&p.plan) == 8 && p.plan.ep == 8),
        "{:?}",
        r.plans
            .iter()
            .map(|p| (shard(&p.plan), p.plan.ep))
            .collect::<Vec<_>>()
    );
    for p in &r.plans {
        let want = t.evaluate(&p.plan).unwrap();
        assert_eq!(p.report.iteration_time, want.iteration_time, "{:?}", p.plan);
    }
}

/// `[search] axes.NAME` walks a declared axis: the example `hsdp`'s (compiled in) shard group over 1, 2, 4 and 8 of the
/// 8 devices (the replicas the rest); with one group of 8 its best plan is ZeRO-3 over 8
/// data-parallel ranks, the built-in search's, in the same time.
#[test]
fn search_walks_a_declared_axis() {
    let mut registry = perfcast_builtins::registry().expect("registry");
    hsdp::register(&mut registry).expect("hsdp");
    let names = hsdp::STRATEGIES;
    let opts = perfcast_engine::TrainingOptions {
        strategies: Some(names.map(String::from).to_vec()),
        ..Default::default()
    };
    let sys = a100_from_registry(&registry, 8).expect("system");
    let hsdp = Training::with_options(small_model(), sys, &registry, &opts).expect("training");
    let space = |shards: Vec<u32>| SearchSpace {
        tp: Some(vec![1]),
        pp: Some(vec![1]),
        zero_stage: Some(vec![3]),
        micro_batch: Some(vec![1]),
        axes: Some([("shard".to_string(), shards)].into()),
        ..small_space()
    };
    let r = crate::best_plans(&hsdp, &space(vec![1, 2, 4, 8]), &constraints(64), 40).unwrap();
    // (An axis at degree 1 is left out of the plan, as plan.axes leaves it.)
    let shard = |p: &TrainingPlan| p.axes.get("shard").copied().unwrap_or(1);
    let mut shards: Vec<u32> = r.plans.iter().map(|p| shard(&p.plan)).collect();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(shards, [1, 2, 4, 8]);
    for p in &r.plans {
        assert_eq!(p.plan.dp * shard(&p.plan), 8, "{:?}", p.plan);
    }
    let one_group = crate::best_plans(&hsdp, &space(vec![8]), &constraints(64), 1).unwrap();
    let builtin = SearchSpace {
        dp: Some(vec![8]),
        axes: None,
        ..space(vec![8])
    };
    let zero3 = crate::best_plans(&training(8), &builtin, &constraints(64), 1).unwrap();
    assert_eq!(
        one_group.plans[0].report.iteration_time,
        zero3.plans[0].report.iteration_time
    );
    // An axis no strategy declares, and a zero degree, name the key.
    let bad = SearchSpace {
        axes: Some([("shrad".to_string(), vec![2])].into()),
        ..space(vec![])
    };
    let e = crate::best_plans(&hsdp, &bad, &constraints(64), 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("search.axes.shrad") && e.contains("did you mean `shard`"),
        "{e}"
    );
    let e = crate::best_plans(&hsdp, &space(vec![0, 2]), &constraints(64), 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("search.axes.shard") && e.contains("positive"),
        "{e}"
    );
    let e = crate::best_plans(&training(8), &space(vec![2]), &constraints(64), 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("search.axes.shard") && e.contains("no strategy"),
        "{e}"
    );
}
