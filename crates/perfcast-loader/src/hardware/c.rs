//! C compute units, memory tiers and interconnects (C ABI 1.0; interconnects 1.1): the
//! vtables' calls as a `ComputeBackend` and a `LinkBackend` (a tier's properties read once),
//! behind the same checked adapters as a Rust library's (the module above). A function the
//! vtable leaves NULL answers its documented default.

use super::{
    foreign_memory_tier, ComputeBackend, ForeignComputeUnit, ForeignInterconnect, LinkBackend,
    TierData,
};
use crate::c_plugin::raw::{call, Instance};
use crate::c_plugin::CCategory;
use crate::call::CallError;
use perfcast_abi::c::{
    v1_0, v1_1, ErrBuf, PcComputeUnitVtable, PcInterconnectVtable, PcLink, PcMemoryTierVtable,
    PcTier,
};
use perfcast_abi::codes::{self, ERR_UNSUPPORTED};
use perfcast_abi::{LinkProps, PcOp, PcOpTime, TierProps};
use perfcast_core::hardware::collective_time;
use perfcast_core::{Bandwidth, Bytes, Collective, Component, PluginError, Seconds};
use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::sync::Arc;

pub(crate) struct CComputeUnit {
    inst: Instance,
    vt: PcComputeUnitVtable,
}

impl ComputeBackend for CComputeUnit {
    fn peak(&self, engine: u32, dtype: u32) -> Result<Option<f64>, CallError> {
        let Some(f) = self.vt.peak else {
            return Ok(None);
        };
        let mut out = 0.0;
        // SAFETY: function and instance come from the plugin, per the header's contract.
        match call(|e, n| unsafe { f(self.inst.this, engine, dtype, &mut out, e, n) }) {
            Ok(()) => Ok(Some(out)),
            Err(e) if e.code == ERR_UNSUPPORTED => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn efficiency(&self, op: &PcOp) -> Result<f64, CallError> {
        let Some(f) = self.vt.efficiency else {
            return Ok(1.0);
        };
        let mut out = 0.0;
        call(|e, n| unsafe { f(self.inst.this, op, &mut out, e, n) })?;
        Ok(out)
    }
    fn launch_overhead(&self) -> Result<f64, CallError> {
        let Some(f) = self.vt.launch_overhead else {
            return Ok(0.0);
        };
        let mut out = 0.0;
        call(|e, n| unsafe { f(self.inst.this, &mut out, e, n) })?;
        Ok(out)
    }
    fn gemm_tile(&self) -> Result<u64, CallError> {
        // Default: perfcast_core::ComputeUnit::gemm_tile's.
        let Some(f) = self.vt.gemm_tile else {
            return Ok(128);
        };
        let mut out = 0u64;
        call(|e, n| unsafe { f(self.inst.this, &mut out, e, n) })?;
        Ok(out)
    }
    fn op_time(&self, op: &PcOp, tiers: &[TierData<'_>]) -> Option<Result<PcOpTime, CallError>> {
        let f = self.vt.op_time?;
        let names: Vec<CString> = tiers
            .iter()
            .map(|t| CString::new(t.kind.replace('\0', "")).unwrap_or_default())
            .collect();
        let c_tiers: Vec<PcTier> = tiers
            .iter()
            .zip(&names)
            .map(|(t, name)| PcTier {
                struct_size: size_of::<PcTier>() as u32,
                level: t.props.level,
                kind: name.as_ptr(),
                capacity: t.props.capacity,
                bandwidth: t.props.bandwidth,
                efficiency: t.props.efficiency,
                latency: t.props.latency,
            })
            .collect();
        let mut out = PcOpTime {
            struct_size: size_of::<PcOpTime>() as u32,
            ..PcOpTime::default()
        };
        let r = call(|e, n| unsafe {
            f(
                self.inst.this,
                op,
                c_tiers.as_ptr(),
                c_tiers.len(),
                &mut out,
                e,
                n,
            )
        });
        Some(r.map(|()| out))
    }
}

pub(crate) struct CMemoryTier {
    _inst: Instance,
}

pub(crate) struct CInterconnect {
    inst: Instance,
    vt: PcInterconnectVtable,
    props: LinkProps,
}

impl LinkBackend for CInterconnect {
    fn collective_time(
        &self,
        kind: u32,
        bytes: f64,
        ranks: u32,
        algorithm: u32,
    ) -> Result<f64, CallError> {
        let Some(f) = self.vt.collective_time else {
            // Default: perfcast's alpha-beta model over the link's properties.
            let unknown = |what: &str, code: u32| CallError {
                code: ERR_UNSUPPORTED,
                path: String::new(),
                message: format!("unknown {what} code {code}"),
            };
            let c = Collective {
                kind: codes::collective_kind_from_code(kind)
                    .ok_or_else(|| unknown("collective kind", kind))?,
                bytes: Bytes(bytes),
                ranks,
            };
            let alg = codes::algorithm_from_code(algorithm)
                .ok_or_else(|| unknown("collective algorithm", algorithm))?;
            let (bw, lat) = (Bandwidth(self.props.bandwidth), Seconds(self.props.latency));
            return Ok(collective_time(&c, bw, lat, alg).0);
        };
        let mut out = 0.0;
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, n| unsafe {
            f(
                self.inst.this,
                kind,
                bytes,
                ranks,
                algorithm,
                &mut out,
                e,
                n,
            )
        })?;
        Ok(out)
    }
}

/// A compute unit's vtable is checked for the 1.0 layout and a `peak`.
impl CCategory for CComputeUnit {
    type Vtable = PcComputeUnitVtable;
    type Checked = PcComputeUnitVtable;
    const WHAT: &'static str = "compute unit";
    const SINCE: &'static str = "1.0";
    fn min_size() -> usize {
        v1_0::compute_unit_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        vt.peak.map(|_| vt).ok_or("peak")
    }
    fn build(name: &str, inst: Instance, vt: Self::Checked) -> Result<Component, PluginError> {
        let unit = ForeignComputeUnit::new(name, Box::new(CComputeUnit { inst, vt }))?;
        Ok(Component::ComputeUnit(Arc::new(unit)))
    }
}

/// `perfcast_memory_tier_vtable.properties`.
type TierProperties = unsafe extern "C" fn(*const c_void, *mut PcTier, ErrBuf, usize) -> i32;

/// A memory tier's vtable is checked for the 1.0 layout and `properties`, which are read
/// once per instance.
impl CCategory for CMemoryTier {
    type Vtable = PcMemoryTierVtable;
    type Checked = TierProperties;
    const WHAT: &'static str = "memory tier";
    const SINCE: &'static str = "1.0";
    fn min_size() -> usize {
        v1_0::memory_tier_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        vt.properties.ok_or("properties")
    }
    fn build(
        name: &str,
        inst: Instance,
        props_fn: Self::Checked,
    ) -> Result<Component, PluginError> {
        let mut out = PcTier {
            struct_size: size_of::<PcTier>() as u32,
            level: u32::MAX,
            kind: std::ptr::null(),
            capacity: f64::NAN,
            bandwidth: f64::NAN,
            efficiency: f64::NAN,
            latency: f64::NAN,
        };
        // SAFETY: function and instance come from the plugin, per the header's contract.
        let props =
            call(|e, cap| unsafe { props_fn(inst.this, &mut out, e, cap) }).map(|()| TierProps {
                level: out.level,
                capacity: out.capacity,
                bandwidth: out.bandwidth,
                efficiency: out.efficiency,
                latency: out.latency,
            });
        let tier = foreign_memory_tier(name, props, Box::new(CMemoryTier { _inst: inst }))?;
        Ok(Component::MemoryTier(Arc::new(tier)))
    }
}

/// `perfcast_interconnect_vtable.properties`.
type LinkProperties = unsafe extern "C" fn(*const c_void, *mut PcLink, ErrBuf, usize) -> i32;

/// An interconnect's vtable is checked for the 1.1 layout and `properties`, which are read
/// once per instance.
impl CCategory for CInterconnect {
    type Vtable = PcInterconnectVtable;
    type Checked = (PcInterconnectVtable, LinkProperties);
    const WHAT: &'static str = "interconnect";
    const SINCE: &'static str = "1.1";
    fn min_size() -> usize {
        v1_1::interconnect_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        vt.properties.map(|p| (vt, p)).ok_or("properties")
    }
    fn build(
        name: &str,
        inst: Instance,
        (vt, props_fn): Self::Checked,
    ) -> Result<Component, PluginError> {
        let mut out = PcLink {
            struct_size: size_of::<PcLink>() as u32,
            domain_size: 0,
            bandwidth: f64::NAN,
            latency: f64::NAN,
        };
        // SAFETY: function and instance come from the plugin, per the header's contract.
        let props =
            call(|e, cap| unsafe { props_fn(inst.this, &mut out, e, cap) }).map(|()| LinkProps {
                domain_size: out.domain_size,
                bandwidth: out.bandwidth,
                latency: out.latency,
            });
        // Checked by ForeignInterconnect::new before any call.
        let checked = props.as_ref().map(|p| *p).unwrap_or(LinkProps {
            domain_size: 0,
            bandwidth: f64::NAN,
            latency: f64::NAN,
        });
        let backend = CInterconnect {
            inst,
            vt,
            props: checked,
        };
        let link = ForeignInterconnect::new(name, props, Box::new(backend))?;
        Ok(Component::Interconnect(Arc::new(link)))
    }
}
