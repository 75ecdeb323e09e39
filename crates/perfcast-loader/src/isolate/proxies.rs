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
use crate::topology::TopologyBackend;
use perfcast_abi::c::{
    PcLayerActivations, PcRecomputePlan, PcScheduleInput, PcScheduleProperties, PcScheduleResult,
};
use perfcast_abi::rust_abi::{
    FfiCollectiveCost, FfiCostItem, FfiGroupAxis, FfiLevel, FfiLinkClass, FfiLinkLoad,
    FfiNetworkCost,
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

    fn number(&self, what: &str, call: Call) -> Result<f64, CallError> {
        match self.ask(what, call)? {
            Answer::Number(x) => Ok(x),
            _ => Err(self.other(what)),
        }
    }

    fn done(&self, what: &str, call: Call) -> Result<(), CallError> {
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

/// A topology in the child.
pub(super) struct IsoTopology(pub(super) Proxy);

impl TopologyBackend for IsoTopology {
    fn check(&self, levels: &[FfiLevel], devices: u64) -> Result<(), CallError> {
        let call = Call::TopologyCheck {
            handle: self.0.handle,
            levels: levels.to_vec(),
            devices,
        };
        self.0.done("check", call)
    }
    fn links(&self, levels: &[FfiLevel], devices: u64) -> Result<Vec<FfiLinkClass>, CallError> {
        let call = Call::TopologyLinks {
            handle: self.0.handle,
            levels: levels.to_vec(),
            devices,
        };
        match self.0.ask("links", call)? {
            Answer::Links(v) => Ok(v
                .into_iter()
                .map(|c| FfiLinkClass {
                    name: c.name.into(),
                    count: c.count,
                    bandwidth: c.bandwidth.0,
                })
                .collect()),
            _ => Err(self.0.other("links")),
        }
    }
    fn cost(&self, levels: &[FfiLevel], devices: u64) -> Result<Option<FfiNetworkCost>, CallError> {
        let call = Call::TopologyCost {
            handle: self.0.handle,
            levels: levels.to_vec(),
            devices,
        };
        match self.0.ask("cost", call)? {
            Answer::Cost(c) => Ok(c.map(|c| FfiNetworkCost {
                switches: c.switches,
                switch_ports: c.switch_ports,
                optics: c.optics,
                items: c
                    .items
                    .into_iter()
                    .map(|i| FfiCostItem {
                        item: i.item.into(),
                        count: i.count,
                        unit_usd: i.unit_usd,
                    })
                    .collect(),
            })),
            _ => Err(self.0.other("cost")),
        }
    }
    fn collective(
        &self,
        levels: &[FfiLevel],
        axes: &[FfiGroupAxis],
        devices: u64,
        kind: u32,
        bytes: f64,
    ) -> Result<FfiCollectiveCost, CallError> {
        let call = Call::TopologyCollective {
            handle: self.0.handle,
            levels: levels.to_vec(),
            axes: axes.to_vec(),
            devices,
            kind,
            bytes,
        };
        match self.0.ask("collective", call)? {
            Answer::CollectiveCost { time, loads } => Ok(FfiCollectiveCost {
                time,
                loads: loads
                    .iter()
                    .map(|l| FfiLinkLoad {
                        class: l.class,
                        links: l.links,
                        busy: l.busy.0,
                    })
                    .collect(),
            }),
            _ => Err(self.0.other("collective")),
        }
    }
}
