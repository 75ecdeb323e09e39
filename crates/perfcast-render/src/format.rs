//! The output format of a command: one enum for every host.

use std::fmt;
use std::str::FromStr;

/// Output format of a command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Aligned columns for a terminal.
    #[default]
    Table,
    /// Pretty-printed JSON, full precision.
    Json,
    /// Comma-separated values with a header line, full precision.
    Csv,
    /// The CSV's columns as a typed Parquet file (binary: written to a file, never to a
    /// terminal; [`crate::parquet`]). Not a `value_enum` value: the commands that write it
    /// list it with `Format::parser` (feature `clap`).
    #[cfg_attr(feature = "clap", value(skip))]
    Parquet,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 4] = [Format::Table, Format::Json, Format::Csv, Format::Parquet];

    /// The name on the command line (`table`, `json`, `csv`).
    pub const fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
        }
    }

    /// The error for a format that an output does not support: names it and the ones it does.
    pub fn unsupported(self, supported: &[Format]) -> String {
        format!(
            "unsupported format `{self}`: expected {}",
            or_list(supported)
        )
    }
}

/// `` `table`, `json` or `csv` ``.
fn or_list(formats: &[Format]) -> String {
    let names: Vec<String> = formats.iter().map(|f| format!("`{f}`")).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => "nothing".into(),
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown format `{s}`: expected {}", or_list(&Format::ALL)))
    }
}

#[cfg(feature = "clap")]
impl Format {
    /// A `--format` parser for a command that writes only some formats: clap lists and
    /// accepts exactly `allowed` (each with its `--help` text), and rejects the others with
    /// clap's own "invalid value ... [possible values: ...]" message, as a `ValueEnum` of those
    /// variants would.
    pub fn parser(
        allowed: &[(Format, &'static str)],
    ) -> impl clap::builder::TypedValueParser<Value = Format> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
        let values: Vec<PossibleValue> = allowed
            .iter()
            .map(|(f, help)| PossibleValue::new(f.name()).help(*help))
            .collect();
        // clap has checked the name against `allowed`, so the parse cannot fail; the default
        // only satisfies the type.
        PossibleValuesParser::new(values).map(|s| s.parse::<Format>().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_errors_list_the_formats() {
        for f in Format::ALL {
            assert_eq!(f.to_string().parse::<Format>(), Ok(f));
        }
        let e = "yaml".parse::<Format>().unwrap_err();
        assert_eq!(
            e,
            "unknown format `yaml`: expected `table`, `json`, `csv` or `parquet`"
        );
        assert_eq!(
            Format::Csv.unsupported(&[Format::Table, Format::Json]),
            "unsupported format `csv`: expected `table` or `json`"
        );
    }
}
