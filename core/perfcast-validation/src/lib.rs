//! perfcast-validation: presets and the validation harness.
//!
//! * [`cases`]: the cases file (schema `perfcast-validation/1`), parsed strictly.
//! * [`hf`]: a Hugging Face `config.json` read into a [`perfcast_core::workload::ModelSpec`].
//! * [`presets`]: model, hardware and node presets embedded from `configs/`, and the
//!   composition of a [`perfcast_core::System`] through the plugin registry.
//! * [`flops`]: the FLOP conventions published TFLOP/s, MFU and HFU are counted in.
//!
//! Invariant: a case is never dropped. Every case of the file comes back with a status (`ok`,
//! `unsupported` with the reason, or `error` with the engine's message), and only published
//! measurements (`[case.measured]`) are scored; derived `[case.reference]` values are shown,
//! never scored.

pub mod cases;
pub mod flops;
pub mod hf;
pub mod presets;
pub mod report;
