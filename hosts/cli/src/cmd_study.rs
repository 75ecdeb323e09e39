//! `perfcast study NAME [--out DIR] [--config FILE]` runs one of the seed paper's studies and
//! writes `NAME.csv`, `NAME.svg` and `NAME.md`; `perfcast study --list` lists them.

use crate::common::{print, to_json, Format, Table};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The study to run (`perfcast study --list` shows them).
    #[arg(value_name = "NAME", required_unless_present = "list")]
    pub name: Option<String>,
    /// List the studies and their configs.
    #[arg(long)]
    pub list: bool,
    /// The list's format: aligned columns, or JSON (one record per study: `name`, `config`,
    /// `title`).
    #[arg(long, value_enum, default_value_t, requires = "list")]
    pub format: Format,
    /// Directory for NAME.csv, NAME.svg and NAME.md (default: out/studies/NAME).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Study config to read instead of the built-in configs/studies/NAME.toml (copy one and
    /// edit it; its relative paths are resolved against its own directory).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Plugin libraries the study's configurations load (e.g. a library topology kind in the
    /// `topologies` study).
    #[command(flatten)]
    pub libraries: crate::common::LoadArgs,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.list && a.format == Format::Json {
        let list: Vec<serde_json::Value> = perfcast_studies::STUDIES
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "config": format!("configs/studies/{}.toml", s.name),
                    "title": s.title,
                })
            })
            .collect();
        return print(&to_json(&list)?);
    }
    if a.list && a.format != Format::Table {
        anyhow::bail!(a.format.unsupported(&[Format::Table, Format::Json]));
    }
    if a.list {
        let mut t = Table::new(&[("study", false), ("config", false), ("what", false)]);
        for s in perfcast_studies::STUDIES {
            t.push(vec![
                s.name.to_string(),
                format!("configs/studies/{}.toml (built-in)", s.name),
                s.title.to_string(),
            ]);
        }
        return print(&t.render());
    }
    let Some(name) = a.name else {
        anyhow::bail!("name a study or pass --list");
    };
    let working = crate::common::working(&format!("running the study {name}"));
    let output = perfcast_studies::run_with(
        &name,
        a.config.as_deref(),
        &crate::common::plugins(),
        a.libraries.specs()?,
    )?;
    drop(working);
    let dir = a
        .out
        .unwrap_or_else(|| PathBuf::from("out/studies").join(&name));
    let files = output.write(&dir)?;
    let mut text = String::new();
    for f in &files {
        text.push_str(&format!("wrote {}\n", f.display()));
    }
    text.push('\n');
    text.push_str(&output.summary);
    print(&text)
}
