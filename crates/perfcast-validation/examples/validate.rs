//! `cargo run -p perfcast-validation --example validate -- [CASES.toml] [--group G] [--json]`:
//! the validation table without the CLI.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut path = None;
    let mut group = None;
    let mut format = perfcast_validation::Format::Table;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--group" => {
                i += 1;
                group = args.get(i).cloned();
            }
            "--json" => format = perfcast_validation::Format::Json,
            p => path = Some(std::path::PathBuf::from(p)),
        }
        i += 1;
    }
    match perfcast_validation::validate_to_string(
        path.as_deref(),
        group.as_deref(),
        format,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    ) {
        Ok(s) => print!("{s}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
