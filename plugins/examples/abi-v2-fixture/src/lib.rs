//! Test fixture (not an example to copy): a Rust plugin whose root module declares perfcast
//! Rust ABI **2.0.0**, standing for a plugin built against a future, incompatible major. The
//! current host (Rust ABI 1.x) must reject it with a short "built for Rust ABI 2.0.0, this
//! host expects Rust ABI 1.x" error, without calling into it.
#![allow(non_local_definitions)]

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, std_types::RString, StableAbi,
};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
pub struct PluginModule {
    #[sabi(last_prefix_field)]
    pub describe: extern "C" fn() -> RString,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "perfcast_plugin";
    const NAME: &'static str = "perfcast_plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new("2.0.0");
}

extern "C" fn describe() -> RString {
    RString::from("abi-v2-fixture")
}

#[export_root_module]
pub fn root_module() -> PluginModuleRef {
    PluginModule { describe }.leak_into_prefix()
}
