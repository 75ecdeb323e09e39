//! Module-level selective recompute: which parts of a layer `plan.recompute = "selective"`
//! reruns in the backward pass instead of keeping their outputs (Megatron-Core
//! `--recompute-granularity selective --recompute-modules ...`, `TransformerConfig.
//! recompute_modules`, default `core_attn`).
//!
//! Megatron-Core discards the outputs of `layernorm`, `mla_up_proj` and `moe_act` after the
//! forward and rebuilds them from the kept inputs in the backward ("output-discarding"
//! checkpointing); `core_attn`, `mlp` and `shared_experts` are checkpointed as a whole, their
//! inputs kept. Either way a module's own activations are not kept and its forward runs
//! twice. DeepSeek-V3's run recomputes its RMSNorms and MLA up-projections the same way
//! (DeepSeek-AI 2024, arXiv 2412.19437, §3.2.3): `["layernorm", "mla_up_proj"]`.
//!
//! Without the key, `selective` means what the software stack says
//! (`software.selective_recompute`: the attention core, or torchtitan's per-op policy).
//! [`LayerProgram::selective`] times what `selective` reruns of a layer's forward either way.

use super::ops::LayerProgram;
use super::timer::{ClassTimes, OpClass};
use perfcast_core::ModelError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The modules, their bits and what each reruns.
pub const MODULES: [(&str, u8, &str); 6] = [
    (
        "core_attn",
        1,
        "the attention core (scores, softmax, x V; Korthikanti et al. 2022 §5)",
    ),
    (
        "layernorm",
        2,
        "the input and pre-MLP norms (their outputs, the next GEMMs' inputs)",
    ),
    (
        "mla_up_proj",
        4,
        "latent attention's query and key/value up-projections and rotary embedding",
    ),
    (
        "mlp",
        8,
        "a dense layer's MLP (its up-projections and activation)",
    ),
    ("moe_act", 16, "the routed experts' activation function"),
    ("shared_experts", 32, "the MoE layers' shared experts"),
];

/// A set of [`MODULES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecomputeModules(pub u8);

impl RecomputeModules {
    pub const CORE_ATTN: Self = Self(1);
    pub const LAYERNORM: Self = Self(2);
    pub const MLA_UP_PROJ: Self = Self(4);
    pub const MLP: Self = Self(8);
    pub const MOE_ACT: Self = Self(16);
    pub const SHARED_EXPERTS: Self = Self(32);

    /// Whether every module of `m` is in the set.
    pub const fn contains(self, m: Self) -> bool {
        self.0 & m.0 == m.0
    }

    /// The set of the modules named, or what is wrong with a name.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut set = 0u8;
        for n in names {
            let n = n.as_ref();
            match MODULES.iter().find(|(name, _, _)| *name == n) {
                Some((_, bit, _)) => set |= bit,
                None if n == "moe" => {
                    return Err(
                        "`moe`: rerunning a whole MoE layer (its dispatch and combine \
                                again) is not modelled; list `moe_act` and `shared_experts`"
                            .into(),
                    )
                }
                None => {
                    return Err(format!(
                        "`{n}` is not a module; modules: {}",
                        MODULES.map(|m| m.0).join(", ")
                    ))
                }
            }
        }
        if set == 0 {
            return Err("lists no module; leave the key out for the stack's `selective`".into());
        }
        Ok(Self(set))
    }

    /// The names of the modules of the set, in [`MODULES`] order.
    pub fn names(self) -> Vec<&'static str> {
        MODULES
            .iter()
            .filter(|(_, bit, _)| self.0 & bit != 0)
            .map(|(n, _, _)| *n)
            .collect()
    }
}

impl Serialize for RecomputeModules {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.names().serialize(s)
    }
}

impl<'de> Deserialize<'de> for RecomputeModules {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        RecomputeModules::parse(&names).map_err(serde::de::Error::custom)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        let m = RecomputeModules::parse(&["mla_up_proj", "layernorm"]).unwrap();
        assert!(
            m.contains(RecomputeModules::LAYERNORM) && m.contains(RecomputeModules::MLA_UP_PROJ)
        );
        assert!(!m.contains(RecomputeModules::CORE_ATTN));
        assert_eq!(m.names(), ["layernorm", "mla_up_proj"]);
        let all: Vec<&str> = MODULES.iter().map(|m| m.0).collect();
        assert_eq!(RecomputeModules::parse(&all).unwrap().names(), all);
        // Bad names: (list, fragment of the complaint).
        let table: [(&[&str], &str); 3] = [
            (&["core_atn"], "modules: core_attn, layernorm"),
            (&["moe"], "moe_act"),
            (&[], "no module"),
        ];
        for (names, want) in table {
            let e = RecomputeModules::parse(names).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
