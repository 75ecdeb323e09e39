//! Unit types. Each is a transparent `f64` newtype so that arithmetic stays free in the hot
//! path while signatures say what a number means.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub};

macro_rules! unit {
    ($(#[$doc:meta])* $name:ident, $suffix:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl $name {
            /// Zero.
            pub const ZERO: Self = Self(0.0);
            /// The value as a plain `f64` in this unit.
            #[inline]
            pub fn get(self) -> f64 {
                self.0
            }
            /// The larger of the two (`f64::max`: a NaN operand yields the other).
            #[inline]
            pub fn max(self, other: Self) -> Self {
                Self(self.0.max(other.0))
            }
            /// The smaller of the two (`f64::min`: a NaN operand yields the other).
            #[inline]
            pub fn min(self, other: Self) -> Self {
                Self(self.0.min(other.0))
            }
            /// Neither NaN nor infinite.
            #[inline]
            pub fn is_finite(self) -> bool {
                self.0.is_finite()
            }
        }
        impl Add for $name {
            type Output = Self;
            #[inline]
            fn add(self, o: Self) -> Self {
                Self(self.0 + o.0)
            }
        }
        impl AddAssign for $name {
            #[inline]
            fn add_assign(&mut self, o: Self) {
                self.0 += o.0;
            }
        }
        impl Sub for $name {
            type Output = Self;
            #[inline]
            fn sub(self, o: Self) -> Self {
                Self(self.0 - o.0)
            }
        }
        impl Mul<f64> for $name {
            type Output = Self;
            #[inline]
            fn mul(self, k: f64) -> Self {
                Self(self.0 * k)
            }
        }
        impl Div<f64> for $name {
            type Output = Self;
            #[inline]
            fn div(self, k: f64) -> Self {
                Self(self.0 / k)
            }
        }
        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = Self>>(it: I) -> Self {
                Self(it.map(|x| x.0).sum())
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} {}", self.0, $suffix)
            }
        }
    };
}

unit!(
    /// A duration in seconds.
    Seconds, "s");
unit!(
    /// A size in bytes (fractional sizes are allowed: 4-bit types, averages).
    Bytes, "B");
unit!(
    /// A count of floating-point (or integer) operations; one multiply-add counts as two.
    FlopCount, "FLOP");
unit!(
    /// A throughput in operations per second.
    FlopRate, "FLOP/s");
unit!(
    /// A bandwidth in bytes per second.
    Bandwidth, "B/s");

impl Seconds {
    /// From microseconds.
    pub fn from_micros(us: f64) -> Self {
        Self(us * 1e-6)
    }
    /// From nanoseconds.
    pub fn from_nanos(ns: f64) -> Self {
        Self(ns * 1e-9)
    }
    /// In microseconds.
    pub fn micros(self) -> f64 {
        self.0 * 1e6
    }
    /// In milliseconds.
    pub fn millis(self) -> f64 {
        self.0 * 1e3
    }
}

impl Bytes {
    /// From binary gibibytes (2^30 bytes).
    pub fn from_gib(g: f64) -> Self {
        Self(g * 1024.0 * 1024.0 * 1024.0)
    }
    /// Decimal gigabytes, as vendors quote HBM capacity.
    pub fn from_gb(g: f64) -> Self {
        Self(g * 1e9)
    }
    /// From binary mebibytes (2^20 bytes).
    pub fn from_mib(m: f64) -> Self {
        Self(m * 1024.0 * 1024.0)
    }
    /// In binary gibibytes (2^30 bytes).
    pub fn gib(self) -> f64 {
        self.0 / (1024.0 * 1024.0 * 1024.0)
    }
    /// In decimal gigabytes (10^9 bytes).
    pub fn gb(self) -> f64 {
        self.0 / 1e9
    }
}

impl FlopRate {
    /// From TFLOP/s (10^12 operations per second; TOPS for integer formats).
    pub fn from_tflops(t: f64) -> Self {
        Self(t * 1e12)
    }
    /// In TFLOP/s (10^12 operations per second).
    pub fn tflops(self) -> f64 {
        self.0 / 1e12
    }
}

impl FlopCount {
    /// In units of 10^12 operations.
    pub fn tera(self) -> f64 {
        self.0 / 1e12
    }
}

impl Bandwidth {
    /// Decimal GB/s.
    pub fn from_gbs(g: f64) -> Self {
        Self(g * 1e9)
    }
    /// Decimal TB/s.
    pub fn from_tbs(t: f64) -> Self {
        Self(t * 1e12)
    }
    /// Gigabits per second (network line rates).
    pub fn from_gbps(g: f64) -> Self {
        Self(g * 1e9 / 8.0)
    }
    /// In decimal GB/s.
    pub fn gbs(self) -> f64 {
        self.0 / 1e9
    }
}

impl Div<FlopRate> for FlopCount {
    type Output = Seconds;
    #[inline]
    fn div(self, r: FlopRate) -> Seconds {
        Seconds(self.0 / r.0)
    }
}

impl Div<Bandwidth> for Bytes {
    type Output = Seconds;
    #[inline]
    fn div(self, b: Bandwidth) -> Seconds {
        Seconds(self.0 / b.0)
    }
}

impl Div<Seconds> for FlopCount {
    type Output = FlopRate;
    #[inline]
    fn div(self, s: Seconds) -> FlopRate {
        FlopRate(self.0 / s.0)
    }
}

/// Arithmetic intensity of `flops` over `bytes` (FLOP per byte); infinite when nothing moves.
#[inline]
pub fn intensity(flops: FlopCount, bytes: Bytes) -> f64 {
    if bytes.0 > 0.0 {
        flops.0 / bytes.0
    } else {
        f64::INFINITY
    }
}

/// Error unless `v` is finite and non-negative; `what` names the quantity for the message.
pub fn ensure_finite(what: &str, v: f64) -> Result<f64, crate::ModelError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(crate::ModelError::NonFinite {
            what: what.to_string(),
            value: v,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        let cases: &[(f64, f64)] = &[
            (Bytes::from_gib(1.0).0, 1073741824.0),
            (Bytes::from_gb(80.0).0, 80e9),
            (Bandwidth::from_gbps(200.0).0, 25e9),
            (Bandwidth::from_tbs(2.039).0, 2.039e12),
            (FlopRate::from_tflops(312.0).0, 312e12),
            (Seconds::from_micros(9.0).0, 9e-6),
            ((FlopCount(312e12) / FlopRate::from_tflops(312.0)).0, 1.0),
            ((Bytes(2e9) / Bandwidth::from_gbs(1.0)).0, 2.0),
        ];
        for (i, (got, want)) in cases.iter().enumerate() {
            assert!(
                (got - want).abs() <= 1e-9 * want.abs(),
                "case {i}: {got} != {want}"
            );
        }
    }

    #[test]
    fn finiteness() {
        assert!(ensure_finite("x", 1.0).is_ok());
        assert!(ensure_finite("x", f64::NAN).is_err());
        assert!(ensure_finite("x", f64::INFINITY).is_err());
        assert!(ensure_finite("x", -1.0).is_err());
        assert_eq!(intensity(FlopCount(10.0), Bytes(0.0)), f64::INFINITY);
    }
}
