//! Rust pipeline schedules and recompute policies (Rust ABI 1.2; a schedule's `properties`
//! 1.3): a library's `FfiPipelineSchedule` and `FfiRecomputePolicy` as backends of the same
//! checked adapters as a C library's (the module above).

use super::{RecomputeBackend, ScheduleBackend};
use crate::call::CallError;
use crate::rust_plugin::res;
use abi_stable::std_types::RSlice;
use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_abi::rust_abi::{FfiPipelineScheduleBox, FfiRecomputePolicyBox};
use perfcast_abi::strategy::PcPlan;
use perfcast_core::parallel::PlanShape;

/// A Rust plugin's pipeline schedule (the current layout's, which the frozen 1.3 root module
/// hands out too).
pub(crate) struct RustSchedule(pub(crate) FfiPipelineScheduleBox);

impl ScheduleBackend for RustSchedule {
    fn validate(&self, plan: &PlanShape, _input: &PcScheduleInput) -> Result<(), CallError> {
        res(self.0.validate(&PcPlan::from_native(plan)))
    }
    fn step(&self, input: &PcScheduleInput) -> Result<PcScheduleResult, CallError> {
        res(self.0.step(input))
    }
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, CallError> {
        res(self.0.in_flight(input, stage))
    }
    fn peak_layers_held(
        &self,
        input: &PcScheduleInput,
        stage: u32,
        chunk_layers: &[f64],
    ) -> Option<Result<f64, CallError>> {
        let chunks = RSlice::from_slice(chunk_layers);
        Some(res(self.0.peak_layers_held(input, stage, chunks)))
    }
    fn properties(&self) -> Result<PcScheduleProperties, CallError> {
        res(self.0.properties())
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
