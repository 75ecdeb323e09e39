//! `perfcast validate [CASES.toml] [--group G] [--format table|json]`: predicted against
//! published measurements, per case, MAPE per group and overall (the harness is
//! `perfcast_validation`).
//!
//! Exit status: 0 when the validation ran, whatever the accuracy; 1 for a cases file that
//! cannot be read or breaks the schema, or a group with no case (the message names the file,
//! the case and the key).

use crate::common::print;
use std::path::PathBuf;

/// Output of `perfcast validate`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ValidateFormat {
    /// Per group: each case's metrics, predicted / measured / error, the time breakdown; then
    /// the summary.
    #[default]
    Table,
    /// `{"cases":[{"id","group","kind","status","reason","metrics":[...]}],"summary":{...}}`.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cases file (schema perfcast-validation/1). Default: configs/validation/cases.toml, looked
    /// up from the current directory and each of its parents.
    #[arg(value_name = "CASES.toml")]
    pub cases: Option<PathBuf>,
    /// Only the cases of this group.
    #[arg(long, value_name = "G")]
    pub group: Option<String>,
    #[arg(long, value_enum, default_value_t)]
    pub format: ValidateFormat,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let format = match a.format {
        ValidateFormat::Table => perfcast_validation::Format::Table,
        ValidateFormat::Json => perfcast_validation::Format::Json,
    };
    let text =
        perfcast_validation::validate_to_string(a.cases.as_deref(), a.group.as_deref(), format)
            .map_err(anyhow::Error::msg)?;
    print(&text)
}
