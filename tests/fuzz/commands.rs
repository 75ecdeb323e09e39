//! The command campaign: mutated inputs run through the CLI's commands in process
//! (`perfcast_cli::run_captured`, exactly what the command line runs, output captured):
//! `predict`, `infer` and `search` on the shipped experiments and examples, `serve` on the
//! shipped serving configs, `sweep` on the shipped sweeps (their first points), `validate` on
//! a cases file of one shipped case. Each input is mutated as the config fuzz run mutates
//! (`harness::edit`: nasty numbers, stray characters, lines dropped or doubled).
//!
//! A finding is a panic (`FailureKind::Internal`), a non-finite number in what a command
//! printed, a number of 25 or more digits there or in its error (the input's own strings,
//! which commands echo, left out of both), or (in
//! the optimised long run) a command that ran longer than [`SLOW`]. A watchdog ends the run,
//! printing the input, when a command has run for [`HUNG`] (it cannot be interrupted in
//! process).

use super::harness::{edit, non_finite, Findings, Rng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A command slower than this is a finding in the long run (issue 47's target).
#[allow(dead_code)] // (the bounded test sets no limit)
pub const SLOW: Duration = Duration::from_secs(10);
/// A command running this long is taken as hung: the run ends.
pub const HUNG: Duration = Duration::from_secs(120);

/// Which command a seed is run through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Predict,
    Infer,
    Search,
    Serve,
    Sweep,
    Validate,
}

impl Command {
    /// The arguments after the file (bounded: one plan from a search, two sweep points).
    fn args(self, file: &str) -> Vec<String> {
        let v: &[&str] = match self {
            Command::Predict => &["predict", file],
            Command::Infer => &["infer", file],
            Command::Search => &["search", file, "--top", "1"],
            Command::Serve => &["serve", file],
            Command::Sweep => &["sweep", file, "--points", "0..2"],
            Command::Validate => &["validate", file],
        };
        v.iter().map(|s| s.to_string()).collect()
    }
}

/// The seeds: (command, text) for every shipped experiment and example (predict, infer,
/// search), serving config (serve), sweep (its relative paths made absolute), and one case
/// in 25 of the validation file (each alone in a cases file).
pub fn seeds(root: &Path) -> Vec<(Command, String)> {
    let read_dir = |dir: &str| -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .filter(|f| f.extension().and_then(|e| e.to_str()) == Some("toml"))
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect()
    };
    let mut out = Vec::new();
    for dir in ["configs/experiments", "configs/examples"] {
        for t in read_dir(dir) {
            for c in [Command::Predict, Command::Infer, Command::Search] {
                out.push((c, t.clone()));
            }
        }
    }
    let configs = root.join("configs").display().to_string();
    for t in read_dir("configs/serving") {
        let t = t.replace(
            "\"trace-example.csv",
            &format!("\"{configs}/serving/trace-example.csv"),
        );
        out.push((Command::Serve, t.replace("\"../", &format!("\"{configs}/"))));
    }
    for t in read_dir("configs/sweeps") {
        out.push((Command::Sweep, t.replace("\"../", &format!("\"{configs}/"))));
    }
    let cases =
        std::fs::read_to_string(root.join("configs/validation/cases.toml")).unwrap_or_default();
    let mut blocks = cases.split("\n[[case]]\n");
    let head = blocks.next().unwrap_or_default().to_string();
    for b in blocks.step_by(25) {
        out.push((Command::Validate, format!("{head}\n[[case]]\n{b}")));
    }
    out
}

/// `printed` without the input's own strings (its ids, sources and notes, which a command
/// echoes: a mutation may have left `nan` or a long number in them).
fn computed(printed: &str, input: &str) -> String {
    let mut out = printed.to_string();
    let mut quoted: Vec<&str> = input.split('"').skip(1).step_by(2).collect();
    // Longest first, so that a string inside another is not cut out of it first.
    quoted.sort_by_key(|q| std::cmp::Reverse(q.len()));
    for q in quoted.into_iter().filter(|q| q.len() >= 3) {
        out = out.replace(q, " ");
    }
    out
}

/// A number printed whole that no physical quantity has (25 digits or more before a point).
fn absurd(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|w| w.len() >= 25)
}

/// Run `n` mutated inputs from `seed` on `threads` threads, files in `dir`; a command slower
/// than `slow` is a finding (`None` in an unoptimised build, where times mean little).
pub fn campaign(
    root: &Path,
    dir: &Path,
    n: u64,
    seed: u64,
    threads: u64,
    slow: Option<Duration>,
) -> Findings {
    let seeds = seeds(root);
    let findings = Findings::default();
    let slowest = AtomicU64::new(0);
    // Per thread: when its command started (ms since `epoch`, 0 when idle) and its input.
    let epoch = Instant::now();
    let running: Vec<(AtomicU64, Mutex<String>)> = (0..threads)
        .map(|_| (AtomicU64::new(0), Mutex::new(String::new())))
        .collect();
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| watchdog(&running, &done, epoch, threads));
        for t in 0..threads {
            let (seeds, findings, running, slowest) = (&seeds, &findings, &running, &slowest);
            let done = &done;
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ (t << 40) ^ 0xC0FFEE);
                let mut i = t;
                while i < n {
                    let (cmd, seed_text) = rng.pick(seeds);
                    let mut text = seed_text.clone();
                    for _ in 0..1 + rng.below(3) {
                        text = edit(&mut rng, &text);
                    }
                    let path = dir.join(format!("campaign-{t}.toml"));
                    if std::fs::write(&path, &text).is_err() {
                        findings.fail(format!("cannot write {}", path.display()));
                        break;
                    }
                    let args = cmd.args(&path.display().to_string());
                    *running[t as usize]
                        .1
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = format!("{args:?}\n{text}");
                    let start = Instant::now();
                    running[t as usize]
                        .0
                        .store(epoch.elapsed().as_millis() as u64 + 1, Ordering::SeqCst);
                    let result = perfcast_cli::run_captured(&args);
                    running[t as usize].0.store(0, Ordering::SeqCst);
                    let took = start.elapsed();
                    slowest.fetch_max(took.as_millis() as u64, Ordering::Relaxed);
                    findings.inputs.fetch_add(1, Ordering::Relaxed);
                    let (printed, failure) = match &result {
                        Ok(out) => (out.as_str(), None),
                        Err(f) => (f.output.as_str(), Some(f)),
                    };
                    let message = failure.map(|f| f.message.as_str()).unwrap_or("");
                    // A report's numbers must be finite; an error may name the bad value it
                    // refuses (`inf is not allowed`), but never print 25 digits of one.
                    let report = computed(printed, &text);
                    let said = computed(&format!("{printed}\n{message}"), &text);
                    let what =
                        if failure.is_some_and(|f| f.kind == perfcast_cli::FailureKind::Internal) {
                            Some("a panic")
                        } else if non_finite(&report) {
                            Some("a non-finite number")
                        } else if absurd(&said) {
                            Some("a number of 25 or more digits")
                        } else if slow.is_some_and(|s| took > s) {
                            Some("too slow")
                        } else {
                            None
                        };
                    match what {
                        Some(w) => findings.fail(format!(
                            "{w} ({:.1} s): {args:?}\n{message}\ninput:\n{text}\nprinted:\n{printed}",
                            took.as_secs_f64(),
                        )),
                        None if failure.is_some() => {
                            findings.errors.fetch_add(1, Ordering::Relaxed);
                        }
                        None => {
                            findings.reports.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    i += threads;
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    println!(
        "slowest command: {:.2} s",
        slowest.load(Ordering::Relaxed) as f64 / 1e3
    );
    findings
}

/// End the process, printing the input, when a command has run for [`HUNG`].
fn watchdog(running: &[(AtomicU64, Mutex<String>)], done: &AtomicU64, epoch: Instant, n: u64) {
    while done.load(Ordering::SeqCst) < n {
        std::thread::sleep(Duration::from_millis(500));
        let now = epoch.elapsed().as_millis() as u64;
        for (since, input) in running {
            let s = since.load(Ordering::SeqCst);
            if s > 0 && now.saturating_sub(s) > HUNG.as_millis() as u64 {
                let input = input.lock().unwrap_or_else(|e| e.into_inner());
                println!("--- hung for {} s:\n{input}", HUNG.as_secs());
                std::process::exit(1);
            }
        }
    }
}
