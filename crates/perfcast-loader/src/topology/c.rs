//! C network topologies (C ABI 1.5): the vtable's calls as a `TopologyBackend`, behind the
//! same checked `ForeignTopology` as a Rust library's (the module above). A C topology has no
//! bill of materials (`cost` is `None`).

use super::{ForeignTopology, TopologyBackend};
use crate::c_plugin::raw::{call, Instance};
use crate::c_plugin::CCategory;
use crate::call::CallError;
use perfcast_abi::c::{
    v1_5, PcGroupAxis, PcLevel, PcLinkClass, PcLinkLoad, PcTopologyCollective, PcTopologyVtable,
};
use perfcast_abi::rust_abi::{
    FfiCollectiveCost, FfiGroupAxis, FfiLevel, FfiLinkClass, FfiLinkLoad, FfiNetworkCost,
};
use perfcast_core::topology::MAX_LINK_LOADS;
use perfcast_core::{Component, PluginError};
use std::sync::Arc;

/// Most link classes a C topology may declare.
const MAX_LINK_CLASSES: usize = 64;

/// A topology's vtable is checked for the 1.5 layout and `collective`.
impl CCategory for CTopology {
    type Vtable = PcTopologyVtable;
    type Checked = (PcTopologyVtable, PcTopologyCollective);
    const WHAT: &'static str = "topology";
    const SINCE: &'static str = "1.5";
    fn min_size() -> usize {
        v1_5::topology_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        vt.collective.map(|c| (vt, c)).ok_or("collective")
    }
    fn build(
        name: &str,
        inst: Instance,
        (vt, collective): Self::Checked,
    ) -> Result<Component, PluginError> {
        let backend = CTopology {
            inst,
            vt,
            collective,
        };
        Ok(Component::Topology(Arc::new(ForeignTopology::new(
            name,
            Box::new(backend),
        ))))
    }
}

pub(crate) struct CTopology {
    inst: Instance,
    vt: PcTopologyVtable,
    collective: PcTopologyCollective,
}

fn pc_levels(levels: &[FfiLevel]) -> Vec<PcLevel> {
    levels
        .iter()
        .map(|l| PcLevel {
            struct_size: size_of::<PcLevel>() as u32,
            domain_size: l.domain_size,
            bandwidth: l.bandwidth,
            latency: l.latency,
            overhead: l.overhead,
        })
        .collect()
}

impl TopologyBackend for CTopology {
    fn check(&self, levels: &[FfiLevel], devices: u64) -> Result<(), CallError> {
        let Some(f) = self.vt.check else {
            return Ok(());
        };
        let l = pc_levels(levels);
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, cap| unsafe { f(self.inst.this, l.as_ptr(), l.len(), devices, e, cap) })
    }
    fn links(&self, levels: &[FfiLevel], devices: u64) -> Result<Vec<FfiLinkClass>, CallError> {
        let Some(f) = self.vt.links else {
            return Ok(Vec::new());
        };
        let l = pc_levels(levels);
        let mut out = [PcLinkClass::default(); MAX_LINK_CLASSES];
        let mut n = 0usize;
        // SAFETY: as above; `out` holds MAX_LINK_CLASSES entries.
        call(|e, cap| unsafe {
            f(
                self.inst.this,
                l.as_ptr(),
                l.len(),
                devices,
                out.as_mut_ptr(),
                out.len(),
                &mut n,
                e,
                cap,
            )
        })?;
        if n > out.len() {
            return Err(crate::c_plugin::raw::too_many("link classes", n, out.len()));
        }
        Ok(out[..n]
            .iter()
            .map(|c| {
                let bytes: Vec<u8> = c
                    .name
                    .iter()
                    .take_while(|b| **b != 0)
                    .map(|b| *b as u8)
                    .collect();
                FfiLinkClass {
                    name: String::from_utf8_lossy(&bytes).into_owned().into(),
                    count: c.count,
                    bandwidth: c.bandwidth,
                }
            })
            .collect())
    }
    fn cost(
        &self,
        _levels: &[FfiLevel],
        _devices: u64,
    ) -> Result<Option<FfiNetworkCost>, CallError> {
        Ok(None)
    }
    fn collective(
        &self,
        levels: &[FfiLevel],
        axes: &[FfiGroupAxis],
        devices: u64,
        kind: u32,
        bytes: f64,
    ) -> Result<FfiCollectiveCost, CallError> {
        let l = pc_levels(levels);
        let a: Vec<PcGroupAxis> = axes
            .iter()
            .map(|x| PcGroupAxis {
                degree: x.degree,
                stride: x.stride,
            })
            .collect();
        let mut time = f64::NAN;
        let mut loads = [PcLinkLoad::default(); MAX_LINK_LOADS];
        let mut n = 0usize;
        // SAFETY: as above; `loads` holds MAX_LINK_LOADS entries.
        call(|e, cap| unsafe {
            (self.collective)(
                self.inst.this,
                l.as_ptr(),
                l.len(),
                a.as_ptr(),
                a.len(),
                devices,
                kind,
                bytes,
                &mut time,
                loads.as_mut_ptr(),
                loads.len(),
                &mut n,
                e,
                cap,
            )
        })?;
        if n > loads.len() {
            return Err(crate::c_plugin::raw::too_many("link loads", n, loads.len()));
        }
        Ok(FfiCollectiveCost {
            time,
            loads: loads[..n]
                .iter()
                .map(|x| FfiLinkLoad {
                    class: x.klass,
                    links: x.links,
                    busy: x.busy,
                })
                .collect(),
        })
    }
}
