//! Where the parallel groups sit on the devices: the order of the mesh axes, innermost first
//! (consecutive ranks of the innermost axis are neighbours, so it is the axis that stays
//! inside the NVLink domain longest).
//!
//! Megatron-LM's order is TP, CP, PP, DP (`crate::network`). Other orders put e.g. the
//! data-parallel group inside a node and TP across nodes, as Calculon's network mapping
//! search does (Isaev et al. 2023, "Calculon: a Methodology and Tool for High-Level Codesign
//! of Systems and Large Language Models", §3). The pipeline axis stays third: the group of
//! the first and last stage (tied embeddings) is placed relative to it, so the orders are the
//! six permutations of TP, CP, DP around it.

use crate::network::{DeclaredDim, Mesh};
use perfcast_core::parallel::{Axis, AxisPlace, AxisSet};
use perfcast_core::{Key, ModelError};
use serde::{Deserialize, Serialize};

/// A mesh axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MeshAxis {
    Tp,
    Cp,
    Pp,
    Dp,
}

impl MeshAxis {
    /// The mesh axis a strategy's axis lives on (sequence parallelism shares the tensor
    /// group; the expert mesh is folded into the data-parallel positions): where a declared
    /// axis anchored at `axis` is laid out.
    pub const fn of(axis: Axis) -> MeshAxis {
        match axis {
            Axis::Tensor | Axis::Sequence => MeshAxis::Tp,
            Axis::Context => MeshAxis::Cp,
            Axis::Pipeline => MeshAxis::Pp,
            Axis::Data | Axis::Expert => MeshAxis::Dp,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            MeshAxis::Tp => "tp",
            MeshAxis::Cp => "cp",
            MeshAxis::Pp => "pp",
            MeshAxis::Dp => "dp",
        }
    }
    fn bit(self) -> u16 {
        match self {
            MeshAxis::Tp => AxisSet::TENSOR.0,
            MeshAxis::Cp => AxisSet::CONTEXT.0,
            MeshAxis::Pp => AxisSet::PIPELINE.0,
            MeshAxis::Dp => AxisSet::DATA.0,
        }
    }
}

/// The order of the mesh axes on the devices, innermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Placement {
    order: [MeshAxis; 4],
}

impl Default for Placement {
    fn default() -> Self {
        Placement::MEGATRON
    }
}

/// Physical slots (mesh positions, innermost first) as the network sees them.
const SLOT_BITS: [u16; 4] = [1, 2, 4, 8];

impl Placement {
    /// TP, CP, PP, DP: Megatron-LM's rank order.
    pub const MEGATRON: Placement = Placement {
        order: [MeshAxis::Tp, MeshAxis::Cp, MeshAxis::Pp, MeshAxis::Dp],
    };

    /// An order of the four axes, innermost first; PP must be third.
    pub fn new(order: [MeshAxis; 4]) -> Result<Placement, ModelError> {
        let mut seen = order;
        seen.sort();
        if seen != [MeshAxis::Tp, MeshAxis::Cp, MeshAxis::Pp, MeshAxis::Dp] {
            return Err(ModelError::invalid(
                Key::other("placement"),
                Placement { order }.name(),
                "must order each of tp, cp, pp, dp exactly once",
            ));
        }
        if order[2] != MeshAxis::Pp {
            return Err(ModelError::invalid(
                Key::other("placement"),
                Placement { order }.name(),
                "pp must be the third axis (the first-and-last-stage group is placed relative \
                 to it); orders: any of tp, cp, dp around it, e.g. dp-tp-pp-cp",
            ));
        }
        Ok(Placement { order })
    }

    /// Parse `tp-cp-pp-dp` (or with commas).
    pub fn parse(s: &str) -> Result<Placement, ModelError> {
        let parts: Vec<&str> = s.split([',', '-']).map(str::trim).collect();
        let axis = |p: &str| match p {
            "tp" => Ok(MeshAxis::Tp),
            "cp" => Ok(MeshAxis::Cp),
            "pp" => Ok(MeshAxis::Pp),
            "dp" => Ok(MeshAxis::Dp),
            other => Err(ModelError::invalid(
                Key::other("placement"),
                s,
                format!("`{other}` is not an axis; axes: tp, cp, pp, dp (e.g. dp-tp-pp-cp)"),
            )),
        };
        if parts.len() != 4 {
            return Err(ModelError::invalid(
                Key::other("placement"),
                s,
                "needs the four axes innermost first, e.g. tp-cp-pp-dp",
            ));
        }
        Placement::new([
            axis(parts[0])?,
            axis(parts[1])?,
            axis(parts[2])?,
            axis(parts[3])?,
        ])
    }

    /// Every supported order (the six with PP third), Megatron's first.
    pub fn all() -> Vec<Placement> {
        use MeshAxis::*;
        [
            [Tp, Cp, Pp, Dp],
            [Cp, Tp, Pp, Dp],
            [Tp, Dp, Pp, Cp],
            [Dp, Tp, Pp, Cp],
            [Cp, Dp, Pp, Tp],
            [Dp, Cp, Pp, Tp],
        ]
        .into_iter()
        .map(|order| Placement { order })
        .collect()
    }

    /// `tp-cp-pp-dp`.
    pub fn name(&self) -> String {
        self.order.map(MeshAxis::name).join("-")
    }

    pub fn order(&self) -> [MeshAxis; 4] {
        self.order
    }

    /// The axes of degree > 1 in order: two placements with the same effective order place
    /// every group the same.
    pub fn effective(&self, tp: u32, cp: u32, pp: u32, dp: u32) -> [Option<MeshAxis>; 4] {
        let mut out = [None; 4];
        let mut n = 0;
        for a in self.order {
            let d = match a {
                MeshAxis::Tp => tp,
                MeshAxis::Cp => cp,
                MeshAxis::Pp => pp,
                MeshAxis::Dp => dp,
            };
            if d > 1 {
                out[n] = Some(a);
                n += 1;
            }
        }
        out
    }

    /// The mesh as laid out (degrees per physical slot) for `tp x cp x pp x dp`.
    pub(crate) fn mesh(&self, tp: u32, cp: u32, pp: u32, dp: u32) -> Mesh {
        let deg = |a: MeshAxis| match a {
            MeshAxis::Tp => tp,
            MeshAxis::Cp => cp,
            MeshAxis::Pp => pp,
            MeshAxis::Dp => dp,
        };
        Mesh::new(
            deg(self.order[0]),
            deg(self.order[1]),
            deg(self.order[2]),
            deg(self.order[3]),
        )
    }

    /// A declared axis of `degree` at `place` (next to a dense axis) as the mesh lays it out
    /// (`batch`: it splits the batch).
    pub(crate) fn declared(&self, place: AxisPlace, degree: u32, batch: bool) -> DeclaredDim {
        let logical = MeshAxis::of(place.anchor());
        let slot = self.order.iter().position(|&a| a == logical).unwrap_or(0) as u8;
        DeclaredDim {
            degree,
            slot,
            outside: matches!(place, AxisPlace::Outside(_)),
            batch,
        }
    }

    /// A group's logical axes as physical slots of [`Placement::mesh`].
    pub(crate) fn map(&self, set: AxisSet) -> AxisSet {
        if *self == Placement::MEGATRON {
            return set;
        }
        // The expert mesh fills a stage's non-pipeline devices innermost first whatever
        // their order: its bits are placed by the mesh itself.
        // So are the declared axes, placed next to their dense axis's slot.
        let mut out =
            set.0 & (AxisSet::PIPELINE_ENDS.0 | AxisSet::EXPERT_MESH.0 | !AxisSet::BUILT_IN.0);
        for (slot, a) in self.order.iter().enumerate() {
            if set.0 & a.bit() != 0 {
                out |= SLOT_BITS[slot];
            }
        }
        AxisSet(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_names() {
        assert_eq!(
            Placement::parse("tp-cp-pp-dp").unwrap(),
            Placement::MEGATRON
        );
        assert_eq!(
            Placement::parse("dp,tp,pp,cp").unwrap().name(),
            "dp-tp-pp-cp"
        );
        for bad in ["tp-cp-dp-pp", "tp-tp-pp-dp", "tp-cp-pp", "tp-xp-pp-dp"] {
            let e = Placement::parse(bad).unwrap_err().to_string();
            assert!(e.contains("placement") && e.contains(bad), "{e}");
        }
        assert_eq!(Placement::all().len(), 6);
        assert_eq!(Placement::all()[0], Placement::MEGATRON);
    }

    /// DP inside the node, TP across: the TP group maps to the outermost slot, DP to the
    /// innermost, with their degrees.
    #[test]
    fn mapping_table() {
        let p = Placement::parse("dp-cp-pp-tp").unwrap();
        let m = p.mesh(8, 1, 16, 8);
        assert_eq!((m.tp, m.cp, m.pp, m.dp), (8, 1, 16, 8));
        // (logical set, physical set)
        let table = [
            (AxisSet::TENSOR, AxisSet::DATA),
            (AxisSet::DATA, AxisSet::TENSOR),
            (AxisSet::DATA_CONTEXT, AxisSet(1 | 2)),
            (AxisSet::PIPELINE, AxisSet::PIPELINE),
            (AxisSet::PIPELINE_ENDS, AxisSet::PIPELINE_ENDS),
        ];
        for (l, phys) in table {
            assert_eq!(p.map(l), phys, "{l:?}");
        }
        let m = Placement::parse("dp-tp-pp-cp").unwrap().mesh(2, 1, 4, 4);
        assert_eq!((m.tp, m.cp, m.pp, m.dp), (4, 2, 4, 1));
        assert_eq!(
            Placement::MEGATRON.effective(8, 1, 16, 8),
            [
                Some(MeshAxis::Tp),
                Some(MeshAxis::Pp),
                Some(MeshAxis::Dp),
                None
            ]
        );
    }
}
