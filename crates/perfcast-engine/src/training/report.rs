//! The training report (JSON through serde; its text and CSV renderings are
//! `perfcast_report::training`'s).

use super::timer::ComputeBreakdown;
use perfcast_core::parallel::{MAX_AXIS_NAME_LEN, MAX_DECLARED_AXES};
use perfcast_core::{Bytes, FlopCount, ModelError, Seconds};
use serde::Serialize;

/// Where one step's time goes, on the critical pipeline stage; the parts add up to the
/// iteration time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeBreakdown {
    /// Compute per op class over all micro-batches (recompute included).
    pub compute: ComputeBreakdown,
    /// The part of `compute` that reruns forward work (recompute).
    pub recompute: Seconds,
    /// Exposed (not overlapped) communication per group.
    pub tp_comm: Seconds,
    pub cp_comm: Seconds,
    pub pp_comm: Seconds,
    pub dp_comm: Seconds,
    pub zero_comm: Seconds,
    /// MoE token dispatch and combine (left out of JSON when zero: dense models).
    #[serde(skip_serializing_if = "is_zero")]
    pub ep_comm: Seconds,
    /// Exposed communication on the strategies' declared axes, one ledger per axis by name
    /// (a collective whose group spans a declared axis is its, not its class's; an axis that
    /// exposes nothing has none; left out of JSON when empty).
    #[serde(skip_serializing_if = "AxisLedger::is_empty")]
    pub axes: AxisLedger,
    /// Pipeline fill and drain.
    pub bubble: Seconds,
    /// Optimizer step.
    pub optimizer: Seconds,
    /// Communication hidden behind compute over the step (not a part of the step time: what
    /// the step rests on overlap for; the compute it slows is in the exposed parts).
    pub hidden_comm: Seconds,
}

impl TimeBreakdown {
    pub fn compute_total(&self) -> Seconds {
        Seconds(self.compute.total())
    }
    /// Exposed communication of every ledger (pipeline hand-offs, MoE dispatch and the
    /// declared axes' included).
    pub fn exposed_comm(&self) -> Seconds {
        self.tp_comm
            + self.cp_comm
            + self.pp_comm
            + self.dp_comm
            + self.zero_comm
            + self.ep_comm
            + self.axes.total()
    }
    /// Sum of all parts (equals the iteration time).
    pub fn total(&self) -> Seconds {
        self.compute_total() + self.exposed_comm() + self.bubble + self.optimizer
    }
}

fn is_zero(s: &Seconds) -> bool {
    s.0 == 0.0
}

/// Exposed communication per declared axis, by the axis's name, in the run's order of the
/// axes; empty when no strategy declares one. Inline and `Copy` (at most
/// [`MAX_DECLARED_AXES`] names of at most [`MAX_AXIS_NAME_LEN`] bytes), so a report stays a
/// value; serialized as a map from name to seconds.
#[derive(Clone, Copy, PartialEq, Default)]
pub struct AxisLedger {
    len: u8,
    name_len: [u8; MAX_DECLARED_AXES],
    names: [[u8; MAX_AXIS_NAME_LEN]; MAX_DECLARED_AXES],
    comm: [Seconds; MAX_DECLARED_AXES],
}

impl AxisLedger {
    /// Append an axis's ledger. The engine's declarations are checked (at most
    /// [`MAX_DECLARED_AXES`], names of at most [`MAX_AXIS_NAME_LEN`] bytes), so neither
    /// bound is reached; past them the entry is dropped rather than the report.
    pub(crate) fn push(&mut self, name: &str, comm: Seconds) {
        let k = self.len as usize;
        if k == MAX_DECLARED_AXES || name.len() > MAX_AXIS_NAME_LEN {
            debug_assert!(false, "unchecked declared axis `{name}`");
            return;
        }
        self.names[k][..name.len()].copy_from_slice(name.as_bytes());
        self.name_len[k] = name.len() as u8;
        self.comm[k] = comm;
        self.len += 1;
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Each axis's name and exposed communication, in the run's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Seconds)> + '_ {
        (0..self.len as usize).map(|k| {
            let name = &self.names[k][..self.name_len[k] as usize];
            // Pushed from a `&str` whole, so always UTF-8.
            (std::str::from_utf8(name).unwrap_or("?"), self.comm[k])
        })
    }
    /// The largest ledger (zero when empty).
    pub fn max(&self) -> Seconds {
        Seconds(self.iter().map(|(_, t)| t.0).fold(0.0, f64::max))
    }
    pub fn total(&self) -> Seconds {
        Seconds(self.iter().map(|(_, t)| t.0).sum())
    }
}

impl std::fmt::Debug for AxisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for AxisLedger {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.len as usize))?;
        for (name, t) in self.iter() {
            m.serialize_entry(name, &t)?;
        }
        m.end()
    }
}

/// Metrics that only MoE models have: left out of CSV when zero.
pub const MOE_METRICS: [&str; 3] = [
    "ep_comm",
    "layer_moe_block_forward",
    "layer_moe_block_backward",
];

/// One transformer layer, one micro-batch, on one device (an MoE model's MoE layer).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerReport {
    /// Forward time (compute plus exposed layer communication).
    pub forward: Seconds,
    /// Backward time including recompute (averaged over the stage's layers).
    pub backward: Seconds,
    pub forward_compute: Seconds,
    pub backward_compute: Seconds,
    /// Recompute time per layer (averaged over the stage's layers).
    pub recompute: Seconds,
    /// The MoE block alone (router, permutes, experts, shared experts, and the exposed
    /// dispatch and combine), forward and backward; `None` for a dense model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe_block_forward: Option<Seconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe_block_backward: Option<Seconds>,
}

/// Memory of one pipeline stage's device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StageMemory {
    pub stage: u32,
    /// Micro-batches of activations held at the peak (whole-stage units).
    pub in_flight: f64,
    pub weights: Bytes,
    pub grads: Bytes,
    pub optimizer: Bytes,
    pub activations: Bytes,
    /// Transient buffers: a recomputed layer's activations, fp32 logits, gathered weights.
    pub temp: Bytes,
    /// Runtime reserve (`EngineParams::runtime_reserve_gib`).
    pub reserved: Bytes,
    pub total: Bytes,
}

/// One quantity of a stage's memory: its key in CSV and JSON, its label in tables, its unit
/// (`B` for bytes; tables show bytes in GiB) and how to read it. [`StageMemory::FIELDS`] is
/// the one list every rendering and the finiteness check use.
#[derive(Clone, Copy)]
pub struct StageField {
    /// The key (the JSON field name of [`StageMemory`]).
    pub name: &'static str,
    /// The row or column label in tables.
    pub label: &'static str,
    /// `B` for byte quantities, empty for counts.
    pub unit: &'static str,
    /// The value, in bytes for byte quantities.
    pub get: fn(&StageMemory) -> f64,
    /// One of the parts that add up to `total` (what a memory stack draws).
    pub part: bool,
}

impl StageField {
    /// The value as a table shows it: GiB for bytes, the count otherwise.
    pub fn display_value(&self, m: &StageMemory) -> f64 {
        let v = (self.get)(m);
        if self.unit == "B" {
            Bytes(v).gib()
        } else {
            v
        }
    }
}

impl StageMemory {
    /// Every quantity of a stage, in the order reports list them.
    pub const FIELDS: [StageField; 8] = [
        StageField {
            name: "in_flight",
            label: "in flight (micro-b.)",
            unit: "",
            get: |m| m.in_flight,
            part: false,
        },
        StageField {
            name: "weights",
            label: "weights",
            unit: "B",
            get: |m| m.weights.0,
            part: true,
        },
        StageField {
            name: "grads",
            label: "gradients",
            unit: "B",
            get: |m| m.grads.0,
            part: true,
        },
        StageField {
            name: "optimizer",
            label: "optimizer",
            unit: "B",
            get: |m| m.optimizer.0,
            part: true,
        },
        StageField {
            name: "activations",
            label: "activations",
            unit: "B",
            get: |m| m.activations.0,
            part: true,
        },
        StageField {
            name: "temp",
            label: "temporary",
            unit: "B",
            get: |m| m.temp.0,
            part: true,
        },
        StageField {
            name: "reserved",
            label: "reserved",
            unit: "B",
            get: |m| m.reserved.0,
            part: true,
        },
        StageField {
            name: "total",
            label: "total",
            unit: "B",
            get: |m| m.total.0,
            part: false,
        },
    ];

    /// The first quantity that is NaN, infinite or negative, with its name.
    pub fn first_invalid(&self) -> Option<(&'static str, f64)> {
        Self::FIELDS
            .iter()
            .map(|f| (f.name, (f.get)(self)))
            .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
    }
}

/// Memory per device against the device tier's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryReport {
    pub first_stage: StageMemory,
    /// Stage 1 when there are more than two stages: the busiest middle stage under 1F1B
    /// (one micro-batch fewer in flight than stage 0, but possibly more layers).
    pub second_stage: Option<StageMemory>,
    pub last_stage: StageMemory,
    /// The largest stage total.
    pub peak: Bytes,
    pub capacity: Bytes,
    pub fits: bool,
    /// How much the peak exceeds the capacity (zero when it fits).
    pub shortfall: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feasibility {
    Fits,
    ExceedsMemory,
}

/// The largest contributor to the step time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// GEMMs and attention on the matrix engine.
    MatrixCompute,
    /// Memory-bound vector ops (norms, activations, dropout, casts, loss).
    VectorOps,
    TensorComm,
    ContextComm,
    PipelineComm,
    PipelineBubble,
    DataComm,
    ZeroComm,
    /// Exposed MoE token dispatch and combine.
    ExpertComm,
    /// Exposed communication on one of the strategies' declared axes (the report's
    /// `breakdown.axes` says which).
    DeclaredAxisComm,
    Optimizer,
}

impl Bottleneck {
    /// The name JSON gives it (snake case), which CSV and Parquet use too.
    pub const fn name(self) -> &'static str {
        match self {
            Bottleneck::MatrixCompute => "matrix_compute",
            Bottleneck::VectorOps => "vector_ops",
            Bottleneck::TensorComm => "tensor_comm",
            Bottleneck::ContextComm => "context_comm",
            Bottleneck::PipelineComm => "pipeline_comm",
            Bottleneck::PipelineBubble => "pipeline_bubble",
            Bottleneck::DataComm => "data_comm",
            Bottleneck::ZeroComm => "zero_comm",
            Bottleneck::ExpertComm => "expert_comm",
            Bottleneck::DeclaredAxisComm => "declared_axis_comm",
            Bottleneck::Optimizer => "optimizer",
        }
    }

    pub const fn describe(self) -> &'static str {
        match self {
            Bottleneck::MatrixCompute => "matrix compute (GEMMs, attention)",
            Bottleneck::VectorOps => "memory-bound vector ops",
            Bottleneck::TensorComm => "exposed tensor-parallel communication",
            Bottleneck::ContextComm => "exposed context-parallel communication",
            Bottleneck::PipelineComm => "pipeline hand-offs",
            Bottleneck::PipelineBubble => "pipeline bubble",
            Bottleneck::DataComm => "exposed gradient reduction",
            Bottleneck::ZeroComm => "exposed ZeRO parameter gathers",
            Bottleneck::ExpertComm => "exposed MoE token dispatch and combine",
            Bottleneck::DeclaredAxisComm => "exposed communication on a declared axis",
            Bottleneck::Optimizer => "optimizer step",
        }
    }
}

/// One training iteration, predicted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrainingReport {
    pub iteration_time: Seconds,
    pub devices: u32,
    /// Micro-batches per step on one pipeline.
    pub micro_batches: u32,
    pub tokens_per_iteration: f64,
    pub tokens_per_s: f64,
    pub tokens_per_s_per_gpu: f64,
    /// Model FLOPs per step (all devices; recompute not counted).
    pub model_flops: FlopCount,
    /// Hardware FLOPs per step (recompute counted).
    pub hardware_flops: FlopCount,
    pub tflops_per_gpu_model: f64,
    pub tflops_per_gpu_hardware: f64,
    /// Dense matrix peak for the plan's precision, TFLOP/s.
    pub peak_tflops: f64,
    pub mfu: f64,
    pub hfu: f64,
    pub breakdown: TimeBreakdown,
    pub layer: LayerReport,
    pub memory: MemoryReport,
    pub feasibility: Feasibility,
    pub bottleneck: Bottleneck,
}

impl TrainingReport {
    /// The stages the report keeps (first, second when there are more than two, last), with
    /// their names in CSV keys.
    pub fn stages(&self) -> impl Iterator<Item = (&'static str, &StageMemory)> {
        let m = &self.memory;
        std::iter::once(("first", &m.first_stage))
            .chain(m.second_stage.as_ref().map(|s| ("second", s)))
            .chain(std::iter::once(("last", &m.last_stage)))
    }

    /// Every number but the stage memories, named (for finiteness checks and CSV).
    pub fn metrics(&self) -> [(&'static str, f64, &'static str); 43] {
        let b = &self.breakdown;
        let c = &b.compute;
        let l = &self.layer;
        let m = &self.memory;
        [
            ("iteration_time", self.iteration_time.0, "s"),
            ("devices", self.devices as f64, ""),
            ("micro_batches", self.micro_batches as f64, ""),
            ("tokens_per_iteration", self.tokens_per_iteration, "tokens"),
            ("tokens_per_s", self.tokens_per_s, "tokens/s"),
            (
                "tokens_per_s_per_gpu",
                self.tokens_per_s_per_gpu,
                "tokens/s",
            ),
            ("model_flops", self.model_flops.0, "FLOP"),
            ("hardware_flops", self.hardware_flops.0, "FLOP"),
            ("tflops_per_gpu_model", self.tflops_per_gpu_model, "TFLOP/s"),
            (
                "tflops_per_gpu_hardware",
                self.tflops_per_gpu_hardware,
                "TFLOP/s",
            ),
            ("peak_tflops", self.peak_tflops, "TFLOP/s"),
            ("mfu", self.mfu, ""),
            ("hfu", self.hfu, ""),
            ("compute.gemm", c.gemm, "s"),
            ("compute.attention", c.attention, "s"),
            ("compute.norm", c.norm, "s"),
            ("compute.activation", c.activation, "s"),
            ("compute.dropout", c.dropout, "s"),
            ("compute.elementwise", c.elementwise, "s"),
            ("compute.rope", c.rope, "s"),
            ("compute.cast", c.cast, "s"),
            ("compute.embedding", c.embedding, "s"),
            ("compute.loss", c.loss, "s"),
            ("recompute", b.recompute.0, "s"),
            ("tp_comm", b.tp_comm.0, "s"),
            ("cp_comm", b.cp_comm.0, "s"),
            ("pp_comm", b.pp_comm.0, "s"),
            ("dp_comm", b.dp_comm.0, "s"),
            ("zero_comm", b.zero_comm.0, "s"),
            ("ep_comm", b.ep_comm.0, "s"),
            ("bubble", b.bubble.0, "s"),
            ("optimizer", b.optimizer.0, "s"),
            ("hidden_comm", b.hidden_comm.0, "s"),
            ("layer_forward", l.forward.0, "s"),
            ("layer_backward", l.backward.0, "s"),
            ("layer_forward_compute", l.forward_compute.0, "s"),
            ("layer_backward_compute", l.backward_compute.0, "s"),
            ("layer_recompute", l.recompute.0, "s"),
            (
                "layer_moe_block_forward",
                l.moe_block_forward.map_or(0.0, |t| t.0),
                "s",
            ),
            (
                "layer_moe_block_backward",
                l.moe_block_backward.map_or(0.0, |t| t.0),
                "s",
            ),
            ("memory.peak", m.peak.0, "B"),
            ("memory.capacity", m.capacity.0, "B"),
            ("memory.shortfall", m.shortfall.0, "B"),
        ]
    }

    /// Error if any number is NaN, infinite or negative.
    pub fn check_finite(&self) -> Result<(), ModelError> {
        for (name, v, _) in self.metrics() {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ModelError::NonFinite {
                    what: format!("training report `{name}`"),
                    value: v,
                });
            }
        }
        for (name, t) in self.breakdown.axes.iter() {
            if !(t.0.is_finite() && t.0 >= 0.0) {
                return Err(ModelError::NonFinite {
                    what: format!("training report `axes.{name}`"),
                    value: t.0,
                });
            }
        }
        for (which, st) in self.stages() {
            if let Some((name, value)) = st.first_invalid() {
                return Err(ModelError::NonFinite {
                    what: format!("training report `memory.{which}.{name}`"),
                    value,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Bottleneck::*;

    /// CSV and Parquet name a bottleneck as JSON does (issue 44: a CSV said `MatrixCompute`).
    #[test]
    fn bottleneck_names_are_the_json_names() {
        for b in [
            MatrixCompute,
            VectorOps,
            TensorComm,
            ContextComm,
            PipelineComm,
            PipelineBubble,
            DataComm,
            ZeroComm,
            ExpertComm,
            DeclaredAxisComm,
            Optimizer,
        ] {
            assert_eq!(serde_json::to_value(b).ok(), Some(b.name().into()), "{b:?}");
        }
    }
}
