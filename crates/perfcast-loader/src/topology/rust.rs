//! Rust network topologies (Rust ABI 1.1): a library's `FfiTopology` as a
//! `TopologyBackend`, behind the same checked `ForeignTopology` as a C library's (the module
//! above).

use super::TopologyBackend;
use crate::call::CallError;
use crate::rust_plugin::res;
use abi_stable::std_types::RSlice;
use perfcast_abi::rust_abi::{
    FfiCollectiveCost, FfiGroupAxis, FfiLevel, FfiLinkClass, FfiNetworkCost,
};
use perfcast_abi::FfiTopologyBox;

/// A Rust plugin's topology.
pub(crate) struct RustTopology(pub(crate) FfiTopologyBox);

impl TopologyBackend for RustTopology {
    fn check(&self, levels: &[FfiLevel], devices: u64) -> Result<(), CallError> {
        res(self.0.check(RSlice::from_slice(levels), devices))
    }
    fn links(&self, levels: &[FfiLevel], devices: u64) -> Result<Vec<FfiLinkClass>, CallError> {
        res(self.0.links(RSlice::from_slice(levels), devices)).map(|v| v.into_vec())
    }
    fn cost(&self, levels: &[FfiLevel], devices: u64) -> Result<Option<FfiNetworkCost>, CallError> {
        res(self.0.cost(RSlice::from_slice(levels), devices)).map(|o| o.into_option())
    }
    fn collective(
        &self,
        levels: &[FfiLevel],
        axes: &[FfiGroupAxis],
        devices: u64,
        kind: u32,
        bytes: f64,
    ) -> Result<FfiCollectiveCost, CallError> {
        res(self.0.collective(
            RSlice::from_slice(levels),
            RSlice::from_slice(axes),
            devices,
            kind,
            bytes,
        ))
    }
}
