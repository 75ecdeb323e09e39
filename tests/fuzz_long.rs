//! The long fuzz run: `cargo run --release -p perfcast-tests --example fuzz -- CONFIGS
//! PLUGINS [SEED] [COMMANDS]` (default 1,000,000 config inputs, 100,000 plugin-answer
//! sequences and 100,000 mutated inputs through the commands, seed 1), on every core. Prints what it ran and found; exits 1 on any panic or non-finite
//! number, with the first inputs that caused one.

#[path = "fuzz/commands.rs"]
mod commands;
#[path = "fuzz/harness.rs"]
mod harness;

use std::time::Instant;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.replace('_', "").parse().ok())
        .collect();
    let configs = args.first().copied().unwrap_or(1_000_000);
    let plugins = args.get(1).copied().unwrap_or(100_000);
    let seed = args.get(2).copied().unwrap_or(1);
    let commands = args.get(3).copied().unwrap_or(100_000);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get() as u64);
    let root = perfcast_testkit::workspace_root();
    let dir = perfcast_testkit::tmpdir("perfcast-fuzz-long");
    let t = Instant::now();
    let c = harness::fuzz_configs(&root, &dir, configs, seed, threads);
    println!(
        "configs: {} in {:.1} s",
        c.summary(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let lib = perfcast_testkit::plugins::build_rust(&["fuzz-fixture"], &dir).remove(0);
    let p = harness::fuzz_plugin(&lib, seed << 32, plugins, threads);
    println!(
        "plugin answers: {} in {:.1} s",
        p.summary(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let m = commands::campaign(&root, &dir, commands, seed, threads, Some(commands::SLOW));
    println!(
        "commands: {} in {:.1} s",
        m.summary(),
        t.elapsed().as_secs_f64()
    );
    let mut failed = false;
    for f in [&c, &p, &m] {
        for what in f.failures.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            failed = true;
            println!("---\n{what}");
        }
    }
    std::process::exit(i32::from(failed));
}
