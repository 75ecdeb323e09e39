//! Run studies without the CLI:
//!
//! - `cargo run -p perfcast-studies --example study -- NAME [OUT]`: one study into OUT
//!   (default `out/studies/NAME`);
//! - `cargo run --release -p perfcast-studies --example study -- --docs`: every study into
//!   `docs/studies/` and the page `docs/studies.md` (run from the repository root).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

fn fail(e: perfcast_studies::StudyError) -> ! {
    eprintln!("error: {e}");
    std::process::exit(1)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "memory-vs-recompute".into());
    if name == "--docs" {
        let mut outputs = Vec::new();
        for s in perfcast_studies::STUDIES {
            let t = std::time::Instant::now();
            let o = perfcast_studies::run(
                s.name,
                None,
                &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                    .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            )
            .unwrap_or_else(|e| fail(e));
            o.write(Path::new("docs/studies"))
                .unwrap_or_else(|e| fail(e));
            println!("{}: {:.2} s", s.name, t.elapsed().as_secs_f64());
            outputs.push(o);
        }
        if let Err(e) = std::fs::write("docs/studies.md", perfcast_studies::docs_page(&outputs)) {
            eprintln!("error: cannot write docs/studies.md: {e}");
            std::process::exit(1);
        }
        println!("wrote docs/studies.md");
        return;
    }
    let out = args.next().unwrap_or_else(|| format!("out/studies/{name}"));
    let t = std::time::Instant::now();
    match perfcast_studies::run(
        &name,
        None,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    )
    .and_then(|o| o.write(Path::new(&out)))
    {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            println!("{name}: {:.2} s", t.elapsed().as_secs_f64());
        }
        Err(e) => fail(e),
    }
}
