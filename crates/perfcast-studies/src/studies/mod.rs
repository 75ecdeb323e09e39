//! The studies, one module each (the seed paper's five, `topologies` and `moe-ep-placement`): `evaluate` (the numbers, for tests and other hosts) and
//! `run` (CSV, SVG and summary).

pub mod a100_to_b200;
pub mod dram_scaling;
pub mod matmul;
pub mod memory_recompute;
pub mod moe_ep_placement;
pub mod technology_nodes;
pub mod topologies;
