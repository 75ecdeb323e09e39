//! perfcast-engine: the model.
//!
//! Builds each device's per-layer op program from a `ModelSpec` and an execution plan, times
//! every op on the system's `ComputeUnit` and every collective on its network levels,
//! composes the pipeline schedule, accounts memory per pipeline stage and reports.
//! [`inference`] times prefill, decode and one engine step of a mixed batch (the
//! `perfcast-serving` crate simulates serving under load, step by step, on top of it).
//!
//! Invariant: [`training::Training::evaluate`] allocates nothing and looks up nothing by
//! string beyond a linear scan of the few resolved plugins; per-layer results are computed
//! once and multiplied; every number in a report is finite (checked before returning).

pub mod inference;
pub mod network;
pub mod software;
pub mod training;

pub use training::{EngineParams, Training, TrainingOptions, TrainingPlan, TrainingReport};
