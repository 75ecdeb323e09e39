//! `perfcast predict`: one training step of the config's `[model]` on its `[device]` /
//! `[system]` under its `[plan]` (engine options from `[options]`).
//!
//! Devices: `system.devices` and `plan.dp` may each be left out. With `plan.dp` omitted it is
//! derived as `system.devices / (tp x pp x cp)` (which must divide); with `system.devices`
//! left at its built-in default it becomes `tp x pp x dp x cp`; with both given, the product
//! must equal `system.devices`.
//!
//! Also home of what `infer` and the model roofline share: the model of `[model]` (fields,
//! a model preset, or `hf_config = "config.json"`), the error mapping from the engine's keys
//! to the config's, and the "was this value set or is it the built-in default" test.

use crate::common::{num, print, to_json, ConfigArgs, Format, Table};
use anyhow::{bail, Context as _};
use perfcast_core::{ModelError, ModelSpec, System};
use perfcast_engine::training::StageMemory;
use perfcast_engine::{Training, TrainingOptions, TrainingPlan, TrainingReport};
use perfcast_host::{Config, HostError, LayerOrigin, SECTIONS};
use perfcast_output::charts::training_svg;
use perfcast_output::{plan_label, PlanStyle, GIB};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Also draw the time breakdown (stacked bar) and the memory of every pipeline stage
    /// (stacked bars) to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Top-level sections `predict` and `infer` accept: the host's, plus `search` (the plan
/// search's section, which experiment files share with `predict`).
pub(crate) fn load(args: &ConfigArgs) -> anyhow::Result<Config> {
    let mut sources = args.sources();
    let mut sections = SECTIONS.to_vec();
    sections.push("search");
    sources.sections = sections;
    Config::load(&sources).map_err(anyhow::Error::new)
}

/// Whether `key` is set by a layer above the built-in defaults.
pub(crate) fn is_set(cfg: &Config, key: &str) -> bool {
    cfg.contains(key)
        && cfg
            .origin_of(key)
            .is_some_and(|o| o != LayerOrigin::Default.label())
}

/// The model of `[model]`: its `ModelSpec` fields (directly or from an included model preset
/// such as `preset:gpt3-175b`), or `hf_config = "path/config.json"` (a Hugging Face config,
/// relative to the file that names it; `name` may be set beside it).
pub(crate) fn model(cfg: &Config) -> anyhow::Result<ModelSpec> {
    if !cfg.contains("model") {
        bail!(
            "no `[model]` in the configuration: set its fields (layers, hidden, heads, ffn_hidden, ffn_act, vocab, seq_len, ...), include a model preset (e.g. include = [\"preset:llama2-70b\"]; `perfcast config presets` lists them), or set model.hf_config = \"config.json\""
        );
    }
    let mut m = if cfg.contains("model.hf_config") {
        let rel: String = cfg.extract("model.hf_config")?;
        if let Ok(figment::value::Value::Dict(_, d)) = cfg.figment().find_value("model") {
            if let Some(other) = d.keys().find(|k| *k != "hf_config" && *k != "name") {
                return Err(cfg
                    .invalid(
                        &format!("model.{other}"),
                        "model.hf_config gives the whole model: remove the other [model] keys \
                         (only `name` may be set beside it), or remove hf_config",
                    )
                    .into());
            }
        }
        let path = relative_to_origin(cfg, "model.hf_config", &rel);
        let mut m = perfcast_validation::hf::model_from_hf_file(&path)
            .map_err(|e| cfg.invalid("model.hf_config", e))?;
        if let Some(name) = cfg.extract_opt::<String>("model.name")? {
            m.name = name;
        } else if m.name.is_empty() {
            m.name = path.display().to_string();
        }
        m
    } else {
        cfg.extract::<ModelSpec>("model")?
    };
    if m.name.is_empty() {
        m.name = "model".into();
    }
    m.validate()
        .map_err(|e| engine_error(cfg, e, Keys::Training))?;
    Ok(m)
}

/// `rel` resolved against the directory of the file that set `key` (the working directory
/// for values from presets, the environment or `--set`).
fn relative_to_origin(cfg: &Config, key: &str, rel: &str) -> PathBuf {
    let p = Path::new(rel);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let file = cfg
        .figment()
        .find_value(key)
        .ok()
        .and_then(|v| cfg.figment().get_metadata(v.tag()))
        .and_then(|md| match md.source.as_ref() {
            Some(figment::Source::File(f)) => Some(f.clone()),
            _ => None,
        });
    match file.as_deref().and_then(Path::parent) {
        Some(dir) => dir.join(p),
        None => p.to_path_buf(),
    }
}

/// Which command's config sections an engine key maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    /// `plan.*` is `[plan]`; engine parameters are `[options]`.
    Training,
    /// The inference engine's `plan.*` is `[inference]`, its `inference.*` options `[options]`.
    Inference,
}

/// An engine error as a config error: the key as the config spells it, where it came from.
pub(crate) fn engine_error(cfg: &Config, e: ModelError, keys: Keys) -> anyhow::Error {
    match e {
        ModelError::Invalid { key, value, rule } => {
            let (key, rule) = match keys {
                Keys::Training => {
                    let key = if let Some(rest) = key.strip_prefix("engine.") {
                        format!("options.engine.{rest}")
                    } else if let Some(rest) = key.strip_prefix("training.") {
                        format!("options.{rest}")
                    } else {
                        key
                    };
                    (key, rule)
                }
                Keys::Inference => {
                    let key = match key.strip_prefix("inference.") {
                        Some(rest) => format!("options.{rest}"),
                        None => key,
                    };
                    (
                        key.replace("plan.", "inference."),
                        rule.replace("plan.", "inference."),
                    )
                }
            };
            anyhow::Error::new(cfg.invalid(&key, format!("got `{value}`; {rule}")))
        }
        other => anyhow::Error::new(other),
    }
}

/// The device count of a user value, checked.
fn product(parts: &[u32]) -> Option<u32> {
    parts
        .iter()
        .try_fold(1u32, |acc, p| acc.checked_mul(*p))
        .filter(|p| *p > 0)
}

/// Reconcile `plan.dp` and `system.devices` (see the module documentation).
fn resolve_devices(
    cfg: &Config,
    plan: &mut TrainingPlan,
    system: &mut System,
) -> Result<(), HostError> {
    let devices_set = is_set(cfg, "system.devices");
    let Some(per) = product(&[plan.tp, plan.pp, plan.cp]) else {
        return Ok(()); // a zero or absurd degree: the engine names it
    };
    if is_set(cfg, "plan.dp") {
        let Some(all) = product(&[per, plan.dp]) else {
            return Ok(());
        };
        if !devices_set {
            system.devices = all;
        } else if all != system.devices {
            return Err(cfg.invalid(
                "plan.dp",
                format!(
                    "plan.tp x plan.pp x plan.dp x plan.cp = {} x {} x {} x {} = {all} must equal system.devices = {}{}; or omit plan.dp to derive it",
                    plan.tp,
                    plan.pp,
                    plan.dp,
                    plan.cp,
                    system.devices,
                    cfg.origin_of("system.devices")
                        .map(|o| format!(" (from {o})"))
                        .unwrap_or_default()
                ),
            ));
        }
    } else if devices_set {
        if !system.devices.is_multiple_of(per) {
            return Err(cfg.invalid(
                "system.devices",
                format!(
                    "{} devices cannot be split into data-parallel replicas of plan.tp x plan.pp x plan.cp = {} x {} x {} = {per} devices: it must be a multiple of {per} (or set plan.dp)",
                    system.devices, plan.tp, plan.pp, plan.cp
                ),
            ));
        }
        plan.dp = system.devices / per;
    } else {
        system.devices = per;
    }
    Ok(())
}

/// What `predict --format json` prints.
#[derive(Serialize)]
struct Output<'a> {
    model: &'a str,
    system: &'a str,
    plan: &'a TrainingPlan,
    report: &'a TrainingReport,
    /// Every pipeline stage's device memory (the report keeps the first, second and last).
    memory_per_stage: &'a [StageMemory],
    notes: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load(&a.config)?;
    let model = model(&cfg)?;
    let mut system = cfg.system()?;
    if !cfg.contains("plan") {
        bail!(
            "no `[plan]` in the configuration: `perfcast predict` needs the training plan (tp, pp, dp, micro_batch, global_batch, recompute, ...; README.md, \"predict\")"
        );
    }
    let mut plan: TrainingPlan = cfg.extract("plan")?;
    let options: TrainingOptions = cfg.extract_opt("options")?.unwrap_or_default();
    resolve_devices(&cfg, &mut plan, &mut system)?;
    let system_name = system.name.clone();
    let training = Training::with_options(model, system, cfg.registry(), &options)
        .map_err(|e| engine_error(&cfg, e, Keys::Training))?;
    let report = training
        .evaluate(&plan)
        .map_err(|e| engine_error(&cfg, e, Keys::Training))?;
    let stages = training
        .memory_per_stage(&plan)
        .map_err(|e| engine_error(&cfg, e, Keys::Training))?;
    let model_name = training.model().name.clone();

    if let Some(path) = &a.plot {
        std::fs::write(
            path,
            training_svg(&model_name, &system_name, &report, &stages),
        )
        .with_context(|| format!("cannot write the plot to `{}`", path.display()))?;
    }
    let text = match a.format {
        Format::Json => to_json(&Output {
            model: &model_name,
            system: &system_name,
            plan: &plan,
            report: &report,
            memory_per_stage: &stages,
            notes: report.notes(),
        })?,
        Format::Csv => csv(&plan, &report, &stages),
        Format::Table => table(&model_name, &system_name, &plan, &report, &stages),
    };
    print(&text)?;
    if !report.memory.fits {
        return Err(does_not_fit(&report, &stages));
    }
    Ok(())
}

/// The error of a plan whose largest stage exceeds the device memory.
fn does_not_fit(r: &TrainingReport, stages: &[StageMemory]) -> anyhow::Error {
    let worst = stages.iter().copied().fold(r.memory.first_stage, |a, s| {
        if s.total.0 > a.total.0 {
            s
        } else {
            a
        }
    });
    anyhow::anyhow!(
        "the plan does not fit in device memory: pipeline stage {} needs {:.2} GiB per device (weights {:.2}, gradients {:.2}, optimizer {:.2}, activations {:.2}, temporary {:.2}, reserved {:.2}) but the device has {:.2} GiB: short by {:.2} GiB; raise plan.tp or plan.pp, use plan.zero_stage, or plan.recompute = \"selective\" / \"full\"",
        worst.stage,
        worst.total.gib(),
        worst.weights.gib(),
        worst.grads.gib(),
        worst.optimizer.gib(),
        worst.activations.gib(),
        worst.temp.gib(),
        worst.reserved.gib(),
        r.memory.capacity.gib(),
        (worst.total.0 - r.memory.capacity.0).max(r.memory.shortfall.0) / GIB,
    )
}

fn table(
    model: &str,
    system: &str,
    plan: &TrainingPlan,
    r: &TrainingReport,
    stages: &[StageMemory],
) -> String {
    let mut s = format!(
        "{model} on {system}, {} devices\n  {}\n",
        r.devices,
        plan_label(plan, PlanStyle::Fields)
    );
    s.push_str(&r.to_table());
    if stages.len() > 3 {
        let _ = writeln!(s, "Memory of every pipeline stage (GiB per device)");
        let mut t = Table::new(&[
            ("stage", true),
            ("in flight", true),
            ("weights", true),
            ("gradients", true),
            ("optimizer", true),
            ("activations", true),
            ("temporary", true),
            ("reserved", true),
            ("total", true),
        ]);
        for st in stages {
            t.push(vec![
                st.stage.to_string(),
                num(st.in_flight),
                format!("{:.2}", st.weights.gib()),
                format!("{:.2}", st.grads.gib()),
                format!("{:.2}", st.optimizer.gib()),
                format!("{:.2}", st.activations.gib()),
                format!("{:.2}", st.temp.gib()),
                format!("{:.2}", st.reserved.gib()),
                format!("{:.2}", st.total.gib()),
            ]);
        }
        for line in t.render().lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

fn csv(plan: &TrainingPlan, r: &TrainingReport, stages: &[StageMemory]) -> String {
    let mut s = r.to_csv();
    for (k, v) in [
        ("plan.tp", plan.tp),
        ("plan.pp", plan.pp),
        ("plan.dp", plan.dp),
        ("plan.cp", plan.cp),
        ("plan.vpp", plan.vpp),
        ("plan.micro_batch", plan.micro_batch),
        ("plan.global_batch", plan.global_batch),
    ] {
        let _ = writeln!(s, "{k},{v},");
    }
    for st in stages {
        for (k, v, u) in [
            ("in_flight", st.in_flight, ""),
            ("weights", st.weights.0, "B"),
            ("grads", st.grads.0, "B"),
            ("optimizer", st.optimizer.0, "B"),
            ("activations", st.activations.0, "B"),
            ("temp", st.temp.0, "B"),
            ("reserved", st.reserved.0, "B"),
            ("total", st.total.0, "B"),
        ] {
            let _ = writeln!(s, "memory.stage{}.{k},{v},{u}", st.stage);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_reject_zero_and_overflow() {
        let table: [(&[u32], Option<u32>); 4] = [
            (&[8, 16, 1], Some(128)),
            (&[8, 0, 1], None),
            (&[u32::MAX, 2], None),
            (&[], Some(1)),
        ];
        for (parts, want) in table {
            assert_eq!(product(parts), want, "{parts:?}");
        }
    }
}
