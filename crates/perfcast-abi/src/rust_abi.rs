//! The Rust plugin ABI (abi_stable): a root module that is a prefix type, and FFI-safe trait
//! objects (`#[sabi_trait]`) for compute units, memory tiers and interconnects.
//!
//! Every call is coarse and numeric, returns an `RResult` (so a plugin never has to panic
//! across the boundary: the SDK turns panics into `FfiError`s), and takes ops as the
//! `#[repr(C)]` `PcOp` shared with the C ABI.
//!
//! Evolution: abi_stable compares the layout of everything reachable from the root module at
//! load time and, for versions >= 1.0, requires equal majors (`RUST_ABI_VERSION`). Its checker
//! lets an OLDER host load a NEWER plugin (appended prefix fields), not the other way round. So
//! a minor appends to [`PluginModule`] (1.1: `new_topology`; 1.2: `new_parallel_strategy`,
//! `new_pipeline_schedule`, `new_recompute_policy`) or to a trait reachable from it (1.3:
//! [`FfiPipelineSchedule::properties`]; 1.4: [`FfiParallelStrategy::axes`] and the `*_axes`
//! calls) and freezes the previous layout here ([`v1_3`]): the loader checks a library against
//! the current layout and, when that fails, against the frozen one, and serves what that minor
//! offers. Only the current minor and the one before it load ([`RUST_ABI_OLDEST_MINOR`]): when
//! a minor is added, the oldest frozen module goes (see `plugins/examples/README.md`). Types
//! reachable from a frozen layout never change.

use crate::c::{
    PcLayerActivations, PcOp, PcOpTime, PcRecomputePlan, PcScheduleInput, PcScheduleProperties,
    PcScheduleResult,
};
use crate::strategy::{
    PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlan, PcPlanAxes, PcStateSplit,
};
use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RSlice, RSliceMut, RStr, RString, RVec},
    StableAbi,
};

/// Version of the Rust ABI: the perfcast-abi crate's own version, which abi_stable both checks
/// as the root module's `VERSION_STRINGS` (equal majors) and records in every type layout.
pub const RUST_ABI_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const RUST_ABI_MAJOR: u32 = 1;
pub const RUST_ABI_MINOR: u32 = 4;
/// Oldest minor of the Rust ABI this host loads: the current one and the one before it. A
/// library of an earlier minor (its root module frozen in no module here) is refused.
pub const RUST_ABI_OLDEST_MINOR: u32 = 3;

/// An error crossing the boundary. `code` is one of `codes::ERR_*`; `path` is the parameter
/// key path for `ERR_PARAMS` (empty otherwise).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct FfiError {
    pub code: i32,
    pub path: RString,
    pub message: RString,
}

impl FfiError {
    pub fn failed(message: impl Into<String>) -> Self {
        FfiError {
            code: crate::codes::ERR_FAILED,
            path: RString::new(),
            message: RString::from(message.into()),
        }
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        FfiError {
            code: crate::codes::ERR_UNSUPPORTED,
            path: RString::new(),
            message: RString::from(message.into()),
        }
    }
}

/// A memory tier as plain data (level code, bytes, bytes/s, fraction, seconds).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq)]
pub struct TierProps {
    pub level: u32,
    pub capacity: f64,
    pub bandwidth: f64,
    pub efficiency: f64,
    pub latency: f64,
}

/// A memory tier described by plain data, as either side of the ABI rebuilds one from
/// [`TierProps`]: the SDK for the tiers a host hands a plugin, the loader for a plugin's
/// tiers. `keep` owns whatever must live as long as the tier (on the host side, the
/// plugin's instance).
pub struct PropsTier {
    kind: String,
    level: perfcast_core::TierLevel,
    props: TierProps,
    _keep: Option<Box<dyn Send + Sync>>,
}

impl PropsTier {
    /// A tier of `kind` at `level` (the level code of `props` already decoded).
    pub fn new(
        kind: String,
        level: perfcast_core::TierLevel,
        props: TierProps,
        keep: Option<Box<dyn Send + Sync>>,
    ) -> Self {
        PropsTier {
            kind,
            level,
            props,
            _keep: keep,
        }
    }
}

impl perfcast_core::MemoryTier for PropsTier {
    fn kind(&self) -> &str {
        &self.kind
    }
    fn level(&self) -> perfcast_core::TierLevel {
        self.level
    }
    fn capacity(&self) -> perfcast_core::Bytes {
        perfcast_core::Bytes(self.props.capacity)
    }
    fn bandwidth(&self) -> perfcast_core::Bandwidth {
        perfcast_core::Bandwidth(self.props.bandwidth)
    }
    fn efficiency(&self) -> f64 {
        self.props.efficiency
    }
    fn latency(&self) -> perfcast_core::Seconds {
        perfcast_core::Seconds(self.props.latency)
    }
}

/// A tier handed to `op_time`: its registered name and its properties.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct FfiTier<'a> {
    pub kind: RStr<'a>,
    pub props: TierProps,
}

/// An interconnect level as plain data.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq)]
pub struct LinkProps {
    pub domain_size: u32,
    /// Bytes/s per device, one direction.
    pub bandwidth: f64,
    /// Seconds per algorithm step.
    pub latency: f64,
}

/// FFI mirror of `perfcast_core::ComputeUnit`. Codes as in `codes`; `peak` is `RNone` for a
/// path the device lacks (and `ERR_UNSUPPORTED` for a code it does not know).
#[sabi_trait]
pub trait FfiComputeUnit: Send + Sync {
    fn peak(&self, engine: u32, dtype: u32) -> RResult<ROption<f64>, FfiError>;
    fn efficiency(&self, op: &PcOp) -> RResult<f64, FfiError>;
    fn launch_overhead(&self) -> RResult<f64, FfiError>;
    fn gemm_tile(&self) -> RResult<u64, FfiError>;
    #[sabi(last_prefix_field)]
    fn op_time(&self, op: &PcOp, tiers: RSlice<'_, FfiTier<'_>>) -> RResult<PcOpTime, FfiError>;
}

/// FFI mirror of `perfcast_core::MemoryTier` (all of it is constant data).
#[sabi_trait]
pub trait FfiMemoryTier: Send + Sync {
    #[sabi(last_prefix_field)]
    fn properties(&self) -> RResult<TierProps, FfiError>;
}

/// FFI mirror of `perfcast_core::Interconnect`.
#[sabi_trait]
pub trait FfiInterconnect: Send + Sync {
    fn properties(&self) -> RResult<LinkProps, FfiError>;
    /// `kind`/`algorithm` codes as in `codes`; bytes as `Collective::bytes`; seconds.
    #[sabi(last_prefix_field)]
    fn collective_time(
        &self,
        kind: u32,
        bytes: f64,
        ranks: u32,
        algorithm: u32,
    ) -> RResult<f64, FfiError>;
}

/// A network level as a topology plugin sees it (Rust ABI 1.1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FfiLevel {
    pub domain_size: u32,
    /// Bytes/s per device, one direction.
    pub bandwidth: f64,
    /// Seconds per algorithm step.
    pub latency: f64,
    /// Seconds per collective (`Interconnect::collective_overhead`).
    pub overhead: f64,
}

/// One axis of a group placement (`perfcast_core::topology::GroupAxis`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FfiGroupAxis {
    pub degree: u64,
    pub stride: u64,
}

/// One link load (`perfcast_core::topology::LinkLoad`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq)]
pub struct FfiLinkLoad {
    pub class: u32,
    pub links: f64,
    /// Seconds.
    pub busy: f64,
}

/// A collective's time (seconds) and link loads.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct FfiCollectiveCost {
    pub time: f64,
    pub loads: RVec<FfiLinkLoad>,
}

/// One link class (`perfcast_core::topology::LinkClass`); bandwidth in bytes/s.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct FfiLinkClass {
    pub name: RString,
    pub count: f64,
    pub bandwidth: f64,
}

/// One line of a bill (`perfcast_core::topology::CostItem`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct FfiCostItem {
    pub item: RString,
    pub count: f64,
    pub unit_usd: f64,
}

/// A network's cost (`perfcast_core::topology::NetworkCost`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct FfiNetworkCost {
    pub switches: f64,
    pub switch_ports: f64,
    pub optics: f64,
    pub items: RVec<FfiCostItem>,
}

/// FFI mirror of `perfcast_core::Topology` (Rust ABI 1.1). `levels` are the system's network
/// levels as data; a group is its axes and the plan's devices; `kind` as `codes`.
#[sabi_trait]
pub trait FfiTopology: Send + Sync {
    fn check(&self, levels: RSlice<'_, FfiLevel>, devices: u64) -> RResult<(), FfiError>;
    fn links(
        &self,
        levels: RSlice<'_, FfiLevel>,
        devices: u64,
    ) -> RResult<RVec<FfiLinkClass>, FfiError>;
    fn cost(
        &self,
        levels: RSlice<'_, FfiLevel>,
        devices: u64,
    ) -> RResult<ROption<FfiNetworkCost>, FfiError>;
    #[sabi(last_prefix_field)]
    fn collective(
        &self,
        levels: RSlice<'_, FfiLevel>,
        axes: RSlice<'_, FfiGroupAxis>,
        devices: u64,
        kind: u32,
        bytes: f64,
    ) -> RResult<FfiCollectiveCost, FfiError>;
}

/// FFI mirror of `perfcast_core::parallel::ParallelStrategy` (Rust ABI 1.2; declared axes
/// 1.4), the data as `crate::strategy`'s `#[repr(C)]` types. `axis` is a code of
/// `strategy::AXES`; the splits come in as the factors so far and go out multiplied; `comms`
/// writes its collectives into `out` (the host's fixed-capacity array) and returns how many
/// it wrote. A 1.4 host asks `axes` once per instance and then calls only the `*_axes`
/// methods, whose plan carries the degrees of the strategy's own declared axes; the 1.2
/// methods stay for the layout (the SDK answers them as the `*_axes` ones with no axes).
#[sabi_trait]
pub trait FfiParallelStrategy: Send + Sync {
    fn axis(&self) -> RResult<u32, FfiError>;
    fn validate(&self, model: &PcModel, plan: &PcPlan) -> RResult<(), FfiError>;
    fn split_layer(&self, plan: &PcPlan, split: PcLayerSplit) -> RResult<PcLayerSplit, FfiError>;
    fn split_state(&self, plan: &PcPlan, split: PcStateSplit) -> RResult<PcStateSplit, FfiError>;
    #[sabi(last_prefix_field)]
    fn comms(
        &self,
        plan: &PcPlan,
        dims: &PcLayerDims,
        out: RSliceMut<'_, PcCommOp>,
    ) -> RResult<u32, FfiError>;
    /// Since 1.4: the mesh axes the strategy declares (at most
    /// `perfcast_core::parallel::MAX_DECLARED_AXES`).
    fn axes(&self) -> RResult<RVec<PcAxisDecl>, FfiError>;
    /// Since 1.4.
    fn validate_axes(&self, model: &PcModel, plan: &PcPlanAxes) -> RResult<(), FfiError>;
    /// Since 1.4.
    fn split_layer_axes(
        &self,
        plan: &PcPlanAxes,
        split: PcLayerSplit,
    ) -> RResult<PcLayerSplit, FfiError>;
    /// Since 1.4.
    fn split_state_axes(
        &self,
        plan: &PcPlanAxes,
        split: PcStateSplit,
    ) -> RResult<PcStateSplit, FfiError>;
    /// Since 1.4: collectives may name the strategy's own axes (`0x100 << k` for its `k`-th).
    fn comms_axes(
        &self,
        plan: &PcPlanAxes,
        dims: &PcLayerDims,
        out: RSliceMut<'_, PcCommOp>,
    ) -> RResult<u32, FfiError>;
}

/// FFI mirror of `perfcast_core::parallel::PipelineSchedule` (Rust ABI 1.2; `properties`
/// 1.3): the plan to check, the C ABI's `perfcast_schedule_input`/`_result`,
/// `peak_layers_held` with the stage's layers per chunk as a slice, and the C ABI's
/// `perfcast_schedule_properties` (asked once per instance).
#[sabi_trait]
pub trait FfiPipelineSchedule: Send + Sync {
    fn validate(&self, plan: &PcPlan) -> RResult<(), FfiError>;
    fn step(&self, input: &PcScheduleInput) -> RResult<PcScheduleResult, FfiError>;
    fn in_flight(&self, input: &PcScheduleInput, stage: u32) -> RResult<f64, FfiError>;
    #[sabi(last_prefix_field)]
    fn peak_layers_held(
        &self,
        input: &PcScheduleInput,
        stage: u32,
        chunk_layers: RSlice<'_, f64>,
    ) -> RResult<f64, FfiError>;
    /// Since 1.3.
    fn properties(&self) -> RResult<PcScheduleProperties, FfiError>;
}

/// FFI mirror of `perfcast_core::parallel::RecomputePolicy` (Rust ABI 1.2), with the C
/// ABI's structs; `recompute_layers` 0 is "not given".
#[sabi_trait]
pub trait FfiRecomputePolicy: Send + Sync {
    #[sabi(last_prefix_field)]
    fn plan(
        &self,
        act: &PcLayerActivations,
        layers: u32,
        recompute_layers: u32,
    ) -> RResult<PcRecomputePlan, FfiError>;
}

pub type FfiComputeUnitBox = FfiComputeUnit_TO<'static, RBox<()>>;
pub type FfiMemoryTierBox = FfiMemoryTier_TO<'static, RBox<()>>;
pub type FfiInterconnectBox = FfiInterconnect_TO<'static, RBox<()>>;
pub type FfiTopologyBox = FfiTopology_TO<'static, RBox<()>>;
pub type FfiParallelStrategyBox = FfiParallelStrategy_TO<'static, RBox<()>>;
pub type FfiPipelineScheduleBox = FfiPipelineSchedule_TO<'static, RBox<()>>;
pub type FfiRecomputePolicyBox = FfiRecomputePolicy_TO<'static, RBox<()>>;

/// One component a plugin provides.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ComponentDesc {
    /// `codes::CATEGORY_*`.
    pub category: u32,
    /// Namespaced registered name, e.g. `acme/npu9`.
    pub name: RString,
    pub description: RString,
}

/// What a plugin says about itself.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct PluginDescriptor {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub name: RString,
    pub version: RString,
    /// Version of the perfcast-abi crate (SDK) the plugin was built with.
    pub sdk_version: RString,
    pub components: RVec<ComponentDesc>,
}

/// Factory signature: `(registered name, params as a JSON object)`.
pub type NewComputeUnit = extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiComputeUnitBox, FfiError>;
pub type NewMemoryTier = extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiMemoryTierBox, FfiError>;
pub type NewInterconnect =
    extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiInterconnectBox, FfiError>;
pub type NewTopology = extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiTopologyBox, FfiError>;
pub type NewParallelStrategy =
    extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiParallelStrategyBox, FfiError>;
pub type NewPipelineSchedule =
    extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiPipelineScheduleBox, FfiError>;
pub type NewRecomputePolicy =
    extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiRecomputePolicyBox, FfiError>;

/// Rust ABI 1.3, frozen: its parallel-strategy trait (the 1.2 one, without declared axes)
/// and its root module. The loader serves every 1.3 category; a 1.3 strategy declares no
/// axes. (1.0 to 1.2, older than the minor before the current one, are no longer kept.)
pub mod v1_3 {
    use super::*;

    /// Rust ABI 1.2's and 1.3's parallel strategy (never changes).
    #[sabi_trait]
    pub trait FfiParallelStrategy: Send + Sync {
        fn axis(&self) -> RResult<u32, FfiError>;
        fn validate(&self, model: &PcModel, plan: &PcPlan) -> RResult<(), FfiError>;
        fn split_layer(
            &self,
            plan: &PcPlan,
            split: PcLayerSplit,
        ) -> RResult<PcLayerSplit, FfiError>;
        fn split_state(
            &self,
            plan: &PcPlan,
            split: PcStateSplit,
        ) -> RResult<PcStateSplit, FfiError>;
        #[sabi(last_prefix_field)]
        fn comms(
            &self,
            plan: &PcPlan,
            dims: &PcLayerDims,
            out: RSliceMut<'_, PcCommOp>,
        ) -> RResult<u32, FfiError>;
    }

    pub type FfiParallelStrategyBox = FfiParallelStrategy_TO<'static, RBox<()>>;
    pub type NewParallelStrategy =
        extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiParallelStrategyBox, FfiError>;

    /// Rust ABI 1.3's root module (never changes).
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
    #[sabi(missing_field(panic))]
    pub struct PluginModule {
        pub describe: extern "C" fn() -> PluginDescriptor,
        pub new_compute_unit:
            extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiComputeUnitBox, FfiError>,
        pub new_memory_tier:
            extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiMemoryTierBox, FfiError>,
        #[sabi(last_prefix_field)]
        pub new_interconnect:
            extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiInterconnectBox, FfiError>,
        pub new_topology: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiTopologyBox, FfiError>,
        pub new_parallel_strategy:
            extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiParallelStrategyBox, FfiError>,
        pub new_pipeline_schedule:
            extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<super::FfiPipelineScheduleBox, FfiError>,
        pub new_recompute_policy:
            extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiRecomputePolicyBox, FfiError>,
    }

    impl RootModule for PluginModuleRef {
        declare_root_module_statics! {PluginModuleRef}
        const BASE_NAME: &'static str = "perfcast_plugin";
        const NAME: &'static str = "perfcast_plugin";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new("1.3.0");
    }
}

/// The root module every Rust plugin exports (through `export_plugin!`). A prefix type:
/// fields are appended at the end, one minor at a time (1.1: `new_topology`; 1.2:
/// `new_parallel_strategy`, `new_pipeline_schedule`, `new_recompute_policy`; 1.3: the
/// schedule trait's `properties`; 1.4: the strategy trait's declared axes); the layout of
/// the minor before the current one is frozen in its module ([`v1_3`]).
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    pub describe: extern "C" fn() -> PluginDescriptor,
    // (The derive needs the fn types spelled out: it does not see through the aliases.)
    pub new_compute_unit: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiComputeUnitBox, FfiError>,
    pub new_memory_tier: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiMemoryTierBox, FfiError>,
    #[sabi(last_prefix_field)]
    pub new_interconnect:
        extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiInterconnectBox, FfiError>,
    /// Since 1.1.
    pub new_topology: extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiTopologyBox, FfiError>,
    /// Since 1.2.
    pub new_parallel_strategy:
        extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiParallelStrategyBox, FfiError>,
    /// Since 1.2.
    pub new_pipeline_schedule:
        extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiPipelineScheduleBox, FfiError>,
    /// Since 1.2.
    pub new_recompute_policy:
        extern "C" fn(RStr<'_>, RStr<'_>) -> RResult<FfiRecomputePolicyBox, FfiError>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "perfcast_plugin";
    const NAME: &'static str = "perfcast_plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new(RUST_ABI_VERSION);
}

/// The optional plain C symbol beside the root module by which a Rust plugin declares its
/// components' parameters (`extern "C" fn() -> *const c_char`: NUL-terminated JSON, see
/// `sdk::params_json`), NUL-terminated. Not part of the root module: abi_stable rejects a
/// library whose prefix type has fewer fields than the host's, so a field appended there
/// would lock out every plugin built before it.
pub const RUST_PARAMS_SYMBOL: &[u8] = b"perfcast_rust_params_v1\0";

/// The exported symbol abi_stable looks for (`abi_stable::library::ROOT_MODULE_LOADER_NAME`),
/// NUL-terminated.
pub const RUST_ROOT_SYMBOL: &[u8] = b"_1as_0lib_1header_0root_bmodule_bloader\0";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_version_constants_agree() {
        assert!(RUST_ABI_VERSION.starts_with(&format!("{RUST_ABI_MAJOR}.{RUST_ABI_MINOR}.")));
        // The current minor and the one before it (frozen in `v1_3`) load, no older one.
        assert_eq!(RUST_ABI_OLDEST_MINOR + 1, RUST_ABI_MINOR);
    }

    #[test]
    fn root_symbol_matches_abi_stable() {
        assert_eq!(
            RUST_ROOT_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME_WITH_NUL.as_bytes()
        );
    }
}
