//! The model of `[model]`.

use crate::{engine_error, ScenarioError};
use perfcast_config::Config;
use perfcast_core::ModelSpec;
use std::path::{Path, PathBuf};

thread_local! {
    /// Models read on this thread (what a test of "once per command" counts).
    static RESOLVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times [`model`] has read a `[model]` on the calling thread (see
/// [`crate::stacks_resolved`]).
pub fn models_resolved() -> usize {
    RESOLVED.with(std::cell::Cell::get)
}

/// The model of `[model]`: its `ModelSpec` fields (directly or from an included model preset
/// such as `preset:gpt3-175b`), or `hf_config = "path/config.json"` (a Hugging Face config,
/// relative to the file that names it; `name` may be set beside it). Validated.
pub fn model(cfg: &Config) -> Result<ModelSpec, ScenarioError> {
    RESOLVED.with(|n| n.set(n.get() + 1));
    if !cfg.contains("model") {
        return Err(ScenarioError::Missing {
            section: "model",
            hint: "set its fields (layers, hidden, heads, ffn_hidden, ffn_act, vocab, seq_len, ...), include a model preset (e.g. include = [\"preset:llama2-70b\"]; `perfcast config presets` lists them), or set model.hf_config = \"config.json\"",
        });
    }
    let mut m = if cfg.contains("model.hf_config") {
        from_hf_config(cfg)?
    } else {
        cfg.extract::<ModelSpec>("model")?
    };
    if m.name.is_empty() {
        m.name = "model".into();
    }
    m.validate().map_err(|e| engine_error(cfg, e))?;
    Ok(m)
}

fn from_hf_config(cfg: &Config) -> Result<ModelSpec, ScenarioError> {
    let rel: String = cfg.extract("model.hf_config")?;
    if let Some(figment::value::Value::Dict(_, d)) = cfg.value().find_ref("model") {
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
    let mut m =
        crate::hf::model_from_hf_file(&path).map_err(|e| cfg.invalid("model.hf_config", e))?;
    if let Some(name) = cfg.extract_opt::<String>("model.name")? {
        m.name = name;
    } else if m.name.is_empty() {
        m.name = path.display().to_string();
    }
    Ok(m)
}

/// `rel` resolved against the directory of the file that set `key` (the working directory
/// for values from presets, the environment or `--set`).
pub(crate) fn relative_to_origin(cfg: &Config, key: &str, rel: &str) -> PathBuf {
    let p = Path::new(rel);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let file = cfg
        .metadata_of(key)
        .and_then(|md| match md.source.as_ref() {
            Some(figment::Source::File(f)) => Some(f.clone()),
            _ => None,
        });
    match file.as_deref().and_then(Path::parent) {
        Some(dir) => dir.join(p),
        None => p.to_path_buf(),
    }
}
