//! perfcast-abi: the stable binary contract between the perfcast host and dynamic plugins.
//!
//! Two ABIs, one op encoding:
//!
//! - **Rust plugins** (`rust_abi`): an abi_stable root module (`PluginModule`, a prefix type)
//!   with factories that take parameters as a JSON string and return `#[sabi_trait]` objects.
//!   Plugin authors do not touch it directly: they implement the *native* `perfcast_core`
//!   traits and export them with [`export_plugin!`] (module [`sdk`]), which catches every panic
//!   and parses parameters with `perfcast_core::params::parse`.
//! - **C plugins** (`c`, `include/perfcast_plugin.h`): a versioned entry symbol
//!   (`perfcast_plugin_entry_v1`) returning descriptor and vtable structs that carry their own
//!   `struct_size`, so the host reads older (shorter) layouts.
//!
//! Both pass ops as [`c::PcOp`] and results as [`c::PcOpTime`] (`#[repr(C)]`, numbers only).
//! The host side (dlopen, checks, adapters to native trait objects) is `perfcast-loader`.
#![allow(non_local_definitions)]

mod axes;
pub mod c;
pub mod codes;
pub mod convert;
pub mod rust_abi;
pub mod sdk;
pub mod strategy;

pub use c::{PcOp, PcOpTime};
pub use rust_abi::{
    ComponentDesc, FfiComputeUnit, FfiComputeUnitBox, FfiComputeUnit_TO, FfiError, FfiInterconnect,
    FfiInterconnectBox, FfiInterconnect_TO, FfiMemoryTier, FfiMemoryTierBox, FfiMemoryTier_TO,
    FfiParallelStrategy, FfiParallelStrategyBox, FfiParallelStrategy_TO, FfiPipelineSchedule,
    FfiPipelineScheduleBox, FfiPipelineSchedule_TO, FfiRecomputePolicy, FfiRecomputePolicyBox,
    FfiRecomputePolicy_TO, FfiTier, FfiTopology, FfiTopologyBox, FfiTopology_TO, LinkProps,
    PluginDescriptor, PluginModule, PluginModuleRef, PropsTier, TierProps, RUST_ABI_VERSION,
};

/// Re-exports used by the code `export_plugin!` expands to (plugin crates need not depend on
/// abi_stable or serde_json themselves).
#[doc(hidden)]
pub mod __private {
    pub use abi_stable;
    pub use perfcast_core::ParamSpec;
    pub use serde_json;
}
