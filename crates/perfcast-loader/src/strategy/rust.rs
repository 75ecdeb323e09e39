//! Rust parallel strategies (Rust ABI 1.2; declared axes 1.4): a library's
//! `FfiParallelStrategy` as a `StrategyBackend`, behind the same checked `ForeignStrategy` as
//! a C library's (the module above). A library of the frozen 1.3 layout declares no axes and
//! is handed the plan's 1.4 prefix.

use super::StrategyBackend;
use crate::call::CallError;
use crate::rust_plugin::res;
use abi_stable::std_types::{RSliceMut, RVec};
use perfcast_abi::rust_abi::v1_3;
use perfcast_abi::strategy::{
    PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlanAxes, PcStateSplit,
};
use perfcast_abi::FfiParallelStrategyBox;

/// A Rust plugin's parallel strategy: of the current layout, or of the frozen 1.3 one (the
/// 1.2 trait: no declared axes, the plan's 1.4 prefix).
pub(crate) enum RustStrategy {
    Current(FfiParallelStrategyBox),
    V1_3(v1_3::FfiParallelStrategyBox),
}

impl StrategyBackend for RustStrategy {
    fn axis(&self) -> Result<u32, CallError> {
        res(match self {
            RustStrategy::Current(o) => o.axis(),
            RustStrategy::V1_3(o) => o.axis(),
        })
    }
    fn axes(&self) -> Result<Vec<PcAxisDecl>, CallError> {
        match self {
            RustStrategy::Current(o) => res(o.axes()).map(RVec::into_vec),
            RustStrategy::V1_3(_) => Ok(Vec::new()),
        }
    }
    fn validate(&self, model: &PcModel, plan: &PcPlanAxes) -> Result<(), CallError> {
        res(match self {
            RustStrategy::Current(o) => o.validate_axes(model, plan),
            RustStrategy::V1_3(o) => o.validate(model, &plan.plan),
        })
    }
    fn split_layer(
        &self,
        plan: &PcPlanAxes,
        split: PcLayerSplit,
    ) -> Result<PcLayerSplit, CallError> {
        res(match self {
            RustStrategy::Current(o) => o.split_layer_axes(plan, split),
            RustStrategy::V1_3(o) => o.split_layer(&plan.plan, split),
        })
    }
    fn split_state(
        &self,
        plan: &PcPlanAxes,
        split: PcStateSplit,
    ) -> Result<PcStateSplit, CallError> {
        res(match self {
            RustStrategy::Current(o) => o.split_state_axes(plan, split),
            RustStrategy::V1_3(o) => o.split_state(&plan.plan, split),
        })
    }
    fn comms(
        &self,
        plan: &PcPlanAxes,
        dims: &PcLayerDims,
        out: &mut [PcCommOp],
    ) -> Result<u32, CallError> {
        let out = RSliceMut::from_mut_slice(out);
        res(match self {
            RustStrategy::Current(o) => o.comms_axes(plan, dims, out),
            RustStrategy::V1_3(o) => o.comms(&plan.plan, dims, out),
        })
    }
}
