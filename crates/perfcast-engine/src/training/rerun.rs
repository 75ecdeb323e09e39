//! What selective recompute reruns of a layer's forward in the backward pass: the modules
//! `plan.recompute_modules` names (`modules`), the attention core, or torchtitan's per-op
//! policy (every second matmul saved), timed on the layer's program.

use super::modules::RecomputeModules;
use super::ops::LayerProgram;
use super::timer::{ClassTimes, OpClass};
use perfcast_core::ModelError;

impl LayerProgram<'_> {
    /// What module recompute reruns of the forward (`plan.recompute_modules`): the modules'
    /// forward ops timed again (their quantisations not counted), the MoE block's by
    /// [`super::ops_moe::rerun`].
    fn modules_rerun(
        &self,
        m: RecomputeModules,
        gemm_t: &[f64; 7],
        attn_f: f64,
    ) -> Result<ClassTimes, ModelError> {
        let x = self.x;
        let timer = self.timer.untraced();
        let mut r = ClassTimes::default();
        let gemm = OpClass::Gemm as usize;
        if m.contains(RecomputeModules::CORE_ATTN) {
            r.0[OpClass::Attention as usize] += attn_f;
        }
        if m.contains(RecomputeModules::LAYERNORM) {
            timer.add(&mut r, self.norm_fwd(), 2.0)?;
        }
        if let (true, Some(l)) = (m.contains(RecomputeModules::MLA_UP_PROJ), &x.mla) {
            // The query up-projection (with a query latent) and the key/value one: the 2nd
            // and 4th GEMMs of `MlaShape::gemms`, or the 3rd alone.
            let ups: &[usize] = if l.q_rank > 0 { &[1, 3] } else { &[2] };
            for &i in ups {
                r.0[gemm] += gemm_t[i];
            }
            if let Some(op) = self.latent_norms_fwd() {
                timer.add(&mut r, op, 1.0)?;
            }
            if let Some(op) = self.rope_fwd() {
                timer.add(&mut r, op, 1.0)?;
            }
        }
        if m.contains(RecomputeModules::MLP) && x.moe.is_none() {
            // The MLP's two GEMMs, the last of the layer's.
            let n = self.gemms.len();
            r.0[gemm] += gemm_t[n.saturating_sub(2)..n].iter().sum::<f64>();
            timer.add(&mut r, self.act_fwd(), 1.0)?;
        }
        super::ops_moe::rerun(&timer, x, m, &mut r)?;
        Ok(r)
    }

    /// What selective recompute reruns of the forward `f`.
    pub(super) fn selective(
        &self,
        f: ClassTimes,
        gemm_t: &[f64; 7],
        attn_f: f64,
    ) -> Result<ClassTimes, ModelError> {
        let x = self.x;
        if let Some(m) = x.modules {
            return self.modules_rerun(m, gemm_t, attn_f);
        }
        let mut selective = ClassTimes::default();
        if !x.op_sac {
            selective.0[OpClass::Attention as usize] = attn_f;
            return Ok(selective);
        }
        selective = f;
        selective.0[OpClass::Attention as usize] -= attn_f;
        if x.mla.is_none() && x.moe.is_none() {
            let (mms, n) = x.matmuls();
            for (j, (g, share)) in mms[..n].iter().enumerate() {
                if j % 2 == 0 {
                    selective.0[OpClass::Gemm as usize] -= gemm_t[*g] * share;
                }
            }
        } else {
            // Latent attention's projections and an MoE layer's attention GEMMs, one matmul
            // each, counted in program order: every second one is saved.
            for (j, t) in gemm_t[..self.gemms.len()].iter().enumerate() {
                if j % 2 == 0 {
                    selective.0[OpClass::Gemm as usize] -= t;
                }
            }
        }
        for v in selective.0.iter_mut() {
            *v = v.max(0.0);
        }
        Ok(selective)
    }
}
