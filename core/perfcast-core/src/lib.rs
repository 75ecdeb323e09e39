//! perfcast-core: the plugin API.
//!
//! Everything a plugin author needs and nothing else: unit types, data types, the workload
//! description and its op IR, the hardware and execution traits, and the registry that maps
//! `(category, name)` to a factory. No I/O, no FFI, no configuration parsing.
//!
//! Invariant: every quantity that crosses a trait boundary carries its unit in its type
//! (`Seconds`, `Bytes`, `FlopCount`, `FlopRate`, `Bandwidth`), and every value returned by a
//! plugin is checked for finiteness by the caller (`units::ensure_finite`).

pub mod dtype;
pub mod error;
pub mod hardware;
pub mod op;
pub mod parallel;
pub mod params;
pub mod registry;
pub mod roofline;
pub mod units;
pub mod workload;

pub use dtype::DType;
pub use error::{Key, ModelError, PluginError, Section};
pub use hardware::{
    CollectiveAlgorithm, ComputeUnit, Engine, Interconnect, MemoryHierarchy, MemoryTier, OpTime,
    System, TierLevel, TimeBound,
};
pub use op::{
    Attention, AttentionKind, Collective, CollectiveKind, ComputeOp, Gemm, Op, VectorOp,
    VectorOpKind,
};
pub use registry::{BuiltinPlugin, Category, Component, Origin, PluginInfo, Registry};
pub use units::{Bandwidth, Bytes, FlopCount, FlopRate, Seconds};
pub use workload::ModelSpec;

/// Re-exported so that built-in plugin crates can `perfcast_core::inventory::submit!` without
/// depending on `inventory` themselves.
pub use inventory;
