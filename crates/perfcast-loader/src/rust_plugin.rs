//! Loading Rust (abi_stable) plugins.

use crate::call::CallError;
use crate::execution::rust::{RustRecompute, RustSchedule};
use crate::execution::{ForeignRecompute, ForeignSchedule};
use crate::hardware::rust::{RustComputeUnit, RustInterconnect};
use crate::hardware::{foreign_memory_tier, ForeignComputeUnit, ForeignInterconnect};
use crate::strategy::rust::RustStrategy;
use crate::strategy::ForeignStrategy;
use crate::topology::rust::RustTopology;
use crate::topology::ForeignTopology;
use crate::{params_json, Candidate, LoadError, LoadedLibrary};
use abi_stable::library::{lib_header_from_path, LibraryError};
use abi_stable::std_types::{RResult, RStr};
use perfcast_abi::codes::category_from_code;
use perfcast_abi::rust_abi::{
    v1_3, FfiMemoryTierBox, NewComputeUnit, NewInterconnect, NewMemoryTier, NewParallelStrategy,
    NewPipelineSchedule, NewRecomputePolicy, NewTopology, PluginDescriptor, RUST_ABI_MAJOR,
    RUST_ABI_MINOR, RUST_ABI_OLDEST_MINOR, RUST_ABI_VERSION, RUST_PARAMS_SYMBOL,
};
use perfcast_abi::{
    FfiComputeUnitBox, FfiError, FfiParallelStrategyBox, FfiTopologyBox, PluginModuleRef,
};
use perfcast_core::{Category, Component, ParamSpec};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

impl From<FfiError> for CallError {
    fn from(e: FfiError) -> Self {
        CallError {
            code: e.code,
            path: e.path.into(),
            message: e.message.into(),
        }
    }
}

/// A Rust plugin's answer, its error as the adapters take it.
pub(crate) fn res<T>(r: RResult<T, FfiError>) -> Result<T, CallError> {
    r.into_result().map_err(CallError::from)
}

/// A strategy factory of the current layout or of the frozen 1.3 one.
#[derive(Clone, Copy)]
enum NewStrategy {
    Current(NewParallelStrategy),
    V1_3(v1_3::NewParallelStrategy),
}

/// A root module of one of the layouts this host reads: the current one, or the frozen one
/// of the minor before it (what that minor offers). Older minors are refused
/// ([`RUST_ABI_OLDEST_MINOR`]).
#[derive(Clone, Copy)]
enum Module {
    /// Rust ABI 1.4 (current).
    Current(PluginModuleRef),
    /// Rust ABI 1.3: strategies without declared axes.
    V1_3(v1_3::PluginModuleRef),
}

impl Module {
    /// The Rust ABI minor of the module's layout.
    fn minor(self) -> u32 {
        match self {
            Module::Current(_) => RUST_ABI_MINOR,
            Module::V1_3(_) => 3,
        }
    }
    fn describe(self) -> PluginDescriptor {
        match self {
            Module::Current(m) => (m.describe())(),
            Module::V1_3(m) => (m.describe())(),
        }
    }
    fn new_compute_unit(self) -> NewComputeUnit {
        match self {
            Module::Current(m) => m.new_compute_unit(),
            Module::V1_3(m) => m.new_compute_unit(),
        }
    }
    fn new_memory_tier(self) -> NewMemoryTier {
        match self {
            Module::Current(m) => m.new_memory_tier(),
            Module::V1_3(m) => m.new_memory_tier(),
        }
    }
    fn new_interconnect(self) -> NewInterconnect {
        match self {
            Module::Current(m) => m.new_interconnect(),
            Module::V1_3(m) => m.new_interconnect(),
        }
    }
    fn new_topology(self) -> NewTopology {
        match self {
            Module::Current(m) => m.new_topology(),
            Module::V1_3(m) => m.new_topology(),
        }
    }
    fn new_parallel_strategy(self) -> NewStrategy {
        match self {
            Module::Current(m) => NewStrategy::Current(m.new_parallel_strategy()),
            Module::V1_3(m) => NewStrategy::V1_3(m.new_parallel_strategy()),
        }
    }
    fn new_pipeline_schedule(self) -> NewPipelineSchedule {
        match self {
            Module::Current(m) => m.new_pipeline_schedule(),
            Module::V1_3(m) => m.new_pipeline_schedule(),
        }
    }
    fn new_recompute_policy(self) -> NewRecomputePolicy {
        match self {
            Module::Current(m) => m.new_recompute_policy(),
            Module::V1_3(m) => m.new_recompute_policy(),
        }
    }
}

/// The first line with an `Error:` in abi_stable's layout dump plus the `Expected`/`Found` lines
/// after it, on one line (the dump runs to hundreds of lines; `LoadError::details` keeps it).
pub(crate) fn summarize_abi_instability(dump: &str) -> String {
    let lines: Vec<&str> = dump.lines().map(str::trim).collect();
    let Some(start) = lines.iter().rposition(|l| l.starts_with("Error:")) else {
        let first = lines.iter().find(|l| !l.is_empty()).copied().unwrap_or("");
        return truncate(first, 160);
    };
    let mut parts = vec![lines[start].trim_start_matches("Error:").trim().to_string()];
    for l in &lines[start + 1..] {
        if l.is_empty() || l.starts_with("Error:") || parts.len() >= 5 {
            break;
        }
        parts.push(l.to_string());
    }
    truncate(
        &parts
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        200,
    )
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn expected() -> String {
    let major = RUST_ABI_VERSION.split('.').next().unwrap_or("?");
    format!("Rust ABI {major}.x")
}

/// The error for a library that declares a minor of this major older than the oldest this host
/// loads (`None` for any other), naming both; `details` is the layout report.
fn older_minor(path: &Path, declared: &str, details: Option<&str>) -> Option<LoadError> {
    let mut it = declared.split('.').map(str::parse::<u32>);
    let (Some(Ok(major)), Some(Ok(minor))) = (it.next(), it.next()) else {
        return None;
    };
    if major != RUST_ABI_MAJOR || minor >= RUST_ABI_OLDEST_MINOR {
        return None;
    }
    let oldest = format!("{RUST_ABI_MAJOR}.{RUST_ABI_OLDEST_MINOR}");
    Some(LoadError::IncompatibleAbi {
        path: path.to_path_buf(),
        found: format!("Rust ABI {declared}"),
        expected: format!(
            "Rust ABI {oldest} to {RUST_ABI_MAJOR}.{RUST_ABI_MINOR} ({major}.{minor} is older \
             than the oldest minor it loads, {oldest}: rebuild the plugin against perfcast-abi \
             {RUST_ABI_VERSION})"
        ),
        summary: None,
        details: details.map(str::to_string),
    })
}

/// `declared`: the Rust ABI version the library declares, when its header could be read.
fn map_library_error(path: &Path, declared: Option<&str>, e: LibraryError) -> LoadError {
    let p = path.to_path_buf();
    match e {
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => {
            LoadError::IncompatibleAbi {
                path: p,
                found: format!("Rust ABI {actual_version}"),
                expected: expected(),
                summary: None,
                details: None,
            }
        }
        LibraryError::AbiInstability(err) => {
            let dump = err.to_string();
            LoadError::IncompatibleAbi {
                path: p,
                found: match declared {
                    Some(v) => format!("Rust ABI {v} with a different layout"),
                    None => "a Rust ABI with a different layout".to_string(),
                },
                expected: format!("the layout of Rust ABI {RUST_ABI_VERSION}"),
                summary: Some(summarize_abi_instability(&dump)),
                details: Some(dump),
            }
        }
        LibraryError::InvalidAbiHeader(h) => LoadError::IncompatibleAbi {
            path: p,
            found: format!("abi_stable header {h:?}"),
            expected: "an abi_stable 0.11 plugin".to_string(),
            summary: None,
            details: None,
        },
        LibraryError::InvalidCAbi { .. } => LoadError::IncompatibleAbi {
            path: p,
            found: "a Rust compiler with another C ABI".to_string(),
            expected: "this compiler's C ABI".to_string(),
            summary: None,
            details: Some(e.to_string()),
        },
        LibraryError::RootModule { .. } => LoadError::Init {
            path: p,
            message: truncate(&e.to_string().replace('\n', " "), 300),
        },
        LibraryError::Many(mut v) if !v.is_empty() => {
            map_library_error(path, declared, v.remove(0))
        }
        other => LoadError::NotAPlugin {
            path: p,
            reason: truncate(&other.to_string().replace('\n', " "), 300),
        },
    }
}

/// Load the abi_stable root module of `path` and describe its components.
/// One entry of a Rust plugin's parameter declarations (`perfcast_rust_params_v1`).
#[derive(serde::Deserialize)]
struct Declared {
    category: u32,
    name: String,
    params: Vec<ParamSpec>,
}

/// The parameters the plugin declares through its optional `perfcast_rust_params_v1`
/// symbol, by (category code, name); none for a plugin without it. Declarations that do not
/// parse are an error naming the file.
fn declared_params(
    path: &Path,
    lib: &libloading::Library,
) -> Result<HashMap<(u32, String), Vec<ParamSpec>>, LoadError> {
    type ParamsFn = extern "C" fn() -> *const std::ffi::c_char;
    let mut out = HashMap::new();
    // SAFETY: the symbol's type is `RUST_PARAMS_SYMBOL`'s documented one.
    let Ok(f) = (unsafe { lib.get::<ParamsFn>(RUST_PARAMS_SYMBOL) }) else {
        return Ok(out);
    };
    let p = f();
    if p.is_null() {
        return Ok(out);
    }
    // SAFETY: a non-null answer is a NUL-terminated string the plugin keeps alive.
    let text = unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy();
    let entries: Vec<Declared> = serde_json::from_str(&text).map_err(|e| LoadError::Invalid {
        path: path.to_path_buf(),
        message: format!("its parameter declarations do not parse: {e}"),
    })?;
    for d in entries {
        out.insert((d.category, d.name), d.params);
    }
    Ok(out)
}

/// The factory of component `name` of `category` in `module`; `None` for a category the
/// module's minor does not offer (its components are skipped).
fn factory(
    module: Module,
    category: Category,
    name: &str,
) -> Result<Option<perfcast_core::registry::Factory>, LoadError> {
    // A module of an earlier minor builds only what that minor carries.
    if !perfcast_abi::codes::rust_carries(category, module.minor()) {
        return Ok(None);
    }
    let n = name.to_string();
    let f: perfcast_core::registry::Factory = match category {
        Category::ComputeUnit => Arc::new(move |params| {
            let json = params_json(params);
            let obj = res((module.new_compute_unit())(
                RStr::from_str(&n),
                RStr::from_str(&json),
            ))
            .map_err(|e| e.into_plugin_error(&n))?;
            let unit = ForeignComputeUnit::new(&n, Box::new(RustComputeUnit(obj)))?;
            Ok(Component::ComputeUnit(Arc::new(unit)))
        }),
        Category::MemoryTier => Arc::new(move |params| {
            let json = params_json(params);
            let obj = res((module.new_memory_tier())(
                RStr::from_str(&n),
                RStr::from_str(&json),
            ))
            .map_err(|e| e.into_plugin_error(&n))?;
            let props = res(obj.properties());
            let tier = foreign_memory_tier(&n, props, Box::new(obj))?;
            Ok(Component::MemoryTier(Arc::new(tier)))
        }),
        Category::Interconnect => Arc::new(move |params| {
            let json = params_json(params);
            let obj = res((module.new_interconnect())(
                RStr::from_str(&n),
                RStr::from_str(&json),
            ))
            .map_err(|e| e.into_plugin_error(&n))?;
            let props = res(obj.properties());
            let link = ForeignInterconnect::new(&n, props, Box::new(RustInterconnect(obj)))?;
            Ok(Component::Interconnect(Arc::new(link)))
        }),
        Category::Topology => {
            let new_topology = module.new_topology();
            Arc::new(move |params| {
                let json = params_json(params);
                let obj = res(new_topology(RStr::from_str(&n), RStr::from_str(&json)))
                    .map_err(|e| e.into_plugin_error(&n))?;
                let t = ForeignTopology::new(&n, Box::new(RustTopology(obj)));
                Ok(Component::Topology(Arc::new(t)))
            })
        }
        Category::ParallelStrategy => {
            let new_strategy = module.new_parallel_strategy();
            Arc::new(move |params| {
                let json = params_json(params);
                let (name, json) = (RStr::from_str(&n), RStr::from_str(&json));
                let obj = match new_strategy {
                    NewStrategy::Current(new) => res(new(name, json)).map(RustStrategy::Current),
                    NewStrategy::V1_3(new) => res(new(name, json)).map(RustStrategy::V1_3),
                }
                .map_err(|e| e.into_plugin_error(&n))?;
                let s = ForeignStrategy::new(&n, Box::new(obj))?;
                Ok(Component::ParallelStrategy(Arc::new(s)))
            })
        }
        Category::PipelineSchedule => {
            let new_schedule = module.new_pipeline_schedule();
            Arc::new(move |params| {
                let json = params_json(params);
                let obj = res(new_schedule(RStr::from_str(&n), RStr::from_str(&json)))
                    .map_err(|e| e.into_plugin_error(&n))?;
                let s = ForeignSchedule::new(&n, Box::new(RustSchedule(obj)))?;
                Ok(Component::PipelineSchedule(Arc::new(s)))
            })
        }
        Category::RecomputePolicy => {
            let new_policy = module.new_recompute_policy();
            Arc::new(move |params| {
                let json = params_json(params);
                let obj = res(new_policy(RStr::from_str(&n), RStr::from_str(&json)))
                    .map_err(|e| e.into_plugin_error(&n))?;
                let p = ForeignRecompute::new(&n, Box::new(RustRecompute(obj)));
                Ok(Component::RecomputePolicy(Arc::new(p)))
            })
        }
    };
    Ok(Some(f))
}

pub(crate) fn load(
    path: &Path,
    open: &Path,
    lib: &libloading::Library,
) -> Result<(LoadedLibrary, Vec<Candidate>), LoadError> {
    // Per-file loading: `RootModule::load_from_file` would memoize one library per root-module
    // type, so a second vendor plugin would alias the first. `open` is the name `lib` was
    // opened with (the dynamic loader hands back the same library); `path` names it.
    let header = lib_header_from_path(open).map_err(|e| map_library_error(path, None, e))?;
    let declared = header.version_strings().version.as_str().to_string();
    // The current layout; failing that, the frozen 1.3 one (a plugin built against the minor
    // before); failing both, a library of an older minor is refused as such, any other with
    // the current layout's error.
    let module = match header.init_root_module::<PluginModuleRef>() {
        Ok(m) => Module::Current(m),
        Err(e @ LibraryError::AbiInstability(_)) => {
            match header.init_root_module::<v1_3::PluginModuleRef>() {
                Ok(m) => Module::V1_3(m),
                Err(_) => {
                    let e = map_library_error(path, Some(&declared), e);
                    return Err(older_minor(path, &declared, e.details()).unwrap_or(e));
                }
            }
        }
        Err(e) => return Err(map_library_error(path, Some(&declared), e)),
    };
    let desc = module.describe();
    if desc.name.is_empty() {
        return Err(LoadError::Init {
            path: path.to_path_buf(),
            message: format!("the plugin has no name ({})", desc.version),
        });
    }
    let mut it = declared.split('.');
    let abi = format!(
        "rust-abi_stable {}.{}",
        it.next().unwrap_or("?"),
        it.next().unwrap_or("?")
    );
    let plugin = desc.name.to_string();
    let declared = declared_params(path, lib)?;
    let mut candidates = Vec::new();
    for c in desc.components.iter() {
        // A category this host does not know is skipped (a newer plugin may offer more).
        let Some(category) = category_from_code(c.category) else {
            continue;
        };
        let name = c.name.to_string();
        let Some(factory) = factory(module, category, &name)? else {
            continue;
        };
        let params = declared.get(&(c.category, name.clone())).cloned();
        candidates.push(Candidate {
            category,
            name,
            description: c.description.to_string(),
            factory,
            params,
        });
    }
    let lib = LoadedLibrary {
        path: path.to_path_buf(),
        plugin,
        version: desc.version.to_string(),
        abi,
        components: Vec::new(),
    };
    Ok((lib, candidates))
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<PluginModuleRef>();
    is::<FfiComputeUnitBox>();
    is::<FfiMemoryTierBox>();
    is::<FfiTopologyBox>();
    is::<FfiParallelStrategyBox>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_one_short_line() {
        let mut dump = String::new();
        for i in 0..800 {
            dump.push_str(&format!("  --- Type Layout {i} ---\n  field: x\n"));
        }
        dump.push_str("Error:mismatched type\n  Expected:\n    u32\n  Found:\n    u64\n\n");
        let s = summarize_abi_instability(&dump);
        assert_eq!(s, "mismatched type Expected: u32 Found: u64");
        assert!(!summarize_abi_instability("oops\nmore").contains('\n'));
    }

    #[test]
    fn only_minors_older_than_the_oldest_loaded_are_refused_as_such() {
        let p = Path::new("/p/libx.so");
        let e = older_minor(p, "1.2.0", Some("report")).unwrap();
        assert_eq!(e.details(), Some("report"));
        let msg = e.to_string();
        assert!(msg.contains("built for Rust ABI 1.2.0"), "{msg}");
        assert!(
            msg.contains(&format!(
                "Rust ABI 1.{RUST_ABI_OLDEST_MINOR} to 1.{RUST_ABI_MINOR} (1.2 is older than"
            )),
            "{msg}"
        );
        for declared in ["1.3.0", "1.4.0", "1.9.0", "2.0.0", "0.1.0", "x", ""] {
            assert!(older_minor(p, declared, None).is_none(), "{declared}");
        }
    }
}
