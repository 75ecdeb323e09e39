//! Software stacks as configuration layers.
//!
//! `stack = "NAME"` (a top-level key of any layer: a file, `PERFCAST_STACK`, `--set
//! stack=NAME`; [`DEFAULT_STACK`] when no layer sets it) selects a stack: the built-in preset `configs/stacks/NAME.toml`, or a stack file
//! (`stack = "my-stack.toml"`, relative to the file that names it). Its `[software]` table
//! becomes a layer right above the built-in defaults, beneath every file, so anything a user
//! sets wins; `config explain` names each value's origin `stack:NAME:LINE`.
//!
//! A stack file holds only `[software]` and, optionally, `stack = "BASE"`: the stack it builds
//! on, read beneath it (recursively; a cycle is an error). The host does not interpret
//! `[software]`: perfcast-scenario reads it into its typed `Stack` (unknown keys are errors
//! there) and maps it to the engines' plan and option fields.

use crate::error::HostError;
use crate::layers::{self, kind_name, Layer, LayerOrigin, STACKS_GROUP, STACK_SCHEME};
use figment::value::Value;
use std::path::{Path, PathBuf};

/// The top-level keys a stack file may set.
pub const STACK_KEYS: [&str; 2] = ["software", "stack"];

/// Names of the built-in stacks (`configs/stacks/*.toml`), sorted.
pub fn stack_names() -> Vec<String> {
    layers::preset_groups()
        .into_iter()
        .filter(|(_, g)| *g == STACKS_GROUP)
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Whether a `stack` value names a file rather than a built-in stack.
fn is_file(name: &str) -> bool {
    name.contains('/')
        || name.contains('\\')
        || [".toml", ".yaml", ".yml", ".json"]
            .iter()
            .any(|e| name.ends_with(e))
}

/// The stack a configuration that names none runs on: the built-in `generic`, today's common
/// practice where a framework is not named (the engines' defaults, with the cross-validated
/// middle of the known stacks where a stack's values are fitted: `configs/stacks/generic.toml`).
pub const DEFAULT_STACK: &str = "generic";

/// The stack the layers select (the `stack` of the highest layer that sets it, else
/// [`DEFAULT_STACK`]), read into layers, lowest (the deepest base) first.
pub(crate) fn stack_layers(all: &[Layer]) -> Result<Vec<Layer>, HostError> {
    let Some((value, layer)) = all
        .iter()
        .rev()
        .find_map(|l| l.data.get("stack").map(|v| (v, l)))
    else {
        let mut out = Vec::new();
        read(
            DEFAULT_STACK,
            "the default stack",
            None,
            None,
            &mut Vec::new(),
            &mut out,
        )?;
        return Ok(out);
    };
    let origin = match &layer.origin {
        LayerOrigin::Env => format!("environment variable {}STACK", layers::ENV_PREFIX),
        o => o.label(),
    };
    let name = stack_name(value, &origin)?;
    let dir = match &layer.origin {
        LayerOrigin::File { path, .. } => path.parent().map(Path::to_path_buf),
        _ => None,
    };
    let mut out = Vec::new();
    read(
        name,
        &origin,
        dir.as_deref(),
        None,
        &mut Vec::new(),
        &mut out,
    )?;
    Ok(out)
}

fn stack_name<'a>(value: &'a Value, origin: &str) -> Result<&'a str, HostError> {
    match value.as_str() {
        Some(s) if !s.trim().is_empty() => Ok(s.trim()),
        _ => Err(HostError::Invalid {
            key: "stack".into(),
            origin: Some(origin.to_string()),
            message: format!(
                "expected the name of a stack (`perfcast config presets` lists them) or a stack file, found {}",
                if value.as_str().is_some() {
                    "an empty string"
                } else {
                    kind_name(value)
                }
            ),
        }),
    }
}

/// Read the stack `name` (set by `origin`) and, beneath it, its base, recursively.
fn read(
    name: &str,
    origin: &str,
    dir: Option<&Path>,
    base_of: Option<String>,
    chain: &mut Vec<String>,
    out: &mut Vec<Layer>,
) -> Result<(), HostError> {
    let (text, layer_origin, label, format, own_dir) = if is_file(name) {
        let mut path = PathBuf::from(name);
        if path.is_relative() {
            if let Some(d) = dir {
                path = d.join(path);
            }
        }
        let by = format!("`stack = \"{name}\"` of {origin}");
        let text =
            crate::input::read_text(&path, crate::input::MAX_TEXT_BYTES).map_err(|source| {
                HostError::Read {
                    path: path.clone(),
                    included_by: Some(by.clone()),
                    source,
                }
            })?;
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("yaml") | Some("yml") => "YAML",
            Some("json") => "JSON",
            _ => "TOML",
        };
        let label = path.display().to_string();
        let own_dir = path.parent().map(Path::to_path_buf);
        let o = LayerOrigin::File {
            path,
            included_by: Some(format!("stack of {origin}")),
        };
        (text, o, label, format, own_dir)
    } else {
        let text = match layers::preset_group(name) {
            Some(STACKS_GROUP) => layers::preset(name).unwrap_or_default().to_string(),
            _ => {
                let known = stack_names();
                return Err(HostError::UnknownStack {
                    name: name.to_string(),
                    origin: origin.to_string(),
                    nearest: nearest(name, &known),
                    known,
                });
            }
        };
        let o = LayerOrigin::Stack {
            name: name.to_string(),
            base_of,
        };
        (text, o, format!("{STACK_SCHEME}{name}"), "TOML", None)
    };
    let id = match &layer_origin {
        LayerOrigin::File { path, .. } => path
            .canonicalize()
            .unwrap_or_else(|_| path.clone())
            .display()
            .to_string(),
        _ => label.clone(),
    };
    if chain.contains(&id) {
        let mut c = chain.clone();
        c.push(id);
        return Err(HostError::IncludeCycle { chain: c });
    }
    chain.push(id);
    let mut data = layers::parse(&text, format, &label)?;
    if let Some(k) = data.keys().find(|k| !STACK_KEYS.contains(&k.as_str())) {
        return Err(HostError::Format {
            origin: label,
            message: format!(
                "a stack sets only `[software]` (and `stack = \"BASE\"`, the stack it builds on); found `{k}`: put plan and option values in the configuration itself"
            ),
        });
    }
    if let Some(base) = data.remove("stack") {
        let base = stack_name(&base, &label)?.to_string();
        if own_dir.is_none() && is_file(&base) {
            return Err(HostError::Format {
                origin: label,
                message: format!(
                    "a built-in stack can build only on another built-in stack, not on `{base}`"
                ),
            });
        }
        let this = layer_origin.label();
        read(&base, &label, own_dir.as_deref(), Some(this), chain, out)?;
    }
    out.push(Layer {
        origin: layer_origin,
        data,
    });
    Ok(())
}

/// Up to three of `known` closest to `name` (perfcast-core's "did you mean", as every
/// unknown name suggests).
fn nearest(name: &str, known: &[String]) -> Vec<String> {
    perfcast_core::suggest::nearest(name, known.iter().map(String::as_str))
        .into_iter()
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_stacks() {
        let known: Vec<String> = ["megatron-lm-2021", "megatron-core-2024", "vllm-2025"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(nearest("megatron-lm-2012", &known)[0], "megatron-lm-2021");
        assert_eq!(nearest("vllm", &known), ["vllm-2025"]);
        // A clear winner stands alone (the shared rule: the best, and those one edit behind).
        assert_eq!(nearest("megatron", &known), ["megatron-lm-2021"]);
        assert!(nearest("zzzzzz", &known).is_empty());
    }

    #[test]
    fn file_or_name() {
        for (v, file) in [
            ("vllm-2025", false),
            ("tensorrt-llm-1.x", false),
            ("my.toml", true),
            ("../stacks/x", true),
        ] {
            assert_eq!(is_file(v), file, "{v}");
        }
    }
}
