//! Rust pipeline schedules and recompute policies (Rust ABI 1.2; a schedule's `properties`
//! 1.3): a library's `FfiPipelineSchedule` and `FfiRecomputePolicy` as backends of the same
//! checked adapters as a C library's (the module above). A schedule of the frozen 1.2 layout
//! has no `properties`: the defaults.

use super::{RecomputeBackend, ScheduleBackend};
use crate::call::CallError;
use crate::rust_plugin::res;
use abi_stable::std_types::RSlice;
use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_abi::rust_abi::{v1_2, FfiPipelineScheduleBox, FfiRecomputePolicyBox};
use perfcast_abi::strategy::PcPlan;
use perfcast_core::parallel::PlanShape;

/// A Rust plugin's pipeline schedule: of the current layout, or of the frozen 1.2 one
/// (which has no `properties`: the defaults).
pub(crate) enum RustSchedule {
    Current(FfiPipelineScheduleBox),
    V1_2(v1_2::FfiPipelineScheduleBox),
}

/// `$call` on the schedule object, whichever layout it has.
macro_rules! on_schedule {
    ($s:expr, $o:ident => $call:expr) => {
        match $s {
            RustSchedule::Current($o) => $call,
            RustSchedule::V1_2($o) => $call,
        }
    };
}

impl ScheduleBackend for RustSchedule {
    fn validate(&self, plan: &PlanShape, _input: &PcScheduleInput) -> Result<(), CallError> {
        let plan = PcPlan::from_native(plan);
        res(on_schedule!(self, o => o.validate(&plan)))
    }
    fn step(&self, input: &PcScheduleInput) -> Result<PcScheduleResult, CallError> {
        res(on_schedule!(self, o => o.step(input)))
    }
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, CallError> {
        res(on_schedule!(self, o => o.in_flight(input, stage)))
    }
    fn peak_layers_held(
        &self,
        input: &PcScheduleInput,
        stage: u32,
        chunk_layers: &[f64],
    ) -> Option<Result<f64, CallError>> {
        let chunks = RSlice::from_slice(chunk_layers);
        Some(res(
            on_schedule!(self, o => o.peak_layers_held(input, stage, chunks)),
        ))
    }
    fn properties(&self) -> Result<PcScheduleProperties, CallError> {
        match self {
            RustSchedule::Current(o) => res(o.properties()),
            RustSchedule::V1_2(_) => Ok(PcScheduleProperties::default()),
        }
    }
}

/// A Rust plugin's recompute policy.
pub(crate) struct RustRecompute(pub(crate) FfiRecomputePolicyBox);

impl RecomputeBackend for RustRecompute {
    fn plan(
        &self,
        act: &PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    ) -> Result<PcRecomputePlan, CallError> {
        res(self.0.plan(act, layers, recompute_layers))
    }
}
