//! A folded Clos (fat-tree) of switches of one radix, tier by tier, with a down:up
//! oversubscription ratio per tier (Leiserson 1985; Al-Fares, Loukissas & Vahdat 2008): a
//! switch below the top tier has `radix * o / (1 + o)` ports down and the rest up; the top
//! tier points all its ports down. A tier-`t` switch's subtree holds
//! `down(0) * ... * down(t)` endpoints.

use perfcast_core::params::positive;
use perfcast_core::PluginError;
use serde::Deserialize;

/// Most tiers a Clos may have.
pub const MAX_TIERS: usize = 4;

/// The Clos parameters shared by the fat-tree kinds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosParams {
    /// Ports per switch (NVIDIA Quantum-2 QM9700: 64 NDR ports; QM9700 user manual).
    #[serde(default = "d_radix")]
    pub radix: u64,
    /// Switch tiers (default: the fewest that reach every endpoint).
    #[serde(default)]
    pub tiers: Option<usize>,
    /// Down:up port ratio of each tier below the top, leaf first (missing tiers 1 = full
    /// bisection; 2 = 2:1).
    #[serde(default)]
    pub oversubscription: Vec<f64>,
}

fn d_radix() -> u64 {
    64
}

impl Default for ClosParams {
    fn default() -> Self {
        ClosParams {
            radix: d_radix(),
            tiers: None,
            oversubscription: Vec::new(),
        }
    }
}

/// A Clos sized for a number of endpoints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clos {
    /// Switch tiers.
    pub tiers: usize,
    radix: u64,
    over: [f64; MAX_TIERS],
    endpoints: u64,
}

impl Clos {
    /// Check `p` (errors name the key under `prefix`).
    pub fn check(p: &ClosParams, prefix: &str) -> Result<(), PluginError> {
        let key = |k: &str| format!("{prefix}{k}");
        if p.radix < 2 {
            return Err(PluginError::Params {
                path: key("radix"),
                message: format!("must be at least 2, got {}", p.radix),
            });
        }
        if let Some(t) = p.tiers {
            if t == 0 || t > MAX_TIERS {
                return Err(PluginError::Params {
                    path: key("tiers"),
                    message: format!("must be 1 to {MAX_TIERS}, got {t}"),
                });
            }
        }
        if p.oversubscription.len() >= MAX_TIERS {
            return Err(PluginError::Params {
                path: key("oversubscription"),
                message: format!("at most {} tiers below the top", MAX_TIERS - 1),
            });
        }
        for (i, &o) in p.oversubscription.iter().enumerate() {
            let o = positive(&format!("{}[{i}]", key("oversubscription")), o)?;
            if o < 1.0 {
                return Err(PluginError::Params {
                    path: format!("{}[{i}]", key("oversubscription")),
                    message: format!("is a down:up ratio, at least 1, got {o}"),
                });
            }
            if p.radix as f64 / (1.0 + o) < 1.0 {
                return Err(PluginError::Params {
                    path: format!("{}[{i}]", key("oversubscription")),
                    message: format!("{o} leaves no up port on a {}-port switch", p.radix),
                });
            }
        }
        Ok(())
    }

    /// The Clos of `p` for `endpoints` endpoints; an error naming the parameters when they
    /// cannot reach that many.
    pub fn new(p: &ClosParams, endpoints: u64, prefix: &str) -> Result<Clos, PluginError> {
        let mut over = [1.0; MAX_TIERS];
        for (i, &o) in p.oversubscription.iter().enumerate().take(MAX_TIERS) {
            over[i] = o;
        }
        let mut c = Clos {
            tiers: 1,
            radix: p.radix,
            over,
            endpoints: endpoints.max(1),
        };
        match p.tiers {
            Some(t) => c.tiers = t,
            None => {
                while c.tiers < MAX_TIERS && c.capacity() < c.endpoints {
                    c.tiers += 1;
                }
            }
        }
        if c.capacity() < c.endpoints {
            return Err(PluginError::Params {
                path: format!("{prefix}tiers"),
                message: format!(
                    "{} tier(s) of {}-port switches reach {} endpoints, fewer than the {} \
                     needed",
                    c.tiers,
                    p.radix,
                    c.capacity(),
                    c.endpoints
                ),
            });
        }
        Ok(c)
    }

    /// Ports down per switch of tier `t` (0 = leaf).
    pub fn down(&self, t: usize) -> u64 {
        if t + 1 >= self.tiers {
            self.radix
        } else {
            self.radix - self.up(t)
        }
    }

    /// Ports up per switch of tier `t` (zero at the top).
    pub fn up(&self, t: usize) -> u64 {
        if t + 1 >= self.tiers {
            0
        } else {
            ((self.radix as f64 / (1.0 + self.over[t])).round() as u64).clamp(1, self.radix - 1)
        }
    }

    /// Endpoints under one tier-`t` switch.
    pub fn block(&self, t: usize) -> u64 {
        (0..=t).map(|k| self.down(k)).product()
    }

    /// Endpoints the Clos can reach.
    pub fn capacity(&self) -> u64 {
        self.block(self.tiers - 1)
    }

    /// Taper seen by traffic leaving a tier-`t` subtree: the product of the ratios up to
    /// `t` (1 for a full-bisection fabric).
    pub fn taper(&self, t: usize) -> f64 {
        self.over[..=t.min(MAX_TIERS - 1)].iter().product()
    }

    /// Switches per tier for the Clos's endpoints (each tier sized to the links below it).
    pub fn switches(&self) -> [u64; MAX_TIERS] {
        let mut out = [0u64; MAX_TIERS];
        let mut below = self.endpoints;
        for (t, o) in out.iter_mut().enumerate().take(self.tiers) {
            let s = below.div_ceil(self.down(t)).max(1);
            *o = s;
            below = s * self.up(t);
        }
        out
    }

    /// Up links leaving tier `t` in all (zero at the top).
    pub fn uplinks(&self, t: usize) -> u64 {
        self.switches()[t] * self.up(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_tier_64_port_reaches_2048() {
        let p = ClosParams::default();
        let c = Clos::new(&p, 1024, "").unwrap();
        assert_eq!(c.tiers, 2);
        assert_eq!((c.down(0), c.up(0), c.down(1)), (32, 32, 64));
        assert_eq!(c.capacity(), 2048);
        assert_eq!(c.switches()[..2], [32, 16]);
        let q = ClosParams {
            oversubscription: vec![3.0],
            ..p.clone()
        };
        let c = Clos::new(&q, 1024, "").unwrap();
        assert_eq!((c.down(0), c.up(0)), (48, 16));
        assert_eq!(c.taper(0), 3.0);
        let e = Clos::new(
            &ClosParams {
                tiers: Some(1),
                ..p
            },
            1024,
            "x.",
        )
        .unwrap_err();
        assert!(e.to_string().contains("x.tiers"), "{e}");
    }
}
