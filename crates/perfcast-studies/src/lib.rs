//! perfcast-studies: the seed paper's five studies (Kundu et al. 2024, "Performance Modeling
//! and Workload Analysis of Distributed LLM Training and Inference", arXiv:2407.14645, IISWC
//! 2024) as reproducible experiments.
//!
//! Each study is a config under `configs/studies/NAME.toml` (copy it and change it) and a
//! function from that config to three files: `NAME.csv` (every number the model produced),
//! `NAME.svg` (the plot) and `NAME.md` (the finding in a few sentences, generated from the
//! numbers, and the command that reproduces it). No result is hand-entered: every number
//! comes from the training and inference engines evaluating the configured hardware.
//!
//! | study | what it evaluates |
//! |---|---|
//! | `memory-vs-recompute` | memory per GPU by component for the Korthikanti models under four recompute policies, fit in 80 GB, time cost |
//! | `a100-to-b200` | the same training job on A100 and Blackwell clusters (best plan each), speed-up split into seven factors by Shapley values |
//! | `technology-nodes` | devices derived from 12 nm .. 1 nm with their memory and network generations: training and inference time shares |
//! | `matmul-boundedness` | every GEMM of Llama-2 70B and GPT-3 175B prefill/decode on A100/H100/H200/B200 on the roofline |
//! | `dram-scaling` | decode and prefill latency and throughput as device memory moves HBM2e .. HBM4e (and GDDR7, LPDDR5X) |
//! | `topologies` | one training plan on fat-trees (1:1, 2:1, 4:1), rail-optimised, rail-only and torus networks: step time, exposed communication, network cost (Wang et al. 2023's rail-only claim) |
//!
//! Invariant: a study either writes finite numbers or returns an error that names the config
//! file, the key and what is allowed; it never panics on user input.

pub mod common;
pub mod error;
pub mod plans;
pub mod shapley;
pub mod studies;

pub use error::StudyError;

use perfcast_config::Plugins;
use std::path::{Path, PathBuf};

/// A study's name and what it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StudyInfo {
    pub name: &'static str,
    pub title: &'static str,
}

/// Every study: the seed paper's, in its order, then perfcast's own.
pub const STUDIES: [StudyInfo; 7] = [
    StudyInfo {
        name: "memory-vs-recompute",
        title: "Memory per GPU under activation recomputation (Korthikanti models, A100-80GB)",
    },
    StudyInfo {
        name: "a100-to-b200",
        title: "A100 -> B200 / GB200 NVL72 training speed-up, attributed to seven factors",
    },
    StudyInfo {
        name: "technology-nodes",
        title: "Technology nodes 12 nm -> 1 nm: where training and inference time goes",
    },
    StudyInfo {
        name: "matmul-boundedness",
        title: "Compute- vs memory-bound GEMMs of LLM inference on A100, H100, H200, B200",
    },
    StudyInfo {
        name: "dram-scaling",
        title: "DRAM generations and inference latency (TTFT vs TPOT)",
    },
    StudyInfo {
        name: "topologies",
        title: "Network topologies for one training plan: step time, exposed communication, cost",
    },
    StudyInfo {
        name: "moe-ep-placement",
        title: "Expert parallelism inside the NVLink domain vs across the scale-out network",
    },
];

/// The three outputs of a study.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyOutput {
    pub name: String,
    pub csv: String,
    pub svg: String,
    /// Markdown: the finding and the command.
    pub summary: String,
    /// The finding alone (a few sentences generated from the numbers).
    pub finding: String,
}

impl StudyOutput {
    /// The outputs of the study of `ctx`: its table as CSV, its figure rendered, and the
    /// summary around `finding`.
    pub fn new(
        ctx: &common::StudyContext,
        table: perfcast_render::Table,
        figure: perfcast_render::figure::Figure,
        finding: String,
    ) -> Result<Self, StudyError> {
        Ok(StudyOutput {
            name: ctx.info.name.to_string(),
            csv: table.csv(),
            svg: figure.render()?,
            summary: common::summary(ctx, &finding),
            finding,
        })
    }

    /// Write `NAME.csv`, `NAME.svg` and `NAME.md` into `dir` (created if needed), each whole
    /// or not at all, holding `dir` against another perfcast writing there
    /// ([`perfcast_render::file`]).
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, StudyError> {
        let _lock =
            perfcast_render::file::DirLock::take(dir).map_err(|source| StudyError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        let mut out = Vec::new();
        for (ext, text) in [
            ("csv", &self.csv),
            ("svg", &self.svg),
            ("md", &self.summary),
        ] {
            let p = dir.join(format!("{}.{ext}", self.name));
            perfcast_render::file::write(&p, text).map_err(|source| StudyError::Write {
                path: p.clone(),
                source,
            })?;
            out.push(p);
        }
        Ok(out)
    }
}

/// The `docs/studies.md` page: every study's plot (`studies/NAME.svg`), its finding and the
/// command that reproduces it. `outputs` in [`STUDIES`] order.
pub fn docs_page(outputs: &[StudyOutput]) -> String {
    let mut s = String::from(
        "# Studies\n\n\
The five studies of the seed paper (Kundu et al. 2024, \"Performance Modeling and Workload Analysis of \
Distributed LLM Training and Inference\", arXiv:2407.14645), \
rerun with perfcast's own model, and perfcast's own studies of network topologies (Wang et al. 2023's \
rail-only claim) and of where a mixture-of-experts model's expert-parallel group sits. Each is a config under `configs/studies/` (copy it, change it, pass it \
with `--config`) and writes `NAME.csv` (every number), `NAME.svg` (the plot) and `NAME.md` (the finding) \
into `--out DIR` (default `out/studies/NAME`). The findings below are generated from the numbers by the \
study itself; the files under [`docs/studies/`](studies/) are the committed outputs.\n\n\
```\nperfcast study --list\nperfcast study NAME [--out DIR] [--config FILE]\n```\n\n\
These are predictions of an analytical model: the hardware figures are datasheet values cited in \
`configs/hardware/` and `plugins/technology/src/generations.rs`, the efficiency factors are the engines' \
documented defaults, and projected hardware (HBM4e, NVLink 7, the 1 nm node) is marked ASSUMPTION \
where it is defined.\n",
    );
    for (i, o) in outputs.iter().enumerate() {
        let title = STUDIES
            .iter()
            .find(|s| s.name == o.name)
            .map(|s| s.title)
            .unwrap_or("");
        s.push_str(&format!(
            "\n## {}. {}\n\n![{}](studies/{}.svg)\n\n{}\n\nReproduce: `perfcast study {}` (config [`configs/studies/{}.toml`](../configs/studies/{}.toml); numbers: [`studies/{}.csv`](studies/{}.csv)).\n",
            i + 1,
            title,
            o.name,
            o.name,
            o.finding.trim(),
            o.name,
            o.name,
            o.name,
            o.name,
            o.name
        ));
    }
    s.push_str(TECHNOLOGY_NOTE);
    s
}

/// How the technology plugin derives hardware (appended to the docs page).
const TECHNOLOGY_NOTE: &str = "
## How the technology plugin derives a device

`plugins/technology` (crate `perfcast-plugin-technology`, linked through `perfcast-builtins`)
registers four kinds any config can use:

| kind | category | what sets it |
|---|---|---|
| `tech/node-scaled-gpu` | compute unit | the reference GPU (default A100-SXM4 on TSMC N7) scaled to a node under the same die area and power |
| `tech/node-sram` | memory tier | on-chip SRAM: reference capacity x SRAM density; bandwidth keeps the reference's bytes per FLOP |
| `tech/dram-generation` | memory tier | a DRAM generation (HBM2 .. HBM4e, GDDR7, LPDDR5X) x a stack count |
| `tech/link-generation` | interconnect | NVLink 2..7 or InfiniBand EDR .. 3.2T, alpha-beta collectives |

The GPU derivation follows DeepFlow's micro-architecture engine (Isaev et al. 2023; seed digest §3.5):
MAC count = reference x logic density (fixed MAC-array area); energy per MAC op = reference x
`energy_per_op` x (V / vdd)^2; clock f(V) = f_ref x g(V) / g(vdd) with g(V) = (V - V_t)^alpha / V
(alpha-power law, alpha = 2); the power of the MAC array must stay within the reference's. If the
nominal supply fits, the node is area-limited; otherwise the supply is lowered (DVFS) until it fits,
and below `V_t + margin` MACs are power-gated (dark silicon). Every peak (per format) and the vector
engine scale by MACs x active fraction x clock; the result is the built-in `gpu` model, so GEMM
efficiency (wave and tile quantisation) stays the same as for shipped GPUs. At the reference node
the derived device is the reference exactly. The node table (logic and SRAM density, energy per op,
supplies) is in `configs/studies/technology-nodes.toml` with its sources (NVIDIA whitepapers, TSMC
node announcements, IEDM bitcell disclosures, IRDS 2022 supplies); the 1 nm row and HBM4e / NVLink 7
/ 3.2T are marked ASSUMPTION. DeepFlow's own per-node factors (x0.67 area, x0.54 energy, x0.9 supply)
are given there as an alternative.
";

/// Names of the known studies.
pub fn names() -> Vec<&'static str> {
    STUDIES.iter().map(|s| s.name).collect()
}

/// The study called `name`, or an error listing the known ones.
pub fn info(name: &str) -> Result<StudyInfo, StudyError> {
    STUDIES
        .iter()
        .copied()
        .find(|s| s.name == name)
        .ok_or_else(|| StudyError::Unknown {
            name: name.to_string(),
            known: names().into_iter().map(String::from).collect(),
        })
}

/// The shipped configs of `configs/studies/`, embedded at build time by `perfcast-assets` (as
/// the presets are), so that `perfcast study NAME` works from any directory: `(study, TOML
/// text)`, sorted by name.
pub use perfcast_assets::STUDY_CONFIGS as BUILTIN_CONFIGS;

/// The built-in config of study `name` (its text as shipped in `configs/studies/NAME.toml`).
pub fn builtin_config(name: &str) -> Option<&'static str> {
    BUILTIN_CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// Run study `name` from `config` (default: its shipped config) with the host's `plugins`.
pub fn run(
    name: &str,
    config: Option<&Path>,
    plugins: &Plugins,
) -> Result<StudyOutput, StudyError> {
    run_with(name, config, plugins, Vec::new())
}

/// [`run`] with plugin libraries loaded into every configuration the study reads
/// (`perfcast study --load`).
pub fn run_with(
    name: &str,
    config: Option<&Path>,
    plugins: &Plugins,
    libraries: Vec<perfcast_config::PluginSpec>,
) -> Result<StudyOutput, StudyError> {
    let info = info(name)?;
    let ctx = match config {
        Some(p) => common::StudyContext::new(
            info,
            p,
            format!("perfcast study {name} --config {}", p.display()),
            plugins,
        )?,
        None => {
            let text = builtin_config(name).ok_or_else(|| StudyError::Unknown {
                name: name.to_string(),
                known: names().into_iter().map(String::from).collect(),
            })?;
            common::StudyContext::builtin(info, text, plugins)
        }
    }
    .with_libraries(libraries);
    match name {
        "memory-vs-recompute" => studies::memory_recompute::run(&ctx),
        "a100-to-b200" => studies::a100_to_b200::run(&ctx),
        "technology-nodes" => studies::technology_nodes::run(&ctx),
        "matmul-boundedness" => studies::matmul::run(&ctx),
        "dram-scaling" => studies::dram_scaling::run(&ctx),
        "topologies" => studies::topologies::run(&ctx),
        "moe-ep-placement" => studies::moe_ep_placement::run(&ctx),
        _ => Err(StudyError::Unknown {
            name: name.to_string(),
            known: names().into_iter().map(String::from).collect(),
        }),
    }
}

#[cfg(test)]
mod builtin_config_tests {
    use super::*;

    /// Every study has its shipped config built in, under its own name.
    #[test]
    fn every_study_has_its_config_built_in() {
        for s in STUDIES {
            assert!(builtin_config(s.name).is_some(), "{}", s.name);
            let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../configs/studies")
                .join(format!("{}.toml", s.name));
            assert!(shipped.exists(), "{}", shipped.display());
        }
    }
}
