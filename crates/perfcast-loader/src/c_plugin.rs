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
    v1_0, v1_1, v1_3, PcComponent, PcComputeUnitVtable, PcEntry, PcInterconnectVtable,
    PcLayerActivations, PcLink, PcMemoryTierVtable, PcParam, PcPipelineScheduleVtable, PcPlugin,
    PcRecomputePlan, PcRecomputePlanFn, PcRecomputePolicyVtable, PcScheduleInFlight,
    PcScheduleInput, PcScheduleResult, PcScheduleStep, PcScheduleValidate, PcTier, C_ABI_MAJOR,
};
use perfcast_abi::codes::{self, ERR_UNSUPPORTED, OK};
use perfcast_abi::{LinkProps, PcOp, PcOpTime, TierProps};
use perfcast_core::hardware::collective_time;
use perfcast_core::parallel::{
    LayerActivations, PipelineSchedule, PlanShape, RecomputePlan, RecomputePolicy, ScheduleInput,
    ScheduleResult,
};
use perfcast_core::registry::Factory;
use perfcast_core::{
    Bandwidth, Bytes, Category, Collective, Component, ModelError, PluginError, Seconds,
};
use std::ffi::{c_char, c_void, CStr, CString};
use std::mem::{size_of, MaybeUninit};
use std::path::Path;
use std::sync::Arc;

const ERR_CAP: usize = 1024;

/// Copy the first `min(struct_size, size_of::<T>())` bytes of `*p` into a zeroed `T`.
///
/// # Safety
/// `p` must point to at least `struct_size` readable bytes, and `T` must be valid when zeroed
/// (integers, raw pointers and `Option<fn>` only).
unsafe fn read_prefix<T: Copy>(p: *const T, struct_size: usize) -> T {
    let mut out = MaybeUninit::<T>::zeroed();
    let n = struct_size.min(size_of::<T>());
    std::ptr::copy_nonoverlapping(p as *const u8, out.as_mut_ptr() as *mut u8, n);
    out.assume_init()
}

/// The `struct_size` at the start of a plugin struct.
unsafe fn struct_size<T>(p: *const T) -> usize {
    std::ptr::read_unaligned(p as *const u32) as usize
}

unsafe fn c_string(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// The message a plugin wrote into an error buffer (bounded; never trusts the NUL).
fn read_err(buf: &[u8], code: i32) -> String {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let s = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if s.is_empty() {
        format!("error code {code} without a message")
    } else {
        s
    }
}

/// Call `f(err, err_cap)` and turn a non-OK status into a `CallError`.
fn call(f: impl FnOnce(*mut c_char, usize) -> i32) -> Result<(), CallError> {
    let mut buf = [0u8; ERR_CAP];
    let rc = f(buf.as_mut_ptr() as *mut c_char, ERR_CAP);
    if rc == OK {
        Ok(())
    } else {
        Err(CallError {
            code: rc,
            path: String::new(),
            message: read_err(&buf, rc),
        })
    }
}

/// A created instance and the function that frees it.
struct Instance {
    this: *mut c_void,
    destroy: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: the header's contract requires instances to be immutable after `create` and every
// function to be callable concurrently from any thread.
unsafe impl Send for Instance {}
unsafe impl Sync for Instance {}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(d) = self.destroy {
            // SAFETY: called once, with the pointer `create` returned.
            unsafe { d(self.this) }
        }
    }
}

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

fn invalid(path: &Path, message: String) -> LoadError {
    LoadError::Invalid {
        path: path.to_path_buf(),
        message,
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

/// The vtable of component `cname`, read up to its `struct_size`, which must cover the
/// `layout` layout (`min` bytes) of a `what` vtable.
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
unsafe fn read_vtable<T: Copy>(
    path: &Path,
    cname: &str,
    vp: *const T,
    min: usize,
    what: &str,
    layout: &str,
) -> Result<T, LoadError> {
    let vsize = struct_size(vp);
    if vsize < min {
        return Err(invalid(
            path,
            format!("`{cname}`: {what} vtable struct_size {vsize} is below the {layout} layout"),
        ));
    }
    Ok(read_prefix(vp, vsize))
}

/// A required function the vtable of `cname` lacks.
fn no_function(path: &Path, cname: &str, function: &str) -> LoadError {
    invalid(
        path,
        format!("`{cname}`: vtable has no {function} function"),
    )
}

/// Creates an instance of a component from its parameters (the component's `create`).
trait NewInstance:
    Fn(&serde_json::Value) -> Result<Instance, PluginError> + Send + Sync + 'static
{
}
impl<F> NewInstance for F where
    F: Fn(&serde_json::Value) -> Result<Instance, PluginError> + Send + Sync + 'static
{
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

/// The factory of pipeline schedule `cname` (its vtable checked: the 1.3 layout, `step` and
/// `in_flight`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
unsafe fn pipeline_schedule(
    path: &Path,
    cname: &str,
    vp: *const PcPipelineScheduleVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_3::pipeline_schedule_vtable_size(),
        "pipeline schedule",
        "1.3",
    )?;
    let (Some(step), Some(in_flight)) = (vt.step, vt.in_flight) else {
        let missing = if vt.step.is_none() {
            "step"
        } else {
            "in_flight"
        };
        return Err(no_function(path, cname, missing));
    };
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
        Ok(Component::PipelineSchedule(Arc::new(CSchedule {
            name: n.clone(),
            inst,
            step,
            in_flight,
            validate: vt.validate,
        })))
    }))
}

/// A C pipeline schedule. Every answer is checked (finite, >= 0; bubble and p2p within the
/// time); `validate` also asks `in_flight` of every stage of the plan, so that memory sizing
/// (which cannot fail) only ever sees answers already checked.
struct CSchedule {
    name: String,
    inst: Instance,
    step: PcScheduleStep,
    in_flight: PcScheduleInFlight,
    validate: Option<PcScheduleValidate>,
}

fn pc_input(i: &ScheduleInput) -> PcScheduleInput {
    PcScheduleInput {
        struct_size: size_of::<PcScheduleInput>() as u32,
        stages: i.stages,
        virtual_stages: i.virtual_stages,
        micro_batches: i.micro_batches,
        forward: i.forward.0,
        backward: i.backward.0,
        p2p: i.p2p.0,
    }
}

impl CSchedule {
    fn failed(&self, e: CallError) -> ModelError {
        ModelError::Plugin(e.into_plugin_error(&self.name))
    }

    fn checked(&self, what: &str, v: f64) -> Result<f64, ModelError> {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(ModelError::NonFinite {
                what: format!("{what} of pipeline schedule `{}`", self.name),
                value: v,
            })
        }
    }

    fn stage_in_flight(&self, input: &PcScheduleInput, stage: u32) -> Result<f64, ModelError> {
        let mut out = f64::NAN;
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, cap| unsafe { (self.in_flight)(self.inst.this, input, stage, &mut out, e, cap) })
            .map_err(|e| self.failed(e))?;
        self.checked(&format!("in_flight of stage {stage}"), out)
    }
}

impl PipelineSchedule for CSchedule {
    fn kind(&self) -> &str {
        &self.name
    }

    fn validate(&self, plan: &PlanShape) -> Result<(), ModelError> {
        let per_step = plan.micro_batch as u64 * plan.dp as u64;
        let m = (plan.global_batch as u64)
            .checked_div(per_step)
            .unwrap_or(0);
        let input = PcScheduleInput {
            struct_size: size_of::<PcScheduleInput>() as u32,
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: u32::try_from(m).unwrap_or(u32::MAX),
            ..Default::default()
        };
        if let Some(v) = self.validate {
            // SAFETY: as above.
            call(|e, cap| unsafe { v(self.inst.this, &input, e, cap) })
                .map_err(|e| self.failed(e))?;
        }
        for stage in 0..plan.pp {
            self.stage_in_flight(&input, stage)?;
        }
        Ok(())
    }

    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError> {
        let pin = pc_input(input);
        let mut out = PcScheduleResult {
            struct_size: size_of::<PcScheduleResult>() as u32,
            time: f64::NAN,
            bubble: f64::NAN,
            p2p: f64::NAN,
            peak_in_flight: f64::NAN,
            ..Default::default()
        };
        // SAFETY: as above.
        call(|e, cap| unsafe { (self.step)(self.inst.this, &pin, &mut out, e, cap) })
            .map_err(|e| self.failed(e))?;
        let time = self.checked("step time", out.time)?;
        let bubble = self.checked("bubble", out.bubble)?;
        let p2p = self.checked("p2p time", out.p2p)?;
        let peak = self.checked("peak_in_flight", out.peak_in_flight)?;
        if bubble + p2p > time * (1.0 + 1e-12) {
            return Err(ModelError::Plugin(PluginError::Failed {
                plugin: self.name.clone(),
                message: format!(
                    "bubble {bubble} s + p2p {p2p} s exceed the step time {time} s they are part of"
                ),
            }));
        }
        Ok(ScheduleResult {
            time: Seconds(time),
            bubble: Seconds(bubble),
            p2p: Seconds(p2p),
            peak_in_flight: peak,
        })
    }

    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64 {
        // Checked by `validate` for the plan's counts before any memory is sized; a count the
        // plugin refuses here reads as infinitely many (the plan does not fit), never as NaN.
        let mut pin = pc_input(input);
        pin.forward = 0.0;
        pin.backward = 0.0;
        pin.p2p = 0.0;
        self.stage_in_flight(&pin, stage).unwrap_or(f64::INFINITY)
    }
}

/// The factory of recompute policy `cname` (its vtable checked: the 1.3 layout, `plan`).
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable.
unsafe fn recompute_policy(
    path: &Path,
    cname: &str,
    vp: *const PcRecomputePolicyVtable,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp,
        v1_3::recompute_policy_vtable_size(),
        "recompute policy",
        "1.3",
    )?;
    let Some(plan) = vt.plan else {
        return Err(no_function(path, cname, "plan"));
    };
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        let inst = new_instance(params)?;
        Ok(Component::RecomputePolicy(Arc::new(CRecompute {
            name: n.clone(),
            inst,
            plan,
        })))
    }))
}

/// A C recompute policy; its answers are checked here (finite, >= 0, layer counts within the
/// stage) with the policy's name in the message.
struct CRecompute {
    name: String,
    inst: Instance,
    plan: PcRecomputePlanFn,
}

impl RecomputePolicy for CRecompute {
    fn kind(&self) -> &str {
        &self.name
    }

    fn plan(
        &self,
        act: &LayerActivations,
        layers: u32,
        recompute_layers: Option<u32>,
    ) -> Result<RecomputePlan, ModelError> {
        // 0 means "not given" across the ABI; a given 0 is refused here, as the built-ins do.
        if recompute_layers == Some(0) {
            return Err(ModelError::invalid(
                perfcast_core::Key::plan("recompute_layers"),
                0,
                format!("must be in 1..={layers}"),
            ));
        }
        let a = PcLayerActivations {
            struct_size: size_of::<PcLayerActivations>() as u32,
            reserved0: 0,
            input: act.input.0,
            attention_core: act.attention_core.0,
            other: act.other.0,
        };
        let mut out = PcRecomputePlan {
            struct_size: size_of::<PcRecomputePlan>() as u32,
            full_layers: f64::NAN,
            attention_layers: f64::NAN,
            kept: f64::NAN,
            working: f64::NAN,
            ..Default::default()
        };
        let rl = recompute_layers.unwrap_or(0);
        // SAFETY: function and instance come from the plugin, per the header's contract.
        call(|e, cap| unsafe { (self.plan)(self.inst.this, &a, layers, rl, &mut out, e, cap) })
            .map_err(|e| ModelError::Plugin(e.into_plugin_error(&self.name)))?;
        let check = |what: &str, v: f64, max: f64| {
            if v.is_finite() && v >= 0.0 && v <= max {
                Ok(v)
            } else {
                Err(ModelError::NonFinite {
                    what: format!(
                        "{what} of recompute policy `{}` (a stage of {layers} layers)",
                        self.name
                    ),
                    value: v,
                })
            }
        };
        let l = layers as f64;
        Ok(RecomputePlan {
            full_layers: check("full_layers", out.full_layers, l)?,
            attention_layers: check("attention_layers", out.attention_layers, l)?,
            kept: Bytes(check("kept", out.kept, f64::MAX)?),
            working: Bytes(check("working", out.working, f64::MAX)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_buffers_are_bounded() {
        assert_eq!(read_err(b"bad key `x`\0garbage", 1), "bad key `x`");
        assert_eq!(read_err(&[b'a'; 4], 2), "aaaa");
        assert!(read_err(&[0; 8], 2).contains("code 2"));
    }

    #[test]
    fn fields_beyond_struct_size_read_as_absent() {
        // A 1.0 vtable followed by bytes that are not the plugin's (0xAB garbage).
        let mut buf = [0xABu8; size_of::<PcComputeUnitVtable>()];
        let size = v1_0::compute_unit_vtable_size();
        buf[..4].copy_from_slice(&(size as u32).to_ne_bytes());
        let p = buf.as_ptr() as *const PcComputeUnitVtable;
        // SAFETY: `buf` holds `size` bytes; only those are copied.
        let v = unsafe { read_prefix(p, struct_size(p)) };
        assert!(v.peak.is_some() && v.launch_overhead.is_some());
        assert!(v.gemm_tile.is_none() && v.op_time.is_none());
        // A larger (newer) struct_size copies only what this host knows.
        buf[..4].copy_from_slice(&1000u32.to_ne_bytes());
        let v = unsafe { read_prefix(p, struct_size(p)) };
        assert!(v.op_time.is_some());
    }
}
