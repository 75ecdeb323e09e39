//! Composing a timed plan: each stage's forward and backward per micro-batch (recompute
//! included), the critical stage, the schedule over the micro-batches, and the step-level
//! collectives and optimizer on top.

use super::moe::StageMix;
use super::ops::PassTimes;
use super::plan::TrainingPlan;
use super::prepare::Prepared;
use super::time::{pool, GroupTimes, KindTimes};
use super::timer::ClassTimes;
use super::{sum, ClassComm, Training};
use perfcast_core::parallel::{CommClass, Phase, RecomputePlan, ScheduleInput};
use perfcast_core::{ModelError, Seconds};

/// One stage's per-micro-batch times.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StageTimes {
    pub(super) layers: f64,
    pub(super) rc_compute: f64,
    pub(super) rc_comm: f64,
    pub(super) fwd: f64,
    pub(super) bwd: f64,
    pub(super) compute: ClassTimes,
    pub(super) comm: ClassComm,
    /// Collective time hidden behind the stage's compute.
    pub(super) hidden: f64,
}

/// The composed step of a plan.
#[derive(Clone, Copy)]
pub(super) struct Composed {
    pub(super) crit: StageTimes,
    /// Which stage is the critical one.
    pub(super) which: Stage,
    pub(super) input: ScheduleInput,
    pub(super) sr: perfcast_core::parallel::ScheduleResult,
    pub(super) step_ex: ClassComm,
    /// Step-level collective time hidden behind the first forward and the last backward.
    pub(super) step_hidden: f64,
    pub(super) iteration: f64,
}

/// A pipeline stage: the first (with the embedding), a middle one, the last (with the LM
/// head); one stage holds both ends when `pp = 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    First,
    Mid,
    Last,
}

impl Training {
    /// One stage's per-micro-batch times under the exposures of `g`.
    pub(super) fn stage(&self, p: &Prepared, g: &GroupTimes, which: Stage) -> StageTimes {
        let single = p.single;
        let (rp, emb, head) = match which {
            Stage::First => (&p.rp_first, true, single),
            Stage::Mid => (&p.rp_mid, false, false),
            Stage::Last => (&p.rp_last, single, true),
        };
        match &p.moe {
            None => {
                let n = match which {
                    Stage::First => p.params.n_first,
                    Stage::Mid => p.params.n_mid,
                    Stage::Last => p.params.n_last,
                };
                dense_stage(g, n, rp, emb, head)
            }
            Some(mp) => {
                let mix = match which {
                    Stage::First => &mp.first,
                    Stage::Mid => &mp.mid,
                    Stage::Last => &mp.last,
                };
                let heads = if head { 1.0 + mp.mtp_heads } else { 0.0 };
                stage_mixed(g, mix, rp, emb, heads)
            }
        }
    }

    /// Compose the stages of a prepared plan (its recompute decided) over the schedule.
    pub(super) fn compose(
        &self,
        plan: &TrainingPlan,
        p: &Prepared,
        g: &GroupTimes,
    ) -> Result<Composed, ModelError> {
        let first = self.stage(p, g, Stage::First);
        let last = self.stage(p, g, Stage::Last);
        let (mut crit, mut which) = if first.fwd + first.bwd >= last.fwd + last.bwd {
            (first, Stage::First)
        } else {
            (last, Stage::Last)
        };
        if plan.pp > 2 {
            let mid = self.stage(p, g, Stage::Mid);
            if mid.fwd + mid.bwd > crit.fwd + crit.bwd {
                (crit, which) = (mid, Stage::Mid);
            }
        }

        let mb = p.shape.micro_batches();
        let input = ScheduleInput {
            stages: plan.pp,
            virtual_stages: plan.vpp,
            micro_batches: mb,
            forward: Seconds(crit.fwd),
            backward: Seconds(crit.bwd),
            p2p: Seconds(g.p2p),
        };
        let sr = p.sched.step(&input)?;
        for (what, v) in [
            ("schedule time", sr.time.0),
            ("schedule bubble", sr.bubble.0),
            ("schedule p2p", sr.p2p.0),
        ] {
            perfcast_core::units::ensure_finite(what, v)?;
        }
        let step = pool(
            &g.comms,
            &g.ctime,
            &[Phase::Step],
            false,
            step_windows(&crit),
            self.params.overlap_compute_share,
        );
        let iteration = sr.time.0 + sum(&step.exposed) + g.opt;
        Ok(Composed {
            crit,
            which,
            input,
            sr,
            step_ex: step.exposed,
            step_hidden: step.hidden,
            iteration,
        })
    }
}

/// The windows the step's collectives hide behind: the critical stage's last backward and
/// first forward ([`perfcast_core::parallel::Window`]'s last two).
pub(super) fn step_windows(crit: &StageTimes) -> [f64; 5] {
    [0.0, 0.0, 0.0, crit.bwd, crit.fwd]
}

/// One dense stage's per-micro-batch times: `n` layers under recompute plan `rp`, with the
/// input embedding and the LM head where the stage holds them.
fn dense_stage(
    g: &GroupTimes,
    n: u64,
    rp: &RecomputePlan,
    with_emb: bool,
    with_head: bool,
) -> StageTimes {
    let (lt, ends) = (&g.lt, &g.ends);
    let (fwd_ex, bwd_ex, rc_ex) = (g.fwd_ex, g.bwd_ex, g.rc_ex);
    let nf = n as f64;
    let mut st = StageTimes {
        layers: nf,
        rc_compute: rp.full_layers * lt.fwd.total + rp.attention_layers * lt.selective.total(),
        rc_comm: rp.full_layers * sum(&rc_ex) + rp.attention_layers * g.selective_comm,
        hidden: nf * (g.fwd_hidden + g.bwd_hidden) + rp.full_layers * g.rc_hidden,
        ..StageTimes::default()
    };
    st.compute.add_scaled(&lt.fwd.classes, nf + rp.full_layers);
    st.compute.add_scaled(&lt.bwd.classes, nf);
    st.compute.add_scaled(&lt.selective, rp.attention_layers);
    for k in 0..6 {
        st.comm[k] = nf * (fwd_ex[k] + bwd_ex[k]) + rp.full_layers * rc_ex[k];
    }
    st.comm[CommClass::Tensor.index()] += rp.attention_layers * g.selective_comm;
    st.fwd = nf * (lt.fwd.total + sum(&fwd_ex));
    st.bwd = nf * (lt.bwd.total + sum(&bwd_ex)) + st.rc_compute + st.rc_comm;
    let mut add = |p: &PassTimes, ex: &ClassComm, fwd: bool| {
        let x = p.total + sum(ex);
        if fwd {
            st.fwd += x;
        } else {
            st.bwd += x;
        }
        st.compute.add_scaled(&p.classes, 1.0);
        for (c, e) in st.comm.iter_mut().zip(ex) {
            *c += e;
        }
    };
    if with_emb {
        add(&ends.embedding_fwd, &g.emb_f_ex, true);
        add(&ends.embedding_bwd, &g.emb_b_ex, false);
    }
    if with_head {
        add(&ends.head_fwd, &g.head_f_ex, true);
        add(&ends.head_bwd, &g.head_b_ex, false);
    }
    st
}

/// One stage's per-micro-batch times with dense and MoE layers (`mix`) and `heads` LM heads
/// with their losses (1, plus one per multi-token-prediction module, on the last stage; 0
/// elsewhere). Recomputed layers take the stage's mean layer.
fn stage_mixed(
    g: &GroupTimes,
    mix: &StageMix,
    rp: &RecomputePlan,
    with_emb: bool,
    heads: f64,
) -> StageTimes {
    let d = KindTimes {
        lt: g.lt,
        fwd_ex: g.fwd_ex,
        bwd_ex: g.bwd_ex,
        rc_ex: g.rc_ex,
        fwd_hidden: g.fwd_hidden,
        bwd_hidden: g.bwd_hidden,
        rc_hidden: g.rc_hidden,
    };
    let k = g.moe.unwrap_or(d);
    let (nd, nm) = (mix.dense, mix.moe);
    let n = (nd + nm).max(1e-300);
    let (wd, wm) = (nd / n, nm / n);
    let full = rp.full_layers;
    let mut st = StageTimes {
        layers: nd + nm,
        rc_compute: full * (wd * d.lt.fwd.total + wm * k.lt.fwd.total)
            + rp.attention_layers * (wd * d.lt.selective.total() + wm * k.lt.selective.total()),
        rc_comm: full * (wd * sum(&d.rc_ex) + wm * sum(&k.rc_ex))
            + rp.attention_layers * g.selective_comm,
        hidden: nd * (d.fwd_hidden + d.bwd_hidden)
            + nm * (k.fwd_hidden + k.bwd_hidden)
            + full * (wd * d.rc_hidden + wm * k.rc_hidden),
        ..StageTimes::default()
    };
    st.compute.add_scaled(&d.lt.fwd.classes, nd + full * wd);
    st.compute.add_scaled(&k.lt.fwd.classes, nm + full * wm);
    st.compute.add_scaled(&d.lt.bwd.classes, nd);
    st.compute.add_scaled(&k.lt.bwd.classes, nm);
    st.compute
        .add_scaled(&d.lt.selective, rp.attention_layers * wd);
    st.compute
        .add_scaled(&k.lt.selective, rp.attention_layers * wm);
    for c in 0..6 {
        st.comm[c] = nd * (d.fwd_ex[c] + d.bwd_ex[c])
            + nm * (k.fwd_ex[c] + k.bwd_ex[c])
            + full * (wd * d.rc_ex[c] + wm * k.rc_ex[c]);
    }
    st.comm[CommClass::Tensor.index()] += rp.attention_layers * g.selective_comm;
    st.fwd = nd * (d.lt.fwd.total + sum(&d.fwd_ex)) + nm * (k.lt.fwd.total + sum(&k.fwd_ex));
    st.bwd = nd * (d.lt.bwd.total + sum(&d.bwd_ex))
        + nm * (k.lt.bwd.total + sum(&k.bwd_ex))
        + st.rc_compute
        + st.rc_comm;
    let mut add = |p: &PassTimes, ex: &ClassComm, fwd: bool, times: f64| {
        let x = times * (p.total + sum(ex));
        if fwd {
            st.fwd += x;
        } else {
            st.bwd += x;
        }
        st.compute.add_scaled(&p.classes, times);
        for (c, e) in st.comm.iter_mut().zip(ex) {
            *c += times * e;
        }
    };
    let ends = &g.ends;
    if with_emb {
        add(&ends.embedding_fwd, &g.emb_f_ex, true, 1.0);
        add(&ends.embedding_bwd, &g.emb_b_ex, false, 1.0);
    }
    if heads > 0.0 {
        add(&ends.head_fwd, &g.head_f_ex, true, heads);
        add(&ends.head_bwd, &g.head_b_ex, false, heads);
    }
    st
}
