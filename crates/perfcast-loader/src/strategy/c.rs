//! C parallel strategies (C ABI 1.4; declared axes 1.7): the vtable's calls as a
//! `StrategyBackend`, behind the same checked `ForeignStrategy` as a Rust library's
//! (the module above). A function the vtable leaves NULL (or, before 1.7, lacks) answers
//! what the trait's default does (any plan, no split, no collectives, no declared axes). The
//! plan is the 1.7 `perfcast_plan` (its `struct_size` says so): a plugin compiled against an
//! earlier minor reads its 1.4 prefix.

use super::{ForeignStrategy, StrategyBackend};
use crate::c_plugin::raw::{call, Instance};
use crate::c_plugin::CCategory;
use crate::call::CallError;
use perfcast_abi::c::{v1_4, PcParallelStrategyVtable};
use perfcast_abi::strategy::{
    PcAxisDecl, PcCommOp, PcLayerDims, PcLayerSplit, PcModel, PcPlan, PcPlanAxes, PcStateSplit,
};
use perfcast_core::parallel::MAX_DECLARED_AXES;
use perfcast_core::{Component, PluginError};
use std::sync::Arc;

/// A parallel strategy's vtable is checked for the 1.4 layout and `axis`.
impl CCategory for CStrategy {
    type Vtable = PcParallelStrategyVtable;
    type Checked = PcParallelStrategyVtable;
    const WHAT: &'static str = "parallel strategy";
    const SINCE: &'static str = "1.4";
    fn min_size() -> usize {
        v1_4::parallel_strategy_vtable_size()
    }
    fn check(vt: Self::Vtable) -> Result<Self::Checked, &'static str> {
        vt.axis.map(|_| vt).ok_or("axis")
    }
    fn build(name: &str, inst: Instance, vt: Self::Checked) -> Result<Component, PluginError> {
        let s = ForeignStrategy::new(name, Box::new(CStrategy { inst, vt }))?;
        Ok(Component::ParallelStrategy(Arc::new(s)))
    }
}

/// The 1.7 plan as the vtable's functions take it: a pointer to its 1.4 prefix, through which
/// a 1.7 plugin reads the whole struct (`plan.struct_size` covers it).
fn prefix(plan: &PcPlanAxes) -> *const PcPlan {
    (plan as *const PcPlanAxes).cast()
}

pub(crate) struct CStrategy {
    inst: Instance,
    vt: PcParallelStrategyVtable,
}

impl StrategyBackend for CStrategy {
    fn axis(&self) -> Result<u32, CallError> {
        let mut out = u32::MAX;
        if let Some(f) = self.vt.axis {
            // SAFETY: function and instance come from the plugin, per the header's contract.
            call(|e, cap| unsafe { f(self.inst.this, &mut out, e, cap) })?;
        }
        Ok(out)
    }
    fn axes(&self) -> Result<Vec<PcAxisDecl>, CallError> {
        let Some(f) = self.vt.axes else {
            return Ok(Vec::new());
        };
        let mut out = [PcAxisDecl::default(); MAX_DECLARED_AXES];
        let mut n = 0usize;
        // SAFETY: as above; `out` holds `out.len()` entries.
        call(|e, cap| unsafe { f(self.inst.this, out.as_mut_ptr(), out.len(), &mut n, e, cap) })?;
        if n > out.len() {
            return Err(crate::c_plugin::raw::too_many(
                "declared axes",
                n,
                out.len(),
            ));
        }
        Ok(out[..n].to_vec())
    }
    fn validate(&self, model: &PcModel, plan: &PcPlanAxes) -> Result<(), CallError> {
        match self.vt.validate {
            // SAFETY: as above.
            Some(f) => call(|e, cap| unsafe { f(self.inst.this, model, prefix(plan), e, cap) }),
            None => Ok(()),
        }
    }
    fn split_layer(
        &self,
        plan: &PcPlanAxes,
        mut split: PcLayerSplit,
    ) -> Result<PcLayerSplit, CallError> {
        if let Some(f) = self.vt.split_layer {
            // SAFETY: as above.
            call(|e, cap| unsafe { f(self.inst.this, prefix(plan), &mut split, e, cap) })?;
        }
        Ok(split)
    }
    fn split_state(
        &self,
        plan: &PcPlanAxes,
        mut split: PcStateSplit,
    ) -> Result<PcStateSplit, CallError> {
        if let Some(f) = self.vt.split_state {
            // SAFETY: as above.
            call(|e, cap| unsafe { f(self.inst.this, prefix(plan), &mut split, e, cap) })?;
        }
        Ok(split)
    }
    fn comms(
        &self,
        plan: &PcPlanAxes,
        dims: &PcLayerDims,
        out: &mut [PcCommOp],
    ) -> Result<u32, CallError> {
        let Some(f) = self.vt.comms else {
            return Ok(0);
        };
        let size = size_of::<PcCommOp>() as u32;
        for slot in out.iter_mut() {
            slot.struct_size = size;
        }
        let mut n = 0usize;
        // SAFETY: as above; `out` holds `out.len()` entries.
        call(|e, cap| unsafe {
            f(
                self.inst.this,
                prefix(plan),
                dims,
                out.as_mut_ptr(),
                out.len(),
                &mut n,
                e,
                cap,
            )
        })?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }
}
