//! Rust compute units and interconnects (Rust ABI 1.0; interconnects 1.0): a library's
//! `FfiComputeUnit` and `FfiInterconnect` as a `ComputeBackend` and a `LinkBackend`, behind the
//! same checked adapters as a C library's (the module above). A memory tier's properties are
//! read once, when it is built.

use super::{ComputeBackend, LinkBackend, TierData};
use crate::call::CallError;
use crate::rust_plugin::res;
use abi_stable::std_types::{RSlice, RStr};
use perfcast_abi::{FfiComputeUnitBox, FfiInterconnectBox, FfiTier, PcOp, PcOpTime};

/// A Rust plugin's compute unit.
pub(crate) struct RustComputeUnit(pub(crate) FfiComputeUnitBox);

impl ComputeBackend for RustComputeUnit {
    fn peak(&self, engine: u32, dtype: u32) -> Result<Option<f64>, CallError> {
        res(self.0.peak(engine, dtype)).map(|o| o.into_option())
    }
    fn efficiency(&self, op: &PcOp) -> Result<f64, CallError> {
        res(self.0.efficiency(op))
    }
    fn launch_overhead(&self) -> Result<f64, CallError> {
        res(self.0.launch_overhead())
    }
    fn gemm_tile(&self) -> Result<u64, CallError> {
        res(self.0.gemm_tile())
    }
    fn op_time(&self, op: &PcOp, tiers: &[TierData<'_>]) -> Option<Result<PcOpTime, CallError>> {
        let ffi: Vec<FfiTier<'_>> = tiers
            .iter()
            .map(|t| FfiTier {
                kind: RStr::from_str(t.kind),
                props: t.props,
            })
            .collect();
        Some(res(self.0.op_time(op, RSlice::from_slice(&ffi))))
    }
}

/// A Rust plugin's interconnect.
pub(crate) struct RustInterconnect(pub(crate) FfiInterconnectBox);

impl LinkBackend for RustInterconnect {
    fn collective_time(
        &self,
        kind: u32,
        bytes: f64,
        ranks: u32,
        algorithm: u32,
    ) -> Result<f64, CallError> {
        res(self.0.collective_time(kind, bytes, ranks, algorithm))
    }
}
