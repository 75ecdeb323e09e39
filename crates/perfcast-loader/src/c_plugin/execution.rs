//! C execution plugins (C ABI 1.3): pipeline schedules and recompute policies. Every answer
//! is checked here, with the plugin's name in the message, before the engine sees it.

use super::raw::{call, no_function, read_vtable, Instance, NewInstance};
use crate::adapter::CallError;
use crate::LoadError;
use perfcast_abi::c::{
    v1_3, PcLayerActivations, PcPipelineScheduleVtable, PcRecomputePlan, PcRecomputePlanFn,
    PcRecomputePolicyVtable, PcScheduleInFlight, PcScheduleInput, PcScheduleResult, PcScheduleStep,
    PcScheduleValidate,
};
use perfcast_core::parallel::{
    LayerActivations, PipelineSchedule, PlanShape, RecomputePlan, RecomputePolicy, ScheduleInput,
    ScheduleResult,
};
use perfcast_core::registry::Factory;
use perfcast_core::{Bytes, Component, ModelError, PluginError, Seconds};
use std::path::Path;
use std::sync::Arc;

/// The factory of pipeline schedule `cname` (its vtable checked: the 1.3 layout, `step` and
/// `in_flight`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
pub(super) unsafe fn pipeline_schedule(
    path: &Path,
    cname: &str,
    vp: *const PcPipelineScheduleVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_3::pipeline_schedule_vtable_size(),
        "pipeline schedule",
        "1.3",
    )?;
    let (Some(step), Some(in_flight)) = (vt.step, vt.in_flight) else {
        let missing = if vt.step.is_none() {
            "step"
        } else {
            "in_flight"
        };
        return Err(no_function(path, cname, missing));
    };
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
        Ok(Component::PipelineSchedule(Arc::new(CSchedule {
            name: n.clone(),
            inst,
            step,
            in_flight,
            validate: vt.validate,
        })))
    }))
}

/// A C pipeline schedule. Every answer is checked (finite, >= 0; bubble and p2p within the
/// time); `validate` also asks `in_flight` of every stage of the plan, so that memory sizing
/// (which cannot fail) only ever sees answers already checked.
struct CSchedule {
    name: String,
    inst: Instance,
    step: PcScheduleStep,
    in_flight: PcScheduleInFlight,
    validate: Option<PcScheduleValidate>,
}

fn pc_input(i: &ScheduleInput) -> PcScheduleInput {
    PcScheduleInput {
        struct_size: size_of::<PcScheduleInput>() as u32,
        stages: i.stages,
        virtual_stages: i.virtual_stages,
        micro_batches: i.micro_batches,
        forward: i.forward.0,
        backward: i.backward.0,
        p2p: i.p2p.0,
    }
}

impl CSchedule {
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
        let mut out = f64::NAN;
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, cap| unsafe { (self.in_flight)(self.inst.this, input, stage, &mut out, e, cap) })
            .map_err(|e| self.failed(e))?;
        self.checked(&format!("in_flight of stage {stage}"), out)
    }
}

impl PipelineSchedule for CSchedule {
    fn kind(&self) -> &str {
        &self.name
    }

    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        let per_step = plan.micro_batch as u64 * plan.dp as u64;
        let m = (plan.global_batch as u64)
            .checked_div(per_step)
            .unwrap_or(0);
        let input = PcScheduleInput {
            struct_size: size_of::<PcScheduleInput>() as u32,
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: u32::try_from(m).unwrap_or(u32::MAX),
            ..Default::default()
        };
        if let Some(v) = self.validate {
            // SAFETY: as above.
            call(|e, cap| unsafe { v(self.inst.this, &input, e, cap) })
                .map_err(|e| self.failed(e))?;
        }
        for stage in 0..plan.pp {
            self.stage_in_flight(&input, stage)?;
        }
        Ok(())
    }

    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let pin = pc_input(input);
        let mut out = PcScheduleResult {
            struct_size: size_of::<PcScheduleResult>() as u32,
            time: f64::NAN,
            bubble: f64::NAN,
            p2p: f64::NAN,
            peak_in_flight: f64::NAN,
            ..Default::default()
        };
        // SAFETY: as above.
        call(|e, cap| unsafe { (self.step)(self.inst.this, &pin, &mut out, e, cap) })
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
        let mut pin = pc_input(input);
        pin.forward = 0.0;
        pin.backward = 0.0;
        pin.p2p = 0.0;
        self.stage_in_flight(&pin, stage).unwrap_or(f64::INFINITY)
    }
}

/// The factory of recompute policy `cname` (its vtable checked: the 1.3 layout, `plan`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
pub(super) unsafe fn recompute_policy(
    path: &Path,
    cname: &str,
    vp: *const PcRecomputePolicyVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_3::recompute_policy_vtable_size(),
        "recompute policy",
        "1.3",
    )?;
    let Some(plan) = vt.plan else {
        return Err(no_function(path, cname, "plan"));
    };
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
        Ok(Component::RecomputePolicy(Arc::new(CRecompute {
            name: n.clone(),
            inst,
            plan,
        })))
    }))
}

/// A C recompute policy; its answers are checked here (finite, >= 0, layer counts within the
/// stage) with the policy's name in the message.
struct CRecompute {
    name: String,
    inst: Instance,
    plan: PcRecomputePlanFn,
}

impl RecomputePolicy for CRecompute {
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
        let a = PcLayerActivations {
            struct_size: size_of::<PcLayerActivations>() as u32,
            reserved0: 0,
            input: act.input.0,
            attention_core: act.attention_core.0,
            other: act.other.0,
        };
        let mut out = PcRecomputePlan {
            struct_size: size_of::<PcRecomputePlan>() as u32,
            full_layers: f64::NAN,
            attention_layers: f64::NAN,
            kept: f64::NAN,
            working: f64::NAN,
            ..Default::default()
        };
        let rl = recompute_layers.unwrap_or(0);
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, cap| unsafe { (self.plan)(self.inst.this, &a, layers, rl, &mut out, e, cap) })
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
