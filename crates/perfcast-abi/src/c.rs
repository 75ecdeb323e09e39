//! Rust mirrors of the structs in `include/perfcast_plugin.h` (the C ABI, major 1).
//!
//! `PcOp` and `PcOpTime` are also the op and result types of the Rust (abi_stable) ABI, so
//! both ABIs share one op encoding. The loader's tests compile a C program that prints the
//! `sizeof`/`offsetof` of every struct and compare them with these definitions.

use abi_stable::StableAbi;
use std::ffi::{c_char, c_void};
use std::mem::size_of;

/// Major version of the C ABI (part of the entry symbol name).
pub const C_ABI_MAJOR: u32 = 1;
/// Newest minor of the C ABI this crate (and the host) knows.
pub const C_ABI_MINOR: u32 = 7;
/// Oldest minor of the C ABI the host loads: every one, since it reads each struct up to the
/// plugin's `struct_size` ([`v1_0`] and its successors give each struct's least size) and a
/// field a plugin's minor lacks takes its default.
pub const C_ABI_OLDEST_MINOR: u32 = 0;
/// The entry symbol, NUL-terminated.
pub const C_ENTRY_SYMBOL: &[u8] = b"perfcast_plugin_entry_v1\0";

/// `perfcast_op`: one compute op, all numbers.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq)]
pub struct PcOp {
    pub struct_size: u32,
    pub kind: u32,
    pub engine: u32,
    pub dtype: u32,
    pub flops: f64,
    pub min_bytes: f64,
    pub launches: u32,
    pub reserved0: u32,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub a_dtype: u32,
    pub b_dtype: u32,
    pub out_dtype: u32,
    pub reserved1: u32,
    pub att_batch: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub q_len: u64,
    pub kv_len: u64,
    pub head_dim: u64,
    pub causal: u32,
    pub attention_kind: u32,
    pub backward: u32,
    /// The flash kernel family of an attention op (see `codes::attention_family_code`).
    pub reserved2: u32,
    pub elements: u64,
    pub flops_per_element: f64,
    pub bytes_per_element: f64,
    pub vector_kind: u32,
    pub reserved3: u32,
}

/// `perfcast_tier`: a memory tier as plain data (C ABI).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcTier {
    pub struct_size: u32,
    pub level: u32,
    pub kind: *const c_char,
    pub capacity: f64,
    pub bandwidth: f64,
    pub efficiency: f64,
    pub latency: f64,
}

/// `perfcast_op_time`: the time of one op.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, Default, PartialEq)]
pub struct PcOpTime {
    pub struct_size: u32,
    pub bound: u32,
    pub bound_tier: u32,
    pub reserved0: u32,
    pub time: f64,
    pub compute: f64,
    pub memory: f64,
    pub overhead: f64,
    pub flops: f64,
    pub device_bytes: f64,
}

pub type ErrBuf = *mut c_char;

/// `perfcast_compute_unit_vtable` (latest minor; read only what `struct_size` covers).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcComputeUnitVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub peak: Option<unsafe extern "C" fn(*const c_void, u32, u32, *mut f64, ErrBuf, usize) -> i32>,
    pub efficiency:
        Option<unsafe extern "C" fn(*const c_void, *const PcOp, *mut f64, ErrBuf, usize) -> i32>,
    pub launch_overhead:
        Option<unsafe extern "C" fn(*const c_void, *mut f64, ErrBuf, usize) -> i32>,
    /// Minor 1.
    pub gemm_tile: Option<unsafe extern "C" fn(*const c_void, *mut u64, ErrBuf, usize) -> i32>,
    /// Minor 1.
    pub op_time: Option<
        unsafe extern "C" fn(
            *const c_void,
            *const PcOp,
            *const PcTier,
            usize,
            *mut PcOpTime,
            ErrBuf,
            usize,
        ) -> i32,
    >,
}

/// `perfcast_memory_tier_vtable`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcMemoryTierVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub properties: Option<unsafe extern "C" fn(*const c_void, *mut PcTier, ErrBuf, usize) -> i32>,
}

/// `perfcast_link` (1.1).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcLink {
    pub struct_size: u32,
    pub domain_size: u32,
    pub bandwidth: f64,
    pub latency: f64,
}

/// `perfcast_interconnect_vtable` (1.1).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcInterconnectVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub properties: Option<unsafe extern "C" fn(*const c_void, *mut PcLink, ErrBuf, usize) -> i32>,
    pub collective_time: Option<
        unsafe extern "C" fn(*const c_void, u32, f64, u32, u32, *mut f64, ErrBuf, usize) -> i32,
    >,
}

/// `perfcast_schedule_input` (1.3).
#[repr(C)]
#[derive(
    StableAbi, Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
pub struct PcScheduleInput {
    pub struct_size: u32,
    pub stages: u32,
    pub virtual_stages: u32,
    pub micro_batches: u32,
    pub forward: f64,
    pub backward: f64,
    pub p2p: f64,
}

/// `perfcast_schedule_result` (1.3).
#[repr(C)]
#[derive(
    StableAbi, Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
pub struct PcScheduleResult {
    pub struct_size: u32,
    pub reserved0: u32,
    pub time: f64,
    pub bubble: f64,
    pub p2p: f64,
    pub peak_in_flight: f64,
}

/// `perfcast_pipeline_schedule_vtable.step`.
pub type PcScheduleStep = unsafe extern "C" fn(
    *const c_void,
    *const PcScheduleInput,
    *mut PcScheduleResult,
    ErrBuf,
    usize,
) -> i32;
/// `perfcast_pipeline_schedule_vtable.in_flight`.
pub type PcScheduleInFlight = unsafe extern "C" fn(
    *const c_void,
    *const PcScheduleInput,
    u32,
    *mut f64,
    ErrBuf,
    usize,
) -> i32;
/// `perfcast_pipeline_schedule_vtable.validate`.
pub type PcScheduleValidate =
    unsafe extern "C" fn(*const c_void, *const PcScheduleInput, ErrBuf, usize) -> i32;

/// `perfcast_schedule_properties` (1.6).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PcScheduleProperties {
    pub struct_size: u32,
    pub overlaps_expert_comm: u32,
    pub model_copies: f64,
}

impl Default for PcScheduleProperties {
    /// The header's defaults: one copy, no expert-communication overlap.
    fn default() -> Self {
        PcScheduleProperties {
            struct_size: size_of::<PcScheduleProperties>() as u32,
            overlaps_expert_comm: 0,
            model_copies: 1.0,
        }
    }
}

/// `perfcast_pipeline_schedule_vtable.properties` (1.6).
pub type PcScheduleProps =
    unsafe extern "C" fn(*const c_void, *mut PcScheduleProperties, ErrBuf, usize) -> i32;

/// `perfcast_pipeline_schedule_vtable` (1.3; `properties` 1.6).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcPipelineScheduleVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub step: Option<PcScheduleStep>,
    pub in_flight: Option<PcScheduleInFlight>,
    pub validate: Option<PcScheduleValidate>,
    pub properties: Option<PcScheduleProps>,
}

/// `perfcast_layer_activations` (1.3).
#[repr(C)]
#[derive(
    StableAbi, Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
pub struct PcLayerActivations {
    pub struct_size: u32,
    pub reserved0: u32,
    pub input: f64,
    pub attention_core: f64,
    pub other: f64,
}

/// `perfcast_recompute_plan` (1.3).
#[repr(C)]
#[derive(
    StableAbi, Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
pub struct PcRecomputePlan {
    pub struct_size: u32,
    pub reserved0: u32,
    pub full_layers: f64,
    pub attention_layers: f64,
    pub kept: f64,
    pub working: f64,
}

/// `perfcast_recompute_policy_vtable.plan`.
pub type PcRecomputePlanFn = unsafe extern "C" fn(
    *const c_void,
    *const PcLayerActivations,
    u32,
    u32,
    *mut PcRecomputePlan,
    ErrBuf,
    usize,
) -> i32;

/// `perfcast_recompute_policy_vtable` (1.3).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcRecomputePolicyVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub plan: Option<PcRecomputePlanFn>,
}

/// `perfcast_parallel_strategy_vtable.axis` (1.4).
pub type PcStrategyAxis = unsafe extern "C" fn(*const c_void, *mut u32, ErrBuf, usize) -> i32;
/// `perfcast_parallel_strategy_vtable.validate`.
pub type PcStrategyValidate = unsafe extern "C" fn(
    *const c_void,
    *const crate::strategy::PcModel,
    *const crate::strategy::PcPlan,
    ErrBuf,
    usize,
) -> i32;
/// `perfcast_parallel_strategy_vtable.split_layer`.
pub type PcStrategySplitLayer = unsafe extern "C" fn(
    *const c_void,
    *const crate::strategy::PcPlan,
    *mut crate::strategy::PcLayerSplit,
    ErrBuf,
    usize,
) -> i32;
/// `perfcast_parallel_strategy_vtable.split_state`.
pub type PcStrategySplitState = unsafe extern "C" fn(
    *const c_void,
    *const crate::strategy::PcPlan,
    *mut crate::strategy::PcStateSplit,
    ErrBuf,
    usize,
) -> i32;
/// `perfcast_parallel_strategy_vtable.comms`.
pub type PcStrategyComms = unsafe extern "C" fn(
    *const c_void,
    *const crate::strategy::PcPlan,
    *const crate::strategy::PcLayerDims,
    *mut crate::strategy::PcCommOp,
    usize,
    *mut usize,
    ErrBuf,
    usize,
) -> i32;

/// `perfcast_parallel_strategy_vtable.axes` (1.7): write the declared axes into
/// `out[0..cap)` and their number into `*n_out`.
pub type PcStrategyAxes = unsafe extern "C" fn(
    *const c_void,
    *mut crate::strategy::PcAxisDecl,
    usize,
    *mut usize,
    ErrBuf,
    usize,
) -> i32;

/// `perfcast_parallel_strategy_vtable` (1.4; `axes` 1.7).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PcParallelStrategyVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub axis: Option<PcStrategyAxis>,
    pub validate: Option<PcStrategyValidate>,
    pub split_layer: Option<PcStrategySplitLayer>,
    pub split_state: Option<PcStrategySplitState>,
    pub comms: Option<PcStrategyComms>,
    /// Since 1.7.
    pub axes: Option<PcStrategyAxes>,
}

/// `perfcast_level` (1.5).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PcLevel {
    pub struct_size: u32,
    pub domain_size: u32,
    pub bandwidth: f64,
    pub latency: f64,
    pub overhead: f64,
}

/// `perfcast_group_axis` (1.5).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PcGroupAxis {
    pub degree: u64,
    pub stride: u64,
}

/// `perfcast_link_class` (1.5).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcLinkClass {
    pub struct_size: u32,
    pub reserved0: u32,
    pub name: [c_char; 64],
    pub count: f64,
    pub bandwidth: f64,
}

impl Default for PcLinkClass {
    fn default() -> Self {
        PcLinkClass {
            struct_size: size_of::<PcLinkClass>() as u32,
            reserved0: 0,
            name: [0; 64],
            count: f64::NAN,
            bandwidth: f64::NAN,
        }
    }
}

/// `perfcast_link_load` (1.5).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcLinkLoad {
    pub struct_size: u32,
    pub klass: u32,
    pub links: f64,
    pub busy: f64,
}

impl Default for PcLinkLoad {
    fn default() -> Self {
        PcLinkLoad {
            struct_size: size_of::<PcLinkLoad>() as u32,
            klass: 0,
            links: f64::NAN,
            busy: f64::NAN,
        }
    }
}

/// `perfcast_topology_vtable.check`.
pub type PcTopologyCheck =
    unsafe extern "C" fn(*const c_void, *const PcLevel, usize, u64, ErrBuf, usize) -> i32;
/// `perfcast_topology_vtable.links`.
pub type PcTopologyLinks = unsafe extern "C" fn(
    *const c_void,
    *const PcLevel,
    usize,
    u64,
    *mut PcLinkClass,
    usize,
    *mut usize,
    ErrBuf,
    usize,
) -> i32;
/// `perfcast_topology_vtable.collective`.
pub type PcTopologyCollective = unsafe extern "C" fn(
    *const c_void,
    *const PcLevel,
    usize,
    *const PcGroupAxis,
    usize,
    u64,
    u32,
    f64,
    *mut f64,
    *mut PcLinkLoad,
    usize,
    *mut usize,
    ErrBuf,
    usize,
) -> i32;

/// `perfcast_topology_vtable` (1.5).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PcTopologyVtable {
    pub struct_size: u32,
    pub reserved0: u32,
    pub check: Option<PcTopologyCheck>,
    pub links: Option<PcTopologyLinks>,
    pub collective: Option<PcTopologyCollective>,
}

/// `perfcast_component`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcComponent {
    pub struct_size: u32,
    pub category: u32,
    pub name: *const c_char,
    pub description: *const c_char,
    pub create: Option<unsafe extern "C" fn(*const c_char, *mut *mut c_void, ErrBuf, usize) -> i32>,
    pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
    pub vtable: *const c_void,
    /// 1.2: declared parameters (`params` NULL: not declared).
    pub n_params: u32,
    pub reserved1: u32,
    pub params: *const *const PcParam,
}

/// `perfcast_param` (1.2): one declared parameter of a component.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcParam {
    pub struct_size: u32,
    pub ty: u32,
    pub default_kind: u32,
    pub reserved0: u32,
    pub name: *const c_char,
    pub unit: *const c_char,
    pub default_value: *const c_char,
    pub range: *const c_char,
    pub doc: *const c_char,
    pub source: *const c_char,
}

/// `perfcast_plugin`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PcPlugin {
    pub struct_size: u32,
    pub abi_major: u32,
    pub abi_minor: u32,
    pub n_components: u32,
    pub name: *const c_char,
    pub version: *const c_char,
    pub components: *const *const PcComponent,
}

/// `perfcast_plugin_entry_v1`.
pub type PcEntry = unsafe extern "C" fn() -> *const PcPlugin;

/// Size of a struct in the C ABI 1.0 layout: everything up to and including `last` (the
/// last field that 1.0 had).
#[macro_export]
macro_rules! size_through {
    ($ty:ty, $field:ident) => {{
        // The field's size, via a never-called projection.
        fn __sz<T>(_: fn(&$ty) -> &T) -> usize {
            ::std::mem::size_of::<T>()
        }
        ::std::mem::offset_of!($ty, $field) + __sz(|s: &$ty| &s.$field)
    }};
}

/// Bytes of the C ABI 1.0 layouts (the minimum `struct_size` a host accepts).
pub mod v1_0 {
    use super::*;
    pub fn plugin_size() -> usize {
        size_through!(PcPlugin, components)
    }
    pub fn component_size() -> usize {
        size_through!(PcComponent, vtable)
    }
    pub fn compute_unit_vtable_size() -> usize {
        size_through!(PcComputeUnitVtable, launch_overhead)
    }
    pub fn memory_tier_vtable_size() -> usize {
        size_through!(PcMemoryTierVtable, properties)
    }
}

/// Bytes of the structs that C ABI 1.1 introduced, in their first layout.
pub mod v1_1 {
    use super::*;
    pub fn interconnect_vtable_size() -> usize {
        size_through!(PcInterconnectVtable, properties)
    }
}

/// Bytes of the structs that C ABI 1.3 introduced, in their first layout.
pub mod v1_3 {
    use super::*;
    pub fn pipeline_schedule_vtable_size() -> usize {
        size_through!(PcPipelineScheduleVtable, in_flight)
    }
    pub fn recompute_policy_vtable_size() -> usize {
        size_through!(PcRecomputePolicyVtable, plan)
    }
}

/// Bytes of the structs that C ABI 1.5 introduced, in their first layout.
pub mod v1_5 {
    use super::*;
    pub fn topology_vtable_size() -> usize {
        size_through!(PcTopologyVtable, collective)
    }
}

/// Bytes of the structs that C ABI 1.4 introduced, in their first layout.
pub mod v1_4 {
    use super::*;
    pub fn parallel_strategy_vtable_size() -> usize {
        size_through!(PcParallelStrategyVtable, comms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_0_sizes_are_prefixes() {
        // 64-bit layout: 1.0 has three function pointers after the 8-byte header.
        if std::mem::size_of::<usize>() == 8 {
            assert_eq!(v1_0::compute_unit_vtable_size(), 8 + 3 * 8);
            assert_eq!(std::mem::size_of::<PcComputeUnitVtable>(), 8 + 5 * 8);
            assert_eq!(v1_0::plugin_size(), std::mem::size_of::<PcPlugin>());
            assert_eq!(std::mem::size_of::<PcOp>(), 184);
        }
    }
}
