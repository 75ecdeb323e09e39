//! Topologies in a plugin host (`--isolate`): the host's proxy, whose every call goes over
//! the connection once per distinct question and whose answers go through the same checked
//! `ForeignTopology` as an in-process library's, and the child's answers to those calls.

use super::TopologyBackend;
use crate::call::CallError;
use crate::isolate::child::failed;
use crate::isolate::protocol::{Answer, Call, WireError};
use crate::isolate::proxies::Proxy;
use abi_stable::std_types::RSlice;
use perfcast_abi::codes;
use perfcast_abi::rust_abi::{
    FfiCollectiveCost, FfiCostItem, FfiGroupAxis, FfiLevel, FfiLinkClass, FfiLinkLoad,
    FfiNetworkCost,
};
use perfcast_abi::sdk;
use perfcast_core::topology::{GroupAxis, GroupPlacement};
use perfcast_core::{Bytes, Component};

/// A topology in the child.
pub(crate) struct IsoTopology(pub(crate) Proxy);

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

/// The child's side: the calls of a topology answered, the host's levels rebuilt as views of
/// their numbers (the last category asked: another call is one this host does not serve).
pub(crate) fn answer(handles: &[Component], call: Call) -> Result<Answer, WireError> {
    let topology = |h: usize| match handles.get(h) {
        Some(Component::Topology(t)) => Ok(t.clone()),
        _ => Err(failed(format!("component {h} is not a topology"))),
    };
    let plugin = |e: perfcast_core::PluginError| match e {
        perfcast_core::PluginError::Failed { message, .. } => failed(message),
        other => failed(other.to_string()),
    };
    let views = |l: &[FfiLevel]| sdk::levels(RSlice::from_slice(l));
    match call {
        Call::TopologyCheck {
            handle,
            levels,
            devices,
        } => topology(handle)?
            .check(&views(&levels), devices)
            .map(|()| Answer::Done)
            .map_err(plugin),
        Call::TopologyLinks {
            handle,
            levels,
            devices,
        } => topology(handle)?
            .links(&views(&levels), devices)
            .map(Answer::Links)
            .map_err(plugin),
        Call::TopologyCost {
            handle,
            levels,
            devices,
        } => topology(handle)?
            .cost(&views(&levels), devices)
            .map(Answer::Cost)
            .map_err(plugin),
        Call::TopologyCollective {
            handle,
            levels,
            axes,
            devices,
            kind,
            bytes,
        } => {
            let kind = codes::collective_kind_from_code(kind)
                .ok_or_else(|| failed(format!("unknown collective kind code {kind}")))?;
            let axes: Vec<GroupAxis> = axes
                .iter()
                .map(|a| GroupAxis {
                    degree: a.degree,
                    stride: a.stride,
                })
                .collect();
            let g = GroupPlacement::new(&axes, devices).map_err(plugin)?;
            let c = topology(handle)?
                .collective(&views(&levels), &g, kind, Bytes(bytes))
                .map_err(plugin)?;
            Ok(Answer::CollectiveCost {
                time: c.time.0,
                loads: c.loads.as_slice().to_vec(),
            })
        }
        _ => Err(failed("a call this plugin host does not serve".into())),
    }
}
