//! A foreign parallel strategy (Rust ABI 1.2) as a native `ParallelStrategy`: the plan, the
//! model's dimensions and the layer's go over as `perfcast_abi::strategy` data, and every
//! answer that comes back is checked before the engine sees it: an axis code it knows; split
//! factors that multiply the ones handed in (>= 1, a whole multiple); at most as many
//! collectives as the host's array holds, each with known codes, a non-empty group of the
//! mesh's axes, bytes and count finite and >= 0, and an overlap efficiency in [0, 1]. A
//! plugin's own error keeps its message, under the component's name.
//!
//! The category's whole boundary is in this module: the checked adapter (here), fed by one
//! backend per way in, `c` (the C ABI's vtable), `rust` (the abi_stable trait object, current
//! and frozen layouts) and `isolate` (the plugin host's proxy, and the child's answers to its
//! calls).

use crate::call::CallError;
use perfcast_abi::convert::bad_value;
use perfcast_abi::strategy::{
    axis_from_code, PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlanAxes,
    PcStateSplit,
};
use perfcast_core::parallel::{
    Axis, AxisDecl, CommList, LayerDims, LayerSplit, Overlap, ParallelStrategy, PlanShape,
    StateSplit, MAX_DECLARED_AXES,
};
use perfcast_core::workload::ModelSpec;
use perfcast_core::{ModelError, PluginError};

/// The calls a foreign strategy answers (one implementation per ABI). The plan carries the
/// degrees of the strategy's own declared axes (a backend of an ABI minor without declared
/// axes hands on its 1.4 prefix).
pub(crate) trait StrategyBackend: Send + Sync {
    fn axis(&self) -> Result<u32, CallError>;
    /// The axes it declares (none before Rust ABI 1.4 and C ABI 1.7).
    fn axes(&self) -> Result<Vec<PcAxisDecl>, CallError>;
    fn validate(&self, model: &PcModel, plan: &PcPlanAxes) -> Result<(), CallError>;
    fn split_layer(
        &self,
        plan: &PcPlanAxes,
        split: PcLayerSplit,
    ) -> Result<PcLayerSplit, CallError>;
    fn split_state(
        &self,
        plan: &PcPlanAxes,
        split: PcStateSplit,
    ) -> Result<PcStateSplit, CallError>;
    /// Write collectives into `out`; how many were written.
    fn comms(
        &self,
        plan: &PcPlanAxes,
        dims: &PcLayerDims,
        out: &mut [PcCommOp],
    ) -> Result<u32, CallError>;
}

/// A foreign parallel strategy.
pub(crate) struct ForeignStrategy {
    kind: String,
    axis: Axis,
    /// The axes it declares, asked once.
    declared: Vec<AxisDecl>,
    backend: Box<dyn StrategyBackend>,
}

impl ForeignStrategy {
    /// Ask the plugin for its axis and its declared axes once; an unknown code, a bad
    /// declaration or more than [`MAX_DECLARED_AXES`] axes refuse the component.
    pub fn new(kind: &str, backend: Box<dyn StrategyBackend>) -> Result<Self, PluginError> {
        let failed = |message: String| PluginError::Failed {
            plugin: kind.to_string(),
            message,
        };
        let code = backend.axis().map_err(|e| e.into_plugin_error(kind))?;
        let axis = axis_from_code(code).map_err(failed)?;
        let decls = backend.axes().map_err(|e| e.into_plugin_error(kind))?;
        if decls.len() > MAX_DECLARED_AXES {
            return Err(failed(format!(
                "declares {} axes; a strategy may declare at most {MAX_DECLARED_AXES}",
                decls.len()
            )));
        }
        let declared = decls
            .iter()
            .map(|d| {
                let d = d.to_native()?;
                d.check().map(|()| d)
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(|m| failed(format!("declared axis: {m}")))?;
        Ok(ForeignStrategy {
            kind: kind.to_string(),
            axis,
            declared,
            backend,
        })
    }

    /// The plan as the plugin sees it: with the degrees of its own declared axes.
    fn plan(&self, plan: &PlanShape) -> PcPlanAxes {
        PcPlanAxes::from_native(plan, self.declared.len())
    }

    fn failed(&self, e: CallError) -> ModelError {
        ModelError::Plugin(e.into_plugin_error(&self.kind))
    }

    fn bad(&self, what: String, value: f64) -> ModelError {
        ModelError::Plugin(bad_value(&self.kind, &what, value))
    }

    /// Each factor of `after` must be `before`'s times a whole number >= 1.
    fn check_factors<const N: usize>(
        &self,
        call: &str,
        before: [(&'static str, u32); N],
        after: [(&'static str, u32); N],
    ) -> Result<(), ModelError> {
        for ((name, b), (_, a)) in before.into_iter().zip(after) {
            if a == 0 || b == 0 || !a.is_multiple_of(b) {
                return Err(self.bad(
                    format!(
                        "{call} `{name}` (not the factor handed in, {b}, times a whole number)"
                    ),
                    a as f64,
                ));
            }
        }
        Ok(())
    }

    fn check_op(
        &self,
        i: usize,
        op: &PcCommOp,
    ) -> Result<perfcast_core::parallel::CommOp, ModelError> {
        let c = op.to_native().map_err(|m| {
            ModelError::Plugin(PluginError::Failed {
                plugin: self.kind.clone(),
                message: format!("collective {i}: {m}"),
            })
        })?;
        for (what, v) in [("bytes", c.bytes.0), ("count", c.count)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(self.bad(format!("collective {i} {what}"), v));
            }
        }
        if let Overlap::Behind { efficiency, .. } = c.overlap {
            if !(0.0..=1.0).contains(&efficiency) {
                return Err(self.bad(
                    format!("collective {i} overlap efficiency (must be in [0, 1])"),
                    efficiency,
                ));
            }
        }
        Ok(c)
    }
}

impl ParallelStrategy for ForeignStrategy {
    fn kind(&self) -> &str {
        &self.kind
    }
    fn axis(&self) -> Axis {
        self.axis
    }
    fn axes(&self) -> Vec<AxisDecl> {
        self.declared.clone()
    }
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError> {
        self.backend
            .validate(&PcModel::from_native(model), &self.plan(plan))
            .map_err(|e| self.failed(e))
    }
    fn split_layer(&self, plan: &PlanShape, split: &mut LayerSplit) -> Result<(), ModelError> {
        let before = PcLayerSplit::from_native(split);
        let after = self
            .backend
            .split_layer(&self.plan(plan), before)
            .map_err(|e| self.failed(e))?;
        self.check_factors("split_layer", before.fields(), after.fields())?;
        *split = after.to_native();
        Ok(())
    }
    fn split_state(&self, plan: &PlanShape, split: &mut StateSplit) -> Result<(), ModelError> {
        let before = PcStateSplit::from_native(split);
        let after = self
            .backend
            .split_state(&self.plan(plan), before)
            .map_err(|e| self.failed(e))?;
        self.check_factors("split_state", before.fields(), after.fields())?;
        *split = after.to_native();
        Ok(())
    }
    fn comms(
        &self,
        plan: &PlanShape,
        dims: &LayerDims,
        out: &mut CommList,
    ) -> Result<(), ModelError> {
        let mut buf = [PcCommOp::default(); CommList::CAPACITY];
        let room = CommList::CAPACITY - out.len();
        let n = self
            .backend
            .comms(
                &self.plan(plan),
                &PcLayerDims::from_native(dims),
                &mut buf[..room],
            )
            .map_err(|e| self.failed(e))? as usize;
        if n > room {
            return Err(self.bad(
                format!("count of collectives (the host's array holds {room})"),
                n as f64,
            ));
        }
        for (i, op) in buf[..n].iter().enumerate() {
            out.push(self.check_op(i, op)?)?;
        }
        Ok(())
    }
}

pub(crate) mod c;
pub(crate) mod isolate;
pub(crate) mod rust;

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_abi::codes::ERR_FAILED;
    use perfcast_abi::strategy::{PcCommOp, PcPlan};
    use perfcast_core::op::CollectiveKind;
    use perfcast_core::parallel::{AxisPlace, Divides};
    use perfcast_core::parallel::{AxisSet, CommClass, CommOp, Phase, Window};
    use perfcast_core::Bytes;

    /// A backend answering what it is told to.
    struct Scripted {
        axis: u32,
        axes: Vec<PcAxisDecl>,
        factor: u32,
        ops: Vec<PcCommOp>,
        claimed: Option<u32>,
        fail: bool,
    }

    impl StrategyBackend for Scripted {
        fn axis(&self) -> Result<u32, CallError> {
            Ok(self.axis)
        }
        fn axes(&self) -> Result<Vec<PcAxisDecl>, CallError> {
            Ok(self.axes.clone())
        }
        fn validate(&self, _: &PcModel, _: &PcPlanAxes) -> Result<(), CallError> {
            if self.fail {
                return Err(CallError {
                    code: ERR_FAILED,
                    path: String::new(),
                    message: "plan.cp = 3 must divide the heads".into(),
                });
            }
            Ok(())
        }
        fn split_layer(
            &self,
            p: &PcPlanAxes,
            mut s: PcLayerSplit,
        ) -> Result<PcLayerSplit, CallError> {
            // The first declared axis's degree, when it has one, multiplies the tokens too.
            s.tokens *= self.factor * if p.n_axes > 0 { p.axes[0] } else { 1 };
            Ok(s)
        }
        fn split_state(&self, _: &PcPlanAxes, s: PcStateSplit) -> Result<PcStateSplit, CallError> {
            Ok(s)
        }
        fn comms(
            &self,
            _: &PcPlanAxes,
            _: &PcLayerDims,
            out: &mut [PcCommOp],
        ) -> Result<u32, CallError> {
            for (slot, op) in out.iter_mut().zip(&self.ops) {
                *slot = *op;
            }
            Ok(self.claimed.unwrap_or(self.ops.len().min(out.len()) as u32))
        }
    }

    fn good_op() -> PcCommOp {
        PcCommOp::from_native(&CommOp {
            class: CommClass::Context,
            phase: Phase::Forward,
            kind: CollectiveKind::AllToAll,
            bytes: Bytes(4e6),
            group: AxisSet::CONTEXT,
            count: 1.0,
            overlap: Overlap::Behind {
                window: Window::Attention,
                efficiency: 0.5,
            },
            with_recompute: true,
            dispatch: None,
        })
    }

    fn strategy(f: impl FnOnce(&mut Scripted)) -> Result<ForeignStrategy, PluginError> {
        let mut s = Scripted {
            axis: 2,
            axes: Vec::new(),
            factor: 2,
            ops: vec![good_op()],
            claimed: None,
            fail: false,
        };
        f(&mut s);
        ForeignStrategy::new("t/cp", Box::new(s))
    }

    fn dims() -> LayerDims {
        LayerDims {
            micro_batch: 1,
            seq_len: 4096,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            ffn_hidden: 14336,
            act_bytes: 2.0,
            gather_bytes: 2.0,
            layer_params: 2e8,
            device_params: 7e9,
            grad_bytes: 4.0,
            weight_bytes: 2.0,
            embedding_params: 5e8,
            tied_embeddings: false,
            moe: None,
        }
    }

    fn plan() -> PlanShape {
        PcPlan {
            tp: 1,
            pp: 1,
            dp: 1,
            cp: 2,
            ep: 1,
            etp: 1,
            vpp: 1,
            micro_batch: 1,
            global_batch: 8,
            ..PcPlan::default()
        }
        .to_native()
        .unwrap()
    }

    fn comms(s: &ForeignStrategy) -> Result<CommList, ModelError> {
        let mut l = CommList::default();
        s.comms(&plan(), &dims(), &mut l).map(|()| l)
    }

    #[test]
    fn good_answers_pass_through() {
        let s = strategy(|_| {}).unwrap();
        assert_eq!((s.kind(), s.axis()), ("t/cp", Axis::Context));
        let mut split = LayerSplit::default();
        s.split_layer(&plan(), &mut split).unwrap();
        assert_eq!(split.tokens, 2);
        let l = comms(&s).unwrap();
        assert_eq!(l.iter().next().unwrap(), &good_op().to_native().unwrap());
    }

    #[test]
    fn bad_answers_are_errors_naming_the_plugin() {
        type Spoil = fn(&mut Scripted);
        let table: [(Spoil, &str); 8] = [
            (|s| s.ops[0].bytes = f64::NAN, "collective 0 bytes"),
            (|s| s.ops[0].count = -1.0, "collective 0 count"),
            (|s| s.ops[0].efficiency = 1.5, "overlap efficiency"),
            (|s| s.ops[0].group = 0, "group 0x0"),
            (|s| s.ops[0].phase = 42, "phase code 42"),
            (|s| s.claimed = Some(40), "count of collectives"),
            (|s| s.factor = 0, "split_layer `tokens`"),
            (|s| s.fail = true, "plan.cp = 3 must divide the heads"),
        ];
        for (spoil, want) in table {
            let s = strategy(spoil).unwrap();
            let mut split = LayerSplit::default();
            let e = s
                .validate(&model(), &plan())
                .and_then(|()| s.split_layer(&plan(), &mut split))
                .and_then(|()| comms(&s).map(|_| ()))
                .unwrap_err()
                .to_string();
            assert!(e.contains("t/cp") && e.contains(want), "{e} / {want}");
        }
        let e = strategy(|s| s.axis = 17).err().unwrap().to_string();
        assert!(e.contains("t/cp") && e.contains("axis code 17"), "{e}");
    }

    fn decl(name: &str) -> PcAxisDecl {
        PcAxisDecl::from_native(&AxisDecl {
            name: name.into(),
            place: AxisPlace::Inside(Axis::Tensor),
            divides: Divides {
                heads: true,
                ..Divides::default()
            },
        })
        .unwrap()
    }

    #[test]
    fn declared_axes_cross_with_their_degrees() {
        let s = strategy(|s| s.axes = vec![decl("row"), decl("col")]).unwrap();
        let axes = s.axes();
        assert_eq!(axes.len(), 2);
        assert_eq!(axes[1].name, "col");
        assert_eq!(axes[0].place, AxisPlace::Inside(Axis::Tensor));
        assert!(axes[0].divides.heads && !axes[0].divides.batch);
        let mut p = plan();
        p.axes[0] = 4;
        p.axes[1] = 2;
        let sent = s.plan(&p);
        assert_eq!((sent.n_axes, &sent.axes[..3]), (2, &[4, 2, 1][..]));
        assert_eq!(sent.to_native().unwrap(), p);
        let mut split = LayerSplit::default();
        s.split_layer(&p, &mut split).unwrap();
        assert_eq!(split.tokens, 2 * 4);
        // A collective on the strategy's own first axis crosses as bit 8.
        let mut op = good_op();
        op.group = 0x100;
        let s = strategy(|s| {
            s.axes = vec![decl("row")];
            s.ops = vec![op];
        })
        .unwrap();
        let l = comms(&s).unwrap();
        assert_eq!(l.iter().next().unwrap().group, AxisSet::declared(0));
    }

    #[test]
    fn bad_declarations_refuse_the_component() {
        let mut long = decl("x");
        long.name = [b'a'; 32];
        let mut bad_place = decl("row");
        bad_place.place = 7;
        let mut bad_anchor = decl("row");
        bad_anchor.anchor = 3; // expert: not a dense axis
        let mut bad_bits = decl("row");
        bad_bits.divides = 0x40;
        let table = [
            (vec![decl("tp")], "built-in axis"),
            (vec![decl("Row")], "lowercase"),
            (vec![long], "NUL-terminated"),
            (vec![bad_place], "place code 7"),
            (vec![bad_anchor], "next to `expert`"),
            (vec![bad_bits], "divides 0x40"),
            (vec![decl("a"); 9], "at most 8"),
        ];
        for (axes, want) in table {
            let e = strategy(|s| s.axes = axes).err().unwrap().to_string();
            assert!(e.contains("t/cp") && e.contains(want), "{e} / {want}");
        }
    }

    /// A small model without the testkit (the loader does not depend on it).
    fn model() -> ModelSpec {
        PcModel {
            layers: 32,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            ffn_hidden: 14336,
            vocab: 128256,
            seq_len: 4096,
            ..PcModel::default()
        }
        .to_native()
        .unwrap()
    }
}
