//! perfcast-plugin-test: check a plugin library against perfcast from the plugin's own tests,
//! without perfcast's private testkit (as nushell's `nu-plugin-test-support` does for its
//! plugins).
//!
//! A [`PluginTest`] is a compiled library (a Rust cdylib built against `perfcast-abi`, or a C
//! shared object built against `perfcast_plugin.h`) loaded beside perfcast's built-in plugins
//! and kernel tables, exactly as `perfcast ... --load LIB` loads it:
//!
//! - [`PluginTest::predict`] evaluates a configuration's training plan (a file, `--set`-style
//!   overrides on top) and returns the report the command line prints;
//! - [`PluginTest::same_report`] evaluates it twice (e.g. a built-in strategy and the plugin's
//!   in its place) and names the first field in which the two reports differ;
//! - [`PluginTest::check_strategy`] puts a parallel strategy through the rules every strategy
//!   keeps, on a grid of plans and two models: its declared axes are well formed; at degree
//!   1 on its axis and on its own axes it does not split the layer or the state (its
//!   collectives, if any, then run in groups of one and cost nothing); every split factor
//!   is at least 1; every collective is on a group of the mesh's axes or of its own declared
//!   axes, with finite, non-negative bytes and count.
//!
//! ```no_run
//! let t = perfcast_plugin_test::PluginTest::new("target/debug/libmy_strategy.so");
//! t.check_strategy("me/my-strategy", &serde_json::json!({})).unwrap();
//! let strategies = r#"options.strategies=["me/my-strategy","sequence","context","expert","pipeline","data","zero"]"#;
//! let report = t.predict("my-experiment.toml", &[strategies, "plan.tp=4"]).unwrap();
//! assert!(report.iteration_time.0 > 0.0);
//! ```

use perfcast_config::plugins::{registry_with, PluginSpec, Plugins};
use perfcast_config::{Config, Sources};
use perfcast_core::parallel::{
    Axis, AxisSet, CommList, LayerDims, LayerSplit, MoeDims, ParallelStrategy, PlanShape,
    StateSplit,
};
use perfcast_core::workload::{FfnAct, ModelSpec, MoeSpec};
use perfcast_engine::TrainingReport;
use perfcast_scenario::{engine_error, TrainingScenario};
use std::path::{Path, PathBuf};

/// Why a check failed: what, where, and the value, in one message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Failure(pub String);

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure(e.to_string())
}

/// A plugin library under test, with perfcast's built-ins beside it.
pub struct PluginTest {
    library: PathBuf,
    plugins: Plugins,
}

impl PluginTest {
    /// The library at `library`; nothing is loaded until a check runs.
    pub fn new(library: impl Into<PathBuf>) -> Self {
        let p = Plugins::new(perfcast_builtins::DefaultPlugins::new());
        let plugins = match perfcast_kernel_data::shared() {
            Some(k) => p.with_kernels(k),
            None => p,
        };
        PluginTest {
            library: library.into(),
            plugins,
        }
    }

    /// The configuration file `config` with `sets` on top (`KEY=VALUE`, as `--set` takes
    /// them) and the library loaded; the environment is not read.
    pub fn config(&self, config: impl AsRef<Path>, sets: &[&str]) -> Result<Config, Failure> {
        let mut sources = Sources::files(&self.plugins, [config.as_ref().to_path_buf()])
            .with_sets(sets.iter().map(|s| s.to_string()))
            .with_libraries([self.library.clone()])
            .without_env()
            .checked_by(perfcast_scenario::check_before_libraries);
        // An experiment file may carry the sections of `search` and `serve` too, as
        // `perfcast predict` reads it.
        sources
            .sections
            .extend(["search", "serving", "slo", "serving_search"]);
        Config::load(&sources).map_err(fail)
    }

    /// The training report of the configuration's plan (`perfcast predict`'s).
    pub fn predict(
        &self,
        config: impl AsRef<Path>,
        sets: &[&str],
    ) -> Result<TrainingReport, Failure> {
        let cfg = self.config(config, sets)?;
        let sc = TrainingScenario::from_config(&cfg).map_err(fail)?;
        sc.training
            .evaluate(&sc.plan)
            .map_err(|e| fail(engine_error(&cfg, e)))
    }

    /// The reports of the configuration's plan with `a` and with `b` on top are equal, field
    /// for field; otherwise the first field that differs, with both values.
    pub fn same_report(
        &self,
        config: impl AsRef<Path>,
        a: &[&str],
        b: &[&str],
    ) -> Result<(), Failure> {
        let json = |sets: &[&str]| -> Result<serde_json::Value, Failure> {
            serde_json::to_value(self.predict(config.as_ref(), sets)?).map_err(fail)
        };
        match first_difference("report", &json(a)?, &json(b)?) {
            None => Ok(()),
            Some(d) => Err(Failure(d)),
        }
    }

    /// A registry of the built-ins and the library.
    pub fn registry(&self) -> Result<perfcast_core::Registry, Failure> {
        let spec = PluginSpec::from(self.library.clone());
        registry_with(&self.plugins, &[spec], None)
            .map(|(r, _)| r)
            .map_err(fail)
    }

    /// Put the parallel strategy `name` (with `params`) through the rules every strategy
    /// keeps (see the crate's documentation); the number of plans it answered (those it
    /// refused are skipped: a refusal is the strategy's own business).
    pub fn check_strategy(&self, name: &str, params: &serde_json::Value) -> Result<usize, Failure> {
        let r = self.registry()?;
        let s = r.parallel_strategy(name, params).map_err(fail)?;
        check_strategy(&*s)
    }
}

/// [`PluginTest::check_strategy`] on a strategy already built (a compiled-in one too).
pub fn check_strategy(s: &dyn ParallelStrategy) -> Result<usize, Failure> {
    let decls = s.axes();
    for d in &decls {
        d.check()
            .map_err(|m| Failure(format!("`{}`: {m}", s.kind())))?;
    }
    let own = decls.len();
    let allowed = AxisSet::BUILT_IN.0 | (0..own).fold(0, |acc, k| acc | AxisSet::declared(k).0);
    // Its own axes' degrees (one pass at 1 when it declares none).
    let declared_degrees: &[u32] = if own == 0 { &[1] } else { &[1, 2, 4] };
    let mut answered = 0;
    for model in [dense(), moe()] {
        for degree in [1, 2, 4, 8] {
            for &declared in declared_degrees {
                let plan = plan(s.axis(), degree, own, declared);
                if s.validate(&model, &plan).is_err() {
                    continue;
                }
                let at_one = degree == 1 && (own == 0 || declared == 1);
                check_answers(s, &model, &plan, allowed, at_one)?;
                answered += 1;
            }
        }
    }
    Ok(answered)
}

fn check_answers(
    s: &dyn ParallelStrategy,
    model: &ModelSpec,
    plan: &PlanShape,
    allowed: u16,
    at_one: bool,
) -> Result<(), Failure> {
    let at = |what: String| Failure(format!("`{}` on {}: {what}", s.kind(), label(plan)));
    let mut split = LayerSplit::default();
    s.split_layer(plan, &mut split)
        .map_err(|e| at(e.to_string()))?;
    let mut state = StateSplit::default();
    s.split_state(plan, &mut state)
        .map_err(|e| at(e.to_string()))?;
    let mut comms = CommList::default();
    s.comms(plan, &dims(model, plan), &mut comms)
        .map_err(|e| at(e.to_string()))?;
    let factors = [
        split.tokens,
        split.weights,
        split.pointwise,
        split.experts,
        split.expert_weights,
        state.weights,
        state.grads,
        state.optimizer,
        state.expert_weights,
        state.expert_grads,
        state.expert_optimizer,
    ];
    if factors.contains(&0) {
        return Err(at(format!("a split factor is 0: {split:?} {state:?}")));
    }
    if at_one && (split != LayerSplit::default() || state != StateSplit::default()) {
        return Err(at(format!(
            "at degree 1 it still splits: {split:?} {state:?}"
        )));
    }
    for (i, c) in comms.iter().enumerate() {
        if c.group.0 == 0 || c.group.0 & !allowed != 0 {
            return Err(at(format!(
                "collective {i}: group {:#x} is not a set of the mesh's axes and its own",
                c.group.0
            )));
        }
        if !(c.bytes.0.is_finite() && c.bytes.0 >= 0.0 && c.count.is_finite() && c.count >= 0.0) {
            return Err(at(format!(
                "collective {i}: bytes {} count {}",
                c.bytes.0, c.count
            )));
        }
    }
    Ok(())
}

/// A plan with every degree 1 but the strategy's axis (`degree`) and its own declared axes
/// (`declared` each); batch 512 sequences of 1.
fn plan(axis: Axis, degree: u32, own: usize, declared: u32) -> PlanShape {
    let mut p = PlanShape {
        global_batch: 512,
        ..PlanShape::default()
    };
    match axis {
        Axis::Tensor | Axis::Sequence => p.tp = degree,
        Axis::Context => p.cp = degree,
        Axis::Expert => p.ep = degree,
        Axis::Pipeline => p.pp = degree,
        Axis::Data => p.dp = degree,
    }
    p.sp = axis == Axis::Sequence && degree > 1;
    p.zero_stage = 3;
    for d in p.axes.iter_mut().take(own) {
        *d = declared;
    }
    p
}

fn label(p: &PlanShape) -> String {
    format!(
        "tp {} cp {} ep {} pp {} dp {} zero {} axes {:?}",
        p.tp, p.cp, p.ep, p.pp, p.dp, p.zero_stage, p.axes
    )
}

/// A Llama-3-8B-like dense model.
fn dense() -> ModelSpec {
    ModelSpec {
        name: "check-dense".into(),
        kv_heads: Some(8),
        head_dim: Some(128),
        ..ModelSpec::dense(32, 4096, 32, 14336, FfnAct::Swiglu, 128256, 4096)
    }
}

/// The dense model with 64 routed experts, 8 active.
fn moe() -> ModelSpec {
    ModelSpec {
        name: "check-moe".into(),
        moe: Some(MoeSpec::new(64, 8, 1408)),
        ..dense()
    }
}

/// One layer of `model` under `plan`, as the engine hands it to the strategies, in round
/// numbers (only the shapes of the answers are checked, not their values): bf16 weights and
/// activations, fp32 gradients, a layer of 12 x hidden^2 parameters (a GPT layer's, Narayanan
/// et al. 2021, eq. 2), each expert three `hidden x expert_ffn_hidden` matrices (SwiGLU).
fn dims(model: &ModelSpec, plan: &PlanShape) -> LayerDims {
    let tokens = plan.micro_batch as f64 * model.seq_len as f64;
    let layer = 12.0 * (model.hidden * model.hidden) as f64;
    LayerDims {
        micro_batch: plan.micro_batch as u64,
        seq_len: model.seq_len,
        hidden: model.hidden,
        heads: model.heads,
        kv_heads: model.kv_heads(),
        head_dim: model.head_dim(),
        ffn_hidden: model.ffn_hidden,
        act_bytes: 2.0,
        gather_bytes: 2.0,
        layer_params: layer / plan.tp as f64,
        device_params: layer * model.layers as f64 / (plan.tp * plan.pp) as f64,
        grad_bytes: 4.0,
        weight_bytes: 2.0,
        embedding_params: (model.vocab * model.hidden) as f64 / plan.tp as f64,
        tied_embeddings: model.tied_embeddings,
        moe: model.moe.map(|m| MoeDims {
            experts: m.experts,
            top_k: m.top_k,
            expert_groups: 1,
            group_top_k: 1,
            tokens,
            routed: tokens * m.top_k as f64,
            dispatch_bytes: tokens * m.top_k as f64 * model.hidden as f64 * 2.0,
            expert_layer_params: 3.0 * (model.hidden * m.expert_ffn_hidden) as f64,
            expert_params: 3.0 * (model.hidden * m.expert_ffn_hidden * m.experts) as f64,
        }),
    }
}

/// The path and values of the first place where `a` and `b` differ.
fn first_difference(path: &str, a: &serde_json::Value, b: &serde_json::Value) -> Option<String> {
    use serde_json::Value::{Array, Object};
    match (a, b) {
        (Object(x), Object(y)) => {
            for (k, v) in x {
                let p = format!("{path}.{k}");
                match y.get(k) {
                    Some(w) => {
                        if let Some(d) = first_difference(&p, v, w) {
                            return Some(d);
                        }
                    }
                    None => return Some(format!("{p}: {v} / absent")),
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{path}.{k}: absent / {}", y[k]))
        }
        (Array(x), Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(&format!("{path}[{i}]"), v, w)),
        _ => (a != b).then(|| format!("{path}: {a} / {b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_with_both_values() {
        let a = json!({"x": 1, "y": {"z": [1, 2.5]}});
        let b = json!({"x": 1, "y": {"z": [1, 3.5]}});
        assert_eq!(
            first_difference("r", &a, &b).unwrap(),
            "r.y.z[1]: 2.5 / 3.5"
        );
        assert_eq!(first_difference("r", &a, &a), None);
        let c = json!({"x": 1});
        assert_eq!(
            first_difference("r", &c, &json!({"x": 1, "w": 2})).unwrap(),
            "r.w: absent / 2"
        );
    }
}
