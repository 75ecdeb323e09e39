//! Foreign pipeline schedules and recompute policies (C ABI 1.3, Rust ABI 1.2; a schedule's
//! properties C ABI 1.6, Rust ABI 1.3) as native trait objects: one checked adapter per
//! category, fed by a backend per ABI. Every answer is checked before the engine sees it, with
//! the component's name in the message: times and counts finite and >= 0, a schedule's bubble
//! and hand-off time within its step time, its model copies >= 1, a policy's layer counts
//! within the stage. A schedule's `validate` also asks `in_flight` of
//! every stage of the plan, so that memory sizing (which cannot fail) only ever sees answers
//! already checked.
//!
//! The categories' whole boundary is in this module: the checked adapters (here), fed by one
//! backend per way in, `c` (the C ABI's vtables, 1.3; a schedule's `properties` 1.6), `rust`
//! (the abi_stable trait objects, 1.2; `properties` 1.3) and `isolate` (the plugin host's
//! proxies, and the child's answers to their calls).

use crate::call::CallError;
use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_core::parallel::{
    LayerActivations, PipelineSchedule, PlanShape, RecomputePlan, RecomputePolicy, ScheduleInput,
    ScheduleResult,
};
use perfcast_core::{Bytes, ModelError, PluginError, Seconds};
use std::mem::size_of;

/// The calls a foreign schedule answers.
pub(crate) trait ScheduleBackend: Send + Sync {
    /// Refuse a plan the schedule cannot run (`input` carries the plan's counts, zero times).
    fn validate(&self, plan: &PlanShape, input: &PcScheduleInput) -> Result<(), CallError>;
    fn step(&self, input: &PcScheduleInput) -> Result<PcScheduleResult, CallError>;
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, CallError>;
    /// `None`: the schedule has no answer of its own (the trait's default, from `in_flight`).
    fn peak_layers_held(
        &self,
        _input: &PcScheduleInput,
        _stage: u32,
        _chunk_layers: &[f64],
    ) -> Option<Result<f64, CallError>> {
        None
    }
    /// What the schedule is (asked once, when the instance is created); the defaults (one
    /// model copy, no expert-communication overlap) for an ABI or plugin without the call.
    fn properties(&self) -> Result<PcScheduleProperties, CallError> {
        Ok(PcScheduleProperties::default())
    }
}

/// A foreign pipeline schedule.
pub(crate) struct ForeignSchedule {
    name: String,
    backend: Box<dyn ScheduleBackend>,
    /// Its checked properties: model-state copies (>= 1) and expert-communication overlap.
    model_copies: f64,
    overlaps_expert_comm: bool,
}

/// The counts of `input` with zero times (what memory sizing asks with).
fn counts_only(input: &ScheduleInput) -> PcScheduleInput {
    PcScheduleInput {
        forward: 0.0,
        backward: 0.0,
        p2p: 0.0,
        ..PcScheduleInput::from_native(input)
    }
}

impl ForeignSchedule {
    /// The adapter of `backend`, its properties asked and checked: `model_copies` finite and
    /// at least 1, `overlaps_expert_comm` 0 or 1.
    pub fn new(name: &str, backend: Box<dyn ScheduleBackend>) -> Result<Self, PluginError> {
        let p = backend
            .properties()
            .map_err(|e| e.into_plugin_error(name))?;
        let bad = |message: String| PluginError::Failed {
            plugin: name.to_string(),
            message,
        };
        if !(p.model_copies.is_finite() && p.model_copies >= 1.0) {
            return Err(bad(format!(
                "properties: model_copies {} is not a number of copies (finite, >= 1)",
                p.model_copies
            )));
        }
        let overlaps_expert_comm = match p.overlaps_expert_comm {
            0 => false,
            1 => true,
            v => {
                return Err(bad(format!(
                    "properties: overlaps_expert_comm {v} is neither 0 nor 1"
                )))
            }
        };
        Ok(ForeignSchedule {
            name: name.to_string(),
            backend,
            model_copies: p.model_copies,
            overlaps_expert_comm,
        })
    }

    fn failed(&self, e: CallError) -> ModelError {
        ModelError::Plugin(e.into_plugin_error(&self.name))
    }

    fn checked(&self, what: &str, v: f64) -> Result<f64, ModelError> {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(ModelError::NonFinite {
                what: format!("{what} of pipeline schedule `{}`", self.name),
                value: v,
            })
        }
    }

    fn stage_in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, ModelError> {
        let v = self
            .backend
            .in_flight(input, stage)
            .map_err(|e| self.failed(e))?;
        self.checked(&format!("in_flight of stage {stage}"), v)
    }
}

impl PipelineSchedule for ForeignSchedule {
    fn kind(&self) -> &str {
        &self.name
    }

    fn model_copies(&self) -> f64 {
        self.model_copies
    }

    fn overlaps_expert_comm(&self) -> bool {
        self.overlaps_expert_comm
    }

    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        let input = PcScheduleInput {
            struct_size: size_of::<PcScheduleInput>() as u32,
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: plan.micro_batches(),
            ..Default::default()
        };
        self.backend
            .validate(plan, &input)
            .map_err(|e| self.failed(e))?;
        for stage in 0..plan.pp {
            self.stage_in_flight(&input, stage)?;
        }
        Ok(())
    }

    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let out = self
            .backend
            .step(&PcScheduleInput::from_native(input))
            .map_err(|e| self.failed(e))?;
        let time = self.checked("step time", out.time)?;
        let bubble = self.checked("bubble", out.bubble)?;
        let p2p = self.checked("p2p time", out.p2p)?;
        let peak = self.checked("peak_in_flight", out.peak_in_flight)?;
        if bubble + p2p > time * (1.0 + 1e-12) {
            return Err(ModelError::Plugin(PluginError::Failed {
                plugin: self.name.clone(),
                message: format!(
                    "bubble {bubble} s + p2p {p2p} s exceed the step time {time} s they are part of"
                ),
            }));
        }
        Ok(ScheduleResult {
            time: Seconds(time),
            bubble: Seconds(bubble),
            p2p: Seconds(p2p),
            peak_in_flight: peak,
        })
    }

    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64 {
        // Checked by `validate` for the plan's counts before any memory is sized; a count the
        // plugin refuses here reads as infinitely many (the plan does not fit), never as NaN.
        self.stage_in_flight(&counts_only(input), stage)
            .unwrap_or(f64::INFINITY)
    }

    fn peak_layers_held(
        &self,
        input: &ScheduleInput,
        stage: u32,
        chunk_layers: &dyn Fn(u32) -> f64,
    ) -> f64 {
        let chunks: Vec<f64> = (0..input.virtual_stages.max(1)).map(chunk_layers).collect();
        match self
            .backend
            .peak_layers_held(&counts_only(input), stage, &chunks)
        {
            None => self.in_flight(input, stage) * chunks.iter().sum::<f64>(),
            // Like `in_flight`: an answer refused reads as infinitely many (does not fit).
            Some(r) => r
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .unwrap_or(f64::INFINITY),
        }
    }
}

/// The call a foreign recompute policy answers; `recompute_layers` 0 is "not given".
pub(crate) trait RecomputeBackend: Send + Sync {
    fn plan(
        &self,
        act: &PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    ) -> Result<PcRecomputePlan, CallError>;
}

/// A foreign recompute policy.
pub(crate) struct ForeignRecompute {
    name: String,
    backend: Box<dyn RecomputeBackend>,
}

impl ForeignRecompute {
    pub fn new(name: &str, backend: Box<dyn RecomputeBackend>) -> Self {
        ForeignRecompute {
            name: name.to_string(),
            backend,
        }
    }
}

impl RecomputePolicy for ForeignRecompute {
    fn kind(&self) -> &str {
        &self.name
    }

    fn plan(
        &self,
        act: &LayerActivations,
        layers: u32,
        recompute_layers: Option<u32>,
    ) -> Result<RecomputePlan, ModelError> {
        // 0 means "not given" across the ABI; a given 0 is refused here, as the built-ins do.
        if recompute_layers == Some(0) {
            return Err(ModelError::invalid(
                perfcast_core::Key::plan("recompute_layers"),
                0,
                format!("must be in 1..={layers}"),
            ));
        }
        let a = PcLayerActivations::from_native(act);
        let out = self
            .backend
            .plan(&a, layers, recompute_layers.unwrap_or(0))
            .map_err(|e| ModelError::Plugin(e.into_plugin_error(&self.name)))?;
        let check = |what: &str, v: f64, max: f64| {
            if v.is_finite() && v >= 0.0 && v <= max {
                Ok(v)
            } else {
                Err(ModelError::NonFinite {
                    what: format!(
                        "{what} of recompute policy `{}` (a stage of {layers} layers)",
                        self.name
                    ),
                    value: v,
                })
            }
        };
        let l = layers as f64;
        Ok(RecomputePlan {
            full_layers: check("full_layers", out.full_layers, l)?,
            attention_layers: check("attention_layers", out.attention_layers, l)?,
            kept: Bytes(check("kept", out.kept, f64::MAX)?),
            working: Bytes(check("working", out.working, f64::MAX)?),
        })
    }
}

pub(crate) mod c;
pub(crate) mod isolate;
pub(crate) mod rust;
