//! A foreign topology (Rust ABI 1.1) as a native `perfcast_core::Topology`: the host's levels
//! and the group go over as data, and every value that comes back is checked: times and busy
//! times finite and >= 0, link counts and bandwidths finite and > 0, costs finite and >= 0.
//! A plugin's error keeps its own message, under the component's name.
//!
//! The category's whole boundary is in this module: the checked adapter (here), fed by one
//! backend per way in, `c` (the C ABI's vtable, 1.5), `rust` (the abi_stable trait object,
//! 1.1) and `isolate` (the plugin host's proxy, and the child's answers to its calls).

use crate::call::CallError;
use perfcast_abi::codes;
use perfcast_abi::rust_abi::{
    FfiCollectiveCost, FfiGroupAxis, FfiLevel, FfiLinkClass, FfiNetworkCost,
};
use perfcast_abi::sdk::level_data;
use perfcast_core::op::CollectiveKind;
use perfcast_core::topology::{
    CollectiveCost, CostItem, GroupPlacement, LinkClass, LinkLoad, LinkLoads, NetworkCost,
};
use perfcast_core::{Bandwidth, Bytes, Interconnect, PluginError, Seconds, Topology};
use std::sync::Arc;

/// The calls a foreign topology answers.
pub(crate) trait TopologyBackend: Send + Sync {
    fn check(&self, levels: &[FfiLevel], devices: u64) -> Result<(), CallError>;
    fn links(&self, levels: &[FfiLevel], devices: u64) -> Result<Vec<FfiLinkClass>, CallError>;
    fn cost(&self, levels: &[FfiLevel], devices: u64) -> Result<Option<FfiNetworkCost>, CallError>;
    fn collective(
        &self,
        levels: &[FfiLevel],
        axes: &[FfiGroupAxis],
        devices: u64,
        kind: u32,
        bytes: f64,
    ) -> Result<FfiCollectiveCost, CallError>;
}

/// A foreign topology.
pub(crate) struct ForeignTopology {
    kind: String,
    backend: Box<dyn TopologyBackend>,
}

impl ForeignTopology {
    pub fn new(kind: &str, backend: Box<dyn TopologyBackend>) -> Self {
        ForeignTopology {
            kind: kind.to_string(),
            backend,
        }
    }

    fn bad(&self, what: String, value: f64) -> PluginError {
        PluginError::BadValue {
            plugin: self.kind.clone(),
            what,
            value,
        }
    }

    fn check_value(
        &self,
        what: impl Fn() -> String,
        v: f64,
        positive: bool,
    ) -> Result<f64, PluginError> {
        let ok = v.is_finite() && if positive { v > 0.0 } else { v >= 0.0 };
        if ok {
            Ok(v)
        } else {
            Err(self.bad(what(), v))
        }
    }
}

fn levels(network: &[Arc<dyn Interconnect>]) -> Vec<FfiLevel> {
    network.iter().map(|l| level_data(l.as_ref())).collect()
}

impl Topology for ForeignTopology {
    fn kind(&self) -> &str {
        &self.kind
    }

    fn check(&self, network: &[Arc<dyn Interconnect>], devices: u64) -> Result<(), PluginError> {
        self.backend
            .check(&levels(network), devices)
            .map_err(|e| e.into_plugin_error(&self.kind))
    }

    fn links(
        &self,
        network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Vec<LinkClass>, PluginError> {
        let v = self
            .backend
            .links(&levels(network), devices)
            .map_err(|e| e.into_plugin_error(&self.kind))?;
        v.into_iter()
            .map(|c| {
                let name = c.name.to_string();
                let count =
                    self.check_value(|| format!("link count of class `{name}`"), c.count, true)?;
                let bw = self.check_value(
                    || format!("bandwidth of link class `{name}`"),
                    c.bandwidth,
                    true,
                )?;
                Ok(LinkClass {
                    name,
                    count,
                    bandwidth: Bandwidth(bw),
                })
            })
            .collect()
    }

    fn collective(
        &self,
        network: &[Arc<dyn Interconnect>],
        group: &GroupPlacement,
        kind: CollectiveKind,
        bytes: Bytes,
    ) -> Result<CollectiveCost, PluginError> {
        let axes: Vec<FfiGroupAxis> = group
            .axes()
            .iter()
            .map(|a| FfiGroupAxis {
                degree: a.degree,
                stride: a.stride,
            })
            .collect();
        let c = self
            .backend
            .collective(
                &levels(network),
                &axes,
                group.devices(),
                codes::collective_kind_code(kind),
                bytes.0,
            )
            .map_err(|e| e.into_plugin_error(&self.kind))?;
        let what = |field: &str| {
            format!(
                "{field} of a {} of {} B over {} ranks",
                kind.name(),
                bytes.0,
                group.ranks()
            )
        };
        let time = self.check_value(|| what("collective time"), c.time, false)?;
        let mut loads = LinkLoads::default();
        for l in c.loads.iter() {
            loads.push(LinkLoad {
                class: l.class,
                links: self.check_value(|| what("link count of a load"), l.links, false)?,
                busy: Seconds(self.check_value(|| what("busy time of a load"), l.busy, false)?),
            })?;
        }
        Ok(CollectiveCost {
            time: Seconds(time),
            loads,
        })
    }

    fn cost(
        &self,
        network: &[Arc<dyn Interconnect>],
        devices: u64,
    ) -> Result<Option<NetworkCost>, PluginError> {
        let Some(c) = self
            .backend
            .cost(&levels(network), devices)
            .map_err(|e| e.into_plugin_error(&self.kind))?
        else {
            return Ok(None);
        };
        let mut out = NetworkCost {
            switches: self.check_value(|| "switch count".into(), c.switches, false)?,
            switch_ports: self.check_value(|| "switch ports".into(), c.switch_ports, false)?,
            optics: self.check_value(|| "optics".into(), c.optics, false)?,
            items: Vec::new(),
        };
        for i in c.items.iter() {
            let item = i.item.to_string();
            out.items.push(CostItem {
                count: self.check_value(|| format!("count of `{item}`"), i.count, false)?,
                unit_usd: self.check_value(|| format!("price of `{item}`"), i.unit_usd, false)?,
                item,
            });
        }
        Ok(Some(out))
    }
}

pub(crate) mod c;
pub(crate) mod isolate;
pub(crate) mod rust;

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::RVec;

    struct Answer(f64);
    impl TopologyBackend for Answer {
        fn check(&self, _: &[FfiLevel], _: u64) -> Result<(), CallError> {
            Ok(())
        }
        fn links(&self, _: &[FfiLevel], _: u64) -> Result<Vec<FfiLinkClass>, CallError> {
            Ok(vec![FfiLinkClass {
                name: "up".into(),
                count: self.0,
                bandwidth: 1e9,
            }])
        }
        fn cost(&self, _: &[FfiLevel], _: u64) -> Result<Option<FfiNetworkCost>, CallError> {
            Ok(None)
        }
        fn collective(
            &self,
            _: &[FfiLevel],
            _: &[FfiGroupAxis],
            _: u64,
            _: u32,
            _: f64,
        ) -> Result<FfiCollectiveCost, CallError> {
            if self.0 == 0.0 {
                return Err(CallError {
                    code: codes::ERR_FAILED,
                    path: String::new(),
                    message: "no route between rails".into(),
                });
            }
            Ok(FfiCollectiveCost {
                time: self.0,
                loads: RVec::new(),
            })
        }
    }

    fn group() -> GroupPlacement {
        GroupPlacement::new(
            &[perfcast_core::topology::GroupAxis {
                degree: 8,
                stride: 1,
            }],
            8,
        )
        .unwrap()
    }

    /// NaN, infinite and negative answers are errors naming the plugin and what it returned;
    /// the plugin's own message is kept.
    #[test]
    fn answers_are_checked() {
        for v in [f64::NAN, -1.0, f64::INFINITY] {
            let t = ForeignTopology::new("x/net", Box::new(Answer(v)));
            let e = t
                .collective(&[], &group(), CollectiveKind::AllReduce, Bytes(1.0))
                .unwrap_err()
                .to_string();
            assert!(e.contains("x/net") && e.contains("collective time"), "{e}");
            let e = t.links(&[], 8).unwrap_err().to_string();
            assert!(e.contains("x/net") && e.contains("`up`"), "{e}");
        }
        let t = ForeignTopology::new("x/net", Box::new(Answer(0.0)));
        let e = t
            .collective(&[], &group(), CollectiveKind::AllReduce, Bytes(1.0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x/net") && e.contains("no route between rails"),
            "{e}"
        );
        let ok = ForeignTopology::new("x/net", Box::new(Answer(2.0)));
        let c = ok
            .collective(&[], &group(), CollectiveKind::AllReduce, Bytes(1.0))
            .unwrap();
        assert_eq!(c.time, Seconds(2.0));
    }
}
