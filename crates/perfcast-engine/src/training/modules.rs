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
//! `rerun` times what `selective` reruns of a layer's forward either way.

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

/// A set of `MODULES`.
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

    /// The names of the modules of the set, in `MODULES` order.
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
