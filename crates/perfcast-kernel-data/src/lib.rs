//! The project's kernel tables, embedded: `tables/<gpu>/<op>.parquet`, converted by `perfcast
//! kernels import` from NVIDIA AIConfigurator's kernel database (`aiconfigurator-core` 0.12.0
//! on PyPI, Apache-2.0; NOTICE and README.md say which files and how). Only the hosts and the
//! tests that time from tables link this crate.

include!(concat!(env!("OUT_DIR"), "/tables.rs"));

/// The catalog of the embedded tables.
pub fn catalog() -> Result<perfcast_kernels::Catalog, perfcast_kernels::KernelError> {
    perfcast_kernels::Catalog::embedded(TABLES)
}
