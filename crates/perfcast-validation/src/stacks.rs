//! Which software stack a case ran on: its `software` string matched against the ordered rules
//! of `configs/validation/stacks.toml` ([`STACK_RULES`], the one documented table; nothing
//! else keys on a case), and the stack presets those rules name, resolved once through
//! perfcast-scenario exactly as `stack = "NAME"` in a configuration is.

use crate::cases::Case;
use crate::{Error, Result};
use perfcast_config::{Config, Plugins, Sources};
use perfcast_scenario::stack::GpuGeneration;
use perfcast_scenario::{Stack, StackKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The rule table (`configs/validation/stacks.toml`).
pub const STACK_RULES: &str = perfcast_assets::validation::STACK_RULES;

/// The schema name of a rule table.
pub const SCHEMA: &str = "perfcast-stacks/1";

/// One rule: a case whose `software` contains every `contains` substring and no `excludes`
/// substring (ignoring case) ran on `stack`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Substrings that must all occur (none: the fallback rule).
    pub contains: Vec<String>,
    /// Substrings none of which may occur.
    #[serde(default)]
    pub excludes: Vec<String>,
    /// A stack preset (`configs/stacks/NAME.toml`).
    pub stack: String,
    /// Why the rule maps these strings to that stack.
    pub why: String,
}

impl Rule {
    fn matches(&self, software: &str) -> bool {
        let s = software.to_lowercase();
        self.contains.iter().all(|p| s.contains(&p.to_lowercase()))
            && !self.excludes.iter().any(|p| s.contains(&p.to_lowercase()))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    schema: String,
    rule: Vec<Rule>,
}

/// The stack a case was mapped to, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StackMatch {
    /// The stack preset.
    pub name: String,
    /// The rule that chose it, counted from 1 in the table's order.
    pub rule: usize,
    /// The rule's `contains` substrings (empty for the fallback).
    pub matched: Vec<String>,
}

impl StackMatch {
    /// `megatron-lm-2021 (rule 1: "Megatron-LM (2021")`.
    pub fn describe(&self) -> String {
        if self.matched.is_empty() {
            format!("{} (rule {}: fallback)", self.name, self.rule)
        } else {
            let m: Vec<String> = self.matched.iter().map(|p| format!("\"{p}\"")).collect();
            format!("{} (rule {}: {})", self.name, self.rule, m.join(" + "))
        }
    }
}

/// The rule table and every stack it names, resolved.
#[derive(Debug, Clone)]
pub struct StackTable {
    rules: Vec<Rule>,
    stacks: BTreeMap<String, Stack>,
}

impl StackTable {
    /// The shipped table ([`STACK_RULES`]).
    pub fn builtin() -> Result<StackTable> {
        StackTable::parse(STACK_RULES, "configs/validation/stacks.toml")
    }

    /// A rule table's text; `file` names it in messages. Every rule must name a stack preset,
    /// carry a reason, and the last must be the fallback (no `contains`).
    pub fn parse(text: &str, file: &str) -> Result<StackTable> {
        let refused = |message: String| Error::File {
            file: file.to_string(),
            message,
        };
        let f: RuleFile = toml::from_str(text).map_err(|e| refused(e.to_string()))?;
        if f.schema != SCHEMA {
            return Err(refused(format!(
                "schema = \"{}\": expected \"{SCHEMA}\"",
                f.schema
            )));
        }
        let Some(last) = f.rule.last() else {
            return Err(refused("no [[rule]]".into()));
        };
        if !last.contains.is_empty() || !last.excludes.is_empty() {
            return Err(refused(format!(
                "the last rule (rule {}) must be the fallback: `contains = []` and no `excludes`, so that every software string maps to a stack",
                f.rule.len()
            )));
        }
        let mut stacks = BTreeMap::new();
        for (i, r) in f.rule.iter().enumerate() {
            let at = |source: Error| Error::StackRule {
                file: file.to_string(),
                rule: i + 1,
                stack: r.stack.clone(),
                source: Box::new(source),
            };
            if r.why.trim().is_empty() {
                return Err(at(Error::invalid(
                    "`why` is empty: say why these strings mean that stack",
                )));
            }
            if i + 1 < f.rule.len() && r.contains.iter().all(|p| p.trim().is_empty()) {
                return Err(at(Error::invalid(
                    "only the last rule may match everything; give `contains` a substring",
                )));
            }
            if !stacks.contains_key(&r.stack) {
                stacks.insert(r.stack.clone(), resolve(&r.stack).map_err(at)?);
            }
        }
        Ok(StackTable {
            rules: f.rule,
            stacks,
        })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule matching a `software` string (a case without one matches only the
    /// fallback).
    pub fn lookup(&self, software: Option<&str>) -> (StackMatch, &Stack) {
        let s = software.unwrap_or("");
        let last = self.rules.len() - 1;
        let (i, r) = self
            .rules
            .iter()
            .enumerate()
            .find(|(i, r)| (software.is_some() || *i == last) && r.matches(s))
            .unwrap_or((last, &self.rules[last]));
        let m = StackMatch {
            name: r.stack.clone(),
            rule: i + 1,
            matched: r.contains.clone(),
        };
        // Every rule's stack was resolved in `parse`.
        let stack = self.stacks.get(&r.stack).unwrap_or(&FALLBACK);
        (m, stack)
    }

    /// The stack of a case.
    pub fn of(&self, case: &Case) -> (StackMatch, &Stack) {
        self.lookup(case.software.as_deref())
    }

    /// The stack of the fallback rule (the last): what a `software` string no rule knows
    /// maps to.
    pub fn fallback_name(&self) -> &str {
        self.rules.last().map(|r| r.stack.as_str()).unwrap_or("")
    }

    /// The table with the fallback rule alone: every case maps to the fallback stack (how
    /// `perfcast calibrate --cv stacks` predicts a held-out stack family).
    pub fn fallback_only(&self) -> StackTable {
        let rules: Vec<Rule> = self.rules.last().cloned().into_iter().collect();
        let stacks = rules
            .iter()
            .filter_map(|r| Some((r.stack.clone(), self.stacks.get(&r.stack)?.clone())))
            .collect();
        StackTable { rules, stacks }
    }
}

/// The GPU generation of a catalog accelerator: the first word of its `arch`
/// (`configs/validation/accelerators.toml`: "Ampere GA100", "Hopper GH100", "Blackwell (2
/// dies)"); `None` for an architecture that is no NVIDIA generation (CDNA, TPU, Gaudi) or an
/// unknown id.
pub fn generation_of(accelerator: &str) -> Option<GpuGeneration> {
    GENERATIONS.get(accelerator).copied().flatten()
}

/// Whether the accelerator's catalog entry rates a 4-bit floating-point matrix peak
/// (`peak_tflops_dense.fp4`: Blackwell, CDNA4), i.e. it has FP4 matrix units.
pub fn has_fp4_matrix(accelerator: &str) -> bool {
    FP4.get(accelerator).copied().unwrap_or(false)
}

static FP4: std::sync::LazyLock<BTreeMap<String, bool>> = std::sync::LazyLock::new(|| {
    per_accelerator(|g| {
        g.get("peak_tflops_dense")
            .and_then(|p| p.get("fp4"))
            .is_some()
    })
});

/// The catalog's `arch` of every accelerator, read once.
static GENERATIONS: std::sync::LazyLock<BTreeMap<String, Option<GpuGeneration>>> =
    std::sync::LazyLock::new(|| {
        per_accelerator(|g| {
            let arch = g.get("arch").and_then(|a| a.as_str()).unwrap_or("");
            GpuGeneration::parse(arch.split_whitespace().next().unwrap_or(""))
        })
    });

/// `f` of every accelerator of the catalog (`configs/validation/accelerators.toml`), by id.
fn per_accelerator<T>(f: impl Fn(&toml::Value) -> T) -> BTreeMap<String, T> {
    let cat: toml::Table = toml::from_str(crate::presets::ACCELERATORS).unwrap_or_default();
    let gpus = cat.get("gpu").and_then(|g| g.as_array());
    gpus.into_iter()
        .flatten()
        .filter_map(|g| Some((g.get("id")?.as_str()?.to_string(), f(g))))
        .collect()
}

static FALLBACK: std::sync::LazyLock<Stack> = std::sync::LazyLock::new(Stack::default);

/// A stack preset resolved as `stack = "NAME"` resolves it in a configuration (its base stacks
/// beneath it; unknown keys are errors).
pub fn resolve(name: &str) -> Result<Stack> {
    let set = format!("stack={}", toml_string(name));
    let cfg = Config::load(
        &Sources::new(&Plugins::none())
            .without_env()
            .with_sets([set]),
    )?;
    Ok(Stack::from_config(&cfg, StackKind::Any)?)
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::CasesFile;

    /// Every public case maps to a stack; the existing groups to the stacks the harness used
    /// to hard-code for them (by group name), which now follow from their software strings.
    #[test]
    fn every_case_maps_and_the_table_is_well_formed() {
        let t = StackTable::builtin().unwrap();
        let p = crate::locate_cases(None).unwrap();
        let file = CasesFile::load(&p).unwrap();
        let mut by_software: BTreeMap<String, String> = BTreeMap::new();
        for c in &file.cases {
            let (m, _) = t.of(c);
            assert!(
                perfcast_config::stack_names().contains(&m.name),
                "{}",
                m.name
            );
            if let Some(s) = &c.software {
                by_software.insert(s.clone(), m.name.clone());
            }
        }
        let table = [
            ("Megatron-LM (2021, SC21 artifact)", "megatron-lm-2021"),
            (
                "Megatron-LM (2022; sequence parallelism + selective recompute)",
                "megatron-lm-2022",
            ),
            ("Megatron-Core r0.8.0", "megatron-core-2024"),
            (
                "Meta Llama 3 training stack (2024, 4D parallelism)",
                "meta-llama3-2024",
            ),
            (
                "TensorRT-LLM v0.6.1 (C++ static-batch benchmark)",
                "tensorrt-llm-0.5",
            ),
        ];
        for (s, want) in table {
            assert_eq!(by_software.get(s).map(String::as_str), Some(want), "{s}");
        }
    }

    #[test]
    fn generations_from_the_catalog() {
        let table = [
            ("A100-SXM4-80GB", Some(GpuGeneration::Ampere)),
            ("H100-SXM5-80GB", Some(GpuGeneration::Hopper)),
            ("B200-SXM-180GB", Some(GpuGeneration::Blackwell)),
            ("MI300X", None),
            ("no-such-gpu", None),
        ];
        for (id, want) in table {
            assert_eq!(generation_of(id), want, "{id}");
        }
    }

    #[test]
    fn matching_order_fallback_and_bad_tables() {
        let t = StackTable::builtin().unwrap();
        let n = t.rules().len();
        let (m, s) = t.lookup(Some("Some New Framework 9.0"));
        assert_eq!((m.name.as_str(), m.rule), ("generic", n));
        // The fallback's values are the engines' defaults (only its words differ) but for
        // the fitted efficiencies, the cross-validated middle of the known stacks.
        let plain = Stack {
            description: String::new(),
            family: String::new(),
            efficiency: Stack::default().efficiency,
            ..s.clone()
        };
        assert_eq!(plain, Stack::default());
        assert!(s.efficiency.gemm < 1.0 && s.efficiency.gemm == s.efficiency.attention);
        assert!(m.describe().contains("fallback"), "{}", m.describe());
        let (m, _) = t.lookup(None);
        assert_eq!(m.rule, n);
        // A family named without a known version lands on its newest profile.
        for (software, stack) in [
            (
                "TensorRT-LLM @b626186241 (PyTorch workflow)",
                "tensorrt-llm-1.x",
            ),
            ("TensorRT-LLM v2.1 (trtllm-serve)", "tensorrt-llm-1.x"),
            (
                "TensorRT-LLM v0.14.0 (Triton tensorrtllm_backend)",
                "tensorrt-llm-0.x",
            ),
            ("NVIDIA NeMo 24.07 container", "megatron-core-2025"),
            ("NeMo Framework inference (2025)", "tensorrt-llm-1.x"),
            ("NeMo AutoModel main (2025-10)", "nemo-automodel-2025"),
            ("Megatron-Core r0.13.0", "megatron-core-2025"),
            ("Megatron-Core r0.8.0", "megatron-core-2024"),
        ] {
            assert_eq!(t.lookup(Some(software)).0.name, stack, "{software}");
        }
        // Case-insensitive; the async-TP rule precedes the plain compile rule.
        let (m, _) = t.lookup(Some("TORCHTITAN @x; torch.compile; asynctp"));
        assert_eq!(m.name, "torchtitan-compile-asynctp-2025");
        assert!(
            m.describe().contains("\"torchtitan\" + \"AsyncTP\""),
            "{}",
            m.describe()
        );

        let bad: [(&str, &str); 6] = [
            ("schema = \"x\"\n[[rule]]\ncontains = []\nstack = \"generic\"\nwhy = \"w\"\n", "expected \"perfcast-stacks/1\""),
            ("schema = \"perfcast-stacks/1\"\n[[rule]]\ncontains = [\"a\"]\nstack = \"generic\"\nwhy = \"w\"\n", "must be the fallback"),
            ("schema = \"perfcast-stacks/1\"\n[[rule]]\ncontains = []\nstack = \"no-such-stack\"\nwhy = \"w\"\n", "unknown stack `no-such-stack`"),
            ("schema = \"perfcast-stacks/1\"\n[[rule]]\ncontains = []\nstack = \"generic\"\nwhy = \" \"\n", "`why` is empty"),
            ("schema = \"perfcast-stacks/1\"\n[[rule]]\ncontains = []\nstack = \"generic\"\nwhy = \"w\"\npattern = 1\n", "unknown field `pattern`"),
            ("schema = \"perfcast-stacks/1\"\nrule = []\n", "no [[rule]]"),
        ];
        for (text, want) in bad {
            let e = StackTable::parse(text, "t.toml").unwrap_err().to_string();
            assert!(e.contains(want) && e.starts_with("t.toml"), "{want}: {e}");
        }
    }
}
