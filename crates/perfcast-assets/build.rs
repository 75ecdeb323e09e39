//! Embeds the presets of `configs/{hardware,systems,models,stacks,experiments}/*.toml` in the
//! library, so that `include = ["preset:NAME"]` (and `stack = "NAME"` for the software stacks,
//! `perfcast predict preset:NAME` for an experiment) works from any directory, and the study configs of `configs/studies/*.toml`, so that `perfcast study
//! NAME` does. Preset names are file stems and must be unique across the four directories.

// A build script reports a failure by panicking: cargo shows the message and stops the build.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The preset groups. `experiments` are whole configurations (a model, a system, a plan) that
/// name only presets, so `perfcast predict preset:gpt3-175b-a100` runs one from anywhere (the
/// Python wheel's command included).
const DIRS: [&str; 5] = ["hardware", "systems", "models", "stacks", "experiments"];

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
    std::fs::write(out_dir.join("residuals.rs"), residuals(&manifest)).expect("write residuals.rs");
}

/// `RESIDUAL_ROWS`: the `[[residual]]` tables of `configs/validation/residuals.toml` as Rust
/// values, so that the error bars of a command cost no TOML parse of ~200 KB (8 ms, a third
/// of an `infer`). The file is what `perfcast calibrate --residuals` writes: one `key =
/// value` per line, strings without escapes, numbers; anything else stops the build here,
/// and perfcast-validation's tests hold these rows equal to the file parsed as TOML.
fn residuals(manifest: &Path) -> String {
    const FIELDS: [&str; 9] = [
        "case",
        "group",
        "kind",
        "stack",
        "generation",
        "metric",
        "predicted",
        "measured",
        "cv",
    ];
    let path = manifest.join("../../configs/validation/residuals.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path).expect("configs/validation/residuals.toml");
    let mut rows: Vec<[Option<String>; 9]> = Vec::new();
    let mut in_rows = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let at = || format!("{}:{}", path.display(), n + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "[[residual]]" {
            rows.push(Default::default());
            in_rows = true;
            continue;
        }
        if line.starts_with('[') {
            assert!(!in_rows, "{}: a table after the residuals", at());
            continue;
        }
        if !in_rows {
            continue;
        }
        let (key, value) = line
            .split_once(" = ")
            .unwrap_or_else(|| panic!("{}: not `key = value`", at()));
        let i = FIELDS
            .iter()
            .position(|f| *f == key)
            .unwrap_or_else(|| panic!("{}: unknown key `{key}`", at()));
        let value = if let Some(s) = value.strip_prefix('"') {
            let s = s
                .strip_suffix('"')
                .unwrap_or_else(|| panic!("{}: an unterminated string", at()));
            assert!(!s.contains(['\\', '"']), "{}: an escaped string", at());
            format!("{s:?}")
        } else {
            let x: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("{}: `{value}` is not a number", at()));
            format!("{x:?}")
        };
        let row = rows.last_mut().expect("inside a [[residual]]");
        assert!(row[i].is_none(), "{}: `{key}` twice", at());
        row[i] = Some(value);
    }
    let mut out = String::from(
        "/// The `[[residual]]` tables of `residuals.toml`: `(case, group, kind, stack,\n\
         /// generation, metric, predicted, measured, cv)`, in file order.\n\
         #[allow(clippy::type_complexity)]\n\
         pub static RESIDUAL_ROWS: &[(&str, &str, &str, Option<&str>, Option<&str>, &str, f64, f64, Option<&str>)] = &[\n",
    );
    for row in rows {
        let field = |i: usize, optional: bool| match (&row[i], optional) {
            (Some(v), false) => v.clone(),
            (Some(v), true) => format!("Some({v})"),
            (None, true) => "None".to_string(),
            (None, false) => panic!("{}: a residual without `{}`", path.display(), FIELDS[i]),
        };
        let optional = [false, false, false, true, true, false, false, false, true];
        let cells: Vec<String> = (0..9).map(|i| field(i, optional[i])).collect();
        writeln!(out, "    ({}),", cells.join(", ")).expect("write to String");
    }
    out.push_str("];\n");
    out
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
