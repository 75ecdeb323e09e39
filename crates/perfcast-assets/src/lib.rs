//! perfcast-assets: the one crate that embeds the project's data (`configs/`), so that the
//! binary carries it and works from any directory, and no other crate reaches into `configs/`
//! with a relative path (`tests/layering.rs` gives this crate no dependency at all).
//!
//! - [`PRESETS`], the files `configs/{hardware,systems,models,stacks,experiments}/*.toml`
//!   (`preset:NAME`, `stack = "NAME"`; read by `perfcast-config`).
//! - [`STUDY_CONFIGS`]: `configs/studies/*.toml` (`perfcast study NAME`).
//! - [`validation`]: the public cases, the accelerator catalog, the stack rules, the kernel
//!   measurements and the residuals of `configs/validation/`.

include!(concat!(env!("OUT_DIR"), "/presets.rs"));
include!(concat!(env!("OUT_DIR"), "/studies.rs"));

/// The data of `configs/validation/` (the repository's copy of the shared validation data,
/// and what the calibration derived from it).
pub mod validation {
    /// `cases.toml`: the public measurements the models are validated against.
    pub const CASES: &str = include_str!("../../../configs/validation/cases.toml");
    /// `accelerators.toml`: the accelerator catalog (datasheet figures with sources).
    pub const ACCELERATORS: &str = include_str!("../../../configs/validation/accelerators.toml");
    /// `stacks.toml`: the rules mapping a case's `software` to a software stack.
    pub const STACK_RULES: &str = include_str!("../../../configs/validation/stacks.toml");
    /// `kernels.toml`: published kernel measurements.
    pub const KERNELS: &str = include_str!("../../../configs/validation/kernels.toml");
    /// `residuals.toml`: the residuals the error bars come from.
    pub const RESIDUALS: &str = include_str!("../../../configs/validation/residuals.toml");
    // `RESIDUAL_ROWS`: its residuals as values (build.rs).
    include!(concat!(env!("OUT_DIR"), "/residuals.rs"));
    /// `CALIBRATION.md`: the calibration's record (its parameter table is checked against the
    /// code).
    pub const CALIBRATION: &str = include_str!("../../../configs/validation/CALIBRATION.md");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_filled_and_sorted() {
        assert!(PRESETS
            .iter()
            .any(|(n, g, _)| *n == "a100-sxm4-80gb" && *g == "hardware"));
        assert!(PRESETS
            .iter()
            .any(|(n, g, _)| *n == "gpt3-175b-a100" && *g == "experiments"));
        assert!(PRESETS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(STUDY_CONFIGS
            .iter()
            .any(|(n, _)| *n == "memory-vs-recompute"));
        assert!(STUDY_CONFIGS.windows(2).all(|w| w[0].0 < w[1].0));
        for text in [
            validation::CASES,
            validation::ACCELERATORS,
            validation::STACK_RULES,
        ] {
            assert!(!text.trim().is_empty());
        }
    }
}
