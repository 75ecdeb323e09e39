//! The numeric codes that cross the boundary (both ABIs), mirrored by `perfcast_plugin.h`, and
//! their conversions to and from the native `perfcast_core` enums.

use perfcast_core::{
    AttentionKind, Category, CollectiveAlgorithm, CollectiveKind, DType, Engine, GemmScaling,
    TierLevel, TimeBound, VectorOpKind,
};

/// Status: success.
pub const OK: i32 = 0;
/// Status: parameters rejected (the message names the key).
pub const ERR_PARAMS: i32 = 1;
/// Status: anything else failed (a panic in a Rust plugin included).
pub const ERR_FAILED: i32 = 2;
/// Status: the device has no such path (engine/dtype, op kind).
pub const ERR_UNSUPPORTED: i32 = 3;

pub const ENGINE_MATRIX: u32 = 0;
pub const ENGINE_VECTOR: u32 = 1;

pub const CATEGORY_COMPUTE_UNIT: u32 = 0;
pub const CATEGORY_MEMORY_TIER: u32 = 1;
/// C ABI since 1.1.
pub const CATEGORY_INTERCONNECT: u32 = 2;
/// Rust ABI since 1.1, C ABI since 1.5.
pub const CATEGORY_TOPOLOGY: u32 = 3;
/// C ABI since 1.3, Rust ABI since 1.2.
pub const CATEGORY_PIPELINE_SCHEDULE: u32 = 4;
/// C ABI since 1.3, Rust ABI since 1.2.
pub const CATEGORY_RECOMPUTE_POLICY: u32 = 5;
/// Rust ABI since 1.2, C ABI since 1.4.
pub const CATEGORY_PARALLEL_STRATEGY: u32 = 6;

pub const OP_GEMM: u32 = 0;
pub const OP_ATTENTION: u32 = 1;
pub const OP_VECTOR: u32 = 2;

pub const TIER_ON_CHIP: u32 = 0;
pub const TIER_DEVICE: u32 = 1;
pub const TIER_HOST: u32 = 2;

pub const BOUND_COMPUTE: u32 = 0;
pub const BOUND_MEMORY: u32 = 1;
pub const BOUND_OVERHEAD: u32 = 2;

pub fn engine_code(e: Engine) -> u32 {
    match e {
        Engine::Matrix => ENGINE_MATRIX,
        Engine::Vector => ENGINE_VECTOR,
    }
}

pub fn engine_from_code(c: u32) -> Option<Engine> {
    match c {
        ENGINE_MATRIX => Some(Engine::Matrix),
        ENGINE_VECTOR => Some(Engine::Vector),
        _ => None,
    }
}

pub fn dtype_from_code(c: u32) -> Option<DType> {
    DType::from_code(c)
}

pub fn category_code(c: Category) -> Option<u32> {
    match c {
        Category::ComputeUnit => Some(CATEGORY_COMPUTE_UNIT),
        Category::MemoryTier => Some(CATEGORY_MEMORY_TIER),
        Category::Interconnect => Some(CATEGORY_INTERCONNECT),
        Category::Topology => Some(CATEGORY_TOPOLOGY),
        Category::PipelineSchedule => Some(CATEGORY_PIPELINE_SCHEDULE),
        Category::RecomputePolicy => Some(CATEGORY_RECOMPUTE_POLICY),
        Category::ParallelStrategy => Some(CATEGORY_PARALLEL_STRATEGY),
    }
}

pub fn category_from_code(c: u32) -> Option<Category> {
    match c {
        CATEGORY_COMPUTE_UNIT => Some(Category::ComputeUnit),
        CATEGORY_MEMORY_TIER => Some(Category::MemoryTier),
        CATEGORY_INTERCONNECT => Some(Category::Interconnect),
        CATEGORY_TOPOLOGY => Some(Category::Topology),
        CATEGORY_PIPELINE_SCHEDULE => Some(Category::PipelineSchedule),
        CATEGORY_RECOMPUTE_POLICY => Some(Category::RecomputePolicy),
        CATEGORY_PARALLEL_STRATEGY => Some(Category::ParallelStrategy),
        _ => None,
    }
}

/// Which ABI carries a category since which minor (`(major, minor)`; `None`: not carried),
/// and whether an isolated plugin host serves it. The loaders skip a component of a category
/// its ABI does not carry (`rust_carries`, `c_carries`), and the user guide's table (docs/commands/plugins.md) is this one
/// ([`support_table`], checked by a test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CategorySupport {
    pub category: Category,
    pub rust: Option<(u32, u32)>,
    pub c: Option<(u32, u32)>,
    pub isolated: bool,
}

/// Every category, in `Category::ALL` order.
pub const SUPPORT: [CategorySupport; 7] = [
    support(Category::ComputeUnit, Some((1, 0)), Some((1, 0))),
    support(Category::MemoryTier, Some((1, 0)), Some((1, 0))),
    support(Category::Interconnect, Some((1, 0)), Some((1, 1))),
    support(Category::ParallelStrategy, Some((1, 2)), Some((1, 4))),
    support(Category::RecomputePolicy, Some((1, 2)), Some((1, 3))),
    support(Category::PipelineSchedule, Some((1, 2)), Some((1, 3))),
    support(Category::Topology, Some((1, 1)), Some((1, 5))),
];

const fn support(
    category: Category,
    rust: Option<(u32, u32)>,
    c: Option<(u32, u32)>,
) -> CategorySupport {
    CategorySupport {
        category,
        rust,
        c,
        isolated: true,
    }
}

fn support_of(category: Category) -> Option<&'static CategorySupport> {
    SUPPORT.iter().find(|s| s.category == category)
}

/// Whether a Rust plugin of ABI 1.`minor` can provide `category`.
pub fn rust_carries(category: Category, minor: u32) -> bool {
    support_of(category)
        .and_then(|s| s.rust)
        .is_some_and(|(_, m)| m <= minor)
}

/// Whether a C plugin of ABI 1.`minor` can provide `category`.
pub fn c_carries(category: Category, minor: u32) -> bool {
    support_of(category)
        .and_then(|s| s.c)
        .is_some_and(|(_, m)| m <= minor)
}

/// [`SUPPORT`] as the user guide's Markdown table (docs/commands/plugins.md), with the oldest
/// minor of each ABI the loaders accept.
pub fn support_table() -> String {
    let since = |v: Option<(u32, u32)>| match v {
        Some((a, b)) => format!("since {a}.{b}"),
        None => "no".to_string(),
    };
    let mut t = String::from(
        "| category | Rust ABI (abi_stable) | C ABI (`perfcast_plugin.h`) | `--isolate` |\n|---|---|---|---|\n",
    );
    for s in SUPPORT {
        t.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.category.name(),
            since(s.rust),
            since(s.c),
            if s.isolated { "yes" } else { "no" }
        ));
    }
    // What the loaders accept: the Rust ABI's current minor and the one before it, every C
    // minor.
    let (rust, c) = (crate::rust_abi::RUST_ABI_MAJOR, crate::c::C_ABI_MAJOR);
    t.push_str(&format!(
        "| oldest minor this host loads | {rust}.{} | {c}.{} | - |\n",
        crate::rust_abi::RUST_ABI_OLDEST_MINOR,
        crate::c::C_ABI_OLDEST_MINOR
    ));
    t
}

/// The C/Rust ABI's attention kind: 0 plain, 1 flash. Every flash family travels as 1 (so a
/// plugin built before the families existed still sees a kind it knows) with its family in
/// [`attention_family_code`] (the op's former `reserved2` field: 0 for a plugin that does not
/// know it, read as FlashAttention-2).
pub fn attention_kind_code(k: AttentionKind) -> u32 {
    if k.is_flash() {
        1
    } else {
        0
    }
}

/// The ABI code of a GEMM's scaling (the op's former `reserved1` field: 0, tensor, for a
/// host older than the scalings).
pub fn gemm_scaling_code(s: GemmScaling) -> u32 {
    s as u32
}

/// The GEMM scaling of a code.
pub fn gemm_scaling_from_code(c: u32) -> Option<GemmScaling> {
    GemmScaling::ALL.get(c as usize).copied()
}

/// The flash family of an attention kind (0: FlashAttention-2 or unspecified, 2: FA3,
/// 3: cuDNN; plain: 0).
pub fn attention_family_code(k: AttentionKind) -> u32 {
    match k {
        AttentionKind::Plain | AttentionKind::Flash => 0,
        AttentionKind::Flash3 => 2,
        AttentionKind::Cudnn => 3,
    }
}

/// The attention kind of a kind code and a family code.
pub fn attention_kind_from_code(c: u32, family: u32) -> Option<AttentionKind> {
    match (c, family) {
        (0, _) => Some(AttentionKind::Plain),
        (1, 0 | 1) => Some(AttentionKind::Flash),
        (1, 2) => Some(AttentionKind::Flash3),
        (1, 3) => Some(AttentionKind::Cudnn),
        _ => None,
    }
}

const VECTOR_KINDS: [VectorOpKind; 10] = [
    VectorOpKind::Norm,
    VectorOpKind::Softmax,
    VectorOpKind::Activation,
    VectorOpKind::Dropout,
    VectorOpKind::Elementwise,
    VectorOpKind::Embedding,
    VectorOpKind::Loss,
    VectorOpKind::Cast,
    VectorOpKind::Rope,
    VectorOpKind::Optimizer,
];

pub fn vector_kind_code(k: VectorOpKind) -> u32 {
    VECTOR_KINDS.iter().position(|x| *x == k).unwrap_or(0) as u32
}

pub fn vector_kind_from_code(c: u32) -> Option<VectorOpKind> {
    VECTOR_KINDS.get(c as usize).copied()
}

pub fn tier_level_code(l: TierLevel) -> u32 {
    match l {
        TierLevel::OnChip => TIER_ON_CHIP,
        TierLevel::Device => TIER_DEVICE,
        TierLevel::Host => TIER_HOST,
    }
}

pub fn tier_level_from_code(c: u32) -> Option<TierLevel> {
    match c {
        TIER_ON_CHIP => Some(TierLevel::OnChip),
        TIER_DEVICE => Some(TierLevel::Device),
        TIER_HOST => Some(TierLevel::Host),
        _ => None,
    }
}

/// `(bound, bound_tier)` codes of a `TimeBound`.
pub fn bound_code(b: TimeBound) -> (u32, u32) {
    match b {
        TimeBound::Compute => (BOUND_COMPUTE, 0),
        TimeBound::Memory(i) => (BOUND_MEMORY, i as u32),
        TimeBound::Overhead => (BOUND_OVERHEAD, 0),
    }
}

/// The `TimeBound` of `(bound, bound_tier)`; `None` for an unknown code or a tier index that
/// does not fit in `n_tiers`.
pub fn bound_from_code(bound: u32, tier: u32, n_tiers: usize) -> Option<TimeBound> {
    match bound {
        BOUND_COMPUTE => Some(TimeBound::Compute),
        BOUND_OVERHEAD => Some(TimeBound::Overhead),
        BOUND_MEMORY if (tier as usize) < n_tiers && tier <= u8::MAX as u32 => {
            Some(TimeBound::Memory(tier as u8))
        }
        _ => None,
    }
}

const COLLECTIVE_KINDS: [CollectiveKind; 6] = [
    CollectiveKind::AllReduce,
    CollectiveKind::AllGather,
    CollectiveKind::ReduceScatter,
    CollectiveKind::AllToAll,
    CollectiveKind::SendRecv,
    CollectiveKind::Broadcast,
];

pub fn collective_kind_code(k: CollectiveKind) -> u32 {
    COLLECTIVE_KINDS.iter().position(|x| *x == k).unwrap_or(0) as u32
}

pub fn collective_kind_from_code(c: u32) -> Option<CollectiveKind> {
    COLLECTIVE_KINDS.get(c as usize).copied()
}

pub fn algorithm_code(a: CollectiveAlgorithm) -> u32 {
    match a {
        CollectiveAlgorithm::Auto => 0,
        CollectiveAlgorithm::Ring => 1,
        CollectiveAlgorithm::Tree => 2,
    }
}

pub fn algorithm_from_code(c: u32) -> Option<CollectiveAlgorithm> {
    match c {
        0 => Some(CollectiveAlgorithm::Auto),
        1 => Some(CollectiveAlgorithm::Ring),
        2 => Some(CollectiveAlgorithm::Tree),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(dtype_from_code(d.code()), Some(d));
        }
        for e in [Engine::Matrix, Engine::Vector] {
            assert_eq!(engine_from_code(engine_code(e)), Some(e));
        }
        for k in VECTOR_KINDS {
            assert_eq!(vector_kind_from_code(vector_kind_code(k)), Some(k));
        }
        for k in COLLECTIVE_KINDS {
            assert_eq!(collective_kind_from_code(collective_kind_code(k)), Some(k));
        }
        for l in [TierLevel::OnChip, TierLevel::Device, TierLevel::Host] {
            assert_eq!(tier_level_from_code(tier_level_code(l)), Some(l));
        }
        for c in Category::ALL {
            assert_eq!(category_from_code(category_code(c).unwrap()), Some(c));
        }
        // The support table covers every category once, each in its ABIs' current minors.
        for c in Category::ALL {
            assert_eq!(SUPPORT.iter().filter(|s| s.category == c).count(), 1, "{c}");
        }
        assert!(rust_carries(Category::Topology, 1) && !rust_carries(Category::Topology, 0));
        assert!(c_carries(Category::Topology, 5) && !c_carries(Category::Topology, 4));
        assert!(
            c_carries(Category::ParallelStrategy, 4) && !c_carries(Category::ParallelStrategy, 3)
        );
        for s in SUPPORT {
            assert!(s
                .rust
                .is_none_or(|(_, m)| m <= crate::rust_abi::RUST_ABI_MINOR));
            assert!(s.c.is_none_or(|(_, m)| m <= crate::c::C_ABI_MINOR));
        }
        assert_eq!(bound_from_code(BOUND_MEMORY, 2, 2), None);
        assert_eq!(
            bound_from_code(BOUND_MEMORY, 1, 2),
            Some(TimeBound::Memory(1))
        );
        assert_eq!(bound_from_code(9, 0, 2), None);
        assert_eq!(engine_from_code(7), None);
        assert_eq!(dtype_from_code(99), None);
    }
}
