//! Test fixture (not an example to copy): a plugin exporting the root module of Rust ABI 1.0
//! (`perfcast_abi::rust_abi::v1_0`, frozen: the layout a plugin built against perfcast-abi
//! 1.0 exports) and declaring version 1.0.0. The current host (Rust ABI 1.1) must load it and
//! serve its 1.0 categories: here one memory tier, `fixture10/tier`.
#![allow(non_local_definitions)]

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RResult, RStr};
use perfcast_abi::rust_abi::v1_0::{PluginModule, PluginModuleRef};
use perfcast_abi::rust_abi::{FfiComputeUnitBox, FfiInterconnectBox, FfiMemoryTierBox};
use perfcast_abi::{sdk, FfiError, PluginDescriptor};
use perfcast_core::params::positive;
use perfcast_core::{Bandwidth, Bytes, MemoryTier, PluginError, TierLevel};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierParams {
    pub capacity_gib: f64,
    pub bandwidth_tbs: f64,
}

pub struct Tier(TierParams);

fn build(p: TierParams) -> Result<Tier, PluginError> {
    positive("capacity_gib", p.capacity_gib)?;
    positive("bandwidth_tbs", p.bandwidth_tbs)?;
    Ok(Tier(p))
}

impl MemoryTier for Tier {
    fn kind(&self) -> &str {
        "fixture10/tier"
    }
    fn level(&self) -> TierLevel {
        TierLevel::Device
    }
    fn capacity(&self) -> Bytes {
        Bytes(self.0.capacity_gib * 1073741824.0)
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth::from_tbs(self.0.bandwidth_tbs)
    }
}

extern "C" fn describe() -> PluginDescriptor {
    let mut d = sdk::describe(
        "fixture10",
        "1.0.0",
        &[(
            perfcast_abi::codes::CATEGORY_MEMORY_TIER,
            "fixture10/tier",
            "a 1.0 tier",
        )],
    );
    d.abi_minor = 0;
    d
}

extern "C" fn new_compute_unit(n: RStr<'_>, _: RStr<'_>) -> RResult<FfiComputeUnitBox, FfiError> {
    RResult::RErr(sdk::unknown("compute unit", n.as_str()))
}

extern "C" fn new_memory_tier(n: RStr<'_>, p: RStr<'_>) -> RResult<FfiMemoryTierBox, FfiError> {
    sdk::guard(|| match n.as_str() {
        "fixture10/tier" => sdk::build_memory_tier(build, p.as_str()),
        other => Err(sdk::unknown("memory tier", other)),
    })
}

extern "C" fn new_interconnect(n: RStr<'_>, _: RStr<'_>) -> RResult<FfiInterconnectBox, FfiError> {
    RResult::RErr(sdk::unknown("interconnect", n.as_str()))
}

#[abi_stable::export_root_module]
pub fn root_module() -> PluginModuleRef {
    PluginModule {
        describe,
        new_compute_unit,
        new_memory_tier,
        new_interconnect,
    }
    .leak_into_prefix()
}
