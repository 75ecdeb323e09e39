//! End-to-end tests of `perfcast search` and `perfcast sweep` on the shipped configs: every
//! output format, the JSON shape, and bad input (non-zero exit, a message naming the key or
//! the constraint, never a panic).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::{repo, Out};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn scenario() -> String {
    repo()
        .join("configs/experiments/gpt3-175b-a100.toml")
        .display()
        .to_string()
}

fn tmpdir() -> PathBuf {
    common::tmpdir("perfcast-search")
}

/// `perfcast args` in the crate's directory (where cargo runs the tests).
fn run(args: &[&str]) -> Out {
    common::output(&mut common::command(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        args,
    ))
}

/// A smaller slice of the shipped space keeps the debug-build tests quick.
const SMALL: [&str; 4] = ["--set", "search.pp=[1, 2, 16]", "--set", "search.tp=[4, 8]"];

#[test]
fn search_json_shape_and_order() {
    let s = scenario();
    let mut args = vec!["search", s.as_str(), "--format", "json", "--top", "3"];
    args.extend(SMALL);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 3);
    let times: Vec<f64> = plans
        .iter()
        .map(|p| p["report"]["iteration_time"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for p in plans {
        assert!(p["report"]["memory"]["fits"].as_bool().unwrap());
        assert_eq!(p["plan"]["global_batch"], 1536);
    }
    let sum = &v["summary"];
    let (e, p, ev) = (
        sum["enumerated"].as_u64().unwrap(),
        sum["pruned"].as_u64().unwrap(),
        sum["evaluated"].as_u64().unwrap(),
    );
    assert_eq!(e, p + ev);
    assert!(ev > 0 && sum["seconds"].as_f64().unwrap() > 0.0);
    let pareto = v["pareto"].as_array().unwrap();
    assert!(!pareto.is_empty());
    // Memory ascending, time descending along the front.
    for w in pareto.windows(2) {
        assert!(w[0]["memory_gib"].as_f64() <= w[1]["memory_gib"].as_f64());
        assert!(w[0]["time_s"].as_f64() > w[1]["time_s"].as_f64());
    }
    // Several device counts: the fastest per count and the front of time vs GPU count.
    let mut args = vec!["search", s.as_str(), "--format", "json", "--top", "1"];
    args.extend(SMALL);
    args.extend(["--set", "search.devices={min=512,max=1024,step=512}"]);
    let o2 = run(&args);
    assert_eq!(o2.code, 0, "{}", o2.stderr);
    let v2: Value = serde_json::from_str(&o2.stdout).unwrap();
    assert_eq!(v2["fastest"].as_array().unwrap().len(), 2);
    assert!(!v2["pareto_devices"].as_array().unwrap().is_empty());
    // The published plan is reported and no faster than the best.
    let pubt = v["published"]["time_s"].as_f64().unwrap();
    assert!(pubt >= times[0]);
}

#[test]
fn search_table_and_csv() {
    let s = scenario();
    let mut args = vec!["search", s.as_str(), "--top", "2"];
    args.extend(SMALL);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for w in [
        "top 2 plans by time",
        "Pareto front",
        "plans enumerated",
        "the config's [plan]",
        "x as fast\n",
    ] {
        assert!(o.stdout.contains(w), "`{w}` missing:\n{}", o.stdout);
    }
    // `[options]` reaches the search as it reaches `predict`: 20 GiB of runtime reserve
    // instead of 1 raises every plan's memory by 19 GiB.
    let top_memory = |extra: &[&str]| {
        let mut args = vec!["search", s.as_str(), "--top", "1", "--format", "json"];
        args.extend(SMALL);
        args.extend(["--set", "search.tp=[8]", "--set", "search.pp=[16]"]);
        args.extend([
            "--set",
            "search.recompute=[\"full\"]",
            "--set",
            "search.zero_stage=[0]",
        ]);
        args.extend(["--set", "search.partial_recompute=false"]);
        args.extend(extra);
        let o = run(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        v["plans"][0]["report"]["memory"]["peak"].as_f64().unwrap() / (1u64 << 30) as f64
    };
    let base = top_memory(&[]);
    let reserved = top_memory(&["--set", "options.engine.runtime_reserve_gib=20"]);
    assert!(
        (reserved - base - 19.0).abs() < 1e-6,
        "{base} -> {reserved}"
    );
    // Another global batch than the [plan]'s: the comparison is per sequence.
    let mut args = vec!["search", s.as_str(), "--top", "1"];
    args.extend(SMALL);
    args.extend(["--set", "search.global_batch=768"]);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("as fast per sequence (global batch 768; the [plan]'s is 1536)"),
        "{}",
        o.stdout
    );
    // One non-default placement: TP across nodes, DP inside them.
    let mut args = vec!["search", s.as_str(), "--top", "1", "--format", "json"];
    args.extend(SMALL);
    args.extend(["--set", "search.placement=[\"dp-cp-pp-tp\"]"]);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["plans"][0]["placement"], "dp-cp-pp-tp");
    let mut args = vec![
        "search",
        s.as_str(),
        "--format",
        "csv",
        "--objective",
        "memory",
    ];
    args.extend(SMALL);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].starts_with("rank,devices,tp,pp,dp,cp,ep,etp,vpp,micro_batch,sp,zero_stage"));
    assert_eq!(lines.len(), 11);
}

#[test]
fn search_bad_input() {
    let s = scenario();
    // (extra args, words the error must contain)
    let table: &[(&[&str], &[&str])] = &[
        (
            &["--set", "search.tp=[3]"],
            &["empty plan space", "search.tp"],
        ),
        (
            &["--set", "search.memory_headroom=0.95"],
            &["no plan fits in memory", "GiB"],
        ),
        (&["--set", "search.zero_stage=[7]"], &["search.zero_stage"]),
        (
            &["--set", "search.recompute=[\"most\"]"],
            &["search.recompute", "most"],
        ),
        (&["--set", "search.tpp=[1]"], &["search", "tpp"]),
        (&["--top", "0"], &["--top 0"]),
        (&["--set", "search.devices=0"], &["search.devices"]),
        (
            &["--set", "search.devices={min=512,max=256}"],
            &["search.devices", "min <= max"],
        ),
    ];
    for (extra, words) in table {
        let mut args = vec!["search", s.as_str()];
        args.extend(SMALL);
        args.extend(extra.iter());
        let o = run(&args);
        assert_eq!(o.code, 1, "{extra:?}: {}", o.stderr);
        for w in *words {
            assert!(o.stderr.contains(w), "{extra:?}: `{w}` not in {}", o.stderr);
        }
        assert!(!o.stderr.contains("internal error"), "{}", o.stderr);
    }
}

fn write_sweep(dir: &Path, body: &str) -> String {
    let p = dir.join("s.toml");
    let text = format!("configs = [\"{}\"]\n{body}", scenario().replace('\\', "/"));
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn sweep_rows_and_out_dir() {
    let d = tmpdir();
    let f = write_sweep(
        &d,
        "mode = \"evaluate\"\n[grid]\n\"components.a100_sxm4_80gb_hbm.bandwidth_tbs\" = [1.5, 3.0]\n\
         include = [\"preset:a100-sxm4-80gb\", \"preset:h100-sxm5-80gb\"]\n",
    );
    let o = run(&["sweep", &f]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", o.stdout);
    assert!(
        lines[0].starts_with("components.a100_sxm4_80gb_hbm.bandwidth_tbs,include,devices,time_s")
    );
    let time = |l: &str| l.split(',').nth(3).unwrap().parse::<f64>().unwrap();
    // More HBM bandwidth never slows the A100 down.
    assert!(time(lines[3]) <= time(lines[1]));
    // A chunk (what a distributed sweep hands one worker): the header and the rows of the
    // points asked for, equal to those rows of the whole run.
    let o = run(&["sweep", &f, "--count"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, "4\n"), "{}", o.stderr);
    let o = run(&["sweep", &f, "--points", "1..3"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // (the last column is the point's wall time)
    let timeless = |l: &str| l.rsplit_once(',').unwrap().0.to_string();
    let chunk: Vec<String> = o.stdout.lines().map(timeless).collect();
    assert_eq!(chunk, [0, 2, 3].map(|i| timeless(lines[i])));
    let o = run(&["sweep", &f, "--points", "2..2"]);
    assert_eq!((o.code, o.stdout.trim_end()), (0, lines[0]), "{}", o.stderr);
    let o = run(&["sweep", &f, "--points", "3..9"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("3..9 are not within the sweep's 4 points"),
        "{}",
        o.stderr
    );
    // Chunks run elsewhere, joined into the sweep's output: the whole run's rows.
    let chunk = |name: &str, points: &str| {
        let o = run(&["sweep", &f, "--points", points]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let p = d.join(name);
        std::fs::write(&p, o.stdout).unwrap();
        p.display().to_string()
    };
    let (c1, c2) = (chunk("c1.csv", "0..1"), chunk("c2.csv", "1..4"));
    let o = run(&["sweep", &f, "--merge", &c1, &c2]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let merged: Vec<String> = o.stdout.lines().map(timeless).collect();
    assert_eq!(
        merged,
        lines.iter().map(|l| timeless(l)).collect::<Vec<_>>()
    );
    let o = run(&["sweep", &f, "--merge", &c2]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("the chunks hold 3 rows") && o.stderr.contains("4 points"),
        "{}",
        o.stderr
    );
    let other = d.join("other.csv");
    std::fs::write(&other, "a,b\n1,2\n").unwrap();
    let o = run(&["sweep", &f, "--merge", &c1, other.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("other.csv: not a chunk of"),
        "{}",
        o.stderr
    );
    let o = run(&["sweep", &f, "--merge", d.join("none.csv").to_str().unwrap()]);
    assert!(
        o.code == 1 && o.stderr.contains("cannot read the chunk"),
        "{}",
        o.stderr
    );
    for bad in ["3", "2..1", "a..b"] {
        let o = run(&["sweep", &f, "--points", bad]);
        assert_eq!(o.code, 2, "{bad}: {}", o.stderr);
        assert!(o.stderr.contains("START..END"), "{bad}: {}", o.stderr);
    }
    let out = d.join("out");
    let o = run(&["sweep", &f, "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let csv = std::fs::read_to_string(out.join("s.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    // While another perfcast holds the directory, a second writer is refused at once and the
    // CSV is untouched.
    let held = perfcast_render::file::DirLock::take(&out).unwrap();
    let o = run(&["sweep", &f, "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("another perfcast is writing into"),
        "{}",
        o.stderr
    );
    drop(held);
    assert_eq!(std::fs::read_to_string(out.join("s.csv")).unwrap(), csv);
    // A sweep that fails at its second point leaves the previous CSV whole, and no partial
    // file behind.
    let bad = write_sweep(&d, "[grid]\n\"search.memory_headroom\" = [0.0, 0.99]\n");
    let o = run(&["sweep", &bad, "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("point 2"), "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(out.join("s.csv")).unwrap(), csv);
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["s.csv"]);
    // A searched point.
    let f = write_sweep(
        &d,
        "[grid]\n\"search.memory_headroom\" = [0.0]\n\"system.devices\" = [512]\n",
    );
    let o = run(&["sweep", &f]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.lines().nth(1).unwrap().contains(",512,"));
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A sweep ended by SIGINT or SIGTERM while it writes removes its temporary CSV and its lock
/// file, leaves the previous CSV as it was, and ends as the signal does.
#[cfg(unix)]
#[test]
fn an_interrupted_sweep_leaves_no_temporary_or_lock_file() {
    use std::os::unix::process::ExitStatusExt;
    let d = tmpdir();
    let values: Vec<String> = (0..4000)
        .map(|i| format!("{}", 1.0 + i as f64 / 1000.0))
        .collect();
    let f = write_sweep(
        &d,
        &format!(
            "mode = \"evaluate\"\n[grid]\n\"components.a100_sxm4_80gb_hbm.bandwidth_tbs\" = [{}]\n",
            values.join(", ")
        ),
    );
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("s.csv"), "earlier\n").unwrap();
    for (name, sig) in [("INT", libc::SIGINT), ("TERM", libc::SIGTERM)] {
        let mut child = common::spawn(
            common::command(&repo(), &["sweep", &f, "--out", out.to_str().unwrap()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        );
        let start = std::time::Instant::now();
        while !names_in(&out).iter().any(|n| n.contains(".partial-")) {
            assert!(
                start.elapsed().as_secs() < 60,
                "{name}: the sweep wrote nothing"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.signal(name);
        let status = child.wait(std::time::Duration::from_secs(30));
        assert_eq!(status.signal(), Some(sig), "{name}: {status:?}");
        assert_eq!(names_in(&out), ["s.csv"], "{name}");
        assert_eq!(
            std::fs::read_to_string(out.join("s.csv")).unwrap(),
            "earlier\n"
        );
    }
}

#[test]
fn sweep_bad_input() {
    let d = tmpdir();
    // (body, words the error must contain)
    let table: &[(&str, &[&str])] = &[
        (
            "[grid]\n\"components.a100_sxm4_80gb_hbm.bandwith_tbs\" = [1.0]\n",
            &[
                "not a key",
                "did you mean",
                "components.a100_sxm4_80gb_hbm.bandwidth_tbs",
            ],
        ),
        (
            "max_seconds = 0.001\n[grid]\n\"search.memory_headroom\" = [0.0, 0.01, 0.02]\n",
            &["3 points", "max_seconds", "--force"],
        ),
        (
            "[grid]\n\"search.memory_headroom\" = [0.0, 0.99]\n",
            &["empty plan space", "point 2", "fit in memory"],
        ),
        ("[grid]\n\"system.devices\" = []\n", &["non-empty array"]),
        (
            "mode = \"guess\"\n[grid]\n\"system.devices\" = [8]\n",
            &["mode"],
        ),
        ("", &["[grid]", "[[points]]"]),
    ];
    for (body, words) in table {
        let f = write_sweep(&d, body);
        let o = run(&["sweep", &f]);
        assert_eq!(o.code, 1, "{body}: {}", o.stderr);
        for w in *words {
            assert!(o.stderr.contains(w), "{body}: `{w}` not in {}", o.stderr);
        }
    }
    // --force runs the long one.
    let f = write_sweep(
        &d,
        "max_seconds = 0.001\nmode = \"evaluate\"\n[grid]\n\"system.devices\" = [1024, 1024]\n",
    );
    assert_eq!(run(&["sweep", &f]).code, 1);
    let o = run(&["sweep", &f, "--force"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn search_is_bounded_estimated_and_refuses_a_hopeless_space_at_once() {
    let s = scenario();
    // The 65,536-layer model: refused before the walk, with the figures.
    let start = std::time::Instant::now();
    let o = run(&["search", &s, "--set", "model.layers=65536"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("no plan can fit in memory") && o.stderr.contains("1729.16 GiB"),
        "{}",
        o.stderr
    );
    assert!(start.elapsed().as_secs_f64() < 5.0);
    // The estimate is in the summary; a walk stopped by the limit says what it left.
    let mut args = vec!["search", s.as_str(), "--format", "json"];
    args.extend(SMALL);
    let o = run(&args);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let sum = &v["summary"];
    assert_eq!(sum["complete"], true);
    assert!(sum["estimated"].as_u64().unwrap() >= sum["enumerated"].as_u64().unwrap());
    assert_eq!(sum["max_seconds"], 300.0);
    let o = run(&["search", &s, "--max-seconds", "0.000001"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("--max-seconds") && o.stderr.contains("not visited"),
        "{}",
        o.stderr
    );
    let o = run(&["search", &s, "--max-seconds=-3"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let o = run(&["search", &s, "--set", "search.max_seconds=0"]);
    assert!(o.stderr.contains("search.max_seconds"), "{}", o.stderr);
}

#[test]
fn search_table_collapses_alike_plans_explains_its_abbreviations_and_prices_the_cost() {
    let s = scenario();
    let mut args = vec!["search", s.as_str()];
    args.extend(SMALL);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let top: Vec<&str> = o
        .stdout
        .lines()
        .skip(3)
        .take_while(|l| !l.is_empty() && !l.starts_with("error bars:"))
        .collect();
    // Each row's results differ from the next row's: alike plans share one row, counted.
    let results = |l: &str| l.split_whitespace().skip(3).collect::<Vec<_>>().join(" ");
    for w in top.windows(2) {
        assert_ne!(
            results(w[0]),
            results(w[1]),
            "alike rows not collapsed:\n{}",
            o.stdout
        );
    }
    let counted: usize = top
        .iter()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(counted, 10, "{}", o.stdout);
    for w in [
        "legend:",
        "tpo TP communication",
        "full(N)",
        "vN virtual pipeline",
    ] {
        assert!(o.stdout.contains(w), "{w}:\n{}", o.stdout);
    }
    // The cost objective shows GPU-hours and the price per step, at a configurable price.
    let mut args = vec![
        "search",
        s.as_str(),
        "--objective",
        "cost",
        "--price-per-gpu-hour",
        "2",
    ];
    args.extend(SMALL);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("gpu_h_step") && o.stdout.contains("usd_step"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("at 2.000 USD per GPU-hour"),
        "{}",
        o.stdout
    );
    args.extend(["--format", "json"]);
    let v: Value = serde_json::from_str(&run(&args).stdout).unwrap();
    let c = &v["cost"]["per_step"][0];
    let p = &v["plans"][0]["report"];
    let h = p["iteration_time"].as_f64().unwrap() * p["devices"].as_f64().unwrap() / 3600.0;
    assert!((c["gpu_hours"].as_f64().unwrap() - h).abs() < 1e-9 * h);
    assert!((c["usd"].as_f64().unwrap() - 2.0 * h).abs() < 1e-9 * h);
    let o = run(&["search", &s, "--set", "search.price_per_gpu_hour=-1"]);
    assert!(
        o.stderr.contains("search.price_per_gpu_hour"),
        "{}",
        o.stderr
    );
}

/// The rows of a Parquet file, each cell as the CSV writes it (a null as an empty cell),
/// and each column's physical type.
fn parquet_rows(path: &Path) -> (Vec<String>, Vec<String>, Vec<Vec<String>>) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let schema = r.metadata().file_metadata().schema_descr_ptr();
    let names = schema
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let types = schema
        .columns()
        .iter()
        .map(|c| c.physical_type().to_string())
        .collect();
    let rows = r
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .into_columns()
                .into_iter()
                .map(|(_, f)| match f {
                    Field::Null => String::new(),
                    Field::Long(v) => v.to_string(),
                    Field::Double(v) => format!("{v:?}"),
                    Field::Str(s) => s,
                    other => panic!("a column of type {other:?}"),
                })
                .collect()
        })
        .collect();
    (names, types, rows)
}

/// `--format parquet --out FILE` writes the CSV's columns and rows, typed (integers INT64,
/// numbers DOUBLE, text BYTE_ARRAY), for search, serve and sweep, and validate's rows per
/// case and metric; without --out, to a path that cannot be written, or from a command that
/// writes no rows, it is a clear error and nothing is written.
#[test]
fn parquet_has_the_csv_columns_typed() {
    let d = tmpdir();
    let same = |what: &str, csv: &str, file: &Path| {
        let csv = perfcast_render::Table::from_csv(csv).unwrap();
        let (names, types, rows) = parquet_rows(file);
        assert_eq!(names, csv.headers, "{what}");
        assert_eq!(rows.len(), csv.rows.len(), "{what}");
        for (p, c) in rows.iter().zip(&csv.rows) {
            for (k, (a, b)) in p.iter().zip(c).enumerate() {
                // The wall time of a point differs from run to run.
                let equal = names[k] == "seconds"
                    || a == b
                    || (types[k] == "DOUBLE" && a.parse::<f64>().ok() == b.parse::<f64>().ok());
                assert!(
                    equal,
                    "{what}: column {} is {a} in Parquet, {b} in CSV",
                    names[k]
                );
            }
        }
        types
    };
    let sc = scenario();
    let mut search = vec!["search", sc.as_str()];
    search.extend(SMALL);
    let csv = run(&[&search[..], &["--format", "csv"]].concat());
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let file = d.join("search.parquet");
    let o = run(&[
        &search[..],
        &["--format", "parquet", "--out", file.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.is_empty() && o.stderr.contains("search.parquet"),
        "{}",
        o.stderr
    );
    let types = same("search", &csv.stdout, &file);
    let col = |t: &str| types.iter().filter(|x| *x == t).count();
    assert!(
        col("INT64") > 0 && col("DOUBLE") > 0 && col("BYTE_ARRAY") > 0,
        "{types:?}"
    );

    let serving = repo().join("configs/serving/llama3.1-8b-h100.toml");
    let serve = [
        "serve",
        serving.to_str().unwrap(),
        "--rates",
        "2,8",
        "--requests",
        "50",
    ];
    let csv = run(&[&serve[..], &["--format", "csv"]].concat());
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let file = d.join("serve.parquet");
    let o = run(&[
        &serve[..],
        &["--format", "parquet", "--out", file.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(o.code, 0, "{}", o.stderr);
    same("serve", &csv.stdout, &file);

    let f = write_sweep(
        &d,
        "mode = \"evaluate\"\n[grid]\n\"components.a100_sxm4_80gb_hbm.bandwidth_tbs\" = [1.5, 3.0]\n",
    );
    let csv = run(&["sweep", &f]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let out = d.join("sweep");
    let o = run(&[
        "sweep",
        &f,
        "--format",
        "parquet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    same("sweep", &csv.stdout, &out.join("s.parquet"));

    let file = d.join("validate.parquet");
    let group = ["--group", "narayanan2021-table1"];
    let o = run(&[
        &[
            "validate",
            "--format",
            "parquet",
            "--out",
            file.to_str().unwrap(),
        ],
        &group[..],
    ]
    .concat());
    assert_eq!(o.code, 0, "{}", o.stderr);
    let json: Value = serde_json::from_str(
        &run(&[&["validate", "--format", "json"], &group[..]].concat()).stdout,
    )
    .unwrap();
    let (names, _, rows) = parquet_rows(&file);
    let metrics: Vec<&Value> = json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["metrics"].as_array().unwrap())
        .collect();
    assert_eq!(rows.len(), metrics.len());
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    for (r, m) in rows.iter().zip(&metrics) {
        assert_eq!(
            r[at("predicted")].parse::<f64>().ok(),
            m["predicted"].as_f64()
        );
        assert_eq!(
            r[at("measured")].parse::<f64>().ok(),
            m["measured"].as_f64()
        );
    }

    // Bad input: no --out, a directory that does not exist, a command without rows.
    let o = run(&[&search[..], &["--format", "parquet"]].concat());
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("add `--out FILE`"), "{}", o.stderr);
    let o = run(&["sweep", &f, "--format", "parquet"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("--out DIR"), "{}", o.stderr);
    let nowhere = d.join("no/such/dir/x.parquet");
    let o = run(&[
        &serve[..],
        &["--format", "parquet", "--out", nowhere.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("no/such/dir/x.parquet"), "{}", o.stderr);
    let collectives = repo().join("configs/validation/collectives.toml");
    let o = run(&[
        "validate",
        collectives.to_str().unwrap(),
        "--format",
        "parquet",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("a collectives file writes"),
        "{}",
        o.stderr
    );
    let o = run(&["predict", &sc, "--format", "parquet"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("possible values: table, json, csv"),
        "{}",
        o.stderr
    );
}
