//! `perfcast validate [CASES.toml] [--group G] [--overlay LAYER.toml] [--interval P]
//! [--residuals FILE] [--format table|json]`: predicted against published measurements, per
//! case, MAPE per group and overall, each prediction's interval and how many measurements
//! fall inside theirs (the harness is `perfcast_validation`).
//!
//! Exit status: 0 when the validation ran, whatever the accuracy; 1 for a cases file that
//! cannot be read or breaks the schema, a group with no case, an overlay that cannot be read
//! or has a key that applies to no case, or a bad residuals file (the message names the file,
//! the case and the key).

use crate::common::{to_json_of, Format};
use crate::error_bars::IntervalArgs;
use perfcast_report::validation;
use perfcast_validation::overlay::Overlay;
use perfcast_validation::{ValidateOptions, Validated};
use std::path::PathBuf;

/// The outputs of `perfcast validate` (no CSV: a report of nested cases), with their help.
const FORMATS: [(Format, &str); 3] = [
    (
        Format::Table,
        "Per group: each case's metrics, predicted / measured / error, the time breakdown; then the summary",
    ),
    (
        Format::Json,
        "`{\"cases\":[{\"id\",\"group\",\"kind\",\"status\",\"reason\",\"metrics\":[...]}],\"summary\":{...}}`",
    ),
    (
        Format::Parquet,
        "One row per case and metric (id, group, kind, status, metric, predicted, measured, rel_error, lo, hi, stack, reason), typed, written to --out FILE",
    ),
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cases file (schema perfcast-validation/1). Default: the built-in copy of
    /// configs/validation/cases.toml (as it was when perfcast was built).
    #[arg(value_name = "CASES.toml")]
    pub cases: Option<PathBuf>,
    /// Only the cases of this group.
    #[arg(long, value_name = "G")]
    pub group: Option<String>,
    /// A configuration layer (e.g. `perfcast calibrate --out`) set on top of every case's
    /// configuration, each key where the case's configuration has it.
    #[arg(long, value_name = "LAYER.toml")]
    pub overlay: Option<PathBuf>,
    #[command(flatten)]
    pub intervals: IntervalArgs,
    #[arg(long, value_parser = Format::parser(&FORMATS), default_value_t)]
    pub format: Format,
    /// Write the output to this file (whole or not at all) instead of standard output;
    /// needed by `--format parquet`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let overlay = match &a.overlay {
        Some(p) => Overlay::load(p).map_err(anyhow::Error::msg)?,
        None => Overlay::empty(),
    };
    let opts = ValidateOptions {
        overlay,
        intervals: a.intervals.load()?,
    };
    let working = crate::common::working("validating");
    let validated = perfcast_validation::validate_file(
        a.cases.as_deref(),
        a.group.as_deref(),
        &crate::common::plugins(),
        &opts,
    )
    .map_err(anyhow::Error::msg)?;
    drop(working);
    let out = a.out.as_deref();
    match validated {
        Validated::Cases(r) => crate::common::write_rows(
            a.format,
            || Ok(r.to_json()),
            || validation::table(&r),
            || validation::rows(&r),
            out,
            "validate",
            "validate",
        ),
        Validated::Collectives(r) => match a.format {
            Format::Parquet => anyhow::bail!(
                "`--format parquet` writes the rows of validation cases; a collectives file \
                 writes `table` or `json`"
            ),
            Format::Json => {
                crate::common::emit(&to_json_of("validate-collectives", &r.to_json())?, out)
            }
            _ => crate::common::emit(&validation::collectives_table(&r), out),
        },
    }
}
