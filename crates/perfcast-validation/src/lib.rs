//! perfcast-validation: presets and the validation harness.
//!
//! * [`cases`]: the cases file (schema `perfcast-validation/1`), parsed strictly.
//! * [`presets`]: the hardware of a case's accelerator (perfcast-config's presets of
//!   `configs/`, or a table built from the accelerator catalog) and model presets, composed
//!   into a [`perfcast_core::System`] by perfcast-config.
//! * [`flops`]: the FLOP conventions published TFLOP/s, MFU and HFU are counted in.
//! * [`stacks`]: a case's `software` string mapped to a stack preset by the ordered rules of
//!   `configs/validation/stacks.toml` (the one table; nothing keys on a case's group or id).
//! * [`harness`]: each case mapped to a training or inference scenario of the engine, every
//!   published metric predicted and compared.
//! * [`report`]: per case, per group (MAPE on each case's first published metric) and
//!   overall; JSON and a terminal table. [`validate`] is the whole run (`perfcast validate`).
//!
//! Invariant: a case is never dropped. Every case of the file comes back with a status (`ok`,
//! `unsupported` with the reason, or `error` with the engine's message), and only published
//! measurements (`[case.measured]`) are scored; derived `[case.reference]` values are shown,
//! never scored.

pub mod baseline;
pub mod calibrate;
pub mod cases;
pub mod collectives;
pub mod error;
pub mod flops;
pub mod harness;
pub mod intervals;
pub mod kernel_tables;
pub mod kernels;
pub mod overlay;
pub mod prepared;
pub mod presets;
pub mod report;
pub mod serving;
pub mod stacks;

pub use error::{Error, Result};

use perfcast_config::Plugins;
use std::path::{Path, PathBuf};

/// The cases file used when none is named (relative to the repository root).
pub const DEFAULT_CASES: &str = "configs/validation/cases.toml";

/// The text of [`DEFAULT_CASES`] as it was when perfcast was built: `validate` without a
/// file runs these, from any directory.
pub const BUILTIN_CASES: &str = perfcast_assets::validation::CASES;

/// How the built-in cases are named in messages and reports (never a path of the machine
/// that built the binary).
pub const BUILTIN_CASES_LABEL: &str = "configs/validation/cases.toml (built-in)";

/// The cases file named `path`, or the built-in cases when `path` is `None`.
pub fn load_cases(path: Option<&Path>) -> Result<(cases::CasesFile, String)> {
    match path {
        Some(p) => {
            let p = locate_cases(Some(p))?;
            let file = cases::CasesFile::load(&p)?;
            Ok((file, p.display().to_string()))
        }
        None => {
            let file = cases::CasesFile::parse(BUILTIN_CASES, BUILTIN_CASES_LABEL)?;
            Ok((file, BUILTIN_CASES_LABEL.to_string()))
        }
    }
}

/// Find a cases file named on the command line: the path as given, else relative to any
/// ancestor of the current directory (so `configs/validation/cases.toml` works from inside
/// the repository). Without a name, `validate` runs [`BUILTIN_CASES`].
pub fn locate_cases(path: Option<&Path>) -> Result<PathBuf> {
    let p = path.unwrap_or(Path::new(DEFAULT_CASES));
    presets::find_repo_file(p).ok_or_else(|| Error::NotFound {
        path: p.to_path_buf(),
    })
}

/// How a validation runs beyond the cases: an overlay, and the error bars.
#[derive(Debug, Clone)]
pub struct ValidateOptions {
    /// Keys set on top of every case's configuration where they apply (a calibration layer).
    pub overlay: overlay::Overlay,
    /// The residuals of the error bars and the interval level; `None`: no error bars.
    pub intervals: Option<(intervals::Residuals, f64)>,
}

impl ValidateOptions {
    /// No overlay; error bars at [`intervals::DEFAULT_LEVEL`] from the shipped residuals.
    pub fn standard() -> Result<ValidateOptions> {
        Ok(ValidateOptions {
            overlay: overlay::Overlay::empty(),
            intervals: Some((intervals::Residuals::embedded()?, intervals::DEFAULT_LEVEL)),
        })
    }
}

/// Load, check and run a cases file with the standard options
/// ([`ValidateOptions::standard`]); see [`validate_with`].
pub fn validate(
    path: Option<&Path>,
    group: Option<&str>,
    plugins: &Plugins,
) -> Result<report::Report> {
    validate_with(path, group, plugins, &ValidateOptions::standard()?)
}

/// Load, check and run a cases file; `Err` for a bad file, an unknown group or an overlay key
/// that applies to no case (the CLI exits non-zero), `Ok` with the report however good or bad
/// the accuracy is.
pub fn validate_with(
    path: Option<&Path>,
    group: Option<&str>,
    plugins: &Plugins,
    opts: &ValidateOptions,
) -> Result<report::Report> {
    let (file, name) = load_cases(path)?;
    if let Some(g) = group {
        if !file.cases.iter().any(|c| c.group == g) {
            let groups = file.groups();
            return Err(Error::UnknownGroup {
                file: name,
                what: "case",
                group: g.to_string(),
                did_you_mean: perfcast_core::suggest::did_you_mean(
                    g,
                    groups.iter().map(String::as_str),
                ),
                groups,
            });
        }
    }
    let mut h = harness::Harness::new(plugins)?.with_overlay(opts.overlay.clone());
    if let Some((r, level)) = &opts.intervals {
        h = h.with_intervals(r.clone(), intervals::check_level(*level)?);
    }
    h.check_overlay(&file, group)?;
    let mut report = h.run(&file, group);
    report.attach_baseline(&file, group);
    if let Some((r, level)) = &opts.intervals {
        report.summary.interval_kinds = r
            .coverage(*level)
            .into_iter()
            .map(|(cv, inside, scored)| report::IntervalCoverage { cv, inside, scored })
            .collect();
    }
    Ok(report)
}

/// Load, check and predict a collectives file (schema `perfcast-collectives/1`); `Err` for a
/// bad file or an unknown group.
pub fn validate_collectives(
    path: &Path,
    group: Option<&str>,
    plugins: &Plugins,
) -> Result<collectives::report::Report> {
    let file = collectives::CollectivesFile::load(path)?;
    if let Some(g) = group {
        if !file.entries.iter().any(|e| e.group == g) {
            return Err(Error::UnknownGroup {
                file: path.display().to_string(),
                what: "collective",
                group: g.to_string(),
                did_you_mean: String::new(),
                groups: file.groups(),
            });
        }
    }
    Ok(collectives::report::run(&file, group, plugins))
}

/// What a validation file held, predicted: its cases ([`validate_with`]) or, for a file whose
/// `schema` is `perfcast-collectives/1`, its collective benchmarks ([`validate_collectives`]).
#[derive(Debug)]
pub enum Validated {
    /// A cases file's report (boxed: it is the larger by far).
    Cases(Box<report::Report>),
    /// A collectives file's report.
    Collectives(collectives::report::Report),
}

impl Validated {
    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Validated::Cases(r) => r.to_json(),
            Validated::Collectives(r) => r.to_json(),
        }
    }
}

/// Validate the file at `path` (the built-in cases when `None`), cases or collectives by its
/// schema; an overlay applies to cases only.
pub fn validate_file(
    path: Option<&Path>,
    group: Option<&str>,
    plugins: &Plugins,
    opts: &ValidateOptions,
) -> Result<Validated> {
    if let Some(p) = path.and_then(presets::find_repo_file) {
        if perfcast_config::input::read_text(&p, perfcast_config::input::MAX_TEXT_BYTES)
            .is_ok_and(|t| collectives::is_collectives(&t))
        {
            if !opts.overlay.is_empty() {
                return Err(Error::File {
                    file: p.display().to_string(),
                    message: "--overlay applies to the cases of a validation cases file, not to collective benchmarks".into(),
                });
            }
            return Ok(Validated::Collectives(validate_collectives(
                &p, group, plugins,
            )?));
        }
    }
    Ok(Validated::Cases(Box::new(validate_with(
        path, group, plugins, opts,
    )?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default cases file is found from inside the repository (tests run in the crate
    /// directory, two levels below the root); a bad group is an error naming the known groups.
    #[test]
    fn default_file_and_group_errors() {
        let p = locate_cases(None).unwrap();
        assert!(p.ends_with(DEFAULT_CASES), "{}", p.display());
        let e = validate(
            None,
            Some("no-such-group"),
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("narayanan2021-table1"), "{e}");
        // The built-in cases are the repository's file as built.
        assert_eq!(BUILTIN_CASES, std::fs::read_to_string(&p).unwrap());
        let e = validate(
            None,
            Some("narayanan2021-tabel1"),
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with(BUILTIN_CASES_LABEL), "{e}");
        assert!(e.contains("did you mean `narayanan2021-table1`?"), "{e}");
        let e = locate_cases(Some(Path::new("no/such/cases.toml")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no/such/cases.toml"), "{e}");
        let out = validate_file(
            None,
            Some("korthikanti2022-abstract"),
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            &ValidateOptions::standard().unwrap(),
        )
        .unwrap();
        assert_eq!(out.to_json()["cases"].as_array().unwrap().len(), 2);
    }
}
