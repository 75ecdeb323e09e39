//! The fuzz harness shared by the bounded test (`tests/fuzz.rs`, part of `cargo test`) and
//! the long run (`cargo run --release -p perfcast-tests --example fuzz -- CONFIGS PLUGINS`).
//!
//! - **Config inputs**: random bytes, and mutations of the shipped experiments, examples and
//!   presets (character edits, numbers replaced by nasty values: -1, 0, 1e309, nan, inf,
//!   2^32, 1e-320, strings, tables...), written as TOML, YAML or JSON files and run through
//!   the whole host: `Config::load`, then `config explain --all`'s reading, the training and
//!   inference scenarios and their evaluation, and the roofline of `[[ops]]`.
//! - **Plugin-answer sequences**: the `fuzz-fixture` library (loaded through the real
//!   loader) answers every call with a seeded random value, plausible or NaN, infinite,
//!   negative, zero, huge, tiny or a panic; each seed builds a system of its components and
//!   evaluates a training step and a serving run.
//!
//! Either way the outcome must be an error or a report whose every number is finite and that
//! obeys the physical laws (positive times; prefill MFU and decode bandwidth utilisation, which
//! count executed work, in [0, 1]; each stage's memory the sum of its parts): a panic (caught per input), a non-finite number or a
//! broken law in a report is a finding, counted and kept.

use perfcast_config::{Config, Sources};
use perfcast_core::{MemoryHierarchy, Registry, System};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan};
use perfcast_engine::training::{Training, TrainingPlan};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// splitmix64.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }
    pub fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.u64() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Inputs run.
    pub inputs: AtomicU64,
    /// Inputs that gave an error (the expected outcome of most).
    pub errors: AtomicU64,
    /// Inputs that gave a report (all of whose numbers were checked).
    pub reports: AtomicU64,
    /// Panics and non-finite numbers: the first 20 inputs and what happened.
    pub failures: Mutex<Vec<String>>,
    pub failure_count: AtomicU64,
}

impl Findings {
    pub fn fail(&self, what: String) {
        self.failure_count.fetch_add(1, Ordering::Relaxed);
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if f.len() < 20 {
            f.push(what);
        }
    }
    /// `inputs, errors, reports, failures`.
    pub fn summary(&self) -> String {
        format!(
            "{} inputs: {} errors, {} reports, {} failures (panics, non-finite numbers or broken physical laws)",
            self.inputs.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
            self.reports.load(Ordering::Relaxed),
            self.failure_count.load(Ordering::Relaxed)
        )
    }
}

/// A rendered report with a non-finite number in it, if any (the word, not a source's
/// letters: "Narayanan" is fine).
pub fn non_finite(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric() && c != '-')
        .any(|w| {
            let w = w.trim_start_matches('-').to_ascii_lowercase();
            w == "nan" || w == "inf" || w == "infinity"
        })
}

/// The physical laws every training report obeys: a positive step time, MFU and HFU not
/// negative, each stage's memory the sum of its parts.
fn physical_training(r: &perfcast_engine::training::TrainingReport) -> Result<(), String> {
    let t = r.iteration_time.0;
    if !(t > 0.0 && t.is_finite()) {
        return Err(format!("iteration time {t} s is not a positive number"));
    }
    // MFU and HFU follow the FLOP conventions (attention counted non-causal), which a
    // long-context step may exceed: they are not bounded by 1 (a 2^20-token step reaches an HFU
    // of 1.16). They are never negative.
    for (what, v) in [("MFU", r.mfu), ("HFU", r.hfu)] {
        if v < 0.0 {
            return Err(format!("{what} = {v} is negative"));
        }
    }
    for (name, st) in r.stages() {
        let parts = st.weights.0
            + st.grads.0
            + st.optimizer.0
            + st.activations.0
            + st.temp.0
            + st.reserved.0;
        if (st.total.0 - parts).abs() > 1e-9 * st.total.0.max(1.0) {
            return Err(format!(
                "the {name} stage's memory {} B is not the sum of its parts {parts} B",
                st.total.0
            ));
        }
    }
    Ok(())
}

/// The physical laws every inference report obeys: positive TTFT and latency, a TPOT positive
/// exactly when there are decode steps, prefill MFU and decode bandwidth utilisation in [0, 1].
fn physical_inference(r: &perfcast_engine::inference::InferenceReport) -> Result<(), String> {
    for (what, v) in [("TTFT", r.ttft.0), ("latency", r.latency.0)] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(format!("{what} {v} s is not a positive number"));
        }
    }
    // One output token is the prefill's: no decode step, a TPOT of 0.
    let tpot = r.tpot.0;
    if !(tpot.is_finite() && tpot >= 0.0 && (tpot > 0.0) == (r.decode.steps > 0)) {
        return Err(format!(
            "TPOT {tpot} s with {} decode steps (positive exactly when there are steps)",
            r.decode.steps
        ));
    }
    for (what, v) in [
        ("prefill MFU", r.prefill_mfu),
        (
            "decode bandwidth utilisation",
            r.decode_bandwidth_utilization,
        ),
    ] {
        if !(0.0..=1.0 + 1e-9).contains(&v) {
            return Err(format!("{what} = {v} is not in [0, 1]"));
        }
    }
    Ok(())
}

/// The seed texts: every shipped experiment and example config and every preset, with the
/// extension each is written with.
pub fn seeds(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["configs/experiments", "configs/examples"] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            files.sort();
            for f in files {
                if f.extension().and_then(|e| e.to_str()) == Some("toml") {
                    if let Ok(t) = std::fs::read_to_string(&f) {
                        out.push(t);
                    }
                }
            }
        }
    }
    for name in perfcast_config::preset_names() {
        if let Some(t) = perfcast_config::preset(&name) {
            out.push(t.to_string());
        }
    }
    out
}

const NASTY: &[&str] = &[
    "-1",
    "0",
    "-0",
    "1e309",
    "nan",
    "inf",
    "-inf",
    "4294967296",
    "18446744073709551616",
    "1e-320",
    "0.0",
    "1e300",
    "\"x\"",
    "[]",
    "{}",
    "true",
    "\"\"",
    "[1, \"a\"]",
    "-4",
    "2147483648",
    "0.5",
    "1e3",
];

/// One mutated input: its text and the extension to write it with.
pub fn input(rng: &mut Rng, seeds: &[String]) -> (String, &'static str) {
    match rng.below(10) {
        // Random bytes (mostly printable, with TOML's punctuation).
        0 => {
            let n = rng.below(300);
            let alphabet = b"abcdefghijklmnopqrstuvwxyz_.=[]{}\"'#,:-+0123456789 \n\t\\";
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    if rng.below(20) == 0 {
                        (rng.u64() & 0xff) as u8
                    } else {
                        *rng.pick(alphabet)
                    }
                })
                .collect();
            let ext = *rng.pick(&["toml", "yaml", "json"]);
            (String::from_utf8_lossy(&bytes).into_owned(), ext)
        }
        // A seed as JSON or YAML, its numbers mutated.
        1 | 2 => {
            let seed = rng.pick(seeds);
            let Ok(v) = seed.parse::<toml::Table>() else {
                return (seed.clone(), "toml");
            };
            let mut j = serde_json::to_value(v).unwrap_or_default();
            mutate_json(rng, &mut j);
            if rng.below(2) == 0 {
                (serde_json::to_string(&j).unwrap_or_default(), "json")
            } else {
                (yaml_of(&j, 0), "yaml")
            }
        }
        // A seed's TOML text, edited.
        _ => {
            let mut t = rng.pick(seeds).clone();
            for _ in 0..1 + rng.below(4) {
                t = edit(rng, &t);
            }
            (t, "toml")
        }
    }
}

fn mutate_json(rng: &mut Rng, v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for (_, x) in m.iter_mut() {
                mutate_json(rng, x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mutate_json(rng, x)),
        Value::Number(_) if rng.below(6) == 0 => {
            let n = *rng.pick(NASTY);
            *v = serde_json::from_str(n).unwrap_or_else(|_| Value::String(n.to_string()));
        }
        _ => {}
    }
}

/// A JSON value as (block) YAML.
fn yaml_of(v: &serde_json::Value, indent: usize) -> String {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| match x {
                Value::Object(_) | Value::Array(_) => {
                    format!("{pad}{k}:\n{}", yaml_of(x, indent + 2))
                }
                _ => format!("{pad}{k}: {x}\n"),
            })
            .collect(),
        Value::Array(a) => a
            .iter()
            .map(|x| match x {
                Value::Object(_) | Value::Array(_) => {
                    format!("{pad}-\n{}", yaml_of(x, indent + 2))
                }
                _ => format!("{pad}- {x}\n"),
            })
            .collect(),
        other => format!("{pad}{other}\n"),
    }
}

/// One random edit of a text: a number replaced by a nasty value, a character inserted or
/// removed, a line duplicated or dropped.
pub fn edit(rng: &mut Rng, t: &str) -> String {
    let chars: Vec<char> = t.chars().collect();
    if chars.is_empty() {
        return (*rng.pick(NASTY)).to_string();
    }
    let at = rng.below(chars.len());
    match rng.below(5) {
        0 | 1 => {
            // The number (or word) at or after `at`.
            let start = (at..chars.len())
                .find(|&i| chars[i].is_ascii_digit())
                .unwrap_or(at);
            let end = (start..chars.len())
                .find(|&i| !(chars[i].is_ascii_alphanumeric() || chars[i] == '.'))
                .unwrap_or(chars.len());
            let mut s: String = chars[..start].iter().collect();
            let nasty: &&str = rng.pick(NASTY);
            s.push_str(nasty);
            s.extend(&chars[end..]);
            s
        }
        2 => {
            let mut s: String = chars[..at].iter().collect();
            s.push(*rng.pick(&['=', '[', ']', '"', '.', '\n', '#', '{', '}', ',', 'x', '0']));
            s.extend(&chars[at..]);
            s
        }
        3 => {
            let n = 1 + rng.below(8);
            let mut s: String = chars[..at].iter().collect();
            s.extend(&chars[(at + n).min(chars.len())..]);
            s
        }
        _ => {
            let lines: Vec<&str> = t.lines().collect();
            let i = rng.below(lines.len());
            let mut out: Vec<&str> = lines.clone();
            if rng.below(2) == 0 {
                out.insert(i, lines[i]);
            } else {
                out.remove(i);
            }
            out.join("\n")
        }
    }
}

/// Run one config input through the host (see the module documentation): `Ok(true)` for a
/// report, `Ok(false)` for an error, `Err` for a non-finite number.
fn run_config(path: &Path) -> Result<bool, String> {
    let cfg = match Config::load(
        &Sources::files(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            [path.to_path_buf()],
        )
        .without_env(),
    ) {
        Ok(c) => c,
        Err(_) => return Ok(false),
    };
    let _ = perfcast_scenario::explain::explain_all(&cfg);
    let mut reported = false;
    if let Ok(sc) = perfcast_scenario::TrainingScenario::from_config(&cfg) {
        if let Ok(r) = sc.training.evaluate(&sc.plan) {
            let text = perfcast_report::training::csv(&r) + &perfcast_report::training::table(&r);
            if non_finite(&text) {
                return Err(format!("training report:\n{text}"));
            }
            physical_training(&r).map_err(|e| format!("training report: {e}\n{text}"))?;
            reported = true;
        }
    }
    if let Ok(sc) = perfcast_scenario::InferenceScenario::from_config(&cfg) {
        if let Ok(r) = sc.inference.evaluate(&sc.plan) {
            let text = perfcast_report::inference::csv(&r, &[]);
            if non_finite(&text) {
                return Err(format!("inference report:\n{text}"));
            }
            physical_inference(&r).map_err(|e| format!("inference report: {e}\n{text}"))?;
            reported = true;
        }
    }
    if let (Ok(device), Ok(ops)) = (cfg.device(), cfg.ops()) {
        if let Ok(r) = perfcast_scenario::roofline::analyze(&device, &ops) {
            let text = serde_json::to_string(&r).unwrap_or_default();
            if text.contains("null") && !ops.is_empty() {
                return Err(format!("roofline report with a non-number: {text}"));
            }
            reported = true;
        }
    }
    Ok(reported)
}

/// Run `n` config inputs from `seed` on `threads` threads, files in `dir`.
pub fn fuzz_configs(root: &Path, dir: &Path, n: u64, seed: u64, threads: u64) -> Findings {
    let seeds = seeds(root);
    let findings = Findings::default();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (seeds, findings) = (&seeds, &findings);
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ (t << 40));
                let mut i = t;
                while i < n {
                    let (text, ext) = input(&mut rng, seeds);
                    let path = dir.join(format!("fuzz-{t}.{ext}"));
                    if std::fs::write(&path, &text).is_err() {
                        findings.fail(format!("cannot write {}", path.display()));
                        return;
                    }
                    let outcome = std::panic::catch_unwind(|| run_config(&path));
                    findings.inputs.fetch_add(1, Ordering::Relaxed);
                    match outcome {
                        Ok(Ok(true)) => findings.reports.fetch_add(1, Ordering::Relaxed),
                        Ok(Ok(false)) => findings.errors.fetch_add(1, Ordering::Relaxed),
                        Ok(Err(what)) => {
                            findings.fail(format!("{what}\ninput ({ext}):\n{text}"));
                            0
                        }
                        Err(_) => {
                            findings.fail(format!("panic on input ({ext}):\n{text}"));
                            0
                        }
                    };
                    i += threads;
                }
            });
        }
    });
    findings
}

/// One plugin-answer sequence: the fuzz components of `seed` as a system, a training step
/// and a serving run evaluated on it.
fn run_plugin(r: &Registry, seed: u64, bad: f64) -> Result<bool, String> {
    let p = serde_json::json!({"seed": seed, "bad": bad});
    let (Ok(gpu), Ok(hbm), Ok(link)) = (
        r.compute_unit("fuzz/gpu", &p),
        r.memory_tier("fuzz/hbm", &p),
        r.interconnect("fuzz/link", &p),
    ) else {
        return Ok(false);
    };
    let system = System {
        name: "fuzz".into(),
        compute: gpu,
        memory: MemoryHierarchy::new(vec![hbm]),
        network: vec![link],
        topology: None,
        devices: 8,
    };
    let model = perfcast_testkit::gpt(4, 1024, 16);
    let mut reported = false;
    if let Ok(t) = Training::new(model.clone(), system.clone(), r) {
        let plan = TrainingPlan {
            tp: 2,
            pp: 2,
            dp: 2,
            micro_batch: 1,
            global_batch: 8,
            recompute: "selective".into(),
            ..TrainingPlan::default()
        };
        if let Ok(rep) = t.evaluate(&plan) {
            let text = perfcast_report::training::csv(&rep);
            if non_finite(&text) {
                return Err(format!("training report of seed {seed}:\n{text}"));
            }
            physical_training(&rep)
                .map_err(|e| format!("training report (plugin) of seed {seed}: {e}\n{text}"))?;
            reported = true;
        }
    }
    // The execution plugins: a strategy, a schedule and a policy answering at random.
    let options: perfcast_engine::TrainingOptions = serde_json::from_value(serde_json::json!({
        "strategies": ["fuzz/tp", "sequence", "context", "expert", "pipeline", "data", "zero"],
        "strategy_params": {"fuzz/tp": p},
        "schedule_params": {"fuzz/sched": p},
        "recompute_params": {"fuzz/policy": p},
    }))
    .map_err(|e| e.to_string())?;
    if let Ok(t) = Training::with_options(model.clone(), system.clone(), r, &options) {
        let plan = TrainingPlan {
            tp: 2,
            pp: 2,
            dp: 2,
            micro_batch: 1,
            global_batch: 8,
            recompute: "fuzz/policy".into(),
            schedule: Some("fuzz/sched".into()),
            ..TrainingPlan::default()
        };
        if let Ok(rep) = t.evaluate(&plan) {
            let text = perfcast_report::training::csv(&rep);
            if non_finite(&text) {
                return Err(format!(
                    "training report (execution plugins) of seed {seed}:\n{text}"
                ));
            }
            physical_training(&rep).map_err(|e| {
                format!("training report (execution plugins) of seed {seed}: {e}\n{text}")
            })?;
            reported = true;
        }
    }
    let plan: InferencePlan = serde_json::from_value(
        serde_json::json!({"tp": 2, "batch": 4, "input_len": 256, "output_len": 32}),
    )
    .map_err(|e| e.to_string())?;
    if let Ok(inf) = Inference::new(model, system, InferenceOptions::default()) {
        if let Ok(rep) = inf.evaluate(&plan) {
            let text = perfcast_report::inference::csv(&rep, &[]);
            if non_finite(&text) {
                return Err(format!("inference report of seed {seed}:\n{text}"));
            }
            physical_inference(&rep)
                .map_err(|e| format!("inference report of seed {seed}: {e}\n{text}"))?;
            reported = true;
        }
    }
    Ok(reported)
}

/// Run `n` plugin-answer sequences (seeds `first..first + n`) against the fuzz-fixture
/// library at `lib`, on `threads` threads.
pub fn fuzz_plugin(lib: &Path, first: u64, n: u64, threads: u64) -> Findings {
    let findings = Findings::default();
    let mut r = perfcast_builtins::registry().expect("built-in registry");
    if let Err(e) = perfcast_loader::load_library(lib, None, &mut r) {
        findings.fail(format!("cannot load the fuzz fixture: {e}"));
        return findings;
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let (r, findings) = (&r, &findings);
            s.spawn(move || {
                let mut i = t;
                while i < n {
                    let seed = first + i;
                    // Mostly a rare bad answer (a sequence makes hundreds of calls); every
                    // fifth sequence one in a hundred, every tenth one in three.
                    let bad = match seed % 10 {
                        0 => 0.3,
                        5 => 0.01,
                        _ => 0.0005,
                    };
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_plugin(r, seed, bad)
                    }));
                    findings.inputs.fetch_add(1, Ordering::Relaxed);
                    match outcome {
                        Ok(Ok(true)) => findings.reports.fetch_add(1, Ordering::Relaxed),
                        Ok(Ok(false)) => findings.errors.fetch_add(1, Ordering::Relaxed),
                        Ok(Err(what)) => {
                            findings.fail(what);
                            0
                        }
                        Err(_) => {
                            findings.fail(format!("panic in the host on seed {seed}"));
                            0
                        }
                    };
                    i += threads;
                }
            });
        }
    });
    findings
}
