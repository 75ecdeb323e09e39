//! C execution plugins (C ABI 1.3; a schedule's `properties` 1.6): pipeline schedules and recompute policies, as backends of
//! the checked adapters of the module above (which check every answer, with the plugin's
//! name in the message, before the engine sees it).

use super::{ForeignRecompute, ForeignSchedule, RecomputeBackend, ScheduleBackend};
use crate::c_plugin::raw::{call, Instance};
use crate::c_plugin::CCategory;
use crate::call::CallError;
use perfcast_abi::c::{
    v1_3, PcLayerActivations, PcPipelineScheduleVtable, PcRecomputePlan, PcRecomputePlanFn,
    PcRecomputePolicyVtable, PcScheduleInFlight, PcScheduleInput, PcScheduleProperties,
    PcScheduleProps, PcScheduleResult, PcScheduleStep, PcScheduleValidate,
};
use perfcast_core::parallel::PlanShape;
use perfcast_core::{Component, PluginError};
use std::mem::size_of;
use std::sync::Arc;

/// A pipeline schedule's vtable is checked for the 1.3 layout, `step` and `in_flight`;
/// `properties` is read when the plugin's vtable reaches it (1.6).
impl CCategory for CSchedule {
    type Vtable = PcPipelineScheduleVtable;
    type Checked = (PcScheduleStep, PcScheduleInFlight, PcPipelineScheduleVtable);
    const WHAT: &'static str = "pipeline schedule";
    const SINCE: &'static str = "1.3";
    fn min_size() -> usize {
        v1_3::pipeline_schedule_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        match (vt.step, vt.in_flight) {
            (Some(step), Some(in_flight)) => Ok((step, in_flight, vt)),
            (None, _) => Err("step"),
            (Some(_), None) => Err("in_flight"),
        }
    }
    fn build(
        name: &str,
        inst: Instance,
        (step, in_flight, vt): Self::Checked,
    ) -> Result<Component, PluginError> {
        let backend = CSchedule {
            inst,
            step,
            in_flight,
            validate: vt.validate,
            properties: vt.properties,
        };
        Ok(Component::PipelineSchedule(Arc::new(ForeignSchedule::new(
            name,
            Box::new(backend),
        )?)))
    }
}

/// A C pipeline schedule's calls (behind the checked `ForeignSchedule`).
pub(crate) struct CSchedule {
    inst: Instance,
    step: PcScheduleStep,
    in_flight: PcScheduleInFlight,
    validate: Option<PcScheduleValidate>,
    properties: Option<PcScheduleProps>,
}

impl ScheduleBackend for CSchedule {
    fn properties(&self) -> Result<PcScheduleProperties, CallError> {
        let mut out = PcScheduleProperties::default();
        if let Some(p) = self.properties {
            // SAFETY: function and instance come from the plugin, per the header's contract.
            call(|e, cap| unsafe { p(self.inst.this, &mut out, e, cap) })?;
        }
        Ok(out)
    }
    fn validate(&self, _plan: &PlanShape, input: &PcScheduleInput) -> Result<(), CallError> {
        match self.validate {
            // SAFETY: function and instance come from the plugin, per the header's contract.
            Some(v) => call(|e, cap| unsafe { v(self.inst.this, input, e, cap) }),
            None => Ok(()),
        }
    }
    fn step(&self, input: &PcScheduleInput) -> Result<PcScheduleResult, CallError> {
        let mut out = PcScheduleResult {
            struct_size: size_of::<PcScheduleResult>() as u32,
            time: f64::NAN,
            bubble: f64::NAN,
            p2p: f64::NAN,
            peak_in_flight: f64::NAN,
            ..Default::default()
        };
        // SAFETY: as above.
        call(|e, cap| unsafe { (self.step)(self.inst.this, input, &mut out, e, cap) })?;
        Ok(out)
    }
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, CallError> {
        let mut out = f64::NAN;
        // SAFETY: as above.
        call(|e, cap| unsafe { (self.in_flight)(self.inst.this, input, stage, &mut out, e, cap) })?;
        Ok(out)
    }
}

/// A recompute policy's vtable is checked for the 1.3 layout and `plan`.
impl CCategory for CRecompute {
    type Vtable = PcRecomputePolicyVtable;
    type Checked = PcRecomputePlanFn;
    const WHAT: &'static str = "recompute policy";
    const SINCE: &'static str = "1.3";
    fn min_size() -> usize {
        v1_3::recompute_policy_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        vt.plan.ok_or("plan")
    }
    fn build(name: &str, inst: Instance, plan: Self::Checked) -> Result<Component, PluginError> {
        let backend = CRecompute { inst, plan };
        Ok(Component::RecomputePolicy(Arc::new(ForeignRecompute::new(
            name,
            Box::new(backend),
        ))))
    }
}

/// A C recompute policy's call (behind the checked `ForeignRecompute`).
pub(crate) struct CRecompute {
    inst: Instance,
    plan: PcRecomputePlanFn,
}

impl RecomputeBackend for CRecompute {
    fn plan(
        &self,
        act: &PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    ) -> Result<PcRecomputePlan, CallError> {
        let mut out = PcRecomputePlan {
            struct_size: size_of::<PcRecomputePlan>() as u32,
            full_layers: f64::NAN,
            attention_layers: f64::NAN,
            kept: f64::NAN,
            working: f64::NAN,
            ..Default::default()
        };
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, cap| unsafe {
            (self.plan)(
                self.inst.this,
                act,
                layers,
                recompute_layers,
                &mut out,
                e,
                cap,
            )
        })?;
        Ok(out)
    }
}
