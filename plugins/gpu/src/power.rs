//! Clock under a power limit.
//!
//! A GPU's peaks and the efficiencies of its preset hold at its rated power (its TDP, the
//! power the kernel measurements were taken at). Capped below it, the power manager lowers
//! the clock (NVIDIA's power capping acts as a clock throttle, `nvidia-smi -pl`): with
//! dynamic power `C·V²·f` and the supply scaled with the clock in the DVFS range, dynamic
//! power grows as `f³` (the cube law of CMOS DVFS; Hennessy & Patterson, "Computer
//! Architecture", 6th ed., §1.5), on top of a part that does not scale with the clock
//! (leakage, memory and I/O). The clock ratio at a limit `P` is then
//! `((P - P_static) / (P_rated - P_static))^(1/3)`, and every engine's throughput scales with
//! it (memory bandwidth does not: HBM has its own clock).

use perfcast_core::params::{fraction, positive};
use perfcast_core::PluginError;

/// Static (clock-independent) power as a fraction of the rated power when the device does
/// not say: leakage plus HBM and I/O, bounded by the draw of a device idling at full clocks
/// with its memory allocated (H100 SXM: 100-145 W of 700 W, 0.14-0.21, wilicc/gpu-burn#114;
/// a DGX H100 in a hung training job ~100 W, NVIDIA-NeMo#9291; A100-80GB 62 W of 400 W,
/// 0.16). The clock at a 500 W limit of a 700 W part moves only from 0.88 to 0.86 across
/// 0.10-0.20, so the bound is tight enough; the cube law's exponent, not this fraction, is
/// what a deep cap (below the minimum-voltage point, where the clock falls about linearly
/// with power) would get wrong.
pub const DEFAULT_STATIC_FRACTION: f64 = 0.15;

/// The power parameters of a GPU (all optional: without a limit below the rating the clock
/// is the rated one).
#[derive(Debug, Clone, Copy, Default)]
pub struct PowerParams {
    /// The power the peaks and efficiencies hold at (the TDP), W.
    pub rated_power_w: Option<f64>,
    /// The power limit the device runs under, W (default: the rated power).
    pub power_limit_w: Option<f64>,
    /// The clock-independent part of the rated power, as a fraction of it (default
    /// [`DEFAULT_STATIC_FRACTION`]).
    pub static_power_fraction: Option<f64>,
}

impl PowerParams {
    /// The clock ratio (limit to rated) these parameters give, or why they are invalid.
    pub fn clock_ratio(&self) -> Result<f64, PluginError> {
        let Some(limit) = self.power_limit_w else {
            return Ok(1.0);
        };
        positive("power_limit_w", limit)?;
        let rated = self.rated_power_w.ok_or_else(|| PluginError::Params {
            path: "rated_power_w".into(),
            message: "needed with power_limit_w: the power the peaks and efficiencies hold at"
                .into(),
        })?;
        positive("rated_power_w", rated)?;
        let s = fraction(
            "static_power_fraction",
            self.static_power_fraction
                .unwrap_or(DEFAULT_STATIC_FRACTION),
        )?;
        let floor = s * rated;
        if limit > rated {
            // A power limit only lowers the clock: the peaks and efficiencies already hold at
            // the rated power, so a higher limit is a mistaken input, not a faster part.
            return Err(PluginError::Params {
                path: "power_limit_w".into(),
                message: format!(
                    "{limit} W is above the rated power {rated} W (rated_power_w): a limit \
                     cannot raise the clock the peaks and efficiencies hold at"
                ),
            });
        }
        if limit == rated {
            return Ok(1.0);
        }
        if limit <= floor {
            return Err(PluginError::Params {
                path: "power_limit_w".into(),
                message: format!(
                    "{limit} W is at or below the static power {floor:.0} W \
                     (static_power_fraction x rated_power_w): no clock remains"
                ),
            });
        }
        Ok(((limit - floor) / (rated - floor)).cbrt())
    }

    /// The matrix engines' power model for a device whose dynamic power at the 16-bit matrix
    /// peak and the datasheet clock is `full_power_w` ([`MatrixPower`]), or why the
    /// parameters are invalid.
    pub fn matrix_power(&self, full_power_w: f64) -> Result<MatrixPower, PluginError> {
        positive("matrix power at the datasheet peak", full_power_w)?;
        let rated = self.rated_power_w.ok_or_else(|| PluginError::Params {
            path: "rated_power_w".into(),
            message: "needed with matrix_pj_per_flop: the power budget a GEMM runs within".into(),
        })?;
        positive("rated_power_w", rated)?;
        // The limit is checked by `clock_ratio` (at most the rated power, above the static).
        self.clock_ratio()?;
        let s = self
            .static_power_fraction
            .unwrap_or(DEFAULT_STATIC_FRACTION);
        let limit = self.power_limit_w.unwrap_or(rated);
        Ok(MatrixPower {
            budget_w: limit - s * rated,
            full_w: full_power_w,
        })
    }
}

/// The clock a matrix-engine load sustains within a power budget.
///
/// At the datasheet clock, a GEMM that keeps a fraction `u` of the matrix peak busy draws
/// `u · full_w` of dynamic power (the work per second times the energy per operation). When
/// that exceeds the budget (the limit less the static power) the power manager lowers the
/// clock to `r`, where the draw `u · full_w · r³` (the work rate falls with `r`, the energy
/// per operation with `V² ∝ r²`: the cube law above) meets it:
/// `r = min(1, (budget / (u · full_w))^(1/3))`. Big GEMMs then run below the datasheet clock
/// and small ones at it: on the kernel tables, GB200 (1,200 W) runs large bf16 GEMMs 7%
/// faster than B200 (1,000 W) with the same chip and peak, `(1200 / 1000)^(1/3) = 1.063`.
/// A GEMM of a narrower format at its own (doubled) peak is taken to draw what a 16-bit one
/// does at the 16-bit peak (ASSUMPTION: the doubled throughput comes from narrower
/// multipliers in the same power envelope).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixPower {
    /// Power left for the clock-dependent part: the limit (or rated power) less the static.
    pub budget_w: f64,
    /// Dynamic power at the 16-bit matrix peak and the datasheet clock.
    pub full_w: f64,
}

impl MatrixPower {
    /// The clock ratio a load at fraction `utilisation` of the peak sustains.
    pub fn clock(&self, utilisation: f64) -> f64 {
        let need = self.full_w * utilisation;
        if need <= self.budget_w {
            1.0
        } else {
            (self.budget_w / need).cbrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ratio_table() {
        let p = |limit: Option<f64>| PowerParams {
            rated_power_w: Some(700.0),
            power_limit_w: limit,
            static_power_fraction: None,
        };
        // (limit, ratio)
        let table = [
            (None, 1.0),
            (Some(700.0), 1.0),
            (Some(500.0), ((500.0 - 105.0) / 595.0f64).cbrt()),
        ];
        for (limit, want) in table {
            let r = p(limit).clock_ratio().unwrap();
            assert!((r - want).abs() < 1e-12, "{limit:?}: {r}");
        }
        assert!((p(Some(500.0)).clock_ratio().unwrap() - 0.872).abs() < 1e-3);
        let e = p(Some(900.0)).clock_ratio().unwrap_err().to_string();
        assert!(
            e.contains("power_limit_w") && e.contains("above the rated power 700"),
            "{e}"
        );
        let e = p(Some(100.0)).clock_ratio().unwrap_err().to_string();
        assert!(e.contains("power_limit_w") && e.contains("static"), "{e}");
        let e = PowerParams {
            power_limit_w: Some(500.0),
            ..PowerParams::default()
        }
        .clock_ratio()
        .unwrap_err()
        .to_string();
        assert!(e.contains("rated_power_w"), "{e}");
    }

    #[test]
    fn matrix_clock_table() {
        let p = |limit: Option<f64>| PowerParams {
            rated_power_w: Some(1000.0),
            power_limit_w: limit,
            static_power_fraction: None,
        };
        let full = 2000.0;
        // (limit, utilisation, clock): the budget is the limit less 150 W of static power.
        let table = [
            (None, 0.0, 1.0),
            (None, 0.4, 1.0),
            (None, 0.425, 1.0),
            (None, 0.8, (850.0f64 / 1600.0).cbrt()),
            (Some(600.0), 0.8, (450.0f64 / 1600.0).cbrt()),
            (Some(1000.0), 1.0, (850.0f64 / 2000.0).cbrt()),
        ];
        for (limit, u, want) in table {
            let r = p(limit).matrix_power(full).unwrap().clock(u);
            assert!((r - want).abs() < 1e-12, "{limit:?} {u}: {r}");
        }
        // More power, a faster big GEMM, by the cube root of the budgets.
        let at = |rated: f64| {
            PowerParams {
                rated_power_w: Some(rated),
                ..PowerParams::default()
            }
            .matrix_power(full)
            .unwrap()
            .clock(0.9)
        };
        assert!((at(1200.0) / at(1000.0) - 1.2f64.cbrt()).abs() < 1e-12);
        for (params, what) in [
            (PowerParams::default(), "rated_power_w"),
            (p(Some(1200.0)), "above the rated power"),
        ] {
            let e = params.matrix_power(full).unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
        assert!(p(None).matrix_power(0.0).is_err());
    }
}
