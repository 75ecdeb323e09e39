//! The project's kernel tables, embedded: `tables/<gpu>/<op>.parquet`, converted by `perfcast
//! kernels import` from NVIDIA AIConfigurator's kernel database (`aiconfigurator-core` 0.12.0
//! on PyPI, Apache-2.0; NOTICE and README.md say which files and how). Only the hosts and the
//! tests that time from tables link this crate.

include!(concat!(env!("OUT_DIR"), "/tables.rs"));

/// The catalog of the embedded tables.
pub fn catalog() -> Result<perfcast_kernels::Catalog, perfcast_kernels::KernelError> {
    perfcast_kernels::Catalog::embedded(TABLES)
}

/// The catalog of the embedded tables, decoded once per process and shared: what a host hands
/// to `perfcast_config::Plugins::with_kernels`. `None` only if a table file were named after
/// no op, which the build script cannot produce.
pub fn shared() -> Option<std::sync::Arc<perfcast_kernels::Catalog>> {
    static CATALOG: std::sync::OnceLock<Option<std::sync::Arc<perfcast_kernels::Catalog>>> =
        std::sync::OnceLock::new();
    CATALOG
        .get_or_init(|| catalog().ok().map(std::sync::Arc::new))
        .clone()
}
