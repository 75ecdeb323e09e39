//! `cargo run -p perfcast-validation --example validate -- [CASES.toml] [--group G] [--json]`:
//! the validation table without the CLI.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use perfcast_validation::{validate_file, ValidateOptions, Validated};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut path = None;
    let mut group = None;
    let mut json = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--group" => {
                i += 1;
                group = args.get(i).cloned();
            }
            "--json" => json = true,
            p => path = Some(std::path::PathBuf::from(p)),
        }
        i += 1;
    }
    let plugins = perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
        .with_kernels(perfcast_kernel_data::shared().expect("kernel tables"));
    let opts = ValidateOptions::standard().expect("the built-in residuals");
    match validate_file(path.as_deref(), group.as_deref(), &plugins, &opts) {
        Ok(v) if json => println!("{:#}", v.to_json()),
        Ok(Validated::Cases(r)) => print!("{}", perfcast_report::validation::table(&r)),
        Ok(Validated::Collectives(r)) => {
            print!("{}", perfcast_report::validation::collectives_table(&r))
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
