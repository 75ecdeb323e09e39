//! `perfcast plugins`: every registered plugin, where it comes from, which ABI.

use crate::common::{print, to_json, Format, Table};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Load a plugin shared library first (repeatable). Nothing else is loaded: no scanning.
    #[arg(long = "load", value_name = "PATH")]
    pub load: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (registry, _libs) = perfcast_host::registry_with(&a.load)?;
    let rows = perfcast_host::plugin_rows(&registry);
    let text = match a.format {
        Format::Json => to_json(&rows)?,
        Format::Table | Format::Csv => {
            let mut t = Table::new(&[
                ("category", false),
                ("name", false),
                ("origin", false),
                ("version", false),
                ("abi", false),
                ("description", false),
            ]);
            for r in &rows {
                t.push(vec![
                    r.category.to_string(),
                    r.name.clone(),
                    r.origin.clone(),
                    r.version.clone(),
                    r.abi.clone(),
                    r.description.clone(),
                ]);
            }
            if a.format == Format::Csv {
                t.csv()
            } else {
                t.render()
            }
        }
    };
    print(&text)
}
