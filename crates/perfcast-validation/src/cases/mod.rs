//! The validation cases file, schema `perfcast-validation/1` (`configs/validation/SCHEMA.md`).
//!
//! Parsing is strict, as the schema's own checker (`check_schema.py`) is: unknown keys, missing
//! required fields, bad enum values, inconsistent degrees and metrics that do not belong to the
//! case's kind are errors that name the file, the case id and the key path. A file with any
//! error is rejected as a whole (the CLI exits non-zero): a validation run on a file that
//! silently lost a case would report a MAPE over a different set than the user thinks.

mod check;
mod load;
mod schema;

pub use load::{CasesError, CasesFile, SCHEMA};
pub use schema::{
    AttentionFlops, AttentionType, Batch, Case, CaseInference, CaseModel, CaseParallel,
    CaseSchedule, CaseSystem, CaseTraining, FlopsConvention, Fp8Recipe, InferenceParallel, Kind,
    LayerScope, Measured, Metric, MlaSpec, Mode, MoeDispatcher, MoeRouting, Optimizer, Precision,
    Recompute, Reference, Statistic, Task, TrainingParallel,
};
