//! Timing a prepared plan: the layer and end programs on the device, every collective on the
//! network levels its group spans, what the overlap windows expose, the optimizer step.

use super::ops::PassTimes;
use super::placement::Placement;
use super::plan::TrainingPlan;
use super::prepare::Prepared;
use super::timer::{KernelPaths, OpLine, Timer};
use super::{ops, sum, ClassComm, Training};
use crate::network::Mesh;
use perfcast_core::op::CollectiveKind;
use perfcast_core::parallel::{CommClass, CommList, CommOp, LayerDims, Overlap, Phase};
use perfcast_core::ModelError;

/// Everything of a plan's timing that neither the recompute policy nor the schedule changes:
/// the layer and end programs, the collectives and their exposed parts, the optimizer step.
#[derive(Clone, Copy)]
pub(super) struct GroupTimes {
    pub(super) lt: ops::LayerTimes,
    pub(super) ends: ops::EndTimes,
    pub(super) comms: CommList,
    pub(super) ctime: [f64; CommList::CAPACITY],
    pub(super) fwd_ex: ClassComm,
    pub(super) bwd_ex: ClassComm,
    pub(super) rc_ex: ClassComm,
    /// Collective time hidden per layer in the forward, the backward and a recomputed
    /// forward.
    pub(super) fwd_hidden: f64,
    pub(super) bwd_hidden: f64,
    pub(super) rc_hidden: f64,
    /// Exposed collective time per layer that `selective` recompute reruns (torchtitan's
    /// per-op SAC reruns the forward's tensor-parallel collectives except the saved
    /// reduce-scatters; Megatron's attention-core recompute none).
    pub(super) selective_comm: f64,
    pub(super) emb_f_ex: ClassComm,
    pub(super) emb_b_ex: ClassComm,
    pub(super) head_f_ex: ClassComm,
    pub(super) head_b_ex: ClassComm,
    pub(super) p2p: f64,
    pub(super) opt: f64,
    /// The MoE layers' program and exposures (`None` for a dense model).
    pub(super) moe: Option<KindTimes>,
}

/// One kind of layer's program and the exposure of its collectives.
#[derive(Clone, Copy)]
pub(super) struct KindTimes {
    pub(super) lt: ops::LayerTimes,
    pub(super) fwd_ex: ClassComm,
    pub(super) bwd_ex: ClassComm,
    pub(super) rc_ex: ClassComm,
    pub(super) fwd_hidden: f64,
    pub(super) bwd_hidden: f64,
    pub(super) rc_hidden: f64,
}

/// What the collectives of one phase cost.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pooled {
    /// Exposed time per class: what no window hides, plus the compute the hidden part slows
    /// (`EngineParams::overlap_compute_share`).
    pub(super) exposed: ClassComm,
    /// Collective time hidden behind compute (what the step would add if nothing
    /// overlapped).
    pub(super) hidden: f64,
}

/// The collectives of `phases`, pooled per overlap window: each window hides up to
/// `efficiency x window` of its collectives' time; the hidden part slows the window's
/// compute by `share x hidden`.
pub(super) fn pool(
    comms: &CommList,
    ctime: &[f64; CommList::CAPACITY],
    phases: &[Phase],
    recompute_only: bool,
    windows: [f64; 5],
    share: f64,
) -> Pooled {
    pool_of(comms, ctime, phases, recompute_only, windows, share, all)
}

/// Every collective (the `keep` of the run's own ledgers).
pub(super) fn all(_: &CommOp) -> bool {
    true
}

/// [`pool`]'s exposed time of the collectives `keep` selects: all of an exposed one's time,
/// and of one behind a window its share (by time) of what the window exposes, so that the
/// exposed times of a partition of the collectives add up to [`pool`]'s. `hidden` stays the
/// whole window's.
pub(super) fn pool_of(
    comms: &CommList,
    ctime: &[f64; CommList::CAPACITY],
    phases: &[Phase],
    recompute_only: bool,
    windows: [f64; 5],
    share: f64,
    keep: impl Fn(&CommOp) -> bool,
) -> Pooled {
    let mut exposed = [0.0; 6];
    let mut total_w = [0.0; 5];
    let mut cap_w = [0.0f64; 5];
    let mut by = [[0.0; 6]; 5];
    for (i, c) in comms.iter().enumerate() {
        if !phases.contains(&c.phase) || (recompute_only && !c.with_recompute) {
            continue;
        }
        let k = c.class.index();
        let kept = keep(c);
        match c.overlap {
            Overlap::Exposed => {
                if kept {
                    exposed[k] += ctime[i];
                }
            }
            Overlap::Behind { window, efficiency } => {
                let w = window.index();
                total_w[w] += ctime[i];
                cap_w[w] = cap_w[w].max(efficiency.clamp(0.0, 1.0) * windows[w]);
                if kept {
                    by[w][k] += ctime[i];
                }
            }
        }
    }
    let mut hidden = 0.0;
    for w in 0..5 {
        if total_w[w] > 0.0 {
            let ex = (total_w[w] - cap_w[w]).max(0.0);
            let hid = total_w[w] - ex;
            hidden += hid;
            for k in 0..6 {
                exposed[k] += (ex + share * hid) * by[w][k] / total_w[w];
            }
        }
    }
    Pooled { exposed, hidden }
}

/// The timed dense layer, the ends, and the MoE layer of a plan.
pub(super) type LayerPrograms = (ops::LayerTimes, ops::EndTimes, Option<ops::LayerTimes>);

/// A plan's timed programs and collectives with the exposed parts of the collectives `keep`
/// selects ([`pool_of`]): with [`all`] the run's; with a part of them, what the composition
/// turns into that part's ledger.
#[allow(clippy::too_many_arguments)]
pub(super) fn exposures(
    lt: ops::LayerTimes,
    ends: ops::EndTimes,
    moe_lt: Option<ops::LayerTimes>,
    comms: CommList,
    ctime: [f64; CommList::CAPACITY],
    opt: f64,
    op_sac: bool,
    share: f64,
    keep: impl Fn(&CommOp) -> bool + Copy,
) -> GroupTimes {
    let layer_windows = |p: &PassTimes| [p.gemm, p.attention, p.total, 0.0, 0.0];
    let none = [0.0; 5];
    let phase =
        |ph: Phase, rc: bool, w: [f64; 5]| pool_of(&comms, &ctime, &[ph], rc, w, share, keep);
    let (fwd, bwd) = (
        phase(Phase::Forward, false, layer_windows(&lt.fwd)),
        phase(Phase::Backward, false, layer_windows(&lt.bwd)),
    );
    let rc = phase(Phase::Forward, true, layer_windows(&lt.fwd));
    let moe = moe_lt.map(|ml| {
        let f = [Phase::Forward, Phase::ExpertForward];
        let b = [Phase::Backward, Phase::ExpertBackward];
        let kind = |ph: &[Phase], rc: bool, w| pool_of(&comms, &ctime, ph, rc, w, share, keep);
        let (mf, mb, mr) = (
            kind(&f, false, layer_windows(&ml.fwd)),
            kind(&b, false, layer_windows(&ml.bwd)),
            kind(&f, true, layer_windows(&ml.fwd)),
        );
        KindTimes {
            lt: ml,
            fwd_ex: mf.exposed,
            bwd_ex: mb.exposed,
            rc_ex: mr.exposed,
            fwd_hidden: mf.hidden,
            bwd_hidden: mb.hidden,
            rc_hidden: mr.hidden,
        }
    });
    let selective_comm = if op_sac {
        let (mut rerun, mut total) = (0.0, 0.0);
        for (c, t) in comms.iter().zip(&ctime) {
            if c.class == CommClass::Tensor && c.phase == Phase::Forward && c.with_recompute {
                total += t;
                if c.kind != perfcast_core::CollectiveKind::ReduceScatter {
                    rerun += t;
                }
            }
        }
        if total > 0.0 {
            rc.exposed[CommClass::Tensor.index()] * rerun / total
        } else {
            0.0
        }
    } else {
        0.0
    };
    GroupTimes {
        selective_comm,
        fwd_ex: fwd.exposed,
        bwd_ex: bwd.exposed,
        rc_ex: rc.exposed,
        fwd_hidden: fwd.hidden,
        bwd_hidden: bwd.hidden,
        rc_hidden: rc.hidden,
        emb_f_ex: phase(Phase::EmbeddingForward, false, none).exposed,
        emb_b_ex: phase(Phase::EmbeddingBackward, false, none).exposed,
        head_f_ex: phase(Phase::HeadForward, false, none).exposed,
        head_b_ex: phase(Phase::HeadBackward, false, none).exposed,
        p2p: sum(&phase(Phase::Boundary, false, layer_windows(&lt.fwd)).exposed),
        lt,
        ends,
        comms,
        ctime,
        opt,
        moe,
    }
}

/// Parameters whose optimizer state one device updates: its dense share and its experts'.
/// With frozen base weights, the adapters of the stage with the most layers.
pub(super) fn optimizer_params(p: &Prepared) -> f64 {
    let pr = &p.params;
    let n = pr.max_layers();
    let (dense, experts) = pr.trainable(p.ls.frozen(), n, pr.device_params, pr.expert_params);
    let dense = dense / p.ssplit.optimizer.max(1) as f64;
    if experts > 0.0 {
        dense + experts / p.ssplit.expert_optimizer.max(1) as f64
    } else {
        dense
    }
}

impl Training {
    /// The collectives of a plan whose base weights are frozen (`task = "lora"`,
    /// [`super::lora`]): the strategies' collectives of the frozen model (no gradients:
    /// `grad_bytes` 0) without its gradient reductions (`CommClass::Data`) and post-step
    /// parameter gathers (step-phase all-gathers), and those two kinds of the adapters alone
    /// (their parameters per layer and on the busiest stage, no embedding table, no experts).
    pub(super) fn frozen_comms(&self, p: &Prepared, out: &mut CommList) -> Result<(), ModelError> {
        let reduces = |op: &CommOp| {
            op.class == CommClass::Data
                || (op.phase == Phase::Step && op.kind == CollectiveKind::AllGather)
        };
        let mut frozen = CommList::default();
        let dims = LayerDims {
            grad_bytes: 0.0,
            ..p.dims
        };
        self.comps.comms(&p.shape, &dims, &mut frozen)?;
        for op in frozen.iter().filter(|op| !reduces(op) && op.bytes.0 > 0.0) {
            out.push(*op)?;
        }
        let pr = &p.params;
        let adapters = LayerDims {
            layer_params: pr.adapter_layer,
            device_params: pr.max_layers() as f64 * pr.adapter_layer,
            embedding_params: 0.0,
            moe: None,
            ..p.dims
        };
        let mut trained = CommList::default();
        self.comps.comms(&p.shape, &adapters, &mut trained)?;
        for op in trained.iter().filter(|op| reduces(op) && op.bytes.0 > 0.0) {
            out.push(*op)?;
        }
        Ok(())
    }

    /// Every compute op of one device's program under `plan`, timed: one layer forward and
    /// backward (one micro-batch), the embedding and the LM head with the loss (one
    /// micro-batch), and the optimizer step. For reports that show what bounds each op; not
    /// for the hot path (it allocates).
    pub fn op_breakdown(&self, plan: &TrainingPlan) -> Result<Vec<OpLine>, ModelError> {
        let p = self.prepare(plan)?;
        let trace = std::cell::RefCell::new(Vec::with_capacity(64));
        let timer = Timer {
            unit: self.system.compute.as_ref(),
            memory: &self.system.memory,
            trace: Some(&trace),
            part: std::cell::Cell::new(""),
            scales: self.params.efficiency,
        };
        // A mixture-of-experts model's layers are shown as its MoE layer.
        ops::layer(&timer, p.moe.as_ref().map_or(&p.ls, |m| &m.ls))?;
        ops::ends(&timer, &p.ls)?;
        ops::optimizer(&timer, optimizer_params(&p), p.state.grads)?;
        Ok(trace.into_inner())
    }

    /// [`Training::op_breakdown`]'s time by op class and by the kernel path that timed each
    /// op (`ComputeUnit::kernel_path`): how much of the program measured kernels time. For
    /// reports; not for the hot path.
    pub fn kernel_paths(&self, plan: &TrainingPlan) -> Result<Vec<KernelPaths>, ModelError> {
        let ops = self.op_breakdown(plan)?;
        let unit = self.system.compute.as_ref();
        Ok(KernelPaths::of(&ops, |op| unit.kernel_path(op)))
    }

    /// Time the layer program, the ends and every collective of a prepared plan (what its
    /// recompute and schedule variants share).
    pub(super) fn group_times(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        lt: ops::LayerTimes,
        ends: ops::EndTimes,
        moe_lt: Option<ops::LayerTimes>,
        placement: &Placement,
    ) -> Result<GroupTimes, ModelError> {
        let timer = Timer {
            unit: self.system.compute.as_ref(),
            memory: &self.system.memory,
            trace: None,
            part: std::cell::Cell::new(""),
            scales: self.params.efficiency,
        };
        let mut comms = CommList::default();
        if p.ls.frozen() {
            self.frozen_comms(p, &mut comms)?;
        } else {
            self.comps.comms(&p.shape, &p.dims, &mut comms)?;
        }
        let mut mesh: Mesh = placement.mesh(plan.tp, plan.cp, plan.pp, plan.dp);
        mesh.ep = p.shape.ep;
        mesh.etp = p.shape.etp;
        for (k, (d, &degree)) in self.comps.declared.iter().zip(&p.shape.axes).enumerate() {
            let batch = d.decl.divides.batch;
            mesh.declare(k, placement.declared(d.decl.place, degree, batch));
        }
        let mut ctime = [0.0f64; CommList::CAPACITY];
        self.network
            .time_comms(&mesh, &comms, |g| placement.map(g), &mut ctime)?;
        let opt = ops::optimizer(&timer, optimizer_params(p), p.state.grads)?;
        let share = self.params.overlap_compute_share;
        Ok(exposures(
            lt,
            ends,
            moe_lt,
            comms,
            ctime,
            opt,
            p.ls.op_sac,
            share,
            all,
        ))
    }
    /// The layer and end programs of a prepared plan, timed (and the MoE layer's).
    pub(super) fn layer_times(&self, p: &Prepared) -> Result<LayerPrograms, ModelError> {
        let timer = Timer {
            unit: self.system.compute.as_ref(),
            memory: &self.system.memory,
            trace: None,
            part: std::cell::Cell::new(""),
            scales: self.params.efficiency,
        };
        let moe = match &p.moe {
            Some(m) => Some(ops::layer(&timer, &m.ls)?),
            None => None,
        };
        Ok((ops::layer(&timer, &p.ls)?, ops::ends(&timer, &p.ls)?, moe))
    }
}
