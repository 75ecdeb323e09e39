//! The host's proxies for the execution categories and topologies in a child (a parallel
//! strategy's is its category's, `crate::strategy::isolate`, on this module's [`Proxy`]): each call goes
//! over the connection once per distinct question (their answers depend on the call's data
//! only, so each is kept by the call's JSON: a search asks the same plans' questions again
//! and again), and the answers go through the same checked adapters as an in-process
//! library's (`ForeignStrategy`, `ForeignSchedule`, `ForeignRecompute`, `ForeignTopology`).

use super::protocol::{Answer, Call};
use super::Connection;
use crate::adapter::CallError;
use crate::execution::{RecomputeBackend, ScheduleBackend};
use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_abi::strategy::PcPlan;
use perfcast_core::parallel::PlanShape;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One component in the child, and the answers it gave.
pub(crate) struct Proxy {
    conn: Arc<Connection>,
    pub(crate) handle: usize,
    answers: Mutex<HashMap<String, Result<Answer, CallError>>>,
}

impl Proxy {
    pub(super) fn new(conn: &Arc<Connection>, handle: usize) -> Self {
        Proxy {
            conn: conn.clone(),
            handle,
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// The answer to `call` (named `what` in messages), asked once.
    pub(crate) fn ask(&self, what: &str, call: Call) -> Result<Answer, CallError> {
        let key = serde_json::to_string(&call).unwrap_or_default();
        if let Some(v) = self.answers.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return v;
        }
        let v = self.conn.call(what, call);
        if let Ok(mut c) = self.answers.lock() {
            c.insert(key, v.clone());
        }
        v
    }

    pub(crate) fn other(&self, what: &str) -> CallError {
        self.conn
            .fail(format!("answered `{what}` with another kind of answer"))
    }

    pub(crate) fn number(&self, what: &str, call: Call) -> Result<f64, CallError> {
        match self.ask(what, call)? {
            Answer::Number(x) => Ok(x),
            _ => Err(self.other(what)),
        }
    }

    pub(crate) fn done(&self, what: &str, call: Call) -> Result<(), CallError> {
        match self.ask(what, call)? {
            Answer::Done => Ok(()),
            _ => Err(self.other(what)),
        }
    }
}

/// A pipeline schedule in the child, with the properties it declared when it was built.
pub(super) struct IsoSchedule(pub(super) Proxy, pub(super) PcScheduleProperties);

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
pub(super) struct IsoRecompute(pub(super) Proxy);

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
