//! Embeds the presets of `configs/{hardware,systems,models,stacks}/*.toml` in the library, so
//! that `include = ["preset:NAME"]` (and `stack = "NAME"` for the software stacks) works from
//! any directory, and the study configs of `configs/studies/*.toml`, so that `perfcast study
//! NAME` does. Preset names are file stems and must be unique across the four directories.

// A build script reports a failure by panicking: cargo shows the message and stops the build.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const DIRS: [&str; 4] = ["hardware", "systems", "models", "stacks"];

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let mut presets: Vec<(String, &str, PathBuf)> = Vec::new();
    for group in DIRS {
        let dir = manifest.join("../../configs").join(group);
        println!("cargo:rerun-if-changed={}", dir.display());
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for p in rd.filter_map(|e| e.ok()).map(|e| e.path()) {
            if p.extension().and_then(|x| x.to_str()) != Some("toml") {
                continue;
            }
            let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            presets.push((stem.to_string(), group, p.clone()));
        }
    }
    presets.sort();
    for w in presets.windows(2) {
        if w[0].0 == w[1].0 {
            panic!(
                "preset name `{}` is used twice: {} and {}; rename one",
                w[0].0,
                w[0].2.display(),
                w[1].2.display()
            );
        }
    }
    let mut out = String::from(
        "/// `(name, group, TOML text)` of every built-in preset, sorted by name.\n\
         pub static PRESETS: &[(&str, &str, &str)] = &[\n",
    );
    for (name, group, path) in &presets {
        println!("cargo:rerun-if-changed={}", path.display());
        let abs = path.canonicalize().unwrap_or_else(|_| path.clone());
        writeln!(
            out,
            "    ({name:?}, {group:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .expect("write to String");
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out_dir.join("presets.rs"), out).expect("write presets.rs");
    std::fs::write(out_dir.join("studies.rs"), studies(&manifest)).expect("write studies.rs");
}

/// `STUDY_CONFIGS`: `(file stem, TOML text)` of every `configs/studies/*.toml`, sorted.
fn studies(manifest: &Path) -> String {
    let dir = manifest.join("../../configs/studies");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("toml"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p.clone())))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from(
        "/// `(study, TOML text)` of every shipped study config, sorted by name.\n\
         pub static STUDY_CONFIGS: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let abs = path.canonicalize().unwrap_or_else(|_| path.clone());
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .expect("write to String");
    }
    out.push_str("];\n");
    out
}
