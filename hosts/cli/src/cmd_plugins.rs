//! `perfcast plugins`: every registered plugin, where it comes from, which ABI.

use crate::common::{print, to_json, Format, Table};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Libraries to load first (`--load PATH`, repeatable, each pinned by a `--sha256 HEX` if
    /// given). Nothing else is loaded: no scanning.
    #[command(flatten)]
    pub libraries: crate::common::LoadArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// The parameters of plugin KIND (name, type, unit, default, allowed values, meaning,
    /// source), as the plugin declares them.
    #[arg(long, value_name = "KIND", conflicts_with = "reference")]
    pub describe: Option<String>,
    #[command(flatten)]
    pub isolation: crate::common::IsolationArgs,
    /// The parameter reference of every plugin, as Markdown (docs/reference.md is this for
    /// the built-ins).
    #[arg(long)]
    pub reference: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let isolate = if a.isolation.isolate {
        Some(a.isolation.options()?)
    } else {
        None
    };
    let (registry, _libs) = perfcast_config::registry_with(
        &crate::common::plugins(),
        &a.libraries.specs()?,
        isolate.as_ref(),
    )?;
    if a.reference {
        return print(&perfcast_scenario::explain::reference(&registry));
    }
    if let Some(kind) = &a.describe {
        return describe(&registry, kind, a.format);
    }
    let rows = perfcast_config::plugin_rows(&registry);
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
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

/// `--describe KIND`: one block per plugin of that name (a name may exist in several
/// categories), its parameters as a table.
fn describe(registry: &perfcast_core::Registry, kind: &str, format: Format) -> anyhow::Result<()> {
    let found = perfcast_config::describe(registry, kind)?;
    if format == Format::Json {
        return print(&to_json(&found)?);
    }
    let headers = [
        ("parameter", false),
        ("type", false),
        ("unit", false),
        ("default", false),
        ("allowed", false),
        ("meaning", false),
        ("source", false),
    ];
    let mut out = String::new();
    let mut csv = Table::new(&[
        ("category", false),
        ("kind", false),
        ("parameter", false),
        ("type", false),
        ("unit", false),
        ("default", false),
        ("allowed", false),
        ("meaning", false),
        ("source", false),
    ]);
    for d in &found {
        out.push_str(&format!(
            "{} `{}` ({}): {}\n",
            d.category, d.name, d.origin, d.description
        ));
        let Some(params) = &d.params else {
            out.push_str("  parameters not declared by the plugin\n");
            continue;
        };
        if params.is_empty() {
            out.push_str("  no parameters\n");
            continue;
        }
        let mut t = Table::new(&headers);
        for p in params {
            let cells = vec![
                p.name.clone(),
                p.ty.clone(),
                p.unit.clone(),
                p.default.clone(),
                p.range.clone(),
                p.description.clone(),
                p.source.clone(),
            ];
            let mut row = vec![d.category.to_string(), d.name.clone()];
            row.extend(cells.iter().cloned());
            csv.push(row);
            t.push(cells);
        }
        for line in t.render().lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    print(&if format == Format::Csv {
        csv.csv()
    } else {
        out
    })
}
