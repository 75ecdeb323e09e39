//! Loading C plugins (`include/perfcast_plugin.h`, entry `perfcast_plugin_entry_v1`).
//!
//! Structs from the plugin are read with [`read_prefix`]: only the bytes the plugin's
//! `struct_size` covers are copied into a zeroed host struct, so fields a 1.0 plugin does not
//! have read as `None` (NULL function pointer) and take their documented default.

use crate::adapter::{
    foreign_memory_tier, CallError, ComputeBackend, ForeignComputeUnit, ForeignInterconnect,
    LinkBackend, TierData,
};
use crate::{params_json, Candidate, LoadError, LoadedLibrary};
use perfcast_abi::c::{
    v1_0, v1_1, PcComponent, PcComputeUnitVtable, PcEntry, PcInterconnectVtable, PcLink,
    PcMemoryTierVtable, PcParam, PcPlugin, PcTier, C_ABI_MAJOR,
};
use perfcast_abi::codes::{self, ERR_UNSUPPORTED};
use perfcast_abi::{LinkProps, PcOp, PcOpTime, TierProps};
use perfcast_core::hardware::collective_time;
use perfcast_core::registry::Factory;
use perfcast_core::{Bandwidth, Bytes, Category, Collective, Component, Seconds};
use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::path::Path;
use std::sync::Arc;

pub(crate) mod raw;
use crate::execution::c::{pipeline_schedule, recompute_policy};
use raw::{
    c_string, call, invalid, no_function, read_prefix, read_vtable, struct_size, Instance,
    NewInstance,
};

struct CComputeUnit {
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

struct CMemoryTier {
    _inst: Instance,
}

struct CInterconnect {
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

/// Read and check the descriptor `entry` returns.
///
/// # Safety
/// `entry` must be the plugin's `perfcast_plugin_entry_v1`.
pub(crate) unsafe fn load(
    path: &Path,
    entry: PcEntry,
) -> Result<(LoadedLibrary, Vec<Candidate>), LoadError> {
    let plugin = read_plugin(path, entry)?;
    let name = c_string(plugin.name).ok_or_else(|| invalid(path, "plugin name is NULL".into()))?;
    let version = c_string(plugin.version).unwrap_or_default();
    if plugin.n_components > 0 && plugin.components.is_null() {
        return Err(invalid(path, "components is NULL".into()));
    }
    let mut candidates = Vec::new();
    for i in 0..plugin.n_components as usize {
        if let Some(c) = candidate(path, i, *plugin.components.add(i))? {
            candidates.push(c);
        }
    }
    let lib = LoadedLibrary {
        path: path.to_path_buf(),
        plugin: name,
        version,
        abi: format!("c {}.{}", plugin.abi_major, plugin.abi_minor),
        components: Vec::new(),
    };
    Ok((lib, candidates))
}

/// The plugin descriptor: not NULL, at least the 1.0 layout, this host's major version.
///
/// # Safety
/// As [`load`].
unsafe fn read_plugin(path: &Path, entry: PcEntry) -> Result<PcPlugin, LoadError> {
    let p = entry();
    if p.is_null() {
        return Err(invalid(
            path,
            "perfcast_plugin_entry_v1 returned NULL".into(),
        ));
    }
    let size = struct_size(p);
    if size < v1_0::plugin_size() {
        return Err(invalid(
            path,
            format!(
                "perfcast_plugin.struct_size is {size}, the 1.0 layout needs at least {}",
                v1_0::plugin_size()
            ),
        ));
    }
    let plugin = read_prefix(p, size);
    if plugin.abi_major != C_ABI_MAJOR {
        return Err(LoadError::IncompatibleAbi {
            path: path.to_path_buf(),
            found: format!("C ABI {}.{}", plugin.abi_major, plugin.abi_minor),
            expected: format!("C ABI {C_ABI_MAJOR}.x"),
            summary: None,
            details: None,
        });
    }
    Ok(plugin)
}

/// Component `i` of the descriptor, checked, as a registry candidate; `None` for a category
/// this host does not know (a newer plugin may offer more).
///
/// # Safety
/// `cp` must be the descriptor's `components[i]`.
unsafe fn candidate(
    path: &Path,
    i: usize,
    cp: *const PcComponent,
) -> Result<Option<Candidate>, LoadError> {
    if cp.is_null() {
        return Err(invalid(path, format!("component {i} is NULL")));
    }
    let csize = struct_size(cp);
    if csize < v1_0::component_size() {
        return Err(invalid(
            path,
            format!("component {i}: struct_size {csize} is below the 1.0 layout"),
        ));
    }
    let c: PcComponent = read_prefix(cp, csize);
    let cname =
        c_string(c.name).ok_or_else(|| invalid(path, format!("component {i} has a NULL name")))?;
    let description = c_string(c.description).unwrap_or_default();
    let create = c
        .create
        .ok_or_else(|| invalid(path, format!("component `{cname}` has no create function")))?;
    if c.vtable.is_null() {
        return Err(invalid(path, format!("component `{cname}` has no vtable")));
    }
    let destroy = c.destroy;
    let n = cname.clone();
    let new_instance = move |params: &serde_json::Value| {
        let json = CString::new(params_json(params)).unwrap_or_default();
        let mut this: *mut c_void = std::ptr::null_mut();
        call(|e, cap| create(json.as_ptr(), &mut this, e, cap))
            .map_err(|e| e.into_plugin_error(&n))?;
        Ok::<_, perfcast_core::PluginError>(Instance { this, destroy })
    };
    // A category the C ABI does not carry is skipped, as a newer plugin's unknown one is.
    match codes::category_from_code(c.category) {
        Some(cat) if codes::c_carries(cat, perfcast_abi::c::C_ABI_MINOR) => {}
        _ => return Ok(None),
    }
    let (category, factory) = match c.category {
        codes::CATEGORY_COMPUTE_UNIT => (
            Category::ComputeUnit,
            compute_unit(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        codes::CATEGORY_MEMORY_TIER => (
            Category::MemoryTier,
            memory_tier(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        codes::CATEGORY_INTERCONNECT => (
            Category::Interconnect,
            interconnect(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        codes::CATEGORY_PIPELINE_SCHEDULE => (
            Category::PipelineSchedule,
            pipeline_schedule(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        codes::CATEGORY_RECOMPUTE_POLICY => (
            Category::RecomputePolicy,
            recompute_policy(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        codes::CATEGORY_PARALLEL_STRATEGY => (
            Category::ParallelStrategy,
            crate::strategy::c::parallel_strategy(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        codes::CATEGORY_TOPOLOGY => (
            Category::Topology,
            crate::topology::c::topology(path, &cname, c.vtable.cast(), new_instance)?,
        ),
        _ => return Ok(None),
    };
    let params = if c.params.is_null() {
        None
    } else {
        Some(declared_params(path, &cname, c.n_params, c.params)?)
    };
    Ok(Some(Candidate {
        category,
        name: cname,
        description,
        factory,
        params,
    }))
}

/// Most parameters one component may declare (a guard against a garbage count).
const MAX_PARAMS: u32 = 4096;

/// The `n` parameters `params` points to (C ABI 1.2), each read up to its `struct_size`.
///
/// # Safety
/// `params` must point to `n` pointers to `perfcast_param`s, as the header says.
unsafe fn declared_params(
    path: &Path,
    cname: &str,
    n: u32,
    params: *const *const PcParam,
) -> Result<Vec<perfcast_core::ParamSpec>, LoadError> {
    if n > MAX_PARAMS {
        return Err(invalid(
            path,
            format!("component `{cname}` declares {n} parameters (at most {MAX_PARAMS})"),
        ));
    }
    let mut out = Vec::with_capacity(n as usize);
    for j in 0..n as usize {
        let pp = *params.add(j);
        if pp.is_null() {
            return Err(invalid(path, format!("`{cname}`: parameter {j} is NULL")));
        }
        let size = struct_size(pp);
        if size < size_of::<PcParam>() {
            return Err(invalid(
                path,
                format!("`{cname}`: parameter {j} has struct_size {size}, below the 1.2 layout"),
            ));
        }
        let p: PcParam = read_prefix(pp, size);
        let text = |s: *const std::ffi::c_char| c_string(s).unwrap_or_default();
        let spec = perfcast_abi::convert::param_spec(
            &text(p.name),
            p.ty,
            p.default_kind,
            [
                &text(p.unit),
                &text(p.default_value),
                &text(p.range),
                &text(p.doc),
                &text(p.source),
            ],
        )
        .map_err(|m| invalid(path, format!("`{cname}`: {m}")))?;
        out.push(spec);
    }
    Ok(out)
}

/// The factory of compute unit `cname` (its vtable checked: the 1.0 layout, a `peak`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
unsafe fn compute_unit(
    path: &Path,
    cname: &str,
    vp: *const PcComputeUnitVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_0::compute_unit_vtable_size(),
        "compute unit",
        "1.0",
    )?;
    if vt.peak.is_none() {
        return Err(no_function(path, cname, "peak"));
    }
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
        let unit = ForeignComputeUnit::new(&n, Box::new(CComputeUnit { inst, vt }))?;
        Ok(Component::ComputeUnit(Arc::new(unit)))
    }))
}

/// The factory of memory tier `cname` (its vtable checked: the 1.0 layout, `properties`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
unsafe fn memory_tier(
    path: &Path,
    cname: &str,
    vp: *const PcMemoryTierVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_0::memory_tier_vtable_size(),
        "memory tier",
        "1.0",
    )?;
    let Some(props_fn) = vt.properties else {
        return Err(no_function(path, cname, "properties"));
    };
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
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
        let tier = foreign_memory_tier(&n, props, Box::new(CMemoryTier { _inst: inst }))?;
        Ok(Component::MemoryTier(Arc::new(tier)))
    }))
}

/// The factory of interconnect `cname` (its vtable checked: the 1.1 layout, `properties`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
unsafe fn interconnect(
    path: &Path,
    cname: &str,
    vp: *const PcInterconnectVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_1::interconnect_vtable_size(),
        "interconnect",
        "1.1",
    )?;
    let Some(props_fn) = vt.properties else {
        return Err(no_function(path, cname, "properties"));
    };
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
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
        let link = ForeignInterconnect::new(&n, props, Box::new(backend))?;
        Ok(Component::Interconnect(Arc::new(link)))
    }))
}
