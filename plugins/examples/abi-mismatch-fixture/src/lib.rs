//! Test fixture (not an example to copy): a Rust plugin that claims perfcast Rust ABI 1.0.0
//! but whose root module has another layout (as if built against a locally modified
//! perfcast-abi). abi_stable's layout check rejects it with a report hundreds of lines long;
//! the host must show one short line and keep the report in `LoadError::details`.
#![allow(non_local_definitions)]

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, std_types::RString, StableAbi,
};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
pub struct PluginModule {
    /// perfcast's `describe` returns a descriptor struct, not a string.
    pub describe: extern "C" fn() -> RString,
    #[sabi(last_prefix_field)]
    pub new_compute_unit: extern "C" fn(u64) -> u32,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "perfcast_plugin";
    const NAME: &'static str = "perfcast_plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new("1.0.0");
}

extern "C" fn describe() -> RString {
    RString::from("abi-mismatch-fixture")
}

extern "C" fn new_compute_unit(x: u64) -> u32 {
    x as u32
}

#[export_root_module]
pub fn root_module() -> PluginModuleRef {
    PluginModule {
        describe,
        new_compute_unit,
    }
    .leak_into_prefix()
}
