//! Kernel tables timed on silicon: GEMMs, prefill and decode attention, MoE blocks and NCCL
//! collectives, by shape, on one GPU each ([`KernelTable`]), with their provenance.
//!
//! - [`op`]: the kernel classes and their columns;
//! - [`io`]: Parquet (any writer's, and perfcast's own table files) and a plain CSV a vendor
//!   can bring;
//! - [`aic`]: the importer of NVIDIA AIConfigurator's tables (`aiconfigurator-core` on PyPI,
//!   Apache-2.0);
//! - [`interp`]: a shape's time from a table, measured or interpolated (never extrapolated);
//! - [`packed`]: the compact form the binary embeds, each variant decoded when first used;
//! - [`timings`]: a table ready to answer shapes, by variant, with its answers memoised;
//! - [`catalog`]: tables by GPU and op, read when first used;
//! - [`measured`]: the compute unit a host wraps around a device's own to time its GEMMs
//!   from its table;
//! - [`rowwise`]: a measured float8 linear layer with row-wise scaling (torchao, H100).
//!
//! The project's converted tables live in `perfcast-kernel-data`, which only what needs them
//! links.

pub mod aic;
pub mod catalog;
pub mod error;
pub mod input;
pub mod interp;
pub mod io;
pub mod measured;
pub mod op;
pub mod packed;
pub mod rowwise;
pub mod table;
pub mod timings;

pub use catalog::Catalog;
pub use error::KernelError;
pub use interp::{Lookup, Path};
pub use measured::MeasuredCompute;
pub use op::Op;
pub use table::{Categorical, KernelTable, Provenance, Row, TableBuilder};
pub use timings::Timings;
