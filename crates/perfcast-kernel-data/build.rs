//! Embeds `tables/<gpu>/<op>.pkt` (the packed form of the `.parquet` beside it, which
//! `perfcast kernels import` writes; `examples/pack.rs` packs them) as
//! `TABLES: &[(gpu, op, bytes)]`, sorted, so the portable binary carries them.

// A build script reports a failure by panicking: cargo shows the message and stops the build.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dir = manifest.join("tables");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut tables: Vec<(String, String, PathBuf)> = Vec::new();
    for gpu in std::fs::read_dir(&dir)
        .expect("tables/")
        .filter_map(|e| e.ok())
    {
        let gpu_dir = gpu.path();
        if !gpu_dir.is_dir() {
            continue;
        }
        println!("cargo:rerun-if-changed={}", gpu_dir.display());
        let gpu_name = gpu.file_name().to_string_lossy().into_owned();
        for f in std::fs::read_dir(&gpu_dir)
            .expect("a GPU folder")
            .filter_map(|e| e.ok())
        {
            let p = f.path();
            if p.extension().and_then(|x| x.to_str()) != Some("pkt") {
                continue;
            }
            let op = p.file_stem().unwrap().to_string_lossy().into_owned();
            tables.push((gpu_name.clone(), op, p));
        }
    }
    tables.sort();
    let mut out = String::from("/// `(gpu, op, packed bytes)` of every embedded table, sorted.\npub const TABLES: &[(&str, &str, &[u8])] = &[\n");
    for (gpu, op, p) in &tables {
        writeln!(
            out,
            "    ({gpu:?}, {op:?}, include_bytes!({:?})),",
            p.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("tables.rs");
    std::fs::write(dest, out).expect("write tables.rs");
}
