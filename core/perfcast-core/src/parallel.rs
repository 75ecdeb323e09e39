//! Execution traits: parallel strategies, recompute policies, pipeline schedules.
//!
//! These are refined by the training model (issue 3); the shapes here are what the registry
//! and hosts rely on: each is a `Send + Sync` object built by name from parameters.

use crate::error::ModelError;
use crate::units::Seconds;
use crate::workload::ModelSpec;
use serde::{Deserialize, Serialize};

/// The mesh axis a strategy shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    Tensor,
    Sequence,
    Context,
    Expert,
    Pipeline,
    Data,
}

/// The degrees and switches of an execution plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanShape {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub cp: u32,
    pub ep: u32,
    /// Virtual pipeline stages (model chunks) per device.
    pub vpp: u32,
    pub sp: bool,
    pub zero_stage: u8,
    /// Sequences per micro-batch.
    pub micro_batch: u32,
    /// Sequences per optimizer step.
    pub global_batch: u32,
}

/// A parallel strategy: one axis of the device mesh.
pub trait ParallelStrategy: Send + Sync {
    fn kind(&self) -> &str;
    fn axis(&self) -> Axis;
    /// Check the plan's degree on this axis against the model (e.g. heads divisible by TP).
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError>;
}

/// An activation-recompute policy.
pub trait RecomputePolicy: Send + Sync {
    fn kind(&self) -> &str;
}

/// What a pipeline schedule is given.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScheduleInput {
    /// Pipeline stages (devices along the pipeline axis).
    pub stages: u32,
    /// Model chunks per stage (interleaving).
    pub virtual_stages: u32,
    /// Micro-batches per optimizer step on one pipeline.
    pub micro_batches: u32,
    /// Forward time of one micro-batch through one stage (all its chunks).
    pub forward: Seconds,
    /// Backward time (including recompute) of one micro-batch through one stage.
    pub backward: Seconds,
    /// Exposed point-to-point time of one hand-off between stages.
    pub p2p: Seconds,
}

/// What a pipeline schedule returns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScheduleResult {
    /// Time from the first forward to the last backward of the step.
    pub time: Seconds,
    /// Idle time of a stage in that span (the bubble).
    pub bubble: Seconds,
    /// Micro-batches whose activations the first stage holds at its peak, counted in units of
    /// one micro-batch through the whole stage (interleaving can make this fractional).
    pub peak_in_flight: f64,
}

/// A pipeline schedule: GPipe, 1F1B, interleaved 1F1B...
pub trait PipelineSchedule: Send + Sync {
    fn kind(&self) -> &str;
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError>;
}
