//! Run one study without the CLI: `cargo run -p perfcast-studies --example study -- NAME [OUT]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "memory-vs-recompute".into());
    let out = args.next().unwrap_or_else(|| format!("out/studies/{name}"));
    let t = std::time::Instant::now();
    match perfcast_studies::run(&name, None).and_then(|o| o.write(std::path::Path::new(&out))) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            println!("{name}: {:.2} s", t.elapsed().as_secs_f64());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
