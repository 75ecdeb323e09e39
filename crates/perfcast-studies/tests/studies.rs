//! Study invariants (not exact figures): every study runs and writes its three files; the
//! Shapley factors multiply to the speed-up; memory components sum to the total; time shares
//! sum to the time; more bandwidth never makes anything slower; an expert-parallel group
//! inside the NVLink domain exposes less all-to-all than one across it; bad input gives errors
//! that name the file, the key and what is allowed.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_studies::common::StudyContext;
use perfcast_studies::studies::{
    a100_to_b200, dram_scaling, memory_recompute, moe_ep_placement, technology_nodes,
};
use perfcast_studies::{info, run, StudyError};

/// The repository's `configs/studies` (the shipped configs the binary embeds through
/// `perfcast-assets`; the tests read the files themselves).
fn configs_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/studies")
}
use std::path::{Path, PathBuf};

/// A fresh temporary directory for this test (under the target directory, not `$TMPDIR`).
fn temp_dir(tag: &str) -> PathBuf {
    perfcast_testkit::tmpdir(&format!("perfcast-studies-{tag}"))
}

/// The shipped config of `name` with its relative paths made absolute, so that it can be
/// edited and written anywhere.
fn shipped(name: &str) -> String {
    let text = std::fs::read_to_string(configs_dir().join(format!("{name}.toml"))).unwrap();
    let base = configs_dir();
    text.replace("\"../", &format!("\"{}/../", base.display()))
}

/// The host's plugins: the built-ins with the shared kernel tables.
fn plugins() -> perfcast_config::Plugins {
    perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"))
}

/// Each config text of `table` run as study `name` is refused with an error naming its file
/// and containing every expected fragment.
fn assert_refused(dir: &Path, name: &str, table: Vec<(String, Vec<&str>)>) {
    for (text, want) in table {
        let p = write_config(dir, name, &text);
        let e = run(name, Some(&p), &plugins()).unwrap_err().to_string();
        assert!(e.contains(&p.display().to_string()), "file not named: {e}");
        for w in want {
            assert!(e.contains(w), "`{w}` missing in: {e}");
        }
    }
}

/// Write `text` as a config file in `dir`.
fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// A small a100-to-b200 config: one job, a narrow grid (the test runs unoptimised).
fn small_a100_to_b200() -> String {
    let full = shipped("a100-to-b200");
    let head = full.split("[[jobs]]").next().unwrap().to_string();
    let base = configs_dir();
    format!(
        "{head}
[[jobs]]
label = \"GPT-3 175B, 256 GPUs\"
model = \"{b}/../models/gpt3-175b.toml\"
gpus = 256
global_batch = 512
baseline = \"{b}/../systems/dgx-a100.toml\"
target = \"{b}/../systems/gb200-nvl72.toml\"

[search]
tp = [8, 16]
pp = [4, 8]
micro_batch = [1]
recompute = [\"selective\", \"full\"]
precision = [\"bf16\", \"fp8\"]
zero_stage = [1]
",
        b = base.display()
    )
}

fn ctx(name: &str, dir: &Path, text: &str) -> StudyContext {
    StudyContext::from_text(info(name).unwrap(), dir, text, &plugins())
}

#[test]
fn every_study_runs_and_writes_its_three_files() {
    let dir = temp_dir("all");
    for s in perfcast_studies::STUDIES {
        let config = if s.name == "a100-to-b200" {
            Some(write_config(&dir, s.name, &small_a100_to_b200()))
        } else {
            None
        };
        let out = run(s.name, config.as_deref(), &plugins())
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let files = out.write(&dir.join(s.name)).unwrap();
        assert_eq!(files.len(), 3);
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            assert!(text.len() > 100, "{} is nearly empty", f.display());
            assert!(
                !text.contains("NaN") && !text.contains("inf,"),
                "{}",
                f.display()
            );
        }
        let csv = std::fs::read_to_string(&files[0]).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines.len() >= 3, "{}: header and rows", s.name);
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(&format!("perfcast study {}", s.name)));
        let md = std::fs::read_to_string(&files[2]).unwrap();
        assert!(md.contains("perfcast study") && md.contains(&format!("{}.svg", s.name)));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_study_name_lists_the_known_ones() {
    let e = run("memory-vs-recomputation", None, &plugins()).unwrap_err();
    assert!(matches!(e, StudyError::Unknown { .. }));
    let msg = e.to_string();
    for s in perfcast_studies::STUDIES {
        assert!(msg.contains(s.name), "{msg}");
    }
}

#[test]
fn bad_config_values_name_the_file_the_key_and_what_is_allowed() {
    let dir = temp_dir("bad");
    let good = shipped("memory-vs-recompute");
    // (edit, expected fragments of the message)
    let table: Vec<(String, Vec<&str>)> = vec![
        (
            good.replacen("recompute = \"none\"", "recompute = \"partial\"", 1),
            vec!["policies[0].recompute", "partial", "none, selective, full"],
        ),
        (
            good.replacen("micro_batch = 4", "micro_batch = \"four\"", 1),
            vec!["models[0].micro_batch", "invalid type"],
        ),
        (
            good.replacen("precision = \"fp16\"", "precison = \"fp16\"", 1),
            vec!["precison", "unknown field"],
        ),
        (
            good.replacen("tp = 8", "tp = 0", 1),
            vec!["models[0].tp", ">= 1"],
        ),
        (
            good.replacen(
                "study = \"memory-vs-recompute\"",
                "study = \"dram-scaling\"",
                1,
            ),
            vec!["`study`", "dram-scaling", "memory-vs-recompute"],
        ),
        (
            good.replacen("korthikanti-gpt-22b.toml", "no-such-model.toml", 1),
            vec!["models[0].model", "no-such-model.toml", "does not exist"],
        ),
        (
            good.replacen("[[policies]]", "[[policies]\n", 1),
            vec!["(syntax)"],
        ),
    ];
    assert_refused(&dir, "memory-vs-recompute", table);
    // A bad value inside a plugin's parameters (technology-nodes) names the node entry and
    // the plugin's key.
    let t = shipped("technology-nodes").replacen("vt = 0.30", "vt = 0.95", 1);
    let p = write_config(&dir, "technology-nodes", &t);
    let e = run("technology-nodes", Some(&p), &plugins())
        .unwrap_err()
        .to_string();
    assert!(e.contains("nodes[0].node") && e.contains("node.vt"), "{e}");
    // The plan search section (perfcast-search's `[search]`) of a100-to-b200: bad values,
    // keys the study sets itself, unknown keys and a space where nothing fits.
    let small = small_a100_to_b200();
    let search_table: Vec<(String, Vec<&str>)> = vec![
        (
            small.replacen(
                "recompute = [\"selective\", \"full\"]",
                "recompute = [\"some\"]",
                1,
            ),
            vec!["search.recompute", "some", "none, selective, full"],
        ),
        (
            small.replacen("zero_stage = [1]", "zero_stage = [1]\nglobal_batch = 8", 1),
            vec!["search.global_batch", "set by the study"],
        ),
        (
            small.replacen("zero_stage = [1]", "zero_stage = [1]\ntpp = [2]", 1),
            vec!["search.tpp", "unknown field"],
        ),
        (
            small
                .replacen("pp = [4, 8]", "pp = [1]", 1)
                .replacen("tp = [8, 16]", "tp = [8]", 1),
            vec![
                "jobs[0]",
                "no plan of the search space fits",
                "GiB per device",
                "widen",
            ],
        ),
    ];
    assert_refused(&dir, "a100-to-b200", search_table);
    let t = shipped("dram-scaling").replacen("generation = \"HBM3\"", "generation = \"HBM9\"", 1);
    let p = write_config(&dir, "dram-scaling", &t);
    let e = run("dram-scaling", Some(&p), &plugins())
        .unwrap_err()
        .to_string();
    assert!(e.contains("memories[1]") && e.contains("HBM3e"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shapley_factors_multiply_to_the_total_speedup() {
    let dir = temp_dir("shapley");
    let (jobs, _) =
        a100_to_b200::evaluate(&ctx("a100-to-b200", &dir, &small_a100_to_b200())).unwrap();
    for j in &jobs {
        let prod: f64 = j.factors.iter().product();
        assert!((prod / j.total - 1.0).abs() < 1e-9, "{prod} vs {}", j.total);
        let direct = j.times[0] / j.times[j.times.len() - 1];
        assert!((direct / j.total - 1.0).abs() < 1e-12);
        assert!(j.total > 1.0, "Blackwell is faster: {}", j.total);
        assert_eq!(j.factors.len(), a100_to_b200::FACTORS.len());
        // Each hybrid's best time is a real evaluation of the plan recorded for it.
        assert!(j.times.iter().all(|t| t.is_finite() && *t > 0.0));
    }
}

#[test]
fn memory_components_sum_to_the_total() {
    let rows = memory_recompute::evaluate(&ctx(
        "memory-vs-recompute",
        &configs_dir(),
        &shipped("memory-vs-recompute"),
    ))
    .unwrap();
    assert_eq!(rows.len(), 16);
    for r in &rows {
        let sum: f64 = memory_recompute::components(&r.stage).iter().sum();
        let total = r.stage.total.gb();
        assert!(
            (sum - total).abs() <= 1e-9 * total,
            "{} {}: {sum} vs {total}",
            r.model,
            r.policy
        );
        assert!(r.stage.total.0 <= r.report.memory.peak.0 * (1.0 + 1e-12));
    }
    // Recomputing more never needs more activation memory (same plan otherwise).
    for m in ["GPT 22B", "GPT 175B", "GPT 530B", "GPT 1T"] {
        let act = |p: &str| {
            rows.iter()
                .find(|r| r.model == m && r.policy == p)
                .map(|r| r.stage.activations.0)
                .unwrap()
        };
        assert!(act("full recompute") <= act("selective + SP"));
        assert!(act("selective + SP") <= act("selective"));
        assert!(act("selective") <= act("no recompute"));
    }
}

#[test]
fn dram_bandwidth_never_makes_inference_slower() {
    let rows = dram_scaling::evaluate(&ctx(
        "dram-scaling",
        &configs_dir(),
        &shipped("dram-scaling"),
    ))
    .unwrap();
    for v in [
        dram_scaling::Variant::BandwidthOnly,
        dram_scaling::Variant::Both,
    ] {
        let mut rs: Vec<&dram_scaling::Row> = rows.iter().filter(|r| r.variant == v).collect();
        rs.sort_by(|a, b| a.bandwidth_tbs.total_cmp(&b.bandwidth_tbs));
        for w in rs.windows(2) {
            let (a, b) = (&w[0].at_batch, &w[1].at_batch);
            for (what, x, y) in [
                ("ttft", a.ttft.0, b.ttft.0),
                ("tpot", a.tpot.0, b.tpot.0),
                ("latency", a.latency.0, b.latency.0),
            ] {
                assert!(
                    y <= x * (1.0 + 1e-12),
                    "{what} rose from {} to {} ({:?})",
                    w[0].memory,
                    w[1].memory,
                    v
                );
            }
        }
    }
    // Capacity alone changes no latency at a fixed batch, only the largest batch.
    let cap: Vec<&dram_scaling::Row> = rows
        .iter()
        .filter(|r| r.variant == dram_scaling::Variant::CapacityOnly)
        .collect();
    for r in &cap {
        assert!((r.at_batch.tpot.0 / cap[0].at_batch.tpot.0 - 1.0).abs() < 1e-12);
    }
}

#[test]
fn technology_sweep_shares_sum_and_bandwidth_is_monotone() {
    // Three devices at the same node whose memory and network generations rise: nothing
    // may get slower.
    let full = shipped("technology-nodes");
    let head = full.split("[[nodes]]").next().unwrap();
    let tail = &full[full.find("[training]").unwrap()..];
    let node = "node = { node_nm = 7, logic_density = 1.0, sram_density = 1.0, energy_per_op = 1.0, vdd = 0.75, vt = 0.30 }";
    let mut text = head.to_string();
    for (mem, up, out) in [
        ("HBM2e", "nvlink3", "hdr"),
        ("HBM3", "nvlink3", "hdr"),
        ("HBM3", "nvlink4", "ndr"),
        ("HBM4", "nvlink5", "xdr"),
    ] {
        text.push_str(&format!(
            "[[nodes]]\nlabel = \"7 nm {mem} {up}\"\n{node}\nmemory = {{ generation = \"{mem}\", units = 5 }}\nscale_up = \"{up}\"\nscale_out = \"{out}\"\n\n"
        ));
    }
    text.push_str(tail);
    let res = technology_nodes::evaluate(&ctx("technology-nodes", &configs_dir(), &text)).unwrap();
    for w in res.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(b.training.iteration_time.0 <= a.training.iteration_time.0 * (1.0 + 1e-12));
        assert!(b.inference.ttft.0 <= a.inference.ttft.0 * (1.0 + 1e-12));
        assert!(b.inference.tpot.0 <= a.inference.tpot.0 * (1.0 + 1e-12));
    }
    for r in &res {
        let t: f64 = r.train_shares.iter().sum();
        assert!((t / r.training.iteration_time.0 - 1.0).abs() < 1e-9);
        let p: f64 = r.prefill_shares.iter().sum();
        assert!((p / r.inference.ttft.0 - 1.0).abs() < 1e-9);
        let d: f64 = r.decode_shares.iter().sum();
        assert!((d / r.inference.tpot.0 - 1.0).abs() < 1e-9);
    }
}

#[test]
fn the_technology_kinds_are_registered_builtins() {
    let r = perfcast_studies::common::registry(&plugins()).unwrap();
    use perfcast_core::Category;
    assert!(r.contains(Category::ComputeUnit, "tech/node-scaled-gpu"));
    assert!(r.contains(Category::MemoryTier, "tech/node-sram"));
    assert!(r.contains(Category::MemoryTier, "tech/dram-generation"));
    assert!(r.contains(Category::Interconnect, "tech/link-generation"));
}

#[test]
fn the_docs_page_shows_every_study_with_its_plot_and_command() {
    let outputs: Vec<perfcast_studies::StudyOutput> = perfcast_studies::STUDIES
        .iter()
        .map(|s| perfcast_studies::StudyOutput {
            name: s.name.to_string(),
            csv: String::new(),
            svg: String::new(),
            summary: String::new(),
            finding: format!("finding of {}", s.name),
        })
        .collect();
    let page = perfcast_studies::docs_page(&outputs);
    for s in perfcast_studies::STUDIES {
        assert!(page.contains(&format!("(studies/{}.svg)", s.name)));
        assert!(page.contains(&format!("`perfcast study {}`", s.name)));
        assert!(page.contains(&format!("finding of {}", s.name)));
    }
}

#[test]
fn built_in_configs_are_the_shipped_files_and_name_presets() {
    for (name, text) in perfcast_studies::BUILTIN_CONFIGS {
        let file = std::fs::read_to_string(configs_dir().join(format!("{name}.toml"))).unwrap();
        assert_eq!(*text, file, "{name}: the built-in copy is stale");
    }
    // A built-in config's `../models/NAME.toml` is the preset; a missing one is an error
    // that says how a built-in config names files.
    let info = info("memory-vs-recompute").unwrap();
    let ctx = StudyContext::builtin(info, "", &plugins());
    assert!(ctx.model("m", "../models/gpt3-175b.toml").is_ok());
    let e = ctx
        .model("m", "../models/nope.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("preset:NAME") && e.contains("(built-in)"), "{e}");
}

/// A job's own `[jobs.search]` replaces the study's `[search]` for that job: a
/// mixture-of-experts job walks its expert layouts and fp4 without widening the dense grid.
#[test]
fn a_job_searches_its_own_space() {
    let dir = temp_dir("job-search");
    let base = configs_dir();
    let text = format!(
        "{head}
[[jobs]]
label = \"Mixtral 8x7B, 288 GPUs\"
model = \"{b}/../models/mixtral-8x7b.toml\"
gpus = 288
global_batch = 288
baseline = \"{b}/../systems/dgx-a100.toml\"
target = \"{b}/../systems/gb200-nvl72.toml\"

[jobs.search]
tp = [1, 2]
pp = [4]
micro_batch = [1]
recompute = [\"full\"]
precision = [\"bf16\", \"fp8\", \"fp4\"]
zero_stage = [1]
ep = [8]
etp = [1]

[search]
tp = [8]
pp = [8]
",
        head = shipped("a100-to-b200").split("[[jobs]]").next().unwrap(),
        b = base.display()
    );
    let (jobs, _) = a100_to_b200::evaluate(&ctx("a100-to-b200", &dir, &text)).unwrap();
    let j = &jobs[0];
    for p in &j.plans {
        assert_eq!((p.ep, p.pp, p.recompute.as_str()), (8, 4, "full"));
    }
    // The A100 computes none of the narrow formats; with Blackwell's matrix engine and the
    // precision factor on, fp4 is among what the search may pick.
    assert_eq!(j.baseline.plan.precision, perfcast_core::DType::Bf16);
    assert!(j.total > 1.0);
    // A bad value in the job's own search names it.
    let bad = text.replacen("recompute = [\"full\"]", "recompute = [\"most\"]", 1);
    let e = a100_to_b200::evaluate(&ctx("a100-to-b200", &dir, &bad))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("jobs[0].search.recompute") && e.contains("most"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_ep_group_inside_the_nvlink_domain_exposes_less_all_to_all() {
    let r = moe_ep_placement::evaluate(&ctx(
        "moe-ep-placement",
        &configs_dir(),
        &shipped("moe-ep-placement"),
    ))
    .unwrap();
    let mut systems: Vec<&str> = r.points.iter().map(|p| p.system.as_str()).collect();
    systems.dedup();
    assert_eq!(systems, ["DGX H100", "DGX B200", "GB200 NVL72"]);
    let fastest = |s: &str, schedule: &str| {
        r.points
            .iter()
            .filter(|p| p.system == s && p.schedule == schedule)
            .filter_map(|p| p.best.as_ref().ok())
            .map(|b| b.report.iteration_time.0)
            .fold(f64::INFINITY, f64::min)
    };
    for s in &systems {
        // Under plain 1F1B (nothing overlapped) a group inside the domain exposes less
        // all-to-all than any across it.
        let mine: Vec<_> = r
            .points
            .iter()
            .filter(|p| p.system == *s && p.schedule == "1f1b")
            .collect();
        let ep_comm = |inside: bool| -> Vec<f64> {
            mine.iter()
                .filter(|p| p.best.is_ok() && p.inside() == inside)
                .map(|p| p.best.as_ref().unwrap().report.breakdown.ep_comm.0)
                .collect()
        };
        let (inside, across) = (ep_comm(true), ep_comm(false));
        assert!(!inside.is_empty() && !across.is_empty(), "{s}");
        let worst_inside = inside.iter().fold(0.0, |a: f64, b| a.max(*b));
        let best_across = across.iter().fold(f64::INFINITY, |a: f64, b| a.min(*b));
        assert!(worst_inside < best_across, "{s}: {inside:?} vs {across:?}");
        // Overlapping two micro-batches never makes the best plan slower.
        assert!(fastest(s, "combined-1f1b") <= fastest(s, "1f1b"), "{s}");
    }
    for p in &r.points {
        if let Ok(b) = &p.best {
            // Each point's plan is at its own EP degree and schedule, an expert whole per GPU.
            assert_eq!((b.plan.ep, b.plan.etp), (p.ep, 1));
            assert_eq!(b.plan.schedule.as_deref(), Some(p.schedule.as_str()));
            let (in_domain, domains) = p.span().unwrap();
            assert!(in_domain <= p.domain as u64 && in_domain * domains >= p.ep as u64);
            // A group larger than the domain cannot be inside it.
            assert!(p.ep <= p.domain || !p.inside(), "{} EP {}", p.system, p.ep);
        }
    }
    // The 72-GPU domain holds EP groups the 8-GPU ones cannot.
    assert!(r
        .points
        .iter()
        .any(|p| p.system == "GB200 NVL72" && p.ep > 8 && p.inside()));
}

#[test]
fn bad_moe_ep_placement_configs_name_the_key() {
    let dir = temp_dir("bad-ep");
    let good = shipped("moe-ep-placement");
    let table: Vec<(String, Vec<&str>)> = vec![
        (
            good.replacen("models/deepseek-v3.toml", "models/gpt3-175b.toml", 1),
            vec!["`model`", "dense"],
        ),
        (
            good.replacen("ep = [8, 16, 32, 64, 128]", "ep = [8, 12]", 1),
            vec!["`ep`", "12", "divide"],
        ),
        (
            good.replacen("ep = [8, 16, 32, 64, 128]", "ep = []", 1),
            vec!["`ep`", "one or more"],
        ),
        (
            good.replacen("zero_stage = [1]", "zero_stage = [1]\nep = [8]", 1),
            vec!["search.ep", "set by the study"],
        ),
        (
            good.replacen(
                "zero_stage = [1]",
                "zero_stage = [1]\nschedule = [\"1f1b\"]",
                1,
            ),
            vec!["search.schedule", "set by the study"],
        ),
        (
            good.replacen(
                "schedules = [\"1f1b\", \"combined-1f1b\"]",
                "schedules = []",
                1,
            ),
            vec!["`schedules`", "one or more"],
        ),
        (
            good.replacen("\"combined-1f1b\"]", "\"zigzag\"]", 1),
            vec!["zigzag"],
        ),
        (
            good.replacen("dgx-b200.toml", "dgx-b300.toml", 1),
            vec!["systems[1].system", "dgx-b300.toml"],
        ),
    ];
    assert_refused(&dir, "moe-ep-placement", table);
    let _ = std::fs::remove_dir_all(&dir);
}
