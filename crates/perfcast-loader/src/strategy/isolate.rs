//! Parallel strategies in a plugin host (`--isolate`): the host's proxy, whose every call
//! goes over the connection once per distinct question and whose answers go through the same
//! checked `ForeignStrategy` as an in-process library's, and the child's answers to those
//! calls.

use super::StrategyBackend;
use crate::call::CallError;
use crate::isolate::child::{failed, model_failed};
use crate::isolate::protocol::{Answer, Call, WireError};
use crate::isolate::proxies::Proxy;
use perfcast_abi::strategy::{
    PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlanAxes, PcStateSplit,
};
use perfcast_core::parallel::{CommList, ParallelStrategy};
use perfcast_core::Component;
use std::sync::Arc;

/// A parallel strategy in the child.
pub(crate) struct IsoStrategy {
    proxy: Proxy,
    axis: u32,
    axes: Vec<PcAxisDecl>,
}

impl IsoStrategy {
    pub(crate) fn new(proxy: Proxy, axis: u32, axes: Vec<PcAxisDecl>) -> Self {
        IsoStrategy { proxy, axis, axes }
    }
}

impl StrategyBackend for IsoStrategy {
    fn axis(&self) -> Result<u32, CallError> {
        Ok(self.axis)
    }
    fn axes(&self) -> Result<Vec<PcAxisDecl>, CallError> {
        Ok(self.axes.clone())
    }
    fn validate(&self, model: &PcModel, plan: &PcPlanAxes) -> Result<(), CallError> {
        let call = Call::Validate {
            handle: self.proxy.handle,
            model: *model,
            plan: *plan,
        };
        self.proxy.done("validate", call)
    }
    fn split_layer(
        &self,
        plan: &PcPlanAxes,
        split: PcLayerSplit,
    ) -> Result<PcLayerSplit, CallError> {
        let call = Call::SplitLayer {
            handle: self.proxy.handle,
            plan: *plan,
            split,
        };
        match self.proxy.ask("split_layer", call)? {
            Answer::LayerSplit(s) => Ok(s),
            _ => Err(self.proxy.other("split_layer")),
        }
    }
    fn split_state(
        &self,
        plan: &PcPlanAxes,
        split: PcStateSplit,
    ) -> Result<PcStateSplit, CallError> {
        let call = Call::SplitState {
            handle: self.proxy.handle,
            plan: *plan,
            split,
        };
        match self.proxy.ask("split_state", call)? {
            Answer::StateSplit(s) => Ok(s),
            _ => Err(self.proxy.other("split_state")),
        }
    }
    fn comms(
        &self,
        plan: &PcPlanAxes,
        dims: &PcLayerDims,
        out: &mut [PcCommOp],
    ) -> Result<u32, CallError> {
        let call = Call::Comms {
            handle: self.proxy.handle,
            plan: *plan,
            dims: *dims,
            capacity: out.len(),
        };
        match self.proxy.ask("comms", call)? {
            Answer::Comms(ops) => {
                // More than fit is the adapter's to refuse (it sees the count).
                for (slot, op) in out.iter_mut().zip(&ops) {
                    *slot = *op;
                }
                Ok(u32::try_from(ops.len()).unwrap_or(u32::MAX))
            }
            _ => Err(self.proxy.other("comms")),
        }
    }
}

/// The child's side: the calls of a parallel strategy answered (`Ok(Err(call))` hands back
/// a call of another category).
pub(crate) fn answer(handles: &[Component], call: Call) -> Result<Result<Answer, Call>, WireError> {
    let answer = match call {
        Call::Validate {
            handle: h,
            model,
            plan,
        } => {
            let s = strategy(handles, h)?;
            let (m, p) = (
                model.to_native().map_err(failed)?,
                plan.to_native().map_err(failed)?,
            );
            s.validate(&m, &p)
                .map(|()| Answer::Done)
                .map_err(model_failed)
        }
        Call::SplitLayer {
            handle: h,
            plan,
            split,
        } => {
            let s = strategy(handles, h)?;
            let mut x = split.to_native();
            s.split_layer(&plan.to_native().map_err(failed)?, &mut x)
                .map_err(model_failed)?;
            Ok(Answer::LayerSplit(PcLayerSplit::from_native(&x)))
        }
        Call::SplitState {
            handle: h,
            plan,
            split,
        } => {
            let s = strategy(handles, h)?;
            let mut x = split.to_native();
            s.split_state(&plan.to_native().map_err(failed)?, &mut x)
                .map_err(model_failed)?;
            Ok(Answer::StateSplit(PcStateSplit::from_native(&x)))
        }
        Call::Comms {
            handle: h,
            plan,
            dims,
            capacity,
        } => {
            let s = strategy(handles, h)?;
            let mut list = CommList::default();
            let (p, d) = (
                plan.to_native().map_err(failed)?,
                dims.to_native().map_err(failed)?,
            );
            s.comms(&p, &d, &mut list).map_err(model_failed)?;
            if list.len() > capacity {
                return Err(failed(format!(
                    "{} collectives do not fit the host's array of {capacity}",
                    list.len()
                )));
            }
            Ok(Answer::Comms(
                list.iter().map(PcCommOp::from_native).collect(),
            ))
        }
        other => return Ok(Err(other)),
    };
    answer.map(Ok)
}

/// The parallel strategy under handle `h`.
fn strategy(handles: &[Component], h: usize) -> Result<Arc<dyn ParallelStrategy>, WireError> {
    match handles.get(h) {
        Some(Component::ParallelStrategy(s)) => Ok(s.clone()),
        Some(_) => Err(failed(format!("component {h} is not a parallel strategy"))),
        None => Err(failed(format!("no component {h}"))),
    }
}
