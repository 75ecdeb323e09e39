//! The Rust plugin SDK: implement the native `perfcast_core` traits, export them with
//! [`export_plugin!`](crate::export_plugin).
//!
//! ```ignore
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct NpuParams { bf16_tflops: f64 }
//! fn build_npu(p: NpuParams) -> Result<Npu, perfcast_core::PluginError> { ... }
//!
//! perfcast_abi::export_plugin! {
//!     name: "acme",
//!     version: env!("CARGO_PKG_VERSION"),
//!     compute_units: [ "acme/npu9" => build_npu : "Acme NPU9 accelerator" [NPU_PARAMS] ],
//!     memory_tiers: [ "acme/hbm-x" => build_hbm ],
//! }
//! ```
//!
//! `[NPU_PARAMS]` (optional, a `&'static [perfcast_core::ParamSpec]`) declares the
//! component's parameters (exported as JSON by the symbol `perfcast_rust_params_v1`, beside
//! the root module): `perfcast plugins --describe acme/npu9` prints them; a component
//! without one is shown as "not declared".
//!
//! A builder is any `fn(P) -> Result<T, PluginError>` where `P: Deserialize` (use
//! `#[serde(deny_unknown_fields)]`; `serde_json::Value` takes the raw table) and `T`
//! implements `ComputeUnit`, `MemoryTier`, `Interconnect`, (Rust ABI 1.1) `Topology` or (1.2)
//! `parallel::ParallelStrategy` (`parallel_strategies: [...]`; it sees the model as
//! `strategy::PcModel` carries it), `parallel::PipelineSchedule` (`pipeline_schedules`) or
//! `parallel::RecomputePolicy` (`recompute_policies`). A
//! topology plugin sees the host's network levels as [`LevelView`]s: their domain,
//! bandwidth, latency and per-collective overhead (a level's own `collective_time` is the
//! host's; a level view answers the alpha-beta formula of those numbers). The SDK parses the parameters with
//! `perfcast_core::params::parse` (so errors carry the key path), wraps the object, and runs
//! every call under `catch_unwind`: a panic comes back to the host as an error message, never
//! as an abort. Plugins must be built with `panic = "unwind"` (the default).

use crate::c::{PcOp, PcOpTime};
use crate::codes::{self, *};
use crate::rust_abi::*;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, ROption, RResult, RSlice, RVec};
use perfcast_core::topology::{GroupAxis, GroupPlacement};
use perfcast_core::{
    Bandwidth, Bytes, Collective, ComputeOp, ComputeUnit, Interconnect, MemoryHierarchy,
    MemoryTier, ModelError, PluginError, Seconds, Topology,
};
use serde::de::DeserializeOwned;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Once};

mod execution;
pub use execution::{build_parallel_strategy, build_pipeline_schedule, build_recompute_policy};

thread_local! {
    /// Depth of `guard` calls on this thread (panics inside are reported, not printed).
    static IN_GUARD: Cell<u32> = const { Cell::new(0) };
    /// The last panic caught inside `guard` on this thread: message and location.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Install (once) a panic hook that, for panics inside `guard`, records message and location
/// instead of printing them (the host reports them as one error line); other panics go to the
/// previous hook. A cdylib has its own copy of std, so this hook is the plugin's, not the host's.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let guarded = IN_GUARD.try_with(|g| g.get() > 0).unwrap_or(false);
            if !guarded {
                return prev(info);
            }
            let loc = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let msg = format!("{}{loc}", panic_message(info.payload()));
            let _ = LAST_PANIC.try_with(|p| *p.borrow_mut() = Some(msg));
        }));
    });
}

/// Run `f`, turning a panic into `ERR_FAILED` with the panic message and location.
pub fn guard<R>(f: impl FnOnce() -> Result<R, FfiError>) -> RResult<R, FfiError> {
    install_hook();
    let _ = IN_GUARD.try_with(|g| g.set(g.get() + 1));
    let r = catch_unwind(AssertUnwindSafe(f));
    let _ = IN_GUARD.try_with(|g| g.set(g.get().saturating_sub(1)));
    match r {
        Ok(Ok(v)) => ROk(v),
        Ok(Err(e)) => RErr(e),
        Err(payload) => {
            let msg = LAST_PANIC
                .try_with(|p| p.borrow_mut().take())
                .ok()
                .flatten()
                .unwrap_or_else(|| panic_message(payload.as_ref()));
            // Dropping a payload can itself panic; never let that escape either.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            RErr(FfiError::failed(format!("panicked: {msg}")))
        }
    }
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// A native plugin error as an `FfiError` (parameter errors keep their key path).
pub fn plugin_error(e: PluginError) -> FfiError {
    match e {
        PluginError::Params { path, message } => FfiError {
            code: ERR_PARAMS,
            path: path.into(),
            message: message.into(),
        },
        other => FfiError::failed(other.to_string()),
    }
}

/// A native model error as an `FfiError` (a missing engine/dtype path stays distinguishable).
pub fn model_error(e: ModelError) -> FfiError {
    match e {
        ModelError::UnsupportedDType { .. } => FfiError::unsupported(e.to_string()),
        ModelError::Plugin(p) => plugin_error(p),
        other => FfiError::failed(other.to_string()),
    }
}

/// Parse a factory's JSON parameters into the plugin's own struct.
pub fn parse_params<P: DeserializeOwned>(json: &str) -> Result<P, FfiError> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| FfiError::failed(format!("parameters are not valid JSON: {e}")))?;
    perfcast_core::params::parse::<P>(&v).map_err(plugin_error)
}

/// The error for a factory asked for a name the plugin does not provide.
pub fn unknown(category: &str, name: &str) -> FfiError {
    FfiError::failed(format!("this plugin provides no {category} named `{name}`"))
}

/// The descriptor `describe` returns: `(category code, name, description)` per component.
pub fn describe(name: &str, version: &str, components: &[(u32, &str, &str)]) -> PluginDescriptor {
    PluginDescriptor {
        abi_major: RUST_ABI_MAJOR,
        abi_minor: RUST_ABI_MINOR,
        name: name.into(),
        version: version.into(),
        sdk_version: env!("CARGO_PKG_VERSION").into(),
        components: components
            .iter()
            .map(|(c, n, d)| ComponentDesc {
                category: *c,
                name: (*n).into(),
                description: (*d).into(),
            })
            .collect::<RVec<_>>(),
    }
}

/// What the plugin's `perfcast_rust_params_v1` symbol returns: the declared parameters of
/// each `(category code, name, params)` as JSON (`[{"category", "name", "params":
/// [ParamSpec...]}]`), NUL-terminated, built once and kept for the life of the process. A
/// panic while building it gives a null pointer (the host then shows the components as "not
/// declared").
pub fn params_json(
    list: impl FnOnce() -> Vec<(u32, &'static str, &'static [perfcast_core::ParamSpec])>,
) -> *const std::ffi::c_char {
    static JSON: std::sync::OnceLock<Option<std::ffi::CString>> = std::sync::OnceLock::new();
    let text = JSON.get_or_init(|| {
        let built = catch_unwind(AssertUnwindSafe(|| {
            let entries: Vec<serde_json::Value> = list()
                .into_iter()
                .map(|(category, name, params)| {
                    serde_json::json!({"category": category, "name": name, "params": params})
                })
                .collect();
            serde_json::to_string(&entries).ok()
        }));
        built
            .ok()
            .flatten()
            .and_then(|s| std::ffi::CString::new(s).ok())
    });
    text.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

/// Run a `describe` body; a panic (in an expression given for the name or version) yields a
/// descriptor with an empty name, which the loader rejects, instead of unwinding out of an
/// `extern "C"` function (an abort).
pub fn describe_guarded(f: impl FnOnce() -> PluginDescriptor) -> PluginDescriptor {
    match guard(|| Ok(f())) {
        ROk(d) => d,
        RErr(e) => PluginDescriptor {
            abi_major: RUST_ABI_MAJOR,
            abi_minor: RUST_ABI_MINOR,
            name: Default::default(),
            version: e.message,
            sdk_version: env!("CARGO_PKG_VERSION").into(),
            components: RVec::new(),
        },
    }
}

/// Leak the root module (assembled by `export_plugin!`).
pub fn root_module(module: PluginModule) -> PluginModuleRef {
    module.leak_into_prefix()
}

pub fn build_topology<P, T, F>(build: F, params_json: &str) -> Result<FfiTopologyBox, FfiError>
where
    P: DeserializeOwned,
    T: Topology + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let t = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiTopology_TO::from_value(SdkTopology(t), TD_Opaque))
}

/// A host network level as a topology plugin sees it: its numbers.
#[derive(Debug, Clone, Copy)]
pub struct LevelView(pub FfiLevel);

impl Interconnect for LevelView {
    fn kind(&self) -> &str {
        "host-level"
    }
    fn domain_size(&self) -> u32 {
        self.0.domain_size
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth(self.0.bandwidth)
    }
    fn latency(&self) -> Seconds {
        Seconds(self.0.latency)
    }
    fn collective_overhead(&self) -> Seconds {
        Seconds(self.0.overhead)
    }
}

/// The host's levels as native interconnects.
pub fn levels(l: RSlice<'_, FfiLevel>) -> Vec<Arc<dyn Interconnect>> {
    l.iter()
        .map(|p| Arc::new(LevelView(*p)) as Arc<dyn Interconnect>)
        .collect()
}

/// A native level as data.
pub fn level_data(l: &dyn Interconnect) -> FfiLevel {
    FfiLevel {
        domain_size: l.domain_size(),
        bandwidth: l.bandwidth().0,
        latency: l.latency().0,
        overhead: l.collective_overhead().0,
    }
}

struct SdkTopology<T>(T);

impl<T: Topology + 'static> FfiTopology for SdkTopology<T> {
    fn check(&self, l: RSlice<'_, FfiLevel>, devices: u64) -> RResult<(), FfiError> {
        guard(|| self.0.check(&levels(l), devices).map_err(plugin_error))
    }
    fn links(
        &self,
        l: RSlice<'_, FfiLevel>,
        devices: u64,
    ) -> RResult<RVec<FfiLinkClass>, FfiError> {
        guard(|| {
            let v = self.0.links(&levels(l), devices).map_err(plugin_error)?;
            Ok(v.into_iter()
                .map(|c| FfiLinkClass {
                    name: c.name.into(),
                    count: c.count,
                    bandwidth: c.bandwidth.0,
                })
                .collect())
        })
    }
    fn cost(
        &self,
        l: RSlice<'_, FfiLevel>,
        devices: u64,
    ) -> RResult<ROption<FfiNetworkCost>, FfiError> {
        guard(|| {
            let c = self.0.cost(&levels(l), devices).map_err(plugin_error)?;
            Ok(c.map(|c| FfiNetworkCost {
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
            })
            .into())
        })
    }
    fn collective(
        &self,
        l: RSlice<'_, FfiLevel>,
        axes: RSlice<'_, FfiGroupAxis>,
        devices: u64,
        kind: u32,
        bytes: f64,
    ) -> RResult<FfiCollectiveCost, FfiError> {
        guard(|| {
            let kind = codes::collective_kind_from_code(kind).ok_or_else(|| {
                FfiError::unsupported(format!("unknown collective kind code {kind}"))
            })?;
            let axes: Vec<GroupAxis> = axes
                .iter()
                .map(|a| GroupAxis {
                    degree: a.degree,
                    stride: a.stride,
                })
                .collect();
            let g = GroupPlacement::new(&axes, devices).map_err(plugin_error)?;
            let c = self
                .0
                .collective(&levels(l), &g, kind, Bytes(bytes))
                .map_err(plugin_error)?;
            Ok(FfiCollectiveCost {
                time: c.time.0,
                loads: c
                    .loads
                    .as_slice()
                    .iter()
                    .map(|l| FfiLinkLoad {
                        class: l.class,
                        links: l.links,
                        busy: l.busy.0,
                    })
                    .collect(),
            })
        })
    }
}

pub fn build_compute_unit<P, T, F>(
    build: F,
    params_json: &str,
) -> Result<FfiComputeUnitBox, FfiError>
where
    P: DeserializeOwned,
    T: ComputeUnit + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let unit = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiComputeUnit_TO::from_value(
        SdkComputeUnit(unit),
        TD_Opaque,
    ))
}

pub fn build_memory_tier<P, T, F>(build: F, params_json: &str) -> Result<FfiMemoryTierBox, FfiError>
where
    P: DeserializeOwned,
    T: MemoryTier + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let tier = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiMemoryTier_TO::from_value(SdkMemoryTier(tier), TD_Opaque))
}

pub fn build_interconnect<P, T, F>(
    build: F,
    params_json: &str,
) -> Result<FfiInterconnectBox, FfiError>
where
    P: DeserializeOwned,
    T: Interconnect + 'static,
    F: FnOnce(P) -> Result<T, PluginError>,
{
    let link = build(parse_params(params_json)?).map_err(plugin_error)?;
    Ok(FfiInterconnect_TO::from_value(
        SdkInterconnect(link),
        TD_Opaque,
    ))
}

fn native_op(op: &PcOp) -> Result<ComputeOp, FfiError> {
    op.to_native().map_err(FfiError::unsupported)
}

/// The host's memory tiers, in the host's order (so `TimeBound::Memory(i)` indices agree).
pub fn hierarchy(tiers: RSlice<'_, FfiTier<'_>>) -> Result<MemoryHierarchy, FfiError> {
    let mut out: Vec<Arc<dyn MemoryTier>> = Vec::with_capacity(tiers.len());
    for t in tiers.iter() {
        let level = tier_level_from_code(t.props.level).ok_or_else(|| {
            FfiError::failed(format!(
                "memory tier `{}` has unknown level code {}",
                t.kind, t.props.level
            ))
        })?;
        out.push(Arc::new(PropsTier::new(
            t.kind.to_string(),
            level,
            t.props,
            None,
        )));
    }
    Ok(MemoryHierarchy { tiers: out })
}

struct SdkComputeUnit<T>(T);

impl<T: ComputeUnit + 'static> FfiComputeUnit for SdkComputeUnit<T> {
    fn peak(&self, engine: u32, dtype: u32) -> RResult<ROption<f64>, FfiError> {
        guard(|| {
            let e = engine_from_code(engine)
                .ok_or_else(|| FfiError::unsupported(format!("unknown engine code {engine}")))?;
            let d = dtype_from_code(dtype)
                .ok_or_else(|| FfiError::unsupported(format!("unknown dtype code {dtype}")))?;
            Ok(self.0.peak(e, d).map(|r| r.0).into())
        })
    }
    fn efficiency(&self, op: &PcOp) -> RResult<f64, FfiError> {
        guard(|| Ok(self.0.efficiency(&native_op(op)?)))
    }
    fn launch_overhead(&self) -> RResult<f64, FfiError> {
        guard(|| Ok(self.0.launch_overhead().0))
    }
    fn gemm_tile(&self) -> RResult<u64, FfiError> {
        guard(|| Ok(self.0.gemm_tile()))
    }
    fn op_time(&self, op: &PcOp, tiers: RSlice<'_, FfiTier<'_>>) -> RResult<PcOpTime, FfiError> {
        guard(|| {
            let op = native_op(op)?;
            let mem = hierarchy(tiers)?;
            self.0
                .op_time(&op, &mem)
                .map(|t| PcOpTime::from_native(&t))
                .map_err(model_error)
        })
    }
}

struct SdkMemoryTier<T>(T);

impl<T: MemoryTier + 'static> FfiMemoryTier for SdkMemoryTier<T> {
    fn properties(&self) -> RResult<TierProps, FfiError> {
        guard(|| {
            Ok(TierProps {
                level: tier_level_code(self.0.level()),
                capacity: self.0.capacity().0,
                bandwidth: self.0.bandwidth().0,
                efficiency: self.0.efficiency(),
                latency: self.0.latency().0,
            })
        })
    }
}

struct SdkInterconnect<T>(T);

impl<T: Interconnect + 'static> FfiInterconnect for SdkInterconnect<T> {
    fn properties(&self) -> RResult<LinkProps, FfiError> {
        guard(|| {
            Ok(LinkProps {
                domain_size: self.0.domain_size(),
                bandwidth: self.0.bandwidth().0,
                latency: self.0.latency().0,
            })
        })
    }
    fn collective_time(
        &self,
        kind: u32,
        bytes: f64,
        ranks: u32,
        algorithm: u32,
    ) -> RResult<f64, FfiError> {
        guard(|| {
            let kind = codes::collective_kind_from_code(kind).ok_or_else(|| {
                FfiError::unsupported(format!("unknown collective kind code {kind}"))
            })?;
            let algorithm = codes::algorithm_from_code(algorithm).ok_or_else(|| {
                FfiError::unsupported(format!("unknown collective algorithm code {algorithm}"))
            })?;
            let c = Collective {
                kind,
                bytes: Bytes(bytes),
                ranks,
            };
            self.0
                .try_collective_time(&c, algorithm)
                .map(|t| t.0)
                .map_err(|e| match e {
                    PluginError::Failed { message, .. } => FfiError::failed(message),
                    other => FfiError::failed(other.to_string()),
                })
        })
    }
}

/// Export native `perfcast_core` implementations as a perfcast Rust plugin (see the module
/// docs of [`sdk`](crate::sdk)). Expands to the abi_stable root module and its exported
/// header symbol; use it once per cdylib.
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr
        $(, compute_units: [ $( $cu:literal => $cu_build:path $(: $cu_desc:literal)? $([$cu_params:expr])? ),* $(,)? ] )?
        $(, memory_tiers: [ $( $mt:literal => $mt_build:path $(: $mt_desc:literal)? $([$mt_params:expr])? ),* $(,)? ] )?
        $(, interconnects: [ $( $ic:literal => $ic_build:path $(: $ic_desc:literal)? $([$ic_params:expr])? ),* $(,)? ] )?
        $(, topologies: [ $( $tp:literal => $tp_build:path $(: $tp_desc:literal)? $([$tp_params:expr])? ),* $(,)? ] )?
        $(, parallel_strategies: [ $( $ps:literal => $ps_build:path $(: $ps_desc:literal)? $([$ps_params:expr])? ),* $(,)? ] )?
        $(, pipeline_schedules: [ $( $sc:literal => $sc_build:path $(: $sc_desc:literal)? $([$sc_params:expr])? ),* $(,)? ] )?
        $(, recompute_policies: [ $( $rp:literal => $rp_build:path $(: $rp_desc:literal)? $([$rp_params:expr])? ),* $(,)? ] )?
        $(,)?
    ) => {
        #[doc(hidden)]
        #[allow(non_upper_case_globals, unused_imports)]
        pub mod __perfcast_plugin_export {
            use super::*;
            use $crate::__private::abi_stable::std_types::{RResult, RStr};

            extern "C" fn describe() -> $crate::PluginDescriptor {
                $crate::sdk::describe_guarded(|| $crate::sdk::describe($name, $version, &[
                    $($( ($crate::codes::CATEGORY_COMPUTE_UNIT, $cu, $crate::export_plugin!(@desc $($cu_desc)?)), )*)?
                    $($( ($crate::codes::CATEGORY_MEMORY_TIER, $mt, $crate::export_plugin!(@desc $($mt_desc)?)), )*)?
                    $($( ($crate::codes::CATEGORY_INTERCONNECT, $ic, $crate::export_plugin!(@desc $($ic_desc)?)), )*)?
                    $($( ($crate::codes::CATEGORY_TOPOLOGY, $tp, $crate::export_plugin!(@desc $($tp_desc)?)), )*)?
                    $($( ($crate::codes::CATEGORY_PARALLEL_STRATEGY, $ps, $crate::export_plugin!(@desc $($ps_desc)?)), )*)?
                    $($( ($crate::codes::CATEGORY_PIPELINE_SCHEDULE, $sc, $crate::export_plugin!(@desc $($sc_desc)?)), )*)?
                    $($( ($crate::codes::CATEGORY_RECOMPUTE_POLICY, $rp, $crate::export_plugin!(@desc $($rp_desc)?)), )*)?
                ]))
            }

            /// The declared parameters (a plain C symbol beside abi_stable's root module, so
            /// that declaring them changes no abi_stable layout: see plugins/examples/README.md).
            #[no_mangle]
            pub extern "C" fn perfcast_rust_params_v1() -> *const ::std::ffi::c_char {
                $crate::sdk::params_json(|| {
                    let mut v: ::std::vec::Vec<(u32, &'static str, &'static [$crate::__private::ParamSpec])> =
                        ::std::vec::Vec::new();
                    $($( $( v.push(($crate::codes::CATEGORY_COMPUTE_UNIT, $cu, $cu_params)); )? )*)?
                    $($( $( v.push(($crate::codes::CATEGORY_MEMORY_TIER, $mt, $mt_params)); )? )*)?
                    $($( $( v.push(($crate::codes::CATEGORY_INTERCONNECT, $ic, $ic_params)); )? )*)?
                    $($( $( v.push(($crate::codes::CATEGORY_TOPOLOGY, $tp, $tp_params)); )? )*)?
                    $($( $( v.push(($crate::codes::CATEGORY_PARALLEL_STRATEGY, $ps, $ps_params)); )? )*)?
                    $($( $( v.push(($crate::codes::CATEGORY_PIPELINE_SCHEDULE, $sc, $sc_params)); )? )*)?
                    $($( $( v.push(($crate::codes::CATEGORY_RECOMPUTE_POLICY, $rp, $rp_params)); )? )*)?
                    v
                })
            }

            extern "C" fn new_compute_unit(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiComputeUnitBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $cu => $crate::sdk::build_compute_unit($cu_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("compute unit", other)),
                })
            }

            extern "C" fn new_memory_tier(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiMemoryTierBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $mt => $crate::sdk::build_memory_tier($mt_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("memory tier", other)),
                })
            }

            extern "C" fn new_interconnect(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiInterconnectBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $ic => $crate::sdk::build_interconnect($ic_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("interconnect", other)),
                })
            }

            extern "C" fn new_topology(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiTopologyBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $tp => $crate::sdk::build_topology($tp_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("topology", other)),
                })
            }

            extern "C" fn new_parallel_strategy(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiParallelStrategyBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $ps => $crate::sdk::build_parallel_strategy($ps_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("parallel strategy", other)),
                })
            }

            extern "C" fn new_pipeline_schedule(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiPipelineScheduleBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $sc => $crate::sdk::build_pipeline_schedule($sc_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("pipeline schedule", other)),
                })
            }

            extern "C" fn new_recompute_policy(
                name: RStr<'_>,
                params: RStr<'_>,
            ) -> RResult<$crate::FfiRecomputePolicyBox, $crate::FfiError> {
                let _ = &params;
                $crate::sdk::guard(|| match name.as_str() {
                    $($( $rp => $crate::sdk::build_recompute_policy($rp_build, params.as_str()), )*)?
                    other => Err($crate::sdk::unknown("recompute policy", other)),
                })
            }

            fn root_module() -> $crate::PluginModuleRef {
                $crate::sdk::root_module($crate::PluginModule {
                    describe,
                    new_compute_unit,
                    new_memory_tier,
                    new_interconnect,
                    new_topology,
                    new_parallel_strategy,
                    new_pipeline_schedule,
                    new_recompute_policy,
                })
            }

            // What `#[abi_stable::export_root_module]` expands to, with paths through this
            // crate so that plugin crates need no direct abi_stable dependency.
            #[no_mangle]
            pub static _1as_0lib_1header_0root_bmodule_bloader:
                $crate::__private::abi_stable::library::LibHeader = {
                pub extern "C" fn _sabi_erased_module(
                ) -> $crate::__private::abi_stable::library::RootModuleResult {
                    $crate::__private::abi_stable::library::__call_root_module_loader(root_module)
                }
                unsafe {
                    $crate::__private::abi_stable::library::LibHeader::from_constructor::<
                        $crate::PluginModuleRef,
                    >(
                        _sabi_erased_module,
                        $crate::__private::abi_stable::library::CheckTypeLayout::Yes,
                    )
                }
            };
        }
    };
    (@desc) => { "" };
    (@desc $d:literal) => { $d };
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::{DType, Engine, FlopRate};
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct P {
        tflops: f64,
        #[serde(default)]
        explode: bool,
    }
    struct Dev(P);
    impl ComputeUnit for Dev {
        fn kind(&self) -> &str {
            "t/dev"
        }
        fn peak(&self, e: Engine, d: DType) -> Option<FlopRate> {
            assert!(!self.0.explode, "peak exploded");
            (e == Engine::Matrix && d == DType::Bf16).then(|| FlopRate::from_tflops(self.0.tflops))
        }
    }
    fn build(p: P) -> Result<Dev, PluginError> {
        perfcast_core::params::positive("tflops", p.tflops)?;
        Ok(Dev(p))
    }

    fn build_err(json: &str) -> FfiError {
        build_compute_unit(build, json).err().expect("must fail")
    }

    #[test]
    fn params_errors_keep_the_key() {
        let e = build_err(r#"{"tflops": 1, "tflopz": 2}"#);
        assert_eq!(e.code, ERR_PARAMS);
        assert!(e.message.contains("tflopz"), "{e:?}");
        let e = build_err(r#"{"tflops": -1}"#);
        assert_eq!((e.code, e.path.as_str()), (ERR_PARAMS, "tflops"));
        assert_eq!(build_err("{").code, ERR_FAILED);
    }

    #[test]
    fn calls_are_guarded() {
        let ok = build_compute_unit(build, r#"{"tflops": 2}"#).unwrap();
        assert_eq!(
            ok.peak(ENGINE_MATRIX, DType::Bf16.code()).unwrap(),
            ROption::RSome(2e12)
        );
        assert_eq!(
            ok.peak(ENGINE_MATRIX, DType::Fp8.code()).unwrap(),
            ROption::RNone
        );
        assert_eq!(ok.peak(9, 0).unwrap_err().code, ERR_UNSUPPORTED);
        let boom = build_compute_unit(build, r#"{"tflops": 2, "explode": true}"#).unwrap();
        let e = boom.peak(ENGINE_MATRIX, DType::Bf16.code()).unwrap_err();
        assert_eq!(e.code, ERR_FAILED);
        assert!(e.message.contains("peak exploded"), "{e:?}");
        // The location is in the message (the panic itself was not printed).
        assert!(e.message.contains("sdk/mod.rs:"), "{e:?}");
    }
}
