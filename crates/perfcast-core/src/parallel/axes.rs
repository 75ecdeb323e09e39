//! The mesh axes a collective's group spans ([`AxisSet`]), and the axes a strategy declares
//! beyond the built-in ones ([`AxisDecl`]).
//!
//! The built-in axes (tensor, context, pipeline, data, the embedding group and the expert mesh)
//! take the low eight bits of an [`AxisSet`]. A strategy may declare axes of its own (the second
//! dimension of 2D tensor parallelism, the shard group of hybrid-sharded data parallelism): each
//! gets a degree from the plan (`plan.axes.NAME`, 1 when absent), a place in the mesh (inside or
//! outside one of the dense axes) and one of the [`MAX_DECLARED_AXES`] bits above the built-in
//! ones. A strategy names its own `k`-th declared axis [`AxisSet::declared`]`(k)` and reads its
//! degree at [`PlanShape::axes`](super::PlanShape::axes)`[k]`; the engine numbers the run's
//! declared axes (in the order the strategies are listed, then their declarations) and
//! translates, so a strategy need not know what else is loaded.

use super::Axis;
use serde::{Deserialize, Serialize};

/// Most axes the strategies of one run may declare (besides the built-in ones).
pub const MAX_DECLARED_AXES: usize = 8;

/// Longest name (in bytes) a declared axis may have: what C ABI's `perfcast_axis_decl`
/// holds before its NUL, and what a report keeps inline for its ledger.
pub const MAX_AXIS_NAME_LEN: usize = 31;

/// Mesh axes of a communication group, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AxisSet(pub u16);

impl AxisSet {
    /// The tensor-parallel group (sequence parallelism shares it).
    pub const TENSOR: AxisSet = AxisSet(1);
    /// The context-parallel group.
    pub const CONTEXT: AxisSet = AxisSet(2);
    /// The pipeline group (one rank per stage; hand-offs between neighbours).
    pub const PIPELINE: AxisSet = AxisSet(4);
    /// The data-parallel group (replicas).
    pub const DATA: AxisSet = AxisSet(8);
    /// Megatron's data-parallel group when context parallelism is on: gradients are reduced
    /// over `dp x cp` ranks.
    pub const DATA_CONTEXT: AxisSet = AxisSet(8 | 2);
    /// The first and the last pipeline stage (Megatron's embedding group: tied input and
    /// output embeddings synchronise their gradients); two ranks when `pp > 1`.
    pub const PIPELINE_ENDS: AxisSet = AxisSet(16);
    /// The expert-parallel group of the MoE layers: `ep` ranks spaced `etp` apart among the
    /// `tp x cp x dp` ranks of a pipeline stage, filled innermost first (Megatron-Core's
    /// expert mesh, ETP innermost, then EP, then expert data parallelism).
    pub const EXPERT: AxisSet = AxisSet(32);
    /// The expert tensor-parallel group (`etp` neighbouring ranks).
    pub const EXPERT_TENSOR: AxisSet = AxisSet(64);
    /// The expert data-parallel group: the `tp x cp x dp / (ep x etp)` ranks holding the same
    /// experts, over which their gradients are reduced and their state sharded.
    pub const EXPERT_DATA: AxisSet = AxisSet(128);
    /// The expert mesh's axes (`EXPERT`, `EXPERT_TENSOR`, `EXPERT_DATA`).
    pub const EXPERT_MESH: AxisSet = AxisSet(32 | 64 | 128);
    /// The built-in axes' bits (the eight above; a declared axis takes one of the bits above
    /// them).
    pub const BUILT_IN: AxisSet = AxisSet(0xff);
    /// The `k`-th declared axis (`k < MAX_DECLARED_AXES`; the empty set beyond): a strategy
    /// names its own `k`-th declared axis so, and the engine's mesh the run's `k`-th.
    pub const fn declared(k: usize) -> AxisSet {
        if k < MAX_DECLARED_AXES {
            AxisSet(1 << (8 + k))
        } else {
            AxisSet(0)
        }
    }
    /// The declared axes of the set, bit `k` for [`AxisSet::declared`]`(k)`.
    pub const fn declared_bits(self) -> u8 {
        (self.0 >> 8) as u8
    }
    /// Whether every axis of `other` is in `self` (false for an empty `other`).
    pub const fn contains(self, other: AxisSet) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
    /// Whether `self` and `other` share an axis.
    pub const fn intersects(self, other: AxisSet) -> bool {
        self.0 & other.0 != 0
    }
    /// The axes of both.
    pub const fn union(self, other: AxisSet) -> AxisSet {
        AxisSet(self.0 | other.0)
    }
}

/// Where a declared axis sits in the mesh, next to one of the dense axes (`tensor`, `context`,
/// `pipeline`, `data`): its ranks are laid out immediately inside or outside that axis's, so
/// that e.g. a shard group inside `data` stays within a node that `data` leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AxisPlace {
    /// Consecutive ranks of the declared axis are closer than the next rank of `axis`.
    Inside(Axis),
    /// The declared axis steps over every rank of `axis`.
    Outside(Axis),
}

impl AxisPlace {
    /// The dense axis it sits next to.
    pub const fn anchor(self) -> Axis {
        match self {
            AxisPlace::Inside(a) | AxisPlace::Outside(a) => a,
        }
    }
}

/// What a declared axis's degree must divide; the engine checks each for every plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Divides {
    /// The axis replicates the model over parts of the batch, as data parallelism does: the
    /// global batch is split over `dp` times its degree (and its degree must divide what is
    /// left after `micro_batch x dp`).
    pub batch: bool,
    /// The attention heads (`model.heads`).
    pub heads: bool,
    /// The key/value heads (`model.kv_heads`).
    pub kv_heads: bool,
    /// The sequence (`model.seq_len`).
    pub sequence: bool,
    /// The routed experts of an MoE model.
    pub experts: bool,
}

/// An axis a strategy declares ([`super::ParallelStrategy::axes`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AxisDecl {
    /// Its name: the plan key `plan.axes.NAME` and the `[search]` key `axes.NAME`
    /// (lowercase letters, digits and `_`, starting with a letter; not a built-in axis's name
    /// or key).
    pub name: String,
    /// Where it sits in the mesh.
    pub place: AxisPlace,
    /// What its degree divides.
    pub divides: Divides,
}

/// Names a declared axis may not take: the built-in axes' names and plan keys.
pub const RESERVED_AXIS_NAMES: [&str; 12] = [
    "tensor", "sequence", "context", "expert", "pipeline", "data", "tp", "cp", "pp", "dp", "ep",
    "etp",
];

impl AxisDecl {
    /// Why the declaration cannot be used (a bad name, or a place next to an axis that is
    /// not one of the dense mesh's).
    pub fn check(&self) -> Result<(), String> {
        let n = &self.name;
        let ok = n.starts_with(|c: char| c.is_ascii_lowercase())
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(format!(
                "axis name `{n}` must be lowercase letters, digits and `_`, starting with a letter"
            ));
        }
        if n.len() > MAX_AXIS_NAME_LEN {
            return Err(format!(
                "axis name `{n}` is {} bytes long; at most {MAX_AXIS_NAME_LEN}",
                n.len()
            ));
        }
        if RESERVED_AXIS_NAMES.contains(&n.as_str()) {
            return Err(format!(
                "axis name `{n}` is a built-in axis's; reserved: {}",
                RESERVED_AXIS_NAMES.join(", ")
            ));
        }
        let anchor = self.place.anchor();
        if !matches!(
            anchor,
            Axis::Tensor | Axis::Context | Axis::Pipeline | Axis::Data
        ) {
            return Err(format!(
                "axis `{n}` is placed next to `{}`; a declared axis sits inside or outside \
                 tensor, context, pipeline or data",
                anchor.name()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_bits_sit_above_the_built_in_ones() {
        assert_eq!(AxisSet::declared(0), AxisSet(0x100));
        assert_eq!(AxisSet::declared(7), AxisSet(0x8000));
        assert_eq!(AxisSet::declared(MAX_DECLARED_AXES), AxisSet(0));
        let s = AxisSet::DATA.union(AxisSet::declared(2));
        assert_eq!(s.declared_bits(), 0b100);
        assert!(s.intersects(AxisSet::declared(2)) && !s.intersects(AxisSet::declared(0)));
        assert_eq!(AxisSet::EXPERT_MESH.declared_bits(), 0);
    }

    #[test]
    fn declaration_checks() {
        let decl = |name: &str, place| AxisDecl {
            name: name.into(),
            place,
            divides: Divides::default(),
        };
        assert!(decl("shard", AxisPlace::Inside(Axis::Data)).check().is_ok());
        assert!(decl("tp_col2", AxisPlace::Outside(Axis::Tensor))
            .check()
            .is_ok());
        assert!(decl(&"a".repeat(31), AxisPlace::Inside(Axis::Data))
            .check()
            .is_ok());
        // (declaration, what the error names)
        let bad = [
            (decl("", AxisPlace::Inside(Axis::Data)), "``"),
            (decl("Shard", AxisPlace::Inside(Axis::Data)), "`Shard`"),
            (decl("2d", AxisPlace::Inside(Axis::Data)), "`2d`"),
            (decl("a-b", AxisPlace::Inside(Axis::Data)), "`a-b`"),
            (decl("tp", AxisPlace::Inside(Axis::Data)), "built-in"),
            (decl("data", AxisPlace::Inside(Axis::Data)), "built-in"),
            (
                decl(&"a".repeat(32), AxisPlace::Inside(Axis::Data)),
                "32 bytes long; at most 31",
            ),
            (
                decl("x", AxisPlace::Inside(Axis::Expert)),
                "next to `expert`",
            ),
            (
                decl("x", AxisPlace::Outside(Axis::Sequence)),
                "next to `sequence`",
            ),
        ];
        for (d, want) in bad {
            let e = d.check().unwrap_err();
            assert!(e.contains(want), "{d:?}: {e}");
        }
    }
}
