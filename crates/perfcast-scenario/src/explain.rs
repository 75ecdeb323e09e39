//! Every value in force, not only those a configuration sets (`perfcast config explain
//! --all`): the merged configuration's own values with their origin, plus
//!
//! - for each `[components.NAME]`, every parameter its plugin declares and the configuration
//!   leaves out, at its declared default (`perfcast_core::ParamSpec`), or "computed" for a
//!   derived one; a plugin that declares nothing says so in one row;
//! - for each parallel strategy in use (`options.strategies`, else the engine's defaults),
//!   its declared parameters under `options.strategy_params.NAME`;
//! - the `[model]` fields left out, as `ModelSpec` reads them (not for an `hf_config`, whose
//!   fields come from the file);
//! - the engine's sections as their types read them (`[plan]` and the training options when
//!   the configuration has a `[plan]`, `[inference]` and the serving options when it has an
//!   `[inference]`): every field left out, at the value the engine uses.

use perfcast_config::{Config, Explained};
use perfcast_core::parallel::AxisPlace;
use perfcast_core::{Category, ParamDefault, PluginInfo};
use perfcast_engine::training::DEFAULT_STRATEGIES;
use serde::Serialize;
use std::collections::BTreeSet;

/// The origin label of a value the configuration leaves to a plugin's declaration.
fn declared_by(info: &PluginInfo) -> String {
    format!(
        "default of {} `{}` ({})",
        info.category, info.name, info.origin
    )
}

/// Every value in force, sorted by key (see the module documentation). What cannot be read
/// (a section that does not extract) is left to the commands, which report it as an error.
pub fn explain_all(cfg: &Config) -> Vec<Explained> {
    let mut rows = cfg.explain();
    let set: BTreeSet<String> = rows.iter().map(|r| r.key.clone()).collect();
    let add = |rows: &mut Vec<Explained>, key: String, value: String, source: String| {
        if !set.contains(&key) && !rows.iter().any(|r| r.key == key) {
            rows.push(Explained { key, value, source });
        }
    };
    for (name, kind) in components(cfg) {
        let infos: Vec<&PluginInfo> = Category::ALL
            .iter()
            .filter_map(|c| cfg.registry().info(*c, &kind))
            .collect();
        for info in infos {
            declared_rows(info, &format!("components.{name}"), &mut |k, v, s| {
                add(&mut rows, k, v, s)
            });
        }
    }
    if cfg.contains("model") && !cfg.contains("model.hf_config") {
        if let Ok(m) = crate::model(cfg) {
            engine_rows(&m, "model", "ModelSpec", &mut |k, v, s| {
                add(&mut rows, k, v, s)
            });
        }
    }
    let training = cfg.contains("plan");
    let serving = cfg.contains("inference");
    // Each part reads the stack as its own commands do (a training stack for `[plan]`, an
    // inference one for `[inference]`); a part whose stack does not fit shows its defaults.
    if training {
        let sc = crate::Scenario::training(cfg);
        let options = crate::training::options(&sc).ok();
        let names: Vec<String> = options
            .as_ref()
            .and_then(|o| o.strategies.clone())
            .unwrap_or_else(|| DEFAULT_STRATEGIES.iter().map(|s| s.to_string()).collect());
        for n in &names {
            if let Some(info) = cfg.registry().info(Category::ParallelStrategy, n) {
                let base = format!("options.strategy_params.{n}");
                declared_rows(info, &base, &mut |k, v, s| add(&mut rows, k, v, s));
            }
            let params = options
                .as_ref()
                .and_then(|o| o.strategy_params.get(n).cloned())
                .unwrap_or_default();
            if let Ok(s) = cfg.registry().parallel_strategy(n, &params) {
                for a in s.axes() {
                    let (side, anchor) = match a.place {
                        AxisPlace::Inside(x) => ("inside", x),
                        AxisPlace::Outside(x) => ("outside", x),
                    };
                    add(
                        &mut rows,
                        format!("plan.axes.{}", a.name),
                        "1".into(),
                        format!(
                            "axis declared by strategy `{n}` ({side} {}): absent from the plan, \
                             degree 1",
                            anchor.name()
                        ),
                    );
                }
            }
        }
        if let Ok(Some(plan)) = crate::training::plan(&sc) {
            engine_rows(&plan, "plan", "TrainingPlan", &mut |k, v, s| {
                add(&mut rows, k, v, s)
            });
        }
        if let Some(o) = &options {
            engine_rows(
                &o.engine,
                "options.engine",
                "TrainingOptions",
                &mut |k, v, s| add(&mut rows, k, v, s),
            );
        }
    }
    if serving {
        if let Ok(plan) = cfg.extract::<perfcast_engine::inference::InferencePlan>("inference") {
            engine_rows(&plan, "inference", "InferencePlan", &mut |k, v, s| {
                add(&mut rows, k, v, s)
            });
        }
        if let Ok(o) = crate::inference::options(&crate::Scenario::inference(cfg)) {
            engine_rows(&o, "options", "InferenceOptions", &mut |k, v, s| {
                add(&mut rows, k, v, s)
            });
        }
    }
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    rows
}

/// `(component name, kind)` of every `[components.NAME]` with a string `kind`.
fn components(cfg: &Config) -> Vec<(String, String)> {
    let Some(dict) = cfg
        .value()
        .find_ref("components")
        .and_then(|c| c.as_dict().cloned())
    else {
        return Vec::new();
    };
    dict.into_iter()
        .filter_map(|(name, v)| {
            let kind = v.find_ref("kind")?.as_str()?.to_string();
            Some((name, kind))
        })
        .collect()
}

/// One row per declared parameter of `info` under `base` (the caller skips those the
/// configuration sets), or one row saying the plugin declares none.
fn declared_rows(info: &PluginInfo, base: &str, add: &mut dyn FnMut(String, String, String)) {
    let Some(params) = &info.params else {
        add(
            format!("{base}.*"),
            "(parameters not declared)".into(),
            format!(
                "{} `{}` ({}) declares no parameters",
                info.category, info.name, info.origin
            ),
        );
        return;
    };
    for p in params {
        let value = match &p.default {
            ParamDefault::Value(v) => toml_to_json(v),
            ParamDefault::Derived(how) => format!("(computed: {how})"),
            // A required parameter left out is an error of the command that builds it.
            ParamDefault::Required => continue,
        };
        add(format!("{base}.{}", p.name), value, declared_by(info));
    }
}

/// A declared TOML default as the JSON `config explain` prints values in.
fn toml_to_json(v: &str) -> String {
    match format!("v = {v}").parse::<toml::Table>() {
        Ok(t) => t
            .get("v")
            .and_then(|x| serde_json::to_string(x).ok())
            .unwrap_or_else(|| v.to_string()),
        Err(_) => v.to_string(),
    }
}

/// One row per leaf of `value` (an engine section as its type reads it) under `base`.
fn engine_rows<T: Serialize>(
    value: &T,
    base: &str,
    ty: &str,
    add: &mut dyn FnMut(String, String, String),
) {
    let Ok(json) = serde_json::to_value(value) else {
        return;
    };
    let mut leaves = Vec::new();
    leaves_of(&json, base.to_string(), &mut leaves);
    for (k, v) in leaves {
        add(k, v, format!("built-in default ({ty})"));
    }
}

fn leaves_of(v: &serde_json::Value, key: String, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves_of(x, format!("{key}.{k}"), out);
            }
        }
        serde_json::Value::Null => {}
        leaf => out.push((key, leaf.to_string())),
    }
}

/// The parameter reference: every plugin of `registry` (perfcast-config's
/// `reference_markdown`), then the engine's own sections with the default of every key.
/// `docs/reference.md` is this for the built-ins (`perfcast plugins --reference`).
pub fn reference(registry: &perfcast_core::Registry) -> String {
    use perfcast_engine::inference::{InferenceOptions, InferencePlan};
    use perfcast_engine::training::{EngineParams, TrainingPlan};
    let mut s = perfcast_config::reference_markdown(registry);
    s.push_str(
        "\n## Engine sections\n\n\
         The keys of the configuration's own sections and the value each takes when left out \
         (`perfcast config explain --all CONFIG` shows them beside the values a configuration \
         sets). What each means: the field documentation of the type (`cargo doc -p \
         perfcast-engine`) and the user guide, docs/SUMMARY.md.\n",
    );
    let serving: Option<InferencePlan> =
        serde_json::from_value(serde_json::json!({"batch": 1, "input_len": 1, "output_len": 1}))
            .ok();
    let required = [
        "inference.batch",
        "inference.input_len",
        "inference.output_len",
    ];
    let sections: [(&str, &str, Option<serde_json::Value>); 4] = [
        (
            "plan",
            "TrainingPlan, read by predict and search",
            serde_json::to_value(TrainingPlan::default()).ok(),
        ),
        (
            "options.engine",
            "TrainingOptions.engine, read by predict and search",
            serde_json::to_value(EngineParams::default()).ok(),
        ),
        (
            "inference",
            "InferencePlan, read by infer",
            serving.and_then(|p| serde_json::to_value(p).ok()),
        ),
        (
            "options",
            "InferenceOptions, read by infer",
            serde_json::to_value(InferenceOptions::default()).ok(),
        ),
    ];
    for (base, ty, value) in sections {
        let Some(v) = value else { continue };
        s.push_str(&format!(
            "\n### `[{base}]` ({ty})\n\n| key | default |\n|---|---|\n"
        ));
        let mut leaves = Vec::new();
        leaves_of(&v, base.to_string(), &mut leaves);
        for (k, d) in leaves {
            let d = if required.contains(&k.as_str()) {
                "required".to_string()
            } else {
                d
            };
            s.push_str(&format!("| `{k}` | {} |\n", d.replace('|', "\\|")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    /// `docs/reference.md` is the built-ins' reference as the plugins declare it; when a
    /// declaration or a default changes, regenerate it with
    /// `cargo run -p perfcast-cli -- plugins --reference > docs/reference.md`.
    #[test]
    fn the_parameter_reference_in_docs_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference.md");
        let file = perfcast_config::input::read_text(&path, perfcast_config::input::MAX_TEXT_BYTES)
            .unwrap_or_default();
        let want = super::reference(&perfcast_builtins::registry().unwrap());
        assert!(
            file == want,
            "docs/reference.md is stale: run `cargo run -p perfcast-cli -- plugins \
             --reference > docs/reference.md` and commit it"
        );
    }
}
