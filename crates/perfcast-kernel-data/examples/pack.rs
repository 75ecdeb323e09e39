//! Packs the project's kernel tables: every `tables/<gpu>/<op>.parquet` (what `perfcast
//! kernels import` writes, the tables' source of record) into `tables/<gpu>/<op>.pkt` beside
//! it, the form the crate embeds (`perfcast_kernels::packed`). Run after an import:
//!
//! ```sh
//! cargo run --release -p perfcast-kernel-data --example pack
//! ```
//!
//! The crate's tests unpack every embedded table and compare it row by row with its Parquet
//! file, so a table imported and not packed fails them.

use perfcast_kernels::io::{read_table, ParquetFile};
use perfcast_kernels::packed::pack;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tables");
    match run(&dir) {
        Ok(n) => {
            println!("packed {n} tables in {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &Path) -> Result<usize, Box<dyn std::error::Error>> {
    let mut n = 0;
    for gpu in std::fs::read_dir(dir)? {
        let gpu = gpu?.path();
        if !gpu.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&gpu)? {
            let p = f?.path();
            if p.extension().and_then(|x| x.to_str()) != Some("parquet") {
                continue;
            }
            let table = read_table(&ParquetFile::read(&p)?, None, None)?;
            std::fs::write(p.with_extension("pkt"), pack(&table)?)?;
            n += 1;
        }
    }
    Ok(n)
}
