//! Pipeline schedules and recompute policies in a plugin host (`--isolate`): the host's
//! proxies, whose every call goes over the connection once per distinct question and whose
//! answers go through the same checked `ForeignSchedule` and `ForeignRecompute` as an
//! in-process library's, and the child's answers to those calls.

use super::{RecomputeBackend, ScheduleBackend};
use crate::call::CallError;
use crate::isolate::child::{failed, model_failed};
use crate::isolate::protocol::{Answer, Call, WireError};
use crate::isolate::proxies::Proxy;
use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_abi::strategy::PcPlan;
use perfcast_core::parallel::{PipelineSchedule, PlanShape};
use perfcast_core::Component;
use std::sync::Arc;

/// A pipeline schedule in the child, with the properties it declared when it was built.
pub(crate) struct IsoSchedule(pub(crate) Proxy, pub(crate) PcScheduleProperties);

impl ScheduleBackend for IsoSchedule {
    fn properties(&self) -> Result<PcScheduleProperties, CallError> {
        Ok(self.1)
    }
    fn validate(&self, plan: &PlanShape, _input: &PcScheduleInput) -> Result<(), CallError> {
        let call = Call::ScheduleValidate {
            handle: self.0.handle,
            plan: PcPlan::from_native(plan),
        };
        self.0.done("validate", call)
    }
    fn step(&self, input: &PcScheduleInput) -> Result<PcScheduleResult, CallError> {
        let call = Call::Step {
            handle: self.0.handle,
            input: *input,
        };
        match self.0.ask("step", call)? {
            Answer::ScheduleResult(r) => Ok(r),
            _ => Err(self.0.other("step")),
        }
    }
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, CallError> {
        let call = Call::InFlight {
            handle: self.0.handle,
            input: *input,
            stage,
        };
        self.0.number("in_flight", call)
    }
    fn peak_layers_held(
        &self,
        input: &PcScheduleInput,
        stage: u32,
        chunk_layers: &[f64],
    ) -> Option<Result<f64, CallError>> {
        let call = Call::PeakLayersHeld {
            handle: self.0.handle,
            input: *input,
            stage,
            chunk_layers: chunk_layers.to_vec(),
        };
        Some(self.0.number("peak_layers_held", call))
    }
}

/// A recompute policy in the child.
pub(crate) struct IsoRecompute(pub(crate) Proxy);

impl RecomputeBackend for IsoRecompute {
    fn plan(
        &self,
        act: &PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    ) -> Result<PcRecomputePlan, CallError> {
        let call = Call::RecomputePlan {
            handle: self.0.handle,
            act: *act,
            layers,
            recompute_layers,
        };
        match self.0.ask("plan", call)? {
            Answer::RecomputePlan(p) => Ok(p),
            _ => Err(self.0.other("plan")),
        }
    }
}

/// The child's side: the calls of a pipeline schedule or a recompute policy answered
/// (`Ok(Err(call))` hands back a call of another category).
pub(crate) fn answer(handles: &[Component], call: Call) -> Result<Result<Answer, Call>, WireError> {
    let answer = match call {
        Call::ScheduleValidate { handle: h, plan } => {
            let p = plan.to_native().map_err(failed)?;
            schedule(handles, h)?
                .validate(&p)
                .map(|()| Answer::Done)
                .map_err(model_failed)
        }
        Call::Step { handle: h, input } => {
            let r = schedule(handles, h)?
                .step(&input.to_native())
                .map_err(model_failed)?;
            Ok(Answer::ScheduleResult(PcScheduleResult::from_native(&r)))
        }
        Call::InFlight {
            handle: h,
            input,
            stage,
        } => Ok(Answer::Number(
            schedule(handles, h)?.in_flight(&input.to_native(), stage),
        )),
        Call::PeakLayersHeld {
            handle: h,
            input,
            stage,
            chunk_layers,
        } => {
            let chunks = |c: u32| chunk_layers.get(c as usize).copied().unwrap_or(0.0);
            Ok(Answer::Number(schedule(handles, h)?.peak_layers_held(
                &input.to_native(),
                stage,
                &chunks,
            )))
        }
        Call::RecomputePlan {
            handle: h,
            act,
            layers,
            recompute_layers,
        } => {
            let Some(Component::RecomputePolicy(p)) = handles.get(h) else {
                return Err(failed(format!("component {h} is not a recompute policy")));
            };
            let given = (recompute_layers != 0).then_some(recompute_layers);
            let r = p
                .plan(&act.to_native(), layers, given)
                .map_err(model_failed)?;
            Ok(Answer::RecomputePlan(PcRecomputePlan::from_native(&r)))
        }
        other => return Ok(Err(other)),
    };
    answer.map(Ok)
}

/// The pipeline schedule under handle `h`.
fn schedule(handles: &[Component], h: usize) -> Result<Arc<dyn PipelineSchedule>, WireError> {
    match handles.get(h) {
        Some(Component::PipelineSchedule(s)) => Ok(s.clone()),
        _ => Err(failed(format!("component {h} is not a pipeline schedule"))),
    }
}
