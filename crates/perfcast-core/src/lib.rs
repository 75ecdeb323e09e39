//! perfcast-core: the plugin API.
//!
//! Everything a plugin author needs and nothing else: unit types ([`units`]), numeric formats
//! ([`dtype`]), the workload description ([`workload`]) and its op IR ([`op`]), the hardware
//! traits and the [`System`] ([`hardware`]) with the default op timing ([`roofline`]), the
//! execution traits ([`parallel`]), errors ([`error`]), parameter parsing ([`params`]) and the
//! [`Registry`] that maps `(category, name)` to a factory ([`registry`]). No I/O, no FFI, no
//! configuration parsing.
//!
//! A plugin implements one trait per component: [`ComputeUnit`], [`MemoryTier`] or
//! [`Interconnect`] (hardware; also loadable from a shared library through `perfcast-abi`), or
//! [`parallel::ParallelStrategy`], [`parallel::RecomputePolicy`] or
//! [`parallel::PipelineSchedule`] (execution; built-in only), or [`Topology`] (how the
//! devices and switches are wired, [`topology`]; also loadable from a Rust library). Its factory reads its parameters
//! with [`params::parse`]; a built-in crate submits each factory with [`builtin!`] and exposes
//! them with [`register_fn!`].
//!
//! Invariant: every quantity that crosses a trait boundary carries its unit in its type
//! ([`Seconds`], [`Bytes`], [`FlopCount`], [`FlopRate`], [`Bandwidth`]), and every value
//! returned by a plugin is checked for finiteness by the caller ([`units::ensure_finite`]).

#![warn(missing_docs)]

pub mod dtype;
pub mod error;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod hardware;
pub mod hash;
pub mod op;
pub mod parallel;
pub mod param_spec;
pub mod params;
pub mod registry;
pub mod roofline;
pub mod suggest;
pub mod topology;
pub mod units;
pub mod workload;

pub use dtype::DType;
pub use error::{Key, ModelError, PluginError, Section};
pub use hardware::{
    CollectiveAlgorithm, ComputeUnit, Engine, Interconnect, KernelPath, MemoryHierarchy,
    MemoryTier, OpTime, System, TierLevel, TimeBound,
};
pub use op::{
    Attention, AttentionKind, Collective, CollectiveKind, ComputeOp, Gemm, GemmScaling, Op,
    RoutedExperts, VectorOp, VectorOpKind,
};
pub use param_spec::{ParamDefault, ParamSpec, ParamType};
pub use registry::{BuiltinPlugin, Category, Component, Origin, PluginInfo, Registry};
pub use topology::{CollectiveCost, GroupAxis, GroupPlacement, LinkLoad, NetworkCost, Topology};
pub use units::{Bandwidth, Bytes, FlopCount, FlopRate, Seconds};
pub use workload::ModelSpec;

/// Re-exported so that built-in plugin crates can `perfcast_core::inventory::submit!` without
/// depending on `inventory` themselves.
pub use inventory;
