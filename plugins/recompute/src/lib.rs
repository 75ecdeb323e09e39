//! Built-in activation-recompute policies: `none`, `selective`, `full`.
//!
//! Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
//! arXiv:2205.05198, §4 and §5):
//!
//! * `none`: every layer keeps all its activations (`sbh(34 + 5as/h)` for a GPT layer).
//! * `selective`: drop the attention core's quadratic activations (QKᵀ scores, softmax,
//!   attention dropout: `5as²b`) and rerun that core in the backward pass.
//! * `full`: keep only each layer's input (`2sbh`, `÷t` with sequence parallelism) and rerun
//!   the layer's whole forward in the backward pass; with `recompute_layers = N` only N layers
//!   of each stage do so (Megatron `--recompute-method block --recompute-num-layers N`), the
//!   others keep everything. While a recomputed layer runs its backward, its full
//!   activations are live once more (`working`).

use perfcast_core::parallel::{LayerActivations, RecomputePlan, RecomputePolicy};
use perfcast_core::registry::Component;
use perfcast_core::{Bytes, Key, ModelError, PluginError};
use serde::Deserialize;
use std::sync::Arc;

/// No parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

fn no_layer_count(kind: &str, n: Option<u32>) -> Result<(), ModelError> {
    match n {
        None => Ok(()),
        Some(n) => Err(ModelError::invalid(
            Key::plan("recompute_layers"),
            n,
            format!("only applies to recompute = \"full\", not \"{kind}\""),
        )),
    }
}

/// Keep everything.
#[derive(Debug, Clone, Default)]
pub struct NoRecompute;

impl RecomputePolicy for NoRecompute {
    fn kind(&self) -> &str {
        "none"
    }
    fn plan(
        &self,
        act: &LayerActivations,
        layers: u32,
        recompute_layers: Option<u32>,
    ) -> Result<RecomputePlan, ModelError> {
        no_layer_count("none", recompute_layers)?;
        Ok(RecomputePlan {
            full_layers: 0.0,
            attention_layers: 0.0,
            kept: act.total() * layers as f64,
            working: Bytes::ZERO,
        })
    }
}

/// Drop and rerun the attention core (Korthikanti 2022 §5).
#[derive(Debug, Clone, Default)]
pub struct Selective;

impl RecomputePolicy for Selective {
    fn kind(&self) -> &str {
        "selective"
    }
    fn plan(
        &self,
        act: &LayerActivations,
        layers: u32,
        recompute_layers: Option<u32>,
    ) -> Result<RecomputePlan, ModelError> {
        no_layer_count("selective", recompute_layers)?;
        Ok(RecomputePlan {
            full_layers: 0.0,
            attention_layers: layers as f64,
            kept: (act.input + act.other) * layers as f64,
            working: act.attention_core,
        })
    }
}

/// Keep each layer's input, rerun its forward (Chen et al. 2016; Korthikanti 2022 §4).
#[derive(Debug, Clone, Default)]
pub struct Full;

impl RecomputePolicy for Full {
    fn kind(&self) -> &str {
        "full"
    }
    fn plan(
        &self,
        act: &LayerActivations,
        layers: u32,
        recompute_layers: Option<u32>,
    ) -> Result<RecomputePlan, ModelError> {
        let n = match recompute_layers {
            None => layers,
            Some(n) if n == 0 || n > layers => {
                return Err(ModelError::invalid(
                    Key::plan("recompute_layers"),
                    n,
                    format!("must be in 1..={layers} (the layers of one pipeline stage chunk set)"),
                ))
            }
            Some(n) => n,
        };
        let kept_layers = (layers - n) as f64;
        Ok(RecomputePlan {
            full_layers: n as f64,
            attention_layers: 0.0,
            kept: act.input * n as f64 + act.total() * kept_layers,
            working: act.total(),
        })
    }
}

fn params_none(p: &serde_json::Value) -> Result<(), PluginError> {
    perfcast_core::params::parse::<NoParams>(p).map(|_| ())
}

perfcast_core::builtin!(
    RecomputePolicy,
    "none",
    "No recompute: every activation kept (Korthikanti 2022 sbh(34 + 5as/h))",
    |p| {
        params_none(p)?;
        Ok(Component::RecomputePolicy(Arc::new(NoRecompute)))
    },
    params = &[]
);
perfcast_core::builtin!(
    RecomputePolicy,
    "selective",
    "Selective (Korthikanti 2022): drop attention scores/softmax/dropout, rerun the attention core",
    |p| {
        params_none(p)?;
        Ok(Component::RecomputePolicy(Arc::new(Selective)))
    },
    params = &[]
);
perfcast_core::builtin!(
    RecomputePolicy,
    "full",
    "Full: keep each layer's input, rerun its forward (optionally only recompute_layers per stage)",
    |p| {
        params_none(p)?;
        Ok(Component::RecomputePolicy(Arc::new(Full)))
    },
    params = &[]
);

// `register(&mut Registry)`: this crate's built-ins, composed by `perfcast-builtins`.
perfcast_core::register_fn!();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_table() {
        let act = LayerActivations {
            input: Bytes(2.0),
            attention_core: Bytes(10.0),
            other: Bytes(30.0),
        };
        let pols: [&dyn RecomputePolicy; 3] = [&NoRecompute, &Selective, &Full];
        // (policy, layers, recompute_layers, kept, full_layers, attention_layers, working)
        let table = [
            (0, 4, None, 168.0, 0.0, 0.0, 0.0),
            (1, 4, None, 128.0, 0.0, 4.0, 10.0),
            (2, 4, None, 8.0, 4.0, 0.0, 42.0),
            (2, 4, Some(1), 2.0 + 3.0 * 42.0, 1.0, 0.0, 42.0),
            (2, 4, Some(4), 8.0, 4.0, 0.0, 42.0),
        ];
        for (i, (p, l, n, kept, fl, al, w)) in table.into_iter().enumerate() {
            let r = pols[p].plan(&act, l, n).unwrap();
            assert_eq!(r.kept.0, kept, "case {i}");
            assert_eq!(r.full_layers, fl, "case {i}");
            assert_eq!(r.attention_layers, al, "case {i}");
            assert_eq!(r.working.0, w, "case {i}");
        }
        assert!(Full.plan(&act, 4, Some(5)).is_err());
        assert!(Full.plan(&act, 4, Some(0)).is_err());
        let e = Selective.plan(&act, 4, Some(2)).unwrap_err().to_string();
        assert!(e.contains("plan.recompute_layers"), "{e}");
    }
}
