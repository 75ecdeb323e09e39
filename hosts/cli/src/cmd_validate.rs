//! `perfcast validate [CASES.toml] [--group G] [--format table|json]`: predicted against
//! published measurements, per case, MAPE per group and overall (the harness is
//! `perfcast_validation`).
//!
//! Exit status: 0 when the validation ran, whatever the accuracy; 1 for a cases file that
//! cannot be read or breaks the schema, or a group with no case (the message names the file,
//! the case and the key).

use crate::common::{print, Format};
use std::path::PathBuf;

/// The outputs of `perfcast validate` (no CSV: a report of nested cases), with their help.
const FORMATS: [(Format, &str); 2] = [
    (
        Format::Table,
        "Per group: each case's metrics, predicted / measured / error, the time breakdown; then the summary",
    ),
    (
        Format::Json,
        "`{\"cases\":[{\"id\",\"group\",\"kind\",\"status\",\"reason\",\"metrics\":[...]}],\"summary\":{...}}`",
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
    #[arg(long, value_parser = Format::parser(&FORMATS), default_value_t)]
    pub format: Format,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let text =
        perfcast_validation::validate_to_string(a.cases.as_deref(), a.group.as_deref(), a.format)
            .map_err(anyhow::Error::msg)?;
    print(&text)
}
