//! Loading C plugins (`include/perfcast_plugin.h`, entry `perfcast_plugin_entry_v1`).
//!
//! Structs from the plugin are read with [`read_prefix`]: only the bytes the plugin's
//! `struct_size` covers are copied into a zeroed host struct, so fields a 1.0 plugin does not
//! have read as `None` (NULL function pointer) and take their documented default.

use crate::execution::c::{CRecompute, CSchedule};
use crate::hardware::c::{CComputeUnit, CInterconnect, CMemoryTier};
use crate::strategy::c::CStrategy;
use crate::topology::c::CTopology;
use crate::{params_json, Candidate, LoadError, LoadedLibrary};
use perfcast_abi::c::{v1_0, PcComponent, PcEntry, PcParam, PcPlugin, C_ABI_MAJOR};
use perfcast_abi::codes::{self};
use perfcast_core::registry::Factory;
use perfcast_core::{Category, Component, PluginError};
use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::path::Path;
use std::sync::Arc;

pub(crate) mod raw;
use raw::{
    c_string, call, invalid, no_function, read_prefix, read_vtable, struct_size, Instance,
    NewInstance,
};

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
    let Some(category) = codes::category_from_code(c.category)
        .filter(|cat| codes::c_carries(*cat, perfcast_abi::c::C_ABI_MINOR))
    else {
        return Ok(None);
    };
    let (vp, ni) = (c.vtable, new_instance);
    let factory = match category {
        Category::ComputeUnit => factory::<CComputeUnit>(path, &cname, vp, ni),
        Category::MemoryTier => factory::<CMemoryTier>(path, &cname, vp, ni),
        Category::Interconnect => factory::<CInterconnect>(path, &cname, vp, ni),
        Category::PipelineSchedule => factory::<CSchedule>(path, &cname, vp, ni),
        Category::RecomputePolicy => factory::<CRecompute>(path, &cname, vp, ni),
        Category::ParallelStrategy => factory::<CStrategy>(path, &cname, vp, ni),
        Category::Topology => factory::<CTopology>(path, &cname, vp, ni),
    }?;
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

/// What one C category has of its own: its vtable, the layout that vtable first had, the
/// functions it requires and the component an instance makes. Reading and checking the vtable
/// and making an instance per call are [`factory`]'s, the same for every category.
pub(crate) trait CCategory {
    /// The category's vtable (`perfcast_*_vtable`).
    type Vtable: Copy;
    /// What a checked vtable hands every instance: the vtable, or its required functions.
    type Checked: Copy + Send + Sync + 'static;
    /// The vtable in messages (`compute unit`).
    const WHAT: &'static str;
    /// The C ABI minor that introduced the vtable (`1.0`).
    const SINCE: &'static str;
    /// Bytes of the vtable in that minor's layout: the least `struct_size` accepted.
    fn min_size() -> usize;
    /// The vtable with its required functions, or the name of the first one it lacks.
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str>;
    /// The component `name` around instance `inst`.
    fn build(name: &str, inst: Instance, checked: Self::Checked) -> Result<Component, PluginError>;
}

/// The factory of component `cname` of category `C`: its vtable read up to its `struct_size`
/// (at least `C`'s first layout) and checked once, here; each call makes an instance with
/// `new_instance` and `C`'s component around it.
///
/// # Safety
/// `vp` must be the component's (non-NULL) vtable, a `C::Vtable`.
unsafe fn factory<C: CCategory>(
    path: &Path,
    cname: &str,
    vp: *const c_void,
    new_instance: impl NewInstance,
) -> Result<Factory, LoadError> {
    let vt = read_vtable(
        path,
        cname,
        vp.cast::<C::Vtable>(),
        C::min_size(),
        C::WHAT,
        C::SINCE,
    )?;
    let checked = C::check(vt).map_err(|function| no_function(path, cname, function))?;
    let n = cname.to_string();
    Ok(Arc::new(move |params: &serde_json::Value| {
        C::build(&n, new_instance(params)?, checked)
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
