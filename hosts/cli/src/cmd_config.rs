//! `perfcast config ...`: inspect configurations.

use crate::common::{print, to_json, ConfigArgs, Format, Table};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The merged configuration, each value with where it came from (file, preset,
    /// environment variable, --set, default).
    Explain(ExplainArgs),
    /// The presets built into perfcast: hardware, systems (nodes), models
    /// (`include = ["preset:NAME"]`), the software stacks (`stack = "NAME"`) and the shipped
    /// experiments (`perfcast predict preset:NAME`).
    Presets(PresetArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Every value in force, defaults included: each component's parameters the config
    /// leaves out (at the plugin's declared default), the strategies' parameters, and the
    /// engine's `[plan]` / `[inference]` / `[options]` fields, each with its origin.
    #[arg(long)]
    pub all: bool,
    /// Load the configuration's plugin libraries (running their code), so that `--all` lists
    /// their components' declared defaults; without it every library is checked (file, ELF
    /// headers, pin) and none runs.
    #[arg(long)]
    pub load_plugins: bool,
}

#[derive(Debug, clap::Args)]
pub struct PresetArgs {
    /// Print this preset's TOML instead of the list.
    pub name: Option<String>,
    /// The list as aligned tables, or as JSON: one record per preset (`name`, `group`, `use`:
    /// how a configuration names it, `description`: a stack's, else null).
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(c: Command) -> anyhow::Result<()> {
    match c {
        Command::Explain(a) => explain(a),
        Command::Presets(a) => presets(a),
    }
}

fn explain(a: ExplainArgs) -> anyhow::Result<()> {
    // The sections `predict` and `infer` read (the experiments' `[search]` included). A
    // partial configuration (a base file without its plan) is explained too: the check
    // of the model and plans before the libraries load is left to the commands that run them.
    let mut sources = crate::cmd_predict::sources(&a.config)?;
    sources.precheck = None;
    if !a.load_plugins {
        sources.policy = perfcast_config::LibraryPolicy::CheckOnly;
    }
    let cfg = crate::common::load_config(&sources)?;
    if let Some(first) = cfg.unloaded().first() {
        let n = cfg.unloaded().len();
        crate::common::eprint_line(&format!(
            "note: {n} plugin {} not loaded ({}{}): `config explain` runs no library code \
             (`--load-plugins` loads {})",
            if n == 1 { "library" } else { "libraries" },
            first.display(),
            if n > 1 { ", ..." } else { "" },
            if n == 1 { "it" } else { "them" },
        ));
    }
    let rows = if a.all {
        perfcast_scenario::explain::explain_all(&cfg)
    } else {
        cfg.explain()
    };
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json(&rows)?,
        Format::Table | Format::Csv => {
            let mut t = Table::new(&[("key", false), ("value", false), ("source", false)]);
            for r in &rows {
                t.push(vec![r.key.clone(), r.value.clone(), r.source.clone()]);
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

fn presets(a: PresetArgs) -> anyhow::Result<()> {
    match a.name {
        Some(_) if a.format != Format::Table => {
            anyhow::bail!("`--format` is the list's: a preset's TOML is printed as it is")
        }
        Some(name) => {
            let text = perfcast_config::preset(&name).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown preset `{name}`; built-in presets: {}; stacks: {}",
                    perfcast_config::preset_names().join(", "),
                    perfcast_config::stack_names().join(", ")
                )
            })?;
            print(text)
        }
        None if a.format == Format::Json => {
            let list: Vec<serde_json::Value> = perfcast_config::preset_groups()
                .into_iter()
                .map(|(n, g)| {
                    let stack = g == perfcast_config::STACKS_GROUP;
                    serde_json::json!({
                        "name": n,
                        "group": g,
                        "use": if stack {
                            format!("stack = \"{n}\"")
                        } else {
                            format!("{}{n}", perfcast_config::PRESET_SCHEME)
                        },
                        "description": stack.then(|| stack_description(n)),
                    })
                })
                .collect();
            print(&to_json(&list)?)
        }
        None if a.format != Format::Table => {
            anyhow::bail!(a.format.unsupported(&[Format::Table, Format::Json]))
        }
        None => {
            let mut t = Table::new(&[("preset", false), ("group", false)]);
            let mut stacks = Table::new(&[("stack", false), ("description", false)]);
            for (n, g) in perfcast_config::preset_groups() {
                if g == perfcast_config::STACKS_GROUP {
                    stacks.push(vec![format!("stack = \"{n}\""), stack_description(n)]);
                } else {
                    t.push(vec![
                        format!("{}{n}", perfcast_config::PRESET_SCHEME),
                        g.to_string(),
                    ]);
                }
            }
            print(&format!("{}\n{}", t.render(), stacks.render()))
        }
    }
}

/// A stack's `software.description`, as its own file (with its base beneath) gives it.
fn stack_description(name: &str) -> String {
    perfcast_config::Config::load(
        &perfcast_config::Sources::new(&crate::common::plugins())
            .without_env()
            .with_sets([format!("stack=\"{name}\"")]),
    )
    .ok()
    .and_then(|c| {
        c.extract_opt::<String>("software.description")
            .ok()
            .flatten()
    })
    .unwrap_or_default()
}
