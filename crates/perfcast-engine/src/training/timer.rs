//! What a timed op is booked under: the op classes of the compute breakdown, their
//! accumulated times, and the [`Timer`] that times each op on the device's `ComputeUnit`
//! (with the software stack's efficiency multipliers) and books it under its class.

use crate::software::EfficiencyScales;
use perfcast_core::op::{ComputeOp, VectorOpKind};
use perfcast_core::units::ensure_finite;
use perfcast_core::{ComputeUnit, KernelPath, MemoryHierarchy, ModelError, OpTime};
use serde::Serialize;
use std::cell::{Cell, RefCell};

/// Op classes of the compute breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    Gemm = 0,
    Attention,
    Norm,
    Activation,
    Dropout,
    Elementwise,
    Rope,
    Cast,
    Embedding,
    Loss,
    Optimizer,
}

pub const CLASSES: usize = 11;

fn class_of(op: &ComputeOp) -> OpClass {
    match op {
        ComputeOp::Gemm(_) => OpClass::Gemm,
        ComputeOp::Attention(_) => OpClass::Attention,
        ComputeOp::Vector(v) => match v.kind {
            VectorOpKind::Norm => OpClass::Norm,
            VectorOpKind::Activation => OpClass::Activation,
            VectorOpKind::Dropout => OpClass::Dropout,
            VectorOpKind::Rope => OpClass::Rope,
            VectorOpKind::Cast => OpClass::Cast,
            VectorOpKind::Embedding => OpClass::Embedding,
            VectorOpKind::Loss | VectorOpKind::Softmax => OpClass::Loss,
            VectorOpKind::Optimizer => OpClass::Optimizer,
            VectorOpKind::Elementwise => OpClass::Elementwise,
        },
    }
}

/// Compute time per op class (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClassTimes(pub [f64; CLASSES]);

impl ClassTimes {
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }
    pub fn add_scaled(&mut self, o: &ClassTimes, k: f64) {
        for i in 0..CLASSES {
            self.0[i] += o.0[i] * k;
        }
    }
    pub fn get(&self, c: OpClass) -> f64 {
        self.0[c as usize]
    }
}

/// Compute time per op class, as reported (the optimizer step is reported on its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ComputeBreakdown {
    pub gemm: f64,
    pub attention: f64,
    pub norm: f64,
    pub activation: f64,
    pub dropout: f64,
    pub elementwise: f64,
    pub rope: f64,
    pub cast: f64,
    pub embedding: f64,
    pub loss: f64,
}

impl From<&ClassTimes> for ComputeBreakdown {
    fn from(c: &ClassTimes) -> Self {
        let g = |k: OpClass| c.get(k);
        ComputeBreakdown {
            gemm: g(OpClass::Gemm),
            attention: g(OpClass::Attention),
            norm: g(OpClass::Norm),
            activation: g(OpClass::Activation),
            dropout: g(OpClass::Dropout),
            elementwise: g(OpClass::Elementwise),
            rope: g(OpClass::Rope),
            cast: g(OpClass::Cast),
            embedding: g(OpClass::Embedding),
            loss: g(OpClass::Loss),
        }
    }
}

impl ComputeBreakdown {
    pub fn fields(&self) -> [(&'static str, f64); CLASSES - 1] {
        [
            ("gemm", self.gemm),
            ("attention", self.attention),
            ("norm", self.norm),
            ("activation", self.activation),
            ("dropout", self.dropout),
            ("elementwise", self.elementwise),
            ("rope", self.rope),
            ("cast", self.cast),
            ("embedding", self.embedding),
            ("loss", self.loss),
        ]
    }
    pub fn total(&self) -> f64 {
        self.fields().iter().map(|f| f.1).sum()
    }
}

/// Times ops and accumulates them per class.
pub struct Timer<'a> {
    pub unit: &'a dyn ComputeUnit,
    pub memory: &'a MemoryHierarchy,
    /// When set, every timed op is recorded (for `Training::op_breakdown`; off in `evaluate`).
    pub trace: Option<&'a RefCell<Vec<OpLine>>>,
    /// Label of the ops being timed (set by the program builders).
    pub part: Cell<&'static str>,
    /// The software stack's multipliers on achieved kernel throughput.
    pub scales: EfficiencyScales,
}

/// One timed op of the per-device program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OpLine {
    /// `layer forward`, `layer backward`, `embedding forward`, ... `optimizer`.
    pub part: &'static str,
    /// Report class (`gemm`, `attention`, `norm`...).
    pub class: &'static str,
    pub op: ComputeOp,
    /// Times the op runs per `part` (one layer, one micro-batch).
    pub count: f64,
    pub time: OpTime,
}

/// The time of one op class in a device's program and the kernel paths that timed it
/// (`ComputeUnit::kernel_path`), in seconds per path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KernelPaths {
    /// Report class (`gemm`, `attention`, `norm`...).
    pub class: &'static str,
    pub measured: f64,
    pub interpolated: f64,
    pub scaled: f64,
    pub analytical: f64,
}

impl KernelPaths {
    fn new(class: &'static str) -> Self {
        KernelPaths {
            class,
            measured: 0.0,
            interpolated: 0.0,
            scaled: 0.0,
            analytical: 0.0,
        }
    }
    fn slot(&mut self, p: KernelPath) -> &mut f64 {
        match p {
            KernelPath::Measured => &mut self.measured,
            KernelPath::Interpolated => &mut self.interpolated,
            KernelPath::Scaled => &mut self.scaled,
            KernelPath::Analytical => &mut self.analytical,
        }
    }
    /// Seconds timed by each path, in [`KernelPath::ALL`]'s order.
    pub fn seconds(&self) -> [(KernelPath, f64); 4] {
        [
            (KernelPath::Measured, self.measured),
            (KernelPath::Interpolated, self.interpolated),
            (KernelPath::Scaled, self.scaled),
            (KernelPath::Analytical, self.analytical),
        ]
    }
    pub fn total(&self) -> f64 {
        self.measured + self.interpolated + self.scaled + self.analytical
    }
    /// The op classes of `ops` in order of first appearance, each op's time (times its count)
    /// under the path `path_of` names.
    pub fn of(ops: &[OpLine], path_of: impl Fn(&ComputeOp) -> KernelPath) -> Vec<KernelPaths> {
        let mut out: Vec<KernelPaths> = Vec::new();
        for o in ops {
            let i = match out.iter().position(|c| c.class == o.class) {
                Some(i) => i,
                None => {
                    out.push(KernelPaths::new(o.class));
                    out.len() - 1
                }
            };
            *out[i].slot(path_of(&o.op)) += o.time.time.0 * o.count;
        }
        out
    }
}

impl OpClass {
    pub const fn name(self) -> &'static str {
        match self {
            OpClass::Gemm => "gemm",
            OpClass::Attention => "attention",
            OpClass::Norm => "norm",
            OpClass::Activation => "activation",
            OpClass::Dropout => "dropout",
            OpClass::Elementwise => "elementwise",
            OpClass::Rope => "rope",
            OpClass::Cast => "cast",
            OpClass::Embedding => "embedding",
            OpClass::Loss => "loss",
            OpClass::Optimizer => "optimizer",
        }
    }
}

impl<'a> Timer<'a> {
    /// The same timer without the op trace: for ops timed again that the program does not
    /// run once more per pass (what recompute reruns).
    pub(super) fn untraced(&self) -> Timer<'a> {
        Timer {
            unit: self.unit,
            memory: self.memory,
            trace: None,
            part: Cell::new(self.part.get()),
            scales: self.scales,
        }
    }

    pub(super) fn add(
        &self,
        acc: &mut ClassTimes,
        op: ComputeOp,
        count: f64,
    ) -> Result<f64, ModelError> {
        self.add_as(acc, op, count, class_of(&op))
    }

    /// Time `op` and book it under `class`.
    pub(super) fn add_as(
        &self,
        acc: &mut ClassTimes,
        op: ComputeOp,
        count: f64,
        class: OpClass,
    ) -> Result<f64, ModelError> {
        if count <= 0.0 || op.flops().0 == 0.0 && op.min_bytes().0 == 0.0 {
            return Ok(0.0);
        }
        let ot = self.timed(&op)?;
        Ok(self.book(acc, op, ot, count, class))
    }

    /// Book a low-precision GEMM `op` that the unit has measured as part of a whole linear
    /// layer (`ComputeUnit::quantised_linear_ratio`): `ratio` times the time of `op16`, its
    /// 16-bit counterpart (whose roofline fields the trace shows), once, under GEMMs.
    pub(super) fn add_measured(
        &self,
        acc: &mut ClassTimes,
        op: ComputeOp,
        op16: ComputeOp,
        ratio: f64,
    ) -> Result<f64, ModelError> {
        let mut ot = self.timed(&op16)?;
        ot.time.0 *= ratio;
        ot.compute.0 *= ratio;
        ensure_finite(op.class(), ot.time.0)?;
        Ok(self.book(acc, op, ot, 1.0, OpClass::Gemm))
    }

    /// `op`'s time on the unit, the stack's efficiency multiplier applied.
    #[inline(always)]
    fn timed(&self, op: &ComputeOp) -> Result<OpTime, ModelError> {
        let mut ot = self.unit.op_time(op, self.memory)?;
        let scale = match op {
            ComputeOp::Gemm(_) => self.scales.gemm,
            ComputeOp::Attention(_) => self.scales.attention,
            ComputeOp::Vector(_) => self.scales.vector,
        };
        ot.time.0 /= scale;
        let t = ot.time.0;
        if !(t.is_finite() && t >= 0.0) {
            ensure_finite(op.class(), t)?;
        }
        Ok(ot)
    }

    /// Book `ot`, the time of `op`, `count` times under `class` (and in the trace).
    #[inline(always)]
    fn book(
        &self,
        acc: &mut ClassTimes,
        op: ComputeOp,
        ot: OpTime,
        count: f64,
        class: OpClass,
    ) -> f64 {
        if let Some(trace) = self.trace {
            trace.borrow_mut().push(OpLine {
                part: self.part.get(),
                class: class.name(),
                op,
                count,
                time: ot,
            });
        }
        let t = ot.time.0;
        acc.0[class as usize] += t * count;
        t * count
    }
}
