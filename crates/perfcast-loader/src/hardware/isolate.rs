//! Compute units, memory tiers and interconnects in a plugin host (`--isolate`): the host's
//! proxies (a unit's peaks, launch overhead and GEMM tile, a tier's and a link's properties
//! come once, with the build; each other question goes over the connection once) behind the
//! same checked adapters as an in-process library's, and the child's answers to their calls.

use super::{ComputeBackend, LinkBackend, TierData};
use crate::call::CallError;
use crate::isolate::child::failed;
use crate::isolate::protocol::{Answer, Call, WireError, WireTier};
use crate::isolate::proxies::Proxy;
use perfcast_abi::codes;
use perfcast_abi::{PcOp, PcOpTime};
use perfcast_core::{Bytes, Collective, Component, MemoryHierarchy, MemoryTier};
use std::sync::Arc;

/// A compute unit in the child, with what it answered when it was built.
pub(crate) struct IsoCompute {
    proxy: Proxy,
    peaks: Vec<(u32, u32, f64)>,
    launch: f64,
    tile: u64,
}

impl IsoCompute {
    pub(crate) fn new(proxy: Proxy, peaks: Vec<(u32, u32, f64)>, launch: f64, tile: u64) -> Self {
        IsoCompute {
            proxy,
            peaks,
            launch,
            tile,
        }
    }
}

impl ComputeBackend for IsoCompute {
    fn peak(&self, engine: u32, dtype: u32) -> Result<Option<f64>, CallError> {
        Ok(self
            .peaks
            .iter()
            .find(|(e, d, _)| *e == engine && *d == dtype)
            .map(|p| p.2))
    }
    fn efficiency(&self, op: &PcOp) -> Result<f64, CallError> {
        let op = op.to_native().map_err(|m| self.proxy.fail(m))?;
        let call = Call::Efficiency {
            handle: self.proxy.handle,
            op,
        };
        self.proxy.number("efficiency", call)
    }
    fn launch_overhead(&self) -> Result<f64, CallError> {
        Ok(self.launch)
    }
    fn gemm_tile(&self) -> Result<u64, CallError> {
        Ok(self.tile)
    }
    fn op_time(&self, op: &PcOp, tiers: &[TierData<'_>]) -> Option<Result<PcOpTime, CallError>> {
        let op = match op.to_native() {
            Ok(o) => o,
            Err(m) => return Some(Err(self.proxy.fail(m))),
        };
        let tiers: Vec<(String, WireTier)> = tiers
            .iter()
            .map(|t| (t.kind.to_string(), t.props.into()))
            .collect();
        let call = Call::OpTime {
            handle: self.proxy.handle,
            op,
            tiers,
        };
        Some(match self.proxy.ask("op_time", call) {
            Ok(Answer::OpTime(t)) => Ok(PcOpTime::from_native(&t)),
            Ok(_) => Err(self.proxy.other("op_time")),
            Err(e) => Err(e),
        })
    }
}

/// An interconnect in the child (its properties came with the build).
pub(crate) struct IsoLink(pub(crate) Proxy);

impl LinkBackend for IsoLink {
    fn collective_time(
        &self,
        kind: u32,
        bytes: f64,
        ranks: u32,
        algorithm: u32,
    ) -> Result<f64, CallError> {
        let bad = |what: &str| self.0.fail(format!("unknown {what} code"));
        let collective = Collective {
            kind: codes::collective_kind_from_code(kind).ok_or_else(|| bad("collective"))?,
            bytes: Bytes(bytes),
            ranks,
        };
        let algorithm = codes::algorithm_from_code(algorithm).ok_or_else(|| bad("algorithm"))?;
        let call = Call::CollectiveTime {
            handle: self.0.handle,
            collective,
            algorithm,
        };
        self.0.number("collective_time", call)
    }
}

/// The component under handle `h`.
fn component(handles: &[Component], h: usize) -> Result<Component, WireError> {
    handles
        .get(h)
        .cloned()
        .ok_or_else(|| failed(format!("no component {h}")))
}

/// The child's side: the calls of a compute unit or an interconnect answered (`Ok(Err(call))`
/// hands back a call of another category).
pub(crate) fn answer(handles: &[Component], call: Call) -> Result<Result<Answer, Call>, WireError> {
    let answer = match call {
        Call::Efficiency { handle: h, op } => match component(handles, h)? {
            Component::ComputeUnit(u) => Ok(Answer::Number(u.efficiency(&op))),
            _ => Err(failed(format!("component {h} is not a compute unit"))),
        },
        Call::OpTime {
            handle: h,
            op,
            tiers,
        } => match component(handles, h)? {
            Component::ComputeUnit(u) => {
                let tiers: Vec<Arc<dyn MemoryTier>> = tiers
                    .into_iter()
                    .filter_map(|(kind, p)| {
                        let level = codes::tier_level_from_code(p.level)?;
                        Some(
                            Arc::new(perfcast_abi::PropsTier::new(kind, level, p.into(), None))
                                as Arc<dyn MemoryTier>,
                        )
                    })
                    .collect();
                u.op_time(&op, &MemoryHierarchy::new(tiers))
                    .map(Answer::OpTime)
                    .map_err(|e| failed(e.to_string()))
            }
            _ => Err(failed(format!("component {h} is not a compute unit"))),
        },
        Call::CollectiveTime {
            handle: h,
            collective,
            algorithm,
        } => match component(handles, h)? {
            Component::Interconnect(l) => l
                .try_collective_time(&collective, algorithm)
                .map(|s| Answer::Number(s.0))
                .map_err(|e| failed(e.to_string())),
            _ => Err(failed(format!("component {h} is not an interconnect"))),
        },
        other => return Ok(Err(other)),
    };
    answer.map(Ok)
}
