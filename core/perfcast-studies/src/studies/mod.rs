//! The five studies, one module each: `evaluate` (the numbers, for tests and other hosts) and
//! `run` (CSV, SVG and summary).

pub mod a100_to_b200;
pub mod dram_scaling;
pub mod matmul;
pub mod memory_recompute;
pub mod technology_nodes;
