//! `Training::evaluate`: a plan through every step, and the report with its breakdown,
//! memory, FLOPs, utilisation and bottleneck.

use super::compose::Composed;
use super::lora::LoraShape;
use super::placement::Placement;
use super::plan::TrainingPlan;
use super::prepare::Prepared;
use super::report::{Bottleneck, Feasibility, LayerReport, TimeBreakdown, TrainingReport};
use super::time::GroupTimes;
use super::timer::{ClassTimes, ComputeBreakdown};
use super::{compose, flops, sum, Training};
use perfcast_core::parallel::{CommClass, RecomputePlan};
use perfcast_core::{Engine, FlopCount, ModelError, Seconds};

impl Training {
    /// Predict one training step under `plan`. A plan that does not fit in memory is still
    /// evaluated and reported with `memory.fits = false`.
    pub fn evaluate(&self, plan: &TrainingPlan) -> Result<TrainingReport, ModelError> {
        self.evaluate_placed(plan, &Placement::MEGATRON)
    }

    /// [`Training::evaluate`] with the mesh axes laid out on the devices in `placement`'s
    /// order (`evaluate` uses Megatron-LM's TP, CP, PP, DP).
    pub fn evaluate_placed(
        &self,
        plan: &TrainingPlan,
        placement: &Placement,
    ) -> Result<TrainingReport, ModelError> {
        let p = self.prepare(plan)?;
        let (lt, ends, moe_lt) = self.layer_times(&p)?;
        let g = self.group_times(plan, &p, lt, ends, moe_lt, placement)?;
        let composed = self.compose(plan, &p, &g)?;
        let Composed {
            crit,
            input,
            sr,
            step_ex,
            step_hidden,
            iteration,
            ..
        } = composed;
        let Prepared {
            s,
            precision,
            single,
            rp_first,
            rp_mid,
            rp_last,
            ..
        } = p;
        let m = &self.model;
        let opt = g.opt;
        let mb = input.micro_batches;

        // Breakdown.
        let mbf = mb as f64;
        let mut compute = ClassTimes::default();
        compute.add_scaled(&crit.compute, mbf);
        let comm_of = |c: CommClass| mbf * crit.comm[c.index()] + step_ex[c.index()];
        let mut breakdown = TimeBreakdown {
            compute: ComputeBreakdown::from(&compute),
            recompute: Seconds(mbf * crit.rc_compute),
            tp_comm: Seconds(comm_of(CommClass::Tensor)),
            cp_comm: Seconds(comm_of(CommClass::Context)),
            pp_comm: Seconds(comm_of(CommClass::Pipeline) + sr.p2p.0),
            dp_comm: Seconds(comm_of(CommClass::Data)),
            zero_comm: Seconds(comm_of(CommClass::Zero)),
            ep_comm: Seconds(comm_of(CommClass::Expert)),
            bubble: sr.bubble,
            optimizer: Seconds(opt),
            axes: Default::default(),
            hidden_comm: Seconds(mbf * crit.hidden + step_hidden),
        };
        self.split_declared(&p, &g, &composed, &mut breakdown);

        let memory = self.memory_report(plan, &p, &input);
        let fits = memory.fits;

        // FLOPs and utilisation.
        // Layers recomputed over the whole pipeline.
        let (full, attn) = if single {
            (rp_first.full_layers, rp_first.attention_layers)
        } else {
            recomputed_layers(plan.pp, [&rp_first, &rp_mid, &rp_last])
        };
        let lf = m.layers as f64;
        let fl = flops::step_flops(
            m,
            plan.global_batch as f64,
            full / lf,
            attn / lf,
            plan.recompute_modules,
            p.ls.lora
                .map(|l| super::lora::layer_adapter_params(m, &LoraShape { split: 1, ..l })),
        );
        let peak_rate = self
            .system
            .compute
            .peak(Engine::Matrix, precision)
            .ok_or_else(|| ModelError::UnsupportedDType {
                device: self.system.compute.kind().to_string(),
                engine: "matrix".to_string(),
                dtype: precision.name().to_string(),
            })?;
        let n = self.system.devices as f64;
        let tokens = plan.global_batch as f64 * s as f64;
        let per_gpu = |f: f64| f / (iteration * n);
        let mfu = per_gpu(fl.model) / peak_rate.0;
        let hfu = per_gpu(fl.hardware) / peak_rate.0;

        let report = TrainingReport {
            iteration_time: Seconds(iteration),
            devices: self.system.devices,
            micro_batches: mb,
            tokens_per_iteration: tokens,
            tokens_per_s: tokens / iteration,
            tokens_per_s_per_gpu: tokens / iteration / n,
            model_flops: FlopCount(fl.model),
            hardware_flops: FlopCount(fl.hardware),
            tflops_per_gpu_model: per_gpu(fl.model) / 1e12,
            tflops_per_gpu_hardware: per_gpu(fl.hardware) / 1e12,
            peak_tflops: peak_rate.tflops(),
            mfu,
            hfu,
            breakdown,
            layer: layer_report(&g, &crit),
            memory,
            feasibility: if fits {
                Feasibility::Fits
            } else {
                Feasibility::ExceedsMemory
            },
            bottleneck: bottleneck(&breakdown),
        };
        report.check_finite()?;
        Ok(report)
    }
}

/// Layers recomputed fully and for their attention over a pipeline of `pp > 1` stages
/// (the first, `pp - 2` middle ones and the last).
fn recomputed_layers(pp: u32, [first, mid, last]: [&RecomputePlan; 3]) -> (f64, f64) {
    let mids = (pp - 2) as f64;
    (
        first.full_layers + mids * mid.full_layers + last.full_layers,
        first.attention_layers + mids * mid.attention_layers + last.attention_layers,
    )
}

/// What binds the step: the largest of its compute and communication parts (the first
/// listed wins a tie).
fn bottleneck(breakdown: &TimeBreakdown) -> Bottleneck {
    let c = &breakdown.compute;
    let matrix = c.gemm + c.attention;
    let vector = c.total() - matrix;
    let candidates = [
        (Bottleneck::MatrixCompute, matrix),
        (Bottleneck::VectorOps, vector),
        (Bottleneck::TensorComm, breakdown.tp_comm.0),
        (Bottleneck::ContextComm, breakdown.cp_comm.0),
        (Bottleneck::PipelineComm, breakdown.pp_comm.0),
        (Bottleneck::PipelineBubble, breakdown.bubble.0),
        (Bottleneck::DataComm, breakdown.dp_comm.0),
        (Bottleneck::ZeroComm, breakdown.zero_comm.0),
        (Bottleneck::ExpertComm, breakdown.ep_comm.0),
        (Bottleneck::DeclaredAxisComm, breakdown.axes.max().0),
        (Bottleneck::Optimizer, breakdown.optimizer.0),
    ];
    let mut bottleneck = candidates[0];
    for cand in candidates {
        if cand.1 > bottleneck.1 {
            bottleneck = cand;
        }
    }
    bottleneck.0
}

/// One layer, one micro-batch: the dense layer's, or an MoE model's MoE layer (whose block
/// alone adds its exposed dispatch and combine).
fn layer_report(g: &GroupTimes, crit: &compose::StageTimes) -> LayerReport {
    let rc_avg = (crit.rc_compute + crit.rc_comm) / crit.layers.max(1.0);
    let (lt, fwd_ex, bwd_ex, block) = match &g.moe {
        Some(k) => {
            let ep = CommClass::Expert.index();
            (
                k.lt,
                k.fwd_ex,
                k.bwd_ex,
                Some((
                    Seconds(k.lt.block_fwd + k.fwd_ex[ep]),
                    Seconds(k.lt.block_bwd + k.bwd_ex[ep]),
                )),
            )
        }
        None => (g.lt, g.fwd_ex, g.bwd_ex, None),
    };
    LayerReport {
        forward: Seconds(lt.fwd.total + sum(&fwd_ex)),
        backward: Seconds(lt.bwd.total + sum(&bwd_ex) + rc_avg),
        forward_compute: Seconds(lt.fwd.total),
        backward_compute: Seconds(lt.bwd.total),
        recompute: Seconds(rc_avg),
        moe_block_forward: block.map(|b| b.0),
        moe_block_backward: block.map(|b| b.1),
    }
}
