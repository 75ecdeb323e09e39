//! Numeric formats of tensors and of the engines that consume them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A numeric format. Configurations spell it in lowercase (`bf16`); [`DType::code`] is its
/// number across the FFI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE 754 single precision (4 bytes).
    Fp32,
    /// TensorFloat-32: the tensor-core format of fp32 GEMMs, stored as fp32 (4 bytes).
    Tf32,
    /// bfloat16 (2 bytes).
    Bf16,
    /// IEEE 754 half precision (2 bytes).
    Fp16,
    /// 8-bit floating point (1 byte).
    Fp8,
    /// 4-bit floating point (half a byte).
    Fp4,
    /// 8-bit integer (1 byte).
    Int8,
    /// 4-bit integer (half a byte).
    Int4,
}

impl DType {
    /// Every format, in [`DType::code`] order.
    pub const ALL: [DType; 8] = [
        DType::Fp32,
        DType::Tf32,
        DType::Bf16,
        DType::Fp16,
        DType::Fp8,
        DType::Fp4,
        DType::Int8,
        DType::Int4,
    ];

    /// Storage size of one element in bytes (tf32 is stored as fp32; 4-bit types are half a byte).
    #[inline]
    pub const fn bytes(self) -> f64 {
        match self {
            DType::Fp32 | DType::Tf32 => 4.0,
            DType::Bf16 | DType::Fp16 => 2.0,
            DType::Fp8 | DType::Int8 => 1.0,
            DType::Fp4 | DType::Int4 => 0.5,
        }
    }

    /// The lowercase name configurations use (`fp32`, `bf16`, ...); also `Display`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Fp32 => "fp32",
            DType::Tf32 => "tf32",
            DType::Bf16 => "bf16",
            DType::Fp16 => "fp16",
            DType::Fp8 => "fp8",
            DType::Fp4 => "fp4",
            DType::Int8 => "int8",
            DType::Int4 => "int4",
        }
    }

    /// Stable small integer for FFI (the C header mirrors these values).
    pub const fn code(self) -> u32 {
        match self {
            DType::Fp32 => 0,
            DType::Tf32 => 1,
            DType::Bf16 => 2,
            DType::Fp16 => 3,
            DType::Fp8 => 4,
            DType::Fp4 => 5,
            DType::Int8 => 6,
            DType::Int4 => 7,
        }
    }

    /// The format whose [`DType::code`] is `code`; `None` for an unknown code.
    pub fn from_code(code: u32) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.code() == code)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let l = s.to_ascii_lowercase();
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == l)
            .ok_or_else(|| {
                format!(
                    "unknown dtype `{s}`{}; expected one of {}",
                    crate::suggest::did_you_mean(&l, DType::ALL.map(|d| d.name())),
                    DType::ALL.map(|d| d.name()).join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(DType::from_code(d.code()), Some(d));
        }
        assert_eq!(DType::Fp4.bytes(), 0.5);
        assert_eq!(DType::Bf16.bytes(), 2.0);
        assert!("fp12".parse::<DType>().unwrap_err().contains("bf16"));
    }
}
