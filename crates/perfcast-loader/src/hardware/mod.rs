//! Foreign compute units, memory tiers and interconnects (from either ABI, or a plugin host)
//! wrapped as native `perfcast_core` trait objects.
//!
//! The categories' whole boundary is in this module: the checked adapters (here), fed by one
//! backend per way in, `c` (the C ABI's vtables), `rust` (the abi_stable trait objects) and
//! `isolate` (the plugin host's proxies, and the child's answers to their calls).
//!
//! Every value coming back from a plugin is checked. Values that take no argument (launch
//! overhead, GEMM tile, a memory tier's properties, a link's properties) and the peak table
//! (2 engines x 8 dtypes) are read ONCE when the component is built, so a bad value or a panic
//! there fails the factory with a clear error and the hot path makes no FFI call for them.
//! `efficiency(op)` cannot be cached: a failure there "poisons" the adapter (the method
//! returns NaN, which the roofline rejects) and every later `op_time` returns the plugin's
//! error. `op_time` itself validates the plugin's answer (finite, >= 0, a known bound).

use crate::call::CallError;
use perfcast_abi::codes::{self, ERR_UNSUPPORTED};
use perfcast_abi::convert::{bad_value, check_fraction, check_non_negative, check_positive};
use perfcast_abi::{LinkProps, PcOp, PcOpTime, PropsTier, TierProps};
use perfcast_core::{
    Bandwidth, Collective, CollectiveAlgorithm, ComputeOp, ComputeUnit, DType, Engine, FlopRate,
    Interconnect, MemoryHierarchy, MemoryTier, ModelError, OpTime, PluginError, Seconds,
};
use std::sync::Mutex;

/// A memory tier handed to a plugin's `op_time`: its name and checked properties.
pub(crate) struct TierData<'a> {
    pub kind: &'a str,
    pub props: TierProps,
}

/// The calls a compute unit of either ABI answers.
pub(crate) trait ComputeBackend: Send + Sync {
    /// `None` (or, from C, `ERR_UNSUPPORTED`) when the device has no such path.
    fn peak(&self, engine: u32, dtype: u32) -> Result<Option<f64>, CallError>;
    fn efficiency(&self, op: &PcOp) -> Result<f64, CallError>;
    fn launch_overhead(&self) -> Result<f64, CallError>;
    fn gemm_tile(&self) -> Result<u64, CallError>;
    /// `None` when the plugin has no model of its own (the host's roofline is used).
    fn op_time(&self, op: &PcOp, tiers: &[TierData<'_>]) -> Option<Result<PcOpTime, CallError>>;
}

const ENGINES: [Engine; 2] = [Engine::Matrix, Engine::Vector];

/// The longest time, in seconds, a plugin may report for one op or either of its parts:
/// 10^7 s is about 116 days, far above any kernel of any model on any device, so a time above
/// it is a unit mistake or garbage (a time of 10^300 s printed a 300-digit step time).
const MAX_OP_SECONDS: f64 = 1e7;

/// A foreign compute unit as a native `ComputeUnit`.
pub(crate) struct ForeignComputeUnit {
    kind: String,
    backend: Box<dyn ComputeBackend>,
    /// `[engine code][dtype code]`, checked.
    peaks: [[Option<f64>; 8]; 2],
    launch: f64,
    tile: u64,
    poison: Mutex<Option<PluginError>>,
}

impl ForeignComputeUnit {
    pub fn new(kind: &str, backend: Box<dyn ComputeBackend>) -> Result<Self, PluginError> {
        let mut peaks = [[None; 8]; 2];
        for e in ENGINES {
            for d in DType::ALL {
                let slot = &mut peaks[codes::engine_code(e) as usize][d.code() as usize];
                match backend.peak(codes::engine_code(e), d.code()) {
                    Ok(None) => {}
                    Ok(Some(v)) => {
                        *slot = Some(check_positive(
                            kind,
                            &format!("peak ({} engine, {d})", e.name()),
                            v,
                        )?)
                    }
                    Err(e) if e.code == ERR_UNSUPPORTED => {}
                    Err(e) => return Err(e.into_plugin_error(kind)),
                }
            }
        }
        let launch = backend
            .launch_overhead()
            .map_err(|e| e.into_plugin_error(kind))?;
        let launch = check_non_negative(kind, "launch_overhead", launch)?;
        let tile = backend.gemm_tile().map_err(|e| e.into_plugin_error(kind))?;
        if tile == 0 {
            return Err(bad_value(kind, "gemm_tile", 0.0));
        }
        Ok(ForeignComputeUnit {
            kind: kind.to_string(),
            backend,
            peaks,
            launch,
            tile,
            poison: Mutex::new(None),
        })
    }

    /// A plugin's own op time must be physically possible on the device it describes: not
    /// shorter than its own compute or memory time (the time includes both), nor than the
    /// op's FLOPs at the device's own peak for the op's engine and format.
    fn check_physical(&self, pc: &PcOp, t: &PcOpTime) -> Result<(), ModelError> {
        const TOL: f64 = 1e-9;
        for (what, v) in [
            ("op_time time", t.time),
            ("op_time compute", t.compute),
            ("op_time memory", t.memory),
            ("op_time overhead", t.overhead),
        ] {
            if v > MAX_OP_SECONDS {
                return Err(bad_value(
                    &self.kind,
                    &format!(
                        "{what} (above {MAX_OP_SECONDS:e} s, about 116 days for one op: a unit \
                         mistake or garbage)"
                    ),
                    v,
                )
                .into());
            }
        }
        let parts = t.compute.max(t.memory);
        if t.time < parts * (1.0 - TOL) {
            return Err(bad_value(
                &self.kind,
                &format!(
                    "op_time time (shorter than its own compute {} s or memory {} s)",
                    t.compute, t.memory
                ),
                t.time,
            )
            .into());
        }
        let peak = self
            .peaks
            .get(pc.engine as usize)
            .and_then(|e| e.get(pc.dtype as usize))
            .copied()
            .flatten();
        if let Some(peak) = peak {
            let least = pc.flops / peak;
            if pc.flops > 0.0 && t.time < least * (1.0 - TOL) {
                return Err(bad_value(
                    &self.kind,
                    &format!(
                        "op_time time (faster than the device's own peak: {:.4e} FLOP at \
                         {peak:.4e} FLOP/s take at least {least:.4e} s)",
                        pc.flops
                    ),
                    t.time,
                )
                .into());
            }
        }
        Ok(())
    }

    fn poisoned(&self) -> Option<PluginError> {
        self.poison.lock().map(|p| p.clone()).unwrap_or(None)
    }

    fn set_poison(&self, e: PluginError) {
        if let Ok(mut p) = self.poison.lock() {
            p.get_or_insert(e);
        }
    }

    fn model_error(&self, e: CallError, op: &ComputeOp) -> ModelError {
        if e.code == ERR_UNSUPPORTED {
            ModelError::UnsupportedDType {
                device: self.kind.clone(),
                engine: Engine::of(op).name().to_string(),
                dtype: op.dtype().name().to_string(),
            }
        } else {
            ModelError::Plugin(e.into_plugin_error(&self.kind))
        }
    }
}

/// A memory tier's properties as plain data, checked (the tier's kind names it in errors).
fn tier_data(t: &dyn MemoryTier) -> Result<TierData<'_>, PluginError> {
    let kind = t.kind();
    let props = TierProps {
        level: codes::tier_level_code(t.level()),
        capacity: check_non_negative(kind, "capacity", t.capacity().0)?,
        bandwidth: check_positive(kind, "bandwidth", t.bandwidth().0)?,
        efficiency: check_fraction(kind, "efficiency", t.efficiency())?,
        latency: check_non_negative(kind, "latency", t.latency().0)?,
    };
    Ok(TierData { kind, props })
}

impl ComputeUnit for ForeignComputeUnit {
    fn kind(&self) -> &str {
        &self.kind
    }

    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        self.peaks[codes::engine_code(engine) as usize][dtype.code() as usize].map(FlopRate)
    }

    fn efficiency(&self, op: &ComputeOp) -> f64 {
        let r = self
            .backend
            .efficiency(&PcOp::from_native(op))
            .map_err(|e| e.into_plugin_error(&self.kind))
            .and_then(|v| check_fraction(&self.kind, "efficiency", v));
        match r {
            Ok(v) => v,
            Err(e) => {
                self.set_poison(e);
                f64::NAN
            }
        }
    }

    fn launch_overhead(&self) -> Seconds {
        Seconds(self.launch)
    }

    fn gemm_tile(&self) -> u64 {
        self.tile
    }

    fn op_time(&self, op: &ComputeOp, memory: &MemoryHierarchy) -> Result<OpTime, ModelError> {
        if let Some(e) = self.poisoned() {
            return Err(e.into());
        }
        let tiers = memory
            .tiers
            .iter()
            .map(|t| tier_data(t.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let pc = PcOp::from_native(op);
        let t = match self.backend.op_time(&pc, &tiers) {
            Some(Ok(t)) => {
                self.check_physical(&pc, &t)?;
                t
            }
            Some(Err(e)) => return Err(self.model_error(e, op)),
            None => {
                let r = perfcast_core::roofline::hierarchical(self, op, memory);
                if let Some(e) = self.poisoned() {
                    return Err(e.into());
                }
                PcOpTime::from_native(&r?)
            }
        };
        Ok(t.to_native(&self.kind, tiers.len())?)
    }
}

/// A foreign memory tier: its properties, read and checked once, as a [`PropsTier`]; `keep`
/// owns the foreign object (dropping it releases the plugin's instance).
pub(crate) fn foreign_memory_tier(
    kind: &str,
    props: Result<TierProps, CallError>,
    keep: Box<dyn Send + Sync>,
) -> Result<PropsTier, PluginError> {
    let p = props.map_err(|e| e.into_plugin_error(kind))?;
    let level = codes::tier_level_from_code(p.level).ok_or_else(|| PluginError::Failed {
        plugin: kind.to_string(),
        message: format!("unknown memory tier level code {}", p.level),
    })?;
    check_non_negative(kind, "capacity", p.capacity)?;
    check_positive(kind, "bandwidth", p.bandwidth)?;
    check_fraction(kind, "efficiency", p.efficiency)?;
    check_non_negative(kind, "latency", p.latency)?;
    Ok(PropsTier::new(kind.to_string(), level, p, Some(keep)))
}

/// The calls a foreign interconnect answers.
pub(crate) trait LinkBackend: Send + Sync {
    fn collective_time(
        &self,
        kind: u32,
        bytes: f64,
        ranks: u32,
        algorithm: u32,
    ) -> Result<f64, CallError>;
}

/// A foreign interconnect. The engines call `try_collective_time`, which returns the plugin's
/// error (or names the bad value it returned); the infallible `collective_time` returns NaN
/// for those.
pub(crate) struct ForeignInterconnect {
    kind: String,
    props: LinkProps,
    backend: Box<dyn LinkBackend>,
}

impl ForeignInterconnect {
    pub fn new(
        kind: &str,
        props: Result<LinkProps, CallError>,
        backend: Box<dyn LinkBackend>,
    ) -> Result<Self, PluginError> {
        let p = props.map_err(|e| e.into_plugin_error(kind))?;
        if p.domain_size == 0 {
            return Err(bad_value(kind, "domain_size", 0.0));
        }
        check_positive(kind, "bandwidth", p.bandwidth)?;
        check_non_negative(kind, "latency", p.latency)?;
        Ok(ForeignInterconnect {
            kind: kind.to_string(),
            props: p,
            backend,
        })
    }
}

impl Interconnect for ForeignInterconnect {
    fn kind(&self) -> &str {
        &self.kind
    }
    fn domain_size(&self) -> u32 {
        self.props.domain_size
    }
    fn bandwidth(&self) -> Bandwidth {
        Bandwidth(self.props.bandwidth)
    }
    fn latency(&self) -> Seconds {
        Seconds(self.props.latency)
    }
    fn collective_time(&self, c: &Collective, algorithm: CollectiveAlgorithm) -> Seconds {
        self.try_collective_time(c, algorithm)
            .unwrap_or(Seconds(f64::NAN))
    }
    fn try_collective_time(
        &self,
        c: &Collective,
        algorithm: CollectiveAlgorithm,
    ) -> Result<Seconds, PluginError> {
        let v = self
            .backend
            .collective_time(
                codes::collective_kind_code(c.kind),
                c.bytes.0,
                c.ranks,
                codes::algorithm_code(algorithm),
            )
            .map_err(|e| e.into_plugin_error(&self.kind))?;
        if v.is_finite() && v >= 0.0 {
            Ok(Seconds(v))
        } else {
            Err(PluginError::BadValue {
                plugin: self.kind.clone(),
                what: format!(
                    "collective time ({} of {} B over {} ranks)",
                    c.kind.name(),
                    c.bytes.0,
                    c.ranks
                ),
                value: v,
            })
        }
    }
}

pub(crate) mod c;
pub(crate) mod isolate;
pub(crate) mod rust;

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_abi::codes::ERR_FAILED;
    use perfcast_core::{Bytes, Gemm, TierLevel, TimeBound};
    use std::sync::Arc;

    #[derive(Clone)]
    struct Mock {
        peak: Result<Option<f64>, i32>,
        eff: Result<f64, i32>,
        launch: f64,
        tile: u64,
        op_time: Option<Result<PcOpTime, i32>>,
    }

    fn err(code: i32) -> CallError {
        CallError {
            code,
            path: String::new(),
            message: format!("mock error {code}"),
        }
    }

    impl ComputeBackend for Mock {
        fn peak(&self, _: u32, _: u32) -> Result<Option<f64>, CallError> {
            self.peak.map_err(err)
        }
        fn efficiency(&self, _: &PcOp) -> Result<f64, CallError> {
            self.eff.map_err(err)
        }
        fn launch_overhead(&self) -> Result<f64, CallError> {
            Ok(self.launch)
        }
        fn gemm_tile(&self) -> Result<u64, CallError> {
            Ok(self.tile)
        }
        fn op_time(&self, _: &PcOp, _: &[TierData<'_>]) -> Option<Result<PcOpTime, CallError>> {
            self.op_time.map(|r| r.map_err(err))
        }
    }

    fn good() -> Mock {
        Mock {
            peak: Ok(Some(1e12)),
            eff: Ok(0.5),
            launch: 1e-6,
            tile: 64,
            op_time: None,
        }
    }

    struct Hbm;
    impl MemoryTier for Hbm {
        fn kind(&self) -> &str {
            "hbm"
        }
        fn level(&self) -> TierLevel {
            TierLevel::Device
        }
        fn capacity(&self) -> Bytes {
            Bytes(1e10)
        }
        fn bandwidth(&self) -> Bandwidth {
            Bandwidth(1e11)
        }
    }

    fn mem() -> MemoryHierarchy {
        MemoryHierarchy::new(vec![Arc::new(Hbm)])
    }

    fn op() -> ComputeOp {
        ComputeOp::Gemm(Gemm::new(512, 512, 512, DType::Bf16))
    }

    #[test]
    fn bad_values_fail_the_factory() {
        // (mock, what the error must mention)
        let table = [
            (
                Mock {
                    peak: Ok(Some(f64::NAN)),
                    ..good()
                },
                "peak (matrix engine, fp32)",
            ),
            (
                Mock {
                    peak: Ok(Some(0.0)),
                    ..good()
                },
                "peak",
            ),
            (
                Mock {
                    peak: Err(ERR_FAILED),
                    ..good()
                },
                "mock error 2",
            ),
            (
                Mock {
                    launch: -1.0,
                    ..good()
                },
                "launch_overhead",
            ),
            (
                Mock {
                    launch: f64::INFINITY,
                    ..good()
                },
                "launch_overhead",
            ),
            (Mock { tile: 0, ..good() }, "gemm_tile"),
        ];
        for (m, want) in table {
            let e = ForeignComputeUnit::new("x/dev", Box::new(m))
                .err()
                .expect("must fail")
                .to_string();
            assert!(e.contains(want) && e.contains("x/dev"), "{e} vs {want}");
        }
        // An unsupported path is not an error, just no peak.
        let none = ForeignComputeUnit::new(
            "x/dev",
            Box::new(Mock {
                peak: Err(ERR_UNSUPPORTED),
                ..good()
            }),
        )
        .unwrap();
        assert_eq!(none.peak(Engine::Matrix, DType::Bf16), None);
    }

    #[test]
    fn efficiency_failures_poison_op_time() {
        for eff in [Err(ERR_FAILED), Ok(1.5), Ok(f64::NAN), Ok(0.0)] {
            let u = ForeignComputeUnit::new("x/dev", Box::new(Mock { eff, ..good() })).unwrap();
            assert!(u.efficiency(&op()).is_nan());
            let e = u.op_time(&op(), &mem()).unwrap_err();
            assert!(matches!(e, ModelError::Plugin(_)), "{e}");
            // Sticky: later ops fail too.
            assert!(u.op_time(&op(), &mem()).is_err());
        }
    }

    #[test]
    fn without_op_time_the_roofline_is_used() {
        let u = ForeignComputeUnit::new("x/dev", Box::new(good())).unwrap();
        let t = u.op_time(&op(), &mem()).unwrap();
        let want = perfcast_core::roofline::hierarchical(&u, &op(), &mem()).unwrap();
        assert_eq!(t, want);
        assert!((t.compute.0 - op().flops().0 / (1e12 * 0.5)).abs() < 1e-15);
    }

    #[test]
    fn plugin_op_time_answers_are_checked() {
        let ok = PcOpTime {
            struct_size: 0,
            bound: codes::BOUND_MEMORY,
            bound_tier: 0,
            reserved0: 0,
            time: 2.0,
            compute: 1.0,
            memory: 2.0,
            overhead: 0.0,
            flops: 1.0,
            device_bytes: 1.0,
        };
        let run = |r: Result<PcOpTime, i32>| {
            ForeignComputeUnit::new(
                "x/dev",
                Box::new(Mock {
                    op_time: Some(r),
                    ..good()
                }),
            )
            .unwrap()
            .op_time(&op(), &mem())
        };
        assert_eq!(run(Ok(ok)).unwrap().bound, TimeBound::Memory(0));
        let bad_tier = PcOpTime {
            bound_tier: 1,
            ..ok
        };
        assert!(run(Ok(bad_tier)).is_err());
        let neg = PcOpTime {
            compute: -1.0,
            ..ok
        };
        assert!(matches!(
            run(Ok(neg)),
            Err(ModelError::Plugin(PluginError::BadValue { .. }))
        ));
        assert!(matches!(
            run(Err(ERR_UNSUPPORTED)),
            Err(ModelError::UnsupportedDType { .. })
        ));
        let e = run(Err(ERR_FAILED)).unwrap_err().to_string();
        assert!(e.contains("mock error 2") && e.contains("x/dev"), "{e}");
        // Physically impossible: faster than the device's own peak (2.7e8 FLOP at 1e12
        // FLOP/s take 2.7e-4 s), or shorter than its own memory time.
        let fast = PcOpTime {
            time: 1e-6,
            compute: 0.0,
            memory: 0.0,
            ..ok
        };
        let e = run(Ok(fast)).unwrap_err().to_string();
        assert!(
            e.contains("x/dev") && e.contains("faster than the device's own peak"),
            "{e}"
        );
        let short = PcOpTime { time: 1.0, ..ok };
        let e = run(Ok(short)).unwrap_err().to_string();
        assert!(e.contains("shorter than its own compute"), "{e}");
        // Times beyond any kernel (a unit mistake or garbage): the part and the bound named.
        for (what, t) in [
            ("op_time time", PcOpTime { time: 1e300, ..ok }),
            ("op_time memory", PcOpTime { memory: 2e7, ..ok }),
        ] {
            let e = run(Ok(t)).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains("above 1e7 s"), "{e}");
        }
        // Just under the bound is a (slow) answer.
        let slow = PcOpTime { time: 9e6, ..ok };
        assert_eq!(run(Ok(slow)).unwrap().time.0, 9e6);
    }

    #[test]
    fn bad_native_tiers_are_named() {
        struct Broken;
        impl MemoryTier for Broken {
            fn kind(&self) -> &str {
                "broken"
            }
            fn level(&self) -> TierLevel {
                TierLevel::Device
            }
            fn capacity(&self) -> Bytes {
                Bytes(1.0)
            }
            fn bandwidth(&self) -> Bandwidth {
                Bandwidth(f64::NAN)
            }
        }
        let u = ForeignComputeUnit::new("x/dev", Box::new(good())).unwrap();
        let e = u
            .op_time(&op(), &MemoryHierarchy::new(vec![Arc::new(Broken)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("broken") && e.contains("bandwidth"), "{e}");
    }

    #[test]
    fn foreign_tier_properties_are_checked() {
        let p = TierProps {
            level: codes::TIER_DEVICE,
            capacity: 1.0,
            bandwidth: 1.0,
            efficiency: 1.0,
            latency: 0.0,
        };
        assert!(foreign_memory_tier("t", Ok(p), Box::new(())).is_ok());
        for bad in [
            TierProps { level: 9, ..p },
            TierProps {
                bandwidth: 0.0,
                ..p
            },
            TierProps {
                efficiency: 1.1,
                ..p
            },
            TierProps {
                capacity: f64::NAN,
                ..p
            },
            TierProps { latency: -1.0, ..p },
        ] {
            assert!(foreign_memory_tier("t", Ok(bad), Box::new(())).is_err());
        }
    }
}
