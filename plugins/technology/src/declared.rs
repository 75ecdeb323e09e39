//! The declared parameters of the `tech/*` kinds (`perfcast plugins --describe tech/...`).
//! Defaults and sources as the parameter structs of `lib.rs` and `node.rs` document them.

use perfcast_core::{ParamSpec, ParamType};

const NODE_NM: ParamSpec = ParamSpec::derived(
    "node_nm",
    ParamType::Float,
    "nm",
    "none: required unless `node` is given",
    "a built-in node: 12, 7, 5, 3, 2, 1",
    "a built-in process node (ignored when `node` is given)",
    "configs/studies/technology-nodes.toml cites each node's figures",
);
const NODE: ParamSpec = ParamSpec::derived(
    "node",
    ParamType::Table,
    "",
    "the built-in row of node_nm",
    "{ node_nm, logic_density, sram_density, energy_per_op, vdd, vt }",
    "an explicit node row, relative to the reference node",
    "TSMC node announcements, IEDM bitcell disclosures, IRDS 2022 supplies",
);
const LIMITS: ParamSpec = ParamSpec::with_default(
    "limits",
    ParamType::Table,
    "",
    "{ alpha = 2.0, vt_margin = 0.1, power_budget = 1.0 }",
    "alpha > 0, vt_margin >= 0, power_budget > 0",
    "operating point of the derivation: alpha-power-law exponent, supply floor above V_t, MAC-array power relative to the reference",
    "DeepFlow (alpha = 2, V_t + margin floor); Sakurai & Newton 1990 (alpha ~1.3 short channel)",
);

/// `tech/node-scaled-gpu`.
pub static NODE_GPU: &[ParamSpec] = &[
    ParamSpec::with_default("name", ParamType::String, "", "\"\"", "", "device name for reports", "-"),
    NODE_NM,
    NODE,
    ParamSpec::derived(
        "reference",
        ParamType::Table,
        "",
        "A100-SXM4 on N7",
        "{ name, matrix_tflops, vector_tflops, sm_count, clock_ghz }",
        "the device the scaling starts from",
        "NVIDIA A100 datasheet r4",
    ),
    LIMITS,
    ParamSpec::with_default(
        "extra_formats",
        ParamType::Table,
        "x bf16 peak",
        "{}",
        "a dtype -> > 0 table",
        "matrix formats the node adds beyond the reference's, as multiples of the derived bf16 peak (e.g. { fp8 = 2.0 })",
        "NVIDIA Hopper/Blackwell whitepapers (fp8 = 2x, fp4 = 4x bf16)",
    ),
    ParamSpec::derived("matmul_efficiency", ParamType::Float, "", "the gpu plugin's 0.8", "(0, 1]", "passed to the gpu model", "see gpu"),
    ParamSpec::derived("vector_efficiency", ParamType::Float, "", "the gpu plugin's 0.8", "(0, 1]", "passed to the gpu model", "see gpu"),
    ParamSpec::derived("launch_overhead_us", ParamType::Float, "us", "the gpu plugin's 3.0", ">= 0", "passed to the gpu model", "see gpu"),
];

/// `tech/node-sram`.
pub static NODE_SRAM: &[ParamSpec] = &[
    NODE_NM,
    NODE,
    LIMITS,
    ParamSpec::with_default(
        "reference_capacity_mb",
        ParamType::Float,
        "MB",
        "40.0",
        "> 0",
        "the reference SRAM (same area at every node)",
        "A100 L2: 40 MB (NVIDIA A100 whitepaper)",
    ),
    ParamSpec::with_default(
        "reference_bandwidth_tbs",
        ParamType::Float,
        "TB/s",
        "7.05",
        "> 0",
        "the reference SRAM's bandwidth",
        "A100 L2 bandwidth of DeepFlow's a100 config",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.8",
        "(0, 1]",
        "achievable fraction of the bandwidth",
        "the sram plugin's default",
    ),
];

/// `tech/dram-generation`.
pub static DRAM_GENERATION: &[ParamSpec] = &[
    ParamSpec::required(
        "generation",
        ParamType::String,
        "",
        "HBM2 .. HBM4e, GDDR7, LPDDR5X (generations.rs)",
        "a DRAM generation",
        "JEDEC and vendor announcements, cited in generations.rs",
    ),
    ParamSpec::required(
        "units",
        ParamType::Integer,
        "",
        ">= 1",
        "stacks (HBM), chips (GDDR) or packages (LPDDR) on the package",
        "the device's design",
    ),
    ParamSpec::derived(
        "unit_bandwidth_gbs",
        ParamType::Float,
        "GB/s",
        "the generation's",
        "> 0",
        "override of the per-unit bandwidth (e.g. a slower speed bin)",
        "the part's datasheet",
    ),
    ParamSpec::derived(
        "unit_capacity_gb",
        ParamType::Float,
        "GB",
        "the generation's",
        "> 0",
        "override of the per-unit capacity",
        "the part's datasheet",
    ),
    ParamSpec::with_default(
        "efficiency",
        ParamType::Float,
        "",
        "0.9",
        "(0, 1]",
        "achievable fraction of the peak",
        "the hbm plugin's default (Jia et al. 2021; Luo et al. 2024)",
    ),
    ParamSpec::with_default(
        "latency_ns",
        ParamType::Float,
        "ns",
        "500.0",
        ">= 0",
        "access latency",
        "the hbm plugin's default",
    ),
];

/// `tech/link-generation`.
pub static LINK_GENERATION: &[ParamSpec] = &[
    ParamSpec::required(
        "generation",
        ParamType::String,
        "",
        "nvlink2 .. nvlink7, edr .. 3.2t (generations.rs)",
        "a link generation",
        "NVIDIA and IBTA announcements, cited in generations.rs",
    ),
    ParamSpec::derived(
        "domain_size",
        ParamType::Integer,
        "devices",
        "scale-up: the generation's domain; scale-out: unlimited",
        ">= 1",
        "devices in one domain",
        "the system's design",
    ),
    ParamSpec::derived(
        "efficiency",
        ParamType::Float,
        "",
        "0.8 scale-up (nvlink's), 0.9 scale-out (infiniband's)",
        "(0, 1]",
        "achievable fraction of the per-direction bandwidth",
        "see nvlink, infiniband",
    ),
    ParamSpec::derived(
        "latency_us",
        ParamType::Float,
        "us",
        "1 scale-up, 5 scale-out",
        ">= 0",
        "latency per algorithm step",
        "the network plugin's defaults",
    ),
    ParamSpec::with_default(
        "base_latency_us",
        ParamType::Float,
        "us",
        "5.0",
        ">= 0",
        "fixed cost per collective",
        "the network plugin's default",
    ),
];
