//! The SDK's side of the execution categories (Rust ABI 1.2; declared axes 1.4): a native parallel strategy,
//! pipeline schedule or recompute policy behind its FFI trait, every call guarded.

use super::{guard, model_error, parse_params, plugin_error};
use crate::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use crate::rust_abi::*;
use crate::strategy::{
    axis_code, PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlan, PcPlanAxes,
    PcStateSplit,
};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RSlice, RSliceMut, RVec};
use perfcast_core::parallel::{CommList, ParallelStrategy, PipelineSchedule, RecomputePolicy};
use perfcast_core::PluginError;
use serde::de::DeserializeOwned;

pub fn build_parallel_strategy<P, T, F>(
    build: F,
    params_json: &str,
) -> Result<FfiParallelStrategyBox, FfiError>
where
    P: DeserializeOwned,
    T: ParallelStrategy + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let s = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiParallelStrategy_TO::from_value(
        SdkStrategy(s),
        TD_Opaque,
    ))
}

fn decoded<T>(r: Result<T, String>, what: &str) -> Result<T, FfiError> {
    r.map_err(|e| FfiError::failed(format!("the host's {what}: {e}")))
}

struct SdkStrategy<T>(T);

impl<T: ParallelStrategy> SdkStrategy<T> {
    /// The 1.2 plan as the 1.4 one without declared axes.
    fn widened(plan: &PcPlan) -> PcPlanAxes {
        PcPlanAxes {
            plan: *plan,
            ..PcPlanAxes::default()
        }
    }
}

impl<T: ParallelStrategy + 'static> FfiParallelStrategy for SdkStrategy<T> {
    fn axis(&self) -> RResult<u32, FfiError> {
        guard(|| Ok(axis_code(self.0.axis())))
    }
    fn validate(&self, model: &PcModel, plan: &PcPlan) -> RResult<(), FfiError> {
        self.validate_axes(model, &Self::widened(plan))
    }
    fn split_layer(&self, plan: &PcPlan, split: PcLayerSplit) -> RResult<PcLayerSplit, FfiError> {
        self.split_layer_axes(&Self::widened(plan), split)
    }
    fn split_state(&self, plan: &PcPlan, split: PcStateSplit) -> RResult<PcStateSplit, FfiError> {
        self.split_state_axes(&Self::widened(plan), split)
    }
    fn comms(
        &self,
        plan: &PcPlan,
        dims: &PcLayerDims,
        out: RSliceMut<'_, PcCommOp>,
    ) -> RResult<u32, FfiError> {
        self.comms_axes(&Self::widened(plan), dims, out)
    }
    fn axes(&self) -> RResult<RVec<PcAxisDecl>, FfiError> {
        guard(|| {
            self.0
                .axes()
                .iter()
                .map(|d| PcAxisDecl::from_native(d).map_err(FfiError::failed))
                .collect()
        })
    }
    fn validate_axes(&self, model: &PcModel, plan: &PcPlanAxes) -> RResult<(), FfiError> {
        guard(|| {
            let m = decoded(model.to_native(), "model")?;
            let p = decoded(plan.to_native(), "plan")?;
            self.0.validate(&m, &p).map_err(model_error)
        })
    }
    fn split_layer_axes(
        &self,
        plan: &PcPlanAxes,
        split: PcLayerSplit,
    ) -> RResult<PcLayerSplit, FfiError> {
        guard(|| {
            let p = decoded(plan.to_native(), "plan")?;
            let mut s = split.to_native();
            self.0.split_layer(&p, &mut s).map_err(model_error)?;
            Ok(PcLayerSplit::from_native(&s))
        })
    }
    fn split_state_axes(
        &self,
        plan: &PcPlanAxes,
        split: PcStateSplit,
    ) -> RResult<PcStateSplit, FfiError> {
        guard(|| {
            let p = decoded(plan.to_native(), "plan")?;
            let mut s = split.to_native();
            self.0.split_state(&p, &mut s).map_err(model_error)?;
            Ok(PcStateSplit::from_native(&s))
        })
    }
    fn comms_axes(
        &self,
        plan: &PcPlanAxes,
        dims: &PcLayerDims,
        mut out: RSliceMut<'_, PcCommOp>,
    ) -> RResult<u32, FfiError> {
        guard(|| {
            let p = decoded(plan.to_native(), "plan")?;
            let d = decoded(dims.to_native(), "layer dimensions")?;
            let mut list = CommList::default();
            self.0.comms(&p, &d, &mut list).map_err(model_error)?;
            if list.len() > out.len() {
                return Err(FfiError::failed(format!(
                    "{} collectives do not fit the host's array of {}",
                    list.len(),
                    out.len()
                )));
            }
            for (slot, op) in out.iter_mut().zip(list.iter()) {
                *slot = PcCommOp::from_native(op);
            }
            Ok(list.len() as u32)
        })
    }
}

pub fn build_pipeline_schedule<P, T, F>(
    build: F,
    params_json: &str,
) -> Result<FfiPipelineScheduleBox, FfiError>
where
    P: DeserializeOwned,
    T: PipelineSchedule + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let s = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiPipelineSchedule_TO::from_value(
        SdkSchedule(s),
        TD_Opaque,
    ))
}

pub fn build_recompute_policy<P, T, F>(
    build: F,
    params_json: &str,
) -> Result<FfiRecomputePolicyBox, FfiError>
where
    P: DeserializeOwned,
    T: RecomputePolicy + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let s = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiRecomputePolicy_TO::from_value(
        SdkRecompute(s),
        TD_Opaque,
    ))
}

struct SdkSchedule<T>(T);

impl<T: PipelineSchedule + 'static> FfiPipelineSchedule for SdkSchedule<T> {
    fn validate(&self, plan: &PcPlan) -> RResult<(), FfiError> {
        guard(|| {
            let p = decoded(plan.to_native(), "plan")?;
            self.0.validate(&p).map_err(model_error)
        })
    }
    fn step(&self, input: &PcScheduleInput) -> RResult<PcScheduleResult, FfiError> {
        guard(|| {
            let r = self.0.step(&input.to_native()).map_err(model_error)?;
            Ok(PcScheduleResult::from_native(&r))
        })
    }
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> RResult<f64, FfiError> {
        guard(|| Ok(self.0.in_flight(&input.to_native(), stage)))
    }
    fn peak_layers_held(
        &self,
        input: &PcScheduleInput,
        stage: u32,
        chunk_layers: RSlice<'_, f64>,
    ) -> RResult<f64, FfiError> {
        guard(|| {
            let chunks = |c: u32| chunk_layers.get(c as usize).copied().unwrap_or(0.0);
            Ok(self.0.peak_layers_held(&input.to_native(), stage, &chunks))
        })
    }
    fn properties(&self) -> RResult<PcScheduleProperties, FfiError> {
        guard(|| {
            Ok(PcScheduleProperties {
                model_copies: self.0.model_copies(),
                overlaps_expert_comm: self.0.overlaps_expert_comm() as u32,
                ..Default::default()
            })
        })
    }
}

struct SdkRecompute<T>(T);

impl<T: RecomputePolicy + 'static> FfiRecomputePolicy for SdkRecompute<T> {
    fn plan(
        &self,
        act: &PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    ) -> RResult<PcRecomputePlan, FfiError> {
        guard(|| {
            let given = (recompute_layers != 0).then_some(recompute_layers);
            let p = self
                .0
                .plan(&act.to_native(), layers, given)
                .map_err(model_error)?;
            Ok(PcRecomputePlan::from_native(&p))
        })
    }
}
