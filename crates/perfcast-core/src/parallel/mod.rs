//! Execution traits: parallel strategies, recompute policies, pipeline schedules.
//!
//! All three are coarse-grained: the engine calls each a handful of times per plan evaluation,
//! with plain data in and plain data out, so a dynamically loaded plugin costs nothing
//! measurable. None of them allocates on the hot path: strategies push collectives into a
//! fixed-capacity [`CommList`].
//!
//! * A [`ParallelStrategy`] owns one axis of the device mesh. Given the plan and the layer's
//!   dimensions it (a) checks the plan, (b) says how it divides one layer's work on a device
//!   ([`LayerSplit`]), (c) adds the collectives it needs per layer and per step, tagged with the
//!   mesh axes of their group and with how they overlap, and (d) says how it shards the model
//!   state ([`StateSplit`]). The engine maps each group onto the network levels and times it.
//! * A [`RecomputePolicy`] decides, from one layer's activation bytes by class, which layers
//!   keep what and which forward work reruns in the backward pass.
//! * A [`PipelineSchedule`] composes one stage's forward/backward times over the micro-batches
//!   into the pipeline time and says how many micro-batches each stage holds at its peak.

use crate::error::{Key, ModelError};
use crate::op::CollectiveKind;
use crate::units::{Bytes, Seconds};
use crate::workload::ModelSpec;
use serde::{Deserialize, Serialize};

mod axes;
mod expert;
pub use axes::{AxisDecl, AxisPlace, AxisSet, Divides, MAX_AXIS_NAME_LEN, MAX_DECLARED_AXES};
pub use expert::{Dispatch, Dispatcher, MoeDims};

/// The mesh axis a strategy shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Tensor parallelism (Megatron TP: weights, heads and MLP width split).
    Tensor,
    /// Sequence parallelism (Korthikanti 2022: the ops outside the TP region, over the TP
    /// group).
    Sequence,
    /// Context parallelism (the sequence split for attention).
    Context,
    /// Expert parallelism (mixture-of-experts: the routed experts split over the ranks,
    /// carved out of TP x CP x DP for the MoE layers, Megatron-Core's folding).
    Expert,
    /// Pipeline parallelism (layers split into stages).
    Pipeline,
    /// Data parallelism (replicas), and ZeRO/FSDP sharding over them.
    Data,
}

impl Axis {
    /// Lowercase name (`tensor`, `sequence`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Axis::Tensor => "tensor",
            Axis::Sequence => "sequence",
            Axis::Context => "context",
            Axis::Expert => "expert",
            Axis::Pipeline => "pipeline",
            Axis::Data => "data",
        }
    }
}

/// How context parallelism exchanges keys and values (Megatron-Core `--cp-comm-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CpComm {
    /// Ring attention: each rank passes its K/V block on in `cp - 1` steps overlapped with the
    /// attention of the block it holds (Liu et al. 2023; Megatron-Core `p2p`, the default).
    #[default]
    P2p,
    /// All-gather K and V before attention (again before its backward) and reduce-scatter
    /// their gradients after it, in the critical path (Llama 3: Dubey et al. 2024 §3.3.2,
    /// "the all-gather communication latency is exposed in the critical path"; Megatron-Core
    /// `all_gather`).
    AllGather,
}

impl CpComm {
    /// The name configurations use (`p2p`, `all_gather`).
    pub const fn name(self) -> &'static str {
        match self {
            CpComm::P2p => "p2p",
            CpComm::AllGather => "all_gather",
        }
    }
}

/// The degrees and switches of an execution plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanShape {
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree (stages).
    pub pp: u32,
    /// Data-parallel degree (replicas).
    pub dp: u32,
    /// Context-parallel degree.
    pub cp: u32,
    /// Expert-parallel degree: MoE layers' routed experts split over `ep` ranks (1 for dense
    /// models).
    pub ep: u32,
    /// Expert tensor-parallel degree: each expert's matrices split over `etp` ranks
    /// (Megatron-Core `--expert-tensor-parallel-size`). `ep x etp` divides `tp x cp x dp`.
    pub etp: u32,
    /// How MoE tokens are dispatched and combined.
    pub moe_dispatcher: Dispatcher,
    /// Overlap the dispatch and combine of one micro-batch with another's compute (Megatron-
    /// Core's 1F1B all-to-all overlap `--overlap-moe-expert-parallel-comm`; DeepSeek's
    /// DualPipe).
    pub ep_comm_overlap: bool,
    /// Virtual pipeline stages (model chunks) per device.
    pub vpp: u32,
    /// Sequence parallelism (the engine sets it only with `tp > 1`).
    pub sp: bool,
    /// ZeRO stage 0..=3 over the `dp x cp` ranks (0: no sharding).
    pub zero_stage: u8,
    /// Sequences per micro-batch.
    pub micro_batch: u32,
    /// Sequences per optimizer step.
    pub global_batch: u32,
    /// Overlap tensor-parallel collectives with GEMMs (Megatron-Core `--tp-comm-overlap`).
    pub tp_comm_overlap: bool,
    /// Overlap the gradient reduction with the backward pass (`--overlap-grad-reduce`).
    pub overlap_grad_reduce: bool,
    /// Overlap the distributed optimizer's parameter all-gather (or ZeRO-3 gathers) with the
    /// forward pass (`--overlap-param-gather`).
    pub overlap_param_gather: bool,
    /// Gradients accumulated and reduced in fp32 (Megatron `main_grad`).
    pub fp32_grad_accum: bool,
    /// Context-parallel K/V exchange.
    pub cp_comm: CpComm,
    /// Degrees of the declared axes (`plan.axes.NAME`; 1 where absent): as a strategy sees
    /// the plan, `axes[k]` is its own `k`-th declared axis ([`AxisSet::declared`]`(k)`), and 1
    /// beyond its declarations.
    pub axes: [u32; MAX_DECLARED_AXES],
    /// Product of the degrees of the declared axes that split the batch ([`Divides::batch`]);
    /// 1 without.
    pub batch_split: u32,
}

/// One device, one sequence per step, every switch off: each degree 1, micro-batch and global
/// batch 1, ZeRO 0, no overlap, bf16 gradient reduction, the default dispatcher and K/V
/// exchange (what a test or a plugin spells out by `..PlanShape::default()`).
impl Default for PlanShape {
    fn default() -> Self {
        PlanShape {
            tp: 1,
            pp: 1,
            dp: 1,
            cp: 1,
            ep: 1,
            etp: 1,
            moe_dispatcher: Dispatcher::default(),
            ep_comm_overlap: false,
            vpp: 1,
            sp: false,
            zero_stage: 0,
            micro_batch: 1,
            global_batch: 1,
            tp_comm_overlap: false,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            fp32_grad_accum: false,
            cp_comm: CpComm::default(),
            axes: [1; MAX_DECLARED_AXES],
            batch_split: 1,
        }
    }
}

impl PlanShape {
    /// Micro-batches per optimizer step on one pipeline (gradient-accumulation steps):
    /// `global_batch / (micro_batch · dp · batch_split)`, rounded down (zero degrees count
    /// as 1).
    pub fn micro_batches(&self) -> u32 {
        let per = self.micro_batch.max(1) * self.dp.max(1) * self.batch_split.max(1);
        self.global_batch / per
    }
}

/// Layers per device on the first, a middle and the last pipeline stage.
///
/// Even splits give `layers / pp` everywhere. Otherwise every stage gets
/// `vpp·ceil(layers / (pp·vpp))` layers and the surplus is taken from the first and the last
/// stage, which also carry the embedding and the LM head (what Llama 3 did: 126 layers on 16
/// stages, one layer fewer on the first and the last; Dubey et al. 2024 §3.3.2). With
/// interleaving, up to two chunks may hold no layer: Llama 3's first chunk on the first stage
/// holds only the embedding and its last chunk on the last stage only the LM head and the loss
/// (ibid.), so 126 layers run as 16 x 8 chunks of one layer. `None` when a stage is left
/// empty, or, interleaved, when an end stage would give up more than one chunk's worth of
/// layers (so at most those two chunks are empty).
pub fn stage_layers(layers: u64, pp: u32, vpp: u32) -> Option<(u64, u64, u64)> {
    let pp = pp as u64;
    let chunks = pp * vpp as u64;
    if pp == 0 || chunks == 0 || layers == 0 {
        return None;
    }
    if pp == 1 {
        return (layers >= chunks).then_some((layers, layers, layers));
    }
    if layers + 2 < chunks {
        return None;
    }
    let per_chunk = layers.div_ceil(chunks);
    let mid = vpp as u64 * per_chunk;
    let surplus = mid * pp - layers;
    let from_last = surplus.div_ceil(2);
    let from_first = surplus - from_last;
    // No empty stage, and with interleaving at most one chunk's worth from each end stage.
    if from_last >= mid || (vpp > 1 && from_last > per_chunk) {
        return None;
    }
    Some((mid - from_first, mid, mid - from_last))
}

/// Interleaving degrees (`vpp`) a run of `layers` on `pp` stages could use.
///
/// Even splits: Megatron-LM sets `--num-layers-per-virtual-pipeline-stage N` with `N` dividing
/// the layers per stage, so `vpp` divides `layers / pp`. Uneven splits: every `vpp` whose
/// [`stage_layers`] accepts (at most one chunk's worth of layers taken from the first and one
/// from the last stage, the balancing Llama 3 used, Dubey et al. 2024 §3.3.2); for 126 layers
/// on 16 stages that is 1, 2, 4 or 8 chunks per stage.
pub fn interleaving_degrees(layers: u64, pp: u32) -> Vec<u32> {
    if pp <= 1 || layers == 0 {
        return vec![1];
    }
    let p = pp as u64;
    if layers.is_multiple_of(p) {
        let per_stage = layers / p;
        return (1..=per_stage)
            .filter(|v| per_stage.is_multiple_of(*v))
            .filter_map(|v| u32::try_from(v).ok())
            .collect();
    }
    let max = ((layers + 2) / p).min(u32::MAX as u64) as u32;
    (1..=max)
        .filter(|&v| stage_layers(layers, pp, v).is_some())
        .collect()
}

/// Dimensions of one transformer layer as seen by the strategies: the sizes are the whole
/// model's (unsharded); the parameter counts are per device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayerDims {
    /// Sequences per micro-batch.
    pub micro_batch: u64,
    /// Sequence length (before context parallelism splits it).
    pub seq_len: u64,
    /// Hidden size `h`.
    pub hidden: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Elements per head.
    pub head_dim: u64,
    /// MLP inner width.
    pub ffn_hidden: u64,
    /// Bytes of one activation element (2 for bf16/fp16 training, and for fp8: activations
    /// stay bf16).
    pub act_bytes: f64,
    /// Bytes of an activation element as the forward all-gathers it for a GEMM (`act_bytes`,
    /// or 1 for per-tensor-scaled fp8 recipes, whose inputs are cast before the gather).
    pub gather_bytes: f64,
    /// Parameters of one layer on one device (all matrices, biases and norms; after TP).
    pub layer_params: f64,
    /// Parameters on one device of the stage with the most (sharded by TP and PP, not by DP).
    pub device_params: f64,
    /// Bytes of one gradient element as reduced (2, or 4 with fp32 accumulation; 0 when the
    /// engine asks for the collectives of frozen weights, whose gradients are not computed).
    pub grad_bytes: f64,
    /// Bytes of one weight element as stored for compute (2 for bf16/fp16/fp8 recipes).
    pub weight_bytes: f64,
    /// Parameters of the word-embedding table on one device (`vocab x hidden / tp`).
    pub embedding_params: f64,
    /// Input and output embeddings share one table.
    pub tied_embeddings: bool,
    /// The MoE layers' dimensions (`None` for a dense model).
    pub moe: Option<MoeDims>,
}

/// When a collective runs (and, with [`CommOp::count`], how often).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Once per layer per micro-batch, in the forward pass.
    Forward,
    /// Once per layer per micro-batch, in the backward pass.
    Backward,
    /// Once per optimizer step, after the pipeline drains (gradient reduction, param gathers).
    Step,
    /// Once per micro-batch per pipeline-stage boundary, each direction (hand-offs).
    Boundary,
    /// Once per micro-batch on the first stage: the input embedding's forward.
    EmbeddingForward,
    /// Once per micro-batch on the first stage: the input embedding's backward.
    EmbeddingBackward,
    /// Once per micro-batch on the last stage: LM head and loss forward.
    HeadForward,
    /// Once per micro-batch on the last stage: LM head and loss backward.
    HeadBackward,
    /// Once per MoE layer per micro-batch, in the forward pass (token dispatch and combine).
    ExpertForward,
    /// Once per MoE layer per micro-batch, in the backward pass.
    ExpertBackward,
}

/// The compute a collective may hide behind. The engine sizes the windows per [`Phase`]:
/// `Forward`, `Backward` and `Boundary` collectives see the layer's windows (`LayerGemms`,
/// `Attention`, `LayerCompute`; the forward's for `Boundary`; an MoE layer's for
/// `ExpertForward` and `ExpertBackward`), `Step` collectives the
/// critical stage's `LastBackward` and `FirstForward`, the embedding and head phases none.
/// A window its phase lacks is empty: a collective behind it is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// The GEMMs of the same layer and pass.
    LayerGemms,
    /// The attention core of the same layer and pass (context-parallel ring exchange).
    Attention,
    /// The whole compute of the same layer and pass (prefetching the next layer's weights).
    LayerCompute,
    /// The backward pass of the last micro-batch on this stage (bucketed gradient reduction).
    LastBackward,
    /// The forward pass of the first micro-batch of the next step (parameter all-gather).
    FirstForward,
}

impl Window {
    /// Every window, in [`Window::index`] order.
    pub const ALL: [Window; 5] = [
        Window::LayerGemms,
        Window::Attention,
        Window::LayerCompute,
        Window::LastBackward,
        Window::FirstForward,
    ];
    /// Position in per-window arrays (0..5).
    pub const fn index(self) -> usize {
        match self {
            Window::LayerGemms => 0,
            Window::Attention => 1,
            Window::LayerCompute => 2,
            Window::LastBackward => 3,
            Window::FirstForward => 4,
        }
    }
}

/// How a collective overlaps with compute.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "overlap")]
pub enum Overlap {
    /// On the critical path.
    Exposed,
    /// Hidden behind `window`: exposed time is `max(0, comm - efficiency · window)`,
    /// collectives sharing a window are pooled (their times summed, the largest efficiency
    /// taken) and the exposed part shared out in proportion to their times.
    Behind {
        /// The compute it hides behind.
        window: Window,
        /// Fraction of the window that can hide communication (clamped to [0, 1]).
        efficiency: f64,
    },
}

/// Which ledger a collective's exposed time goes to in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommClass {
    /// Tensor- (and sequence-) parallel collectives (`tp`).
    Tensor,
    /// Context-parallel K/V exchange (`cp`).
    Context,
    /// Pipeline hand-offs and the embedding group's all-reduce (`pp`).
    Pipeline,
    /// Gradient reductions (`dp`; ZeRO-3's reduce-scatters included).
    Data,
    /// ZeRO/FSDP parameter all-gathers (`zero`).
    Zero,
    /// MoE token dispatch and combine (`ep`).
    Expert,
}

impl CommClass {
    /// Every class, in [`CommClass::index`] order.
    pub const ALL: [CommClass; 6] = [
        CommClass::Tensor,
        CommClass::Context,
        CommClass::Pipeline,
        CommClass::Data,
        CommClass::Zero,
        CommClass::Expert,
    ];
    /// Position in per-class arrays (0..6).
    pub const fn index(self) -> usize {
        match self {
            CommClass::Tensor => 0,
            CommClass::Context => 1,
            CommClass::Pipeline => 2,
            CommClass::Data => 3,
            CommClass::Zero => 4,
            CommClass::Expert => 5,
        }
    }
    /// Short name, as reports spell it (`tp`, `cp`, `pp`, `dp`, `zero`, `ep`).
    pub const fn name(self) -> &'static str {
        match self {
            CommClass::Tensor => "tp",
            CommClass::Context => "cp",
            CommClass::Pipeline => "pp",
            CommClass::Data => "dp",
            CommClass::Zero => "zero",
            CommClass::Expert => "ep",
        }
    }
}

/// One collective a strategy adds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CommOp {
    /// The report ledger its exposed time goes to.
    pub class: CommClass,
    /// When it runs.
    pub phase: Phase,
    /// The pattern.
    pub kind: CollectiveKind,
    /// Full buffer size `S` (see [`crate::op::Collective`]).
    pub bytes: Bytes,
    /// Mesh axes of the group; the engine derives ranks and placement on the network.
    pub group: AxisSet,
    /// Times it is issued each time its `phase` comes round (per layer for Forward/Backward,
    /// per step for Step, ...); the engine multiplies its time by this.
    pub count: f64,
    /// How it overlaps with compute.
    pub overlap: Overlap,
    /// Issued again when the layer's forward is recomputed (full recompute; only
    /// `Forward` and `ExpertForward` collectives are re-issued).
    pub with_recompute: bool,
    /// A token dispatch or combine (an all-to-all whose rows go to the ranks of each token's
    /// experts): what the engine needs to place it on a group spanning several scale-up
    /// domains. `None` for every other collective.
    pub dispatch: Option<Dispatch>,
}

/// A fixed-capacity list of collectives (no allocation on the hot path).
#[derive(Debug, Clone, Copy)]
pub struct CommList {
    items: [Option<CommOp>; CommList::CAPACITY],
    len: usize,
}

impl Default for CommList {
    fn default() -> Self {
        CommList {
            items: [None; CommList::CAPACITY],
            len: 0,
        }
    }
}

impl CommList {
    /// Most collectives the strategies of one plan may add together.
    pub const CAPACITY: usize = 32;
    /// Add a collective; an error when the list is full.
    pub fn push(&mut self, op: CommOp) -> Result<(), ModelError> {
        if self.len == Self::CAPACITY {
            return Err(ModelError::invalid(
                Key::other("parallel strategies"),
                self.len,
                format!(
                    "at most {} collectives per plan may be added",
                    Self::CAPACITY
                ),
            ));
        }
        self.items[self.len] = Some(op);
        self.len += 1;
        Ok(())
    }
    /// Collectives in the list.
    pub fn len(&self) -> usize {
        self.len
    }
    /// No collective yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Remove every collective.
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// The collectives, in the order they were pushed.
    pub fn iter(&self) -> impl Iterator<Item = &CommOp> {
        self.items[..self.len].iter().flatten()
    }
    /// The collectives from position `start` on, to edit (the engine renumbers the declared
    /// axes of what a strategy pushed).
    pub fn ops_mut_from(&mut self, start: usize) -> impl Iterator<Item = &mut CommOp> {
        let end = self.len;
        self.items[start.min(end)..end].iter_mut().flatten()
    }
}

/// How the strategies divide one layer's work on one device. Each strategy multiplies in its
/// own factor; the engine starts from all ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayerSplit {
    /// Divides the tokens every op of the layer sees (context parallel splits the sequence).
    pub tokens: u32,
    /// Divides the weight matrices, the attention heads and the MLP width (tensor parallel).
    pub weights: u32,
    /// Divides the work of the ops outside the tensor-parallel region: norms, dropout,
    /// residual adds (sequence parallel), and the activations they keep.
    pub pointwise: u32,
    /// Divides the routed experts of an MoE layer (expert parallelism).
    pub experts: u32,
    /// Divides each expert's matrices (expert tensor parallelism).
    pub expert_weights: u32,
}

impl Default for LayerSplit {
    fn default() -> Self {
        LayerSplit {
            tokens: 1,
            weights: 1,
            pointwise: 1,
            experts: 1,
            expert_weights: 1,
        }
    }
}

/// How the model state on one device is sharded beyond TP and PP (divisors).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StateSplit {
    /// Divides the weights (ZeRO-3 / FSDP).
    pub weights: u32,
    /// Divides the gradients (ZeRO-2 and up).
    pub grads: u32,
    /// Divides the optimizer state (ZeRO-1 and up): also the optimizer step's work.
    pub optimizer: u32,
    /// Divide the routed experts' weights, gradients and optimizer state beyond EP and ETP
    /// (ZeRO over the expert data-parallel group; the dense divisors above do not apply to
    /// them).
    pub expert_weights: u32,
    /// See `expert_weights`.
    pub expert_grads: u32,
    /// See `expert_weights`.
    pub expert_optimizer: u32,
}

impl Default for StateSplit {
    fn default() -> Self {
        StateSplit {
            weights: 1,
            grads: 1,
            optimizer: 1,
            expert_weights: 1,
            expert_grads: 1,
            expert_optimizer: 1,
        }
    }
}

/// A parallel strategy: one axis of the device mesh. Called a few times per evaluation; the
/// engine applies every strategy in use in order (mesh order by default).
pub trait ParallelStrategy: Send + Sync {
    /// Registered kind (e.g. `tensor`), for messages.
    fn kind(&self) -> &str;
    /// The mesh axis this strategy shards (descriptive: the engine places each collective by
    /// its [`CommOp::group`], not by this).
    fn axis(&self) -> Axis;
    /// Axes of its own the strategy adds to the mesh (see [`AxisDecl`]): asked once, when the
    /// strategies are resolved. Default: none.
    fn axes(&self) -> Vec<AxisDecl> {
        Vec::new()
    }
    /// Check the plan's degree on this axis against the model (e.g. heads divisible by TP).
    /// Called for every plan before anything is worked out.
    fn validate(&self, model: &ModelSpec, plan: &PlanShape) -> Result<(), ModelError>;
    /// Multiply this axis's factors into `split`. Default: no split. An error (a loaded
    /// strategy's bad answer) refuses the plan.
    fn split_layer(&self, _plan: &PlanShape, _split: &mut LayerSplit) -> Result<(), ModelError> {
        Ok(())
    }
    /// Add the collectives this axis needs (per layer, per micro-batch, per step: see
    /// [`Phase`]). Default: none.
    fn comms(
        &self,
        _plan: &PlanShape,
        _dims: &LayerDims,
        _out: &mut CommList,
    ) -> Result<(), ModelError> {
        Ok(())
    }
    /// Multiply this axis's state-sharding divisors into `split`. Default: no sharding.
    fn split_state(&self, _plan: &PlanShape, _split: &mut StateSplit) -> Result<(), ModelError> {
        Ok(())
    }
}

/// Activation bytes one layer keeps on one device for one micro-batch with nothing
/// recomputed, by class (Korthikanti 2022 §4.1, generalised by the engine).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayerActivations {
    /// The layer's input (what full recompute keeps).
    pub input: Bytes,
    /// The attention core's quadratic part: scores, softmax output, attention-dropout mask
    /// and output (what selective recompute drops; Korthikanti 2022 `5as²b/t`).
    pub attention_core: Bytes,
    /// Everything else the backward pass needs.
    pub other: Bytes,
}

impl LayerActivations {
    /// Every class: what a layer keeps without recompute.
    pub fn total(&self) -> Bytes {
        self.input + self.attention_core + self.other
    }
}

/// What a recompute policy decides for one pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecomputePlan {
    /// Layers of the stage that keep only their input and rerun their whole forward (in
    /// 0..=layers).
    pub full_layers: f64,
    /// Layers that drop the attention core and rerun it in the backward pass (in
    /// 0..=layers).
    pub attention_layers: f64,
    /// Activation bytes the stage keeps per micro-batch (all its layers); the engine
    /// multiplies it by the micro-batches in flight.
    pub kept: Bytes,
    /// Extra bytes live while a recomputed layer runs its backward (what it rebuilt: one
    /// layer's activations, or its attention core); added once to the stage's memory.
    pub working: Bytes,
}

/// An activation-recompute policy.
pub trait RecomputePolicy: Send + Sync {
    /// Registered kind (e.g. `selective`), for messages.
    fn kind(&self) -> &str;
    /// Decide for a stage of `layers` layers, each keeping `act` without recompute.
    /// `recompute_layers` is the plan's optional per-stage layer count (capped at `layers`
    /// by the engine). Called for the first, a middle and the last stage of each plan; the
    /// engine refuses a plan whose counts leave 0..=layers or whose bytes are not finite and
    /// non-negative.
    fn plan(
        &self,
        act: &LayerActivations,
        layers: u32,
        recompute_layers: Option<u32>,
    ) -> Result<RecomputePlan, ModelError>;
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
    /// Forward time of one micro-batch through one stage (all its chunks; the slowest
    /// stage's, exposed communication included).
    pub forward: Seconds,
    /// Backward time (including recompute) of one micro-batch through one stage (the
    /// slowest stage's).
    pub backward: Seconds,
    /// Exposed point-to-point time of one hand-off between stages (one direction).
    pub p2p: Seconds,
}

/// What a pipeline schedule returns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScheduleResult {
    /// Time from the first forward to the last backward of the step (bubble and
    /// point-to-point time included).
    pub time: Seconds,
    /// Idle time of a stage in that span (the bubble); reported, part of `time`.
    pub bubble: Seconds,
    /// Point-to-point time on the critical path; reported with the pipeline communication,
    /// part of `time`.
    pub p2p: Seconds,
    /// Micro-batches whose activations the first stage holds at its peak, counted in units of
    /// one micro-batch through the whole stage (interleaving can make this fractional).
    /// Informational: the engine sizes memory with [`PipelineSchedule::in_flight`] and
    /// [`PipelineSchedule::peak_layers_held`].
    pub peak_in_flight: f64,
}

/// A pipeline schedule: GPipe, 1F1B, interleaved 1F1B (Huang et al. 2019; Narayanan et al.
/// 2021 §2.2)...
pub trait PipelineSchedule: Send + Sync {
    /// Registered kind (e.g. `1f1b`), for messages.
    fn kind(&self) -> &str;
    /// Check the plan (e.g. a non-interleaved schedule refuses virtual stages > 1). Called
    /// for every plan that uses the schedule, before `step`. Default: any plan.
    fn validate(&self, _plan: &PlanShape) -> Result<(), ModelError> {
        Ok(())
    }
    /// Compose the stage times over the micro-batches into the pipeline's time. The engine
    /// refuses times that are not finite and non-negative; the search's lower bound assumes
    /// `time` does not decrease when `forward + backward` grows.
    fn step(&self, input: &ScheduleInput) -> Result<ScheduleResult, ModelError>;
    /// Micro-batches (whole-stage units) stage `stage` (0-based) holds at its peak. Must
    /// depend on the counts of `input` only: memory is also sized with zero times.
    fn in_flight(&self, input: &ScheduleInput, stage: u32) -> f64;
    /// Peak of layer-micro-batches whose activations stage `stage` holds, its chunk `c`
    /// (0-based, of `virtual_stages`) having `chunk_layers(c)` layers: the activations it keeps
    /// are this many times one layer's. Chunks differ on the first and the last stage of an
    /// uneven split. Like `in_flight`, it must not depend on the times. Default: `in_flight`
    /// times the stage's layers (chunks advance together).
    fn peak_layers_held(
        &self,
        input: &ScheduleInput,
        stage: u32,
        chunk_layers: &dyn Fn(u32) -> f64,
    ) -> f64 {
        let layers: f64 = (0..input.virtual_stages.max(1)).map(chunk_layers).sum();
        self.in_flight(input, stage) * layers
    }
    /// Copies of its stage's model state (weights, gradients, optimizer) a device holds:
    /// 1, or 2 for DualPipe (a stage of each direction). Default 1.
    fn model_copies(&self) -> f64 {
        1.0
    }
    /// The schedule runs one micro-batch's forward beside another's backward, so that an
    /// MoE layer's dispatch and combine hide behind the other micro-batch's compute
    /// (DualPipe; Megatron-Core's combined 1F1B): the engine then times the expert
    /// all-to-all as `plan.ep_comm_overlap` does, given two micro-batches or more. Default
    /// false.
    fn overlaps_expert_comm(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_layer_table() {
        // (layers, pp, vpp, first, middle, last)
        let table = [
            (96, 16, 1, Some((6, 6, 6))),
            (126, 16, 1, Some((7, 8, 7))),
            (125, 16, 1, Some((7, 8, 6))),
            (96, 8, 2, Some((12, 12, 12))),
            (24, 1, 1, Some((24, 24, 24))),
            (17, 16, 1, None),
            (15, 16, 1, None),
            (10, 2, 2, Some((5, 6, 5))),
            // Llama 3: an embedding-only first chunk and a head-only last chunk.
            (126, 16, 8, Some((7, 8, 7))),
            (127, 16, 8, Some((8, 8, 7))),
            (125, 16, 8, None),
            (126, 16, 4, Some((7, 8, 7))),
            (126, 16, 3, None),
            (2, 1, 3, None),
            (0, 4, 1, None),
            // More than one chunk's worth from an end stage.
            (20, 4, 4, None),
            (96, 8, 5, None),
            (100, 16, 1, Some((1, 7, 1))),
        ];
        for (l, p, v, want) in table {
            assert_eq!(stage_layers(l, p, v), want, "L={l} p={p} v={v}");
        }
    }

    #[test]
    fn interleaving_degree_table() {
        // (layers, pp, degrees)
        let table: &[(u64, u32, &[u32])] = &[
            (96, 8, &[1, 2, 3, 4, 6, 12]),
            (112, 16, &[1, 7]),
            (128, 64, &[1, 2]),
            (126, 16, &[1, 2, 4, 8]),
            (125, 16, &[1, 2, 4]),
            (80, 1, &[1]),
            (10, 16, &[]),
        ];
        for (l, p, want) in table {
            assert_eq!(interleaving_degrees(*l, *p), *want, "{l} layers, pp {p}");
        }
    }

    #[test]
    fn comm_list_capacity_and_axis_sets() {
        let op = CommOp {
            class: CommClass::Tensor,
            phase: Phase::Forward,
            kind: CollectiveKind::AllReduce,
            bytes: Bytes(1.0),
            group: AxisSet::TENSOR,
            count: 2.0,
            overlap: Overlap::Exposed,
            with_recompute: true,
            dispatch: None,
        };
        let mut l = CommList::default();
        for _ in 0..CommList::CAPACITY {
            l.push(op).unwrap();
        }
        assert!(l.push(op).is_err());
        assert_eq!(l.iter().count(), CommList::CAPACITY);
        l.clear();
        assert!(l.is_empty());
        assert!(AxisSet::DATA_CONTEXT.contains(AxisSet::DATA));
        assert!(!AxisSet::DATA.contains(AxisSet::CONTEXT));
        let plan = PlanShape {
            tp: 8,
            pp: 16,
            dp: 8,
            global_batch: 1536,
            ..PlanShape::default()
        };
        assert_eq!(plan.micro_batches(), 192);
    }
}
