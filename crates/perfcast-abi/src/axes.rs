//! The declared mesh axes across the ABIs (Rust ABI 1.4, C ABI 1.7): what a strategy
//! declares ([`PcAxisDecl`], as `perfcast_core::parallel::AxisDecl`) and the plan it is
//! handed with its own axes' degrees ([`PcPlanAxes`], which is C ABI 1.7's `perfcast_plan`).
//! Re-exported by `crate::strategy`.

use crate::strategy::{axis_code, axis_from_code, PcPlan};
use abi_stable::StableAbi;
use perfcast_core::parallel::{AxisDecl, AxisPlace, Divides, PlanShape, MAX_DECLARED_AXES};
use serde::{Deserialize, Serialize};

/// The places a declared axis takes, in code order (`PERFCAST_PLACE_*`).
pub const PLACE_INSIDE: u32 = 0;
pub const PLACE_OUTSIDE: u32 = 1;

/// What a declared axis's degree divides (`PERFCAST_DIVIDES_*` bits of [`PcAxisDecl::divides`]).
pub const DIVIDES_BATCH: u32 = 1;
pub const DIVIDES_HEADS: u32 = 2;
pub const DIVIDES_KV_HEADS: u32 = 4;
pub const DIVIDES_SEQUENCE: u32 = 8;
pub const DIVIDES_EXPERTS: u32 = 16;
const DIVIDES_ALL: u32 = 31;

/// Bytes of a declared axis's name, its NUL included.
pub const AXIS_NAME_BYTES: usize = 32;

/// The plan a strategy with declared axes sees (Rust ABI 1.4; C ABI 1.7's `perfcast_plan`,
/// which appends these fields to the 1.4 struct): the 1.4 plan, the product of the degrees
/// of every declared axis that splits the batch, and the degrees of the strategy's own
/// declared axes in the order it declared them (`axes[..n_axes]`; the rest 1).
/// `plan.struct_size` is this struct's size.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PcPlanAxes {
    pub plan: PcPlan,
    pub batch_split: u32,
    pub n_axes: u32,
    pub axes: [u32; MAX_DECLARED_AXES],
}

impl Default for PcPlanAxes {
    fn default() -> Self {
        PcPlanAxes {
            plan: PcPlan {
                struct_size: std::mem::size_of::<PcPlanAxes>() as u32,
                ..PcPlan::default()
            },
            batch_split: 1,
            n_axes: 0,
            axes: [1; MAX_DECLARED_AXES],
        }
    }
}

impl PcPlanAxes {
    /// The plan of a strategy that declares `n_axes` axes (its degrees at `p.axes[..n_axes]`).
    pub fn from_native(p: &PlanShape, n_axes: usize) -> Self {
        let n = n_axes.min(MAX_DECLARED_AXES);
        let mut axes = [1; MAX_DECLARED_AXES];
        axes[..n].copy_from_slice(&p.axes[..n]);
        PcPlanAxes {
            plan: PcPlan {
                struct_size: std::mem::size_of::<PcPlanAxes>() as u32,
                ..PcPlan::from_native(p)
            },
            batch_split: p.batch_split,
            n_axes: n as u32,
            axes,
        }
    }

    /// The plan, every code and degree checked.
    pub fn to_native(&self) -> Result<PlanShape, String> {
        let mut p = self.plan.to_native()?;
        let n = self.n_axes as usize;
        if n > MAX_DECLARED_AXES {
            return Err(format!(
                "n_axes {n} is above the {MAX_DECLARED_AXES} a plan carries"
            ));
        }
        if let Some(d) = self.axes[..n].iter().find(|&&d| d == 0) {
            return Err(format!("a declared axis has degree {d}"));
        }
        if self.batch_split == 0 {
            return Err("batch_split is 0".into());
        }
        p.axes[..n].copy_from_slice(&self.axes[..n]);
        p.batch_split = self.batch_split;
        Ok(p)
    }
}

/// `perfcast_axis_decl`: one mesh axis a strategy declares (plugin -> host; Rust ABI 1.4,
/// C ABI 1.7), as [`AxisDecl`]: its name (NUL-terminated UTF-8 in `name`), whether it sits
/// inside or outside (`PLACE_*`) the dense axis `anchor` (an [`AXES`] code: tensor, context,
/// pipeline or data) and what its degree divides (`DIVIDES_*` bits).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcAxisDecl {
    pub struct_size: u32,
    pub place: u32,
    pub anchor: u32,
    pub divides: u32,
    /// (Serialised as a string: the bytes up to the NUL.)
    #[serde(with = "name_text")]
    pub name: [u8; AXIS_NAME_BYTES],
}

/// A declared axis's name as text on the wire (the isolated plugin host's JSON): the bytes
/// up to the first NUL; a text that does not fit is an error.
mod name_text {
    use super::AXIS_NAME_BYTES;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(name: &[u8; AXIS_NAME_BYTES], s: S) -> Result<S::Ok, S::Error> {
        let end = name.iter().position(|&b| b == 0).unwrap_or(AXIS_NAME_BYTES);
        s.serialize_str(&String::from_utf8_lossy(&name[..end]))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; AXIS_NAME_BYTES], D::Error> {
        let text = String::deserialize(d)?;
        let bytes = text.as_bytes();
        if bytes.len() >= AXIS_NAME_BYTES {
            return Err(D::Error::custom(format!(
                "axis name `{text}` is longer than {} bytes",
                AXIS_NAME_BYTES - 1
            )));
        }
        let mut name = [0; AXIS_NAME_BYTES];
        name[..bytes.len()].copy_from_slice(bytes);
        Ok(name)
    }
}

impl Default for PcAxisDecl {
    fn default() -> Self {
        PcAxisDecl {
            struct_size: std::mem::size_of::<PcAxisDecl>() as u32,
            place: 0,
            anchor: 0,
            divides: 0,
            name: [0; AXIS_NAME_BYTES],
        }
    }
}

impl PcAxisDecl {
    /// The declaration as data; a name longer than [`AXIS_NAME_BYTES`] `- 1` bytes is an
    /// error.
    pub fn from_native(d: &AxisDecl) -> Result<Self, String> {
        let bytes = d.name.as_bytes();
        if bytes.len() >= AXIS_NAME_BYTES || bytes.contains(&0) {
            return Err(format!(
                "axis name `{}` is longer than {} bytes",
                d.name,
                AXIS_NAME_BYTES - 1
            ));
        }
        let mut name = [0; AXIS_NAME_BYTES];
        name[..bytes.len()].copy_from_slice(bytes);
        let (place, anchor) = match d.place {
            AxisPlace::Inside(a) => (PLACE_INSIDE, a),
            AxisPlace::Outside(a) => (PLACE_OUTSIDE, a),
        };
        let v = d.divides;
        let divides = [
            (v.batch, DIVIDES_BATCH),
            (v.heads, DIVIDES_HEADS),
            (v.kv_heads, DIVIDES_KV_HEADS),
            (v.sequence, DIVIDES_SEQUENCE),
            (v.experts, DIVIDES_EXPERTS),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |acc, (_, bit)| acc | bit);
        Ok(PcAxisDecl {
            place,
            anchor: axis_code(anchor),
            divides,
            name,
            ..PcAxisDecl::default()
        })
    }

    /// The declaration, every code checked (the name's rules are the engine's:
    /// [`AxisDecl::check`]).
    pub fn to_native(&self) -> Result<AxisDecl, String> {
        let end = self.name.iter().position(|&b| b == 0).ok_or_else(|| {
            format!("an axis name is not NUL-terminated within {AXIS_NAME_BYTES} bytes")
        })?;
        let name = std::str::from_utf8(&self.name[..end])
            .map_err(|_| "an axis name is not UTF-8".to_string())?
            .to_string();
        let anchor = axis_from_code(self.anchor).map_err(|e| format!("axis `{name}`: {e}"))?;
        let place = match self.place {
            PLACE_INSIDE => AxisPlace::Inside(anchor),
            PLACE_OUTSIDE => AxisPlace::Outside(anchor),
            c => return Err(format!("axis `{name}`: unknown place code {c}")),
        };
        if self.divides & !DIVIDES_ALL != 0 {
            return Err(format!(
                "axis `{name}`: divides {:#x} has bits outside {DIVIDES_ALL:#x}",
                self.divides
            ));
        }
        let on = |bit: u32| self.divides & bit != 0;
        Ok(AxisDecl {
            name,
            place,
            divides: Divides {
                batch: on(DIVIDES_BATCH),
                heads: on(DIVIDES_HEADS),
                kv_heads: on(DIVIDES_KV_HEADS),
                sequence: on(DIVIDES_SEQUENCE),
                experts: on(DIVIDES_EXPERTS),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::parallel::Axis;

    #[test]
    fn declarations_and_plans_round_trip() {
        for (place, divides) in [
            (
                AxisPlace::Inside(Axis::Data),
                Divides {
                    batch: true,
                    ..Divides::default()
                },
            ),
            (
                AxisPlace::Outside(Axis::Tensor),
                Divides {
                    heads: true,
                    kv_heads: true,
                    sequence: true,
                    experts: true,
                    ..Divides::default()
                },
            ),
        ] {
            let d = AxisDecl {
                name: "shard_2".into(),
                place,
                divides,
            };
            assert_eq!(PcAxisDecl::from_native(&d).unwrap().to_native().unwrap(), d);
        }
        let long = AxisDecl {
            name: "a".repeat(AXIS_NAME_BYTES),
            place: AxisPlace::Inside(Axis::Data),
            divides: Divides::default(),
        };
        assert!(PcAxisDecl::from_native(&long)
            .unwrap_err()
            .contains("longer than 31"));
        // On the wire (the isolated host's JSON) the name is text.
        let d = PcAxisDecl::from_native(&AxisDecl {
            name: "col".into(),
            place: AxisPlace::Outside(Axis::Tensor),
            divides: Divides::default(),
        })
        .unwrap();
        let j = serde_json::to_string(&d).unwrap();
        assert!(j.contains(r#""name":"col""#), "{j}");
        assert_eq!(serde_json::from_str::<PcAxisDecl>(&j).unwrap(), d);
        let too_long = j.replace("\"col\"", &format!("\"{}\"", "c".repeat(32)));
        assert!(serde_json::from_str::<PcAxisDecl>(&too_long)
            .unwrap_err()
            .to_string()
            .contains("longer than 31"));
        let mut p = PlanShape {
            tp: 2,
            dp: 4,
            global_batch: 64,
            batch_split: 8,
            ..PlanShape::default()
        };
        p.axes[0] = 8;
        p.axes[1] = 3;
        let c = PcPlanAxes::from_native(&p, 2);
        assert_eq!(
            c.plan.struct_size as usize,
            std::mem::size_of::<PcPlanAxes>()
        );
        assert_eq!(c.to_native().unwrap(), p);
        // Only the strategy's own axes cross.
        let one = PcPlanAxes::from_native(&p, 1);
        assert_eq!(&one.axes[..3], &[8, 1, 1]);
        type Spoil = fn(&mut PcPlanAxes);
        let table: [(Spoil, &str); 3] = [
            (|c| c.n_axes = 9, "n_axes 9"),
            (|c| c.axes[1] = 0, "degree 0"),
            (|c| c.batch_split = 0, "batch_split is 0"),
        ];
        for (spoil, want) in table {
            let mut x = c;
            spoil(&mut x);
            assert!(x.to_native().unwrap_err().contains(want), "{want}");
        }
    }
}
