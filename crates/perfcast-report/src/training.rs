//! The training report as text: a readable table, `metric,value,unit` CSV, and plain-language
//! notes on what limits the step (the engine computes the report; this formats it).

use perfcast_engine::training::MOE_METRICS;
use perfcast_engine::training::{StageMemory, TrainingReport};
use std::fmt::Write as _;

/// Share of the step (or, for vector ops, of compute) above which [`notes`]
/// mentions a cost. Advisory thresholds chosen for readability, not from a paper; no number
/// of a report depends on them.
const NOTE_SHARE: f64 = 0.15;
/// The same for each class of exposed communication, which the notes list separately.
const NOTE_COMM_SHARE: f64 = 0.1;

/// `metric,value,unit` lines with a header.
pub fn csv(r: &TrainingReport) -> String {
    let mut s = String::from("metric,value,unit\n");
    for (n, v, u) in r.metrics() {
        if v == 0.0 && MOE_METRICS.contains(&n) {
            continue;
        }
        let _ = writeln!(s, "{n},{v},{u}");
    }
    for (name, t) in r.breakdown.axes.iter() {
        let _ = writeln!(s, "axes.{name},{},s", t.0);
    }
    for (which, st) in r.stages() {
        for f in &StageMemory::FIELDS {
            let _ = writeln!(s, "memory.{which}.{},{},{}", f.name, (f.get)(st), f.unit);
        }
    }
    let _ = writeln!(s, "fits,{},", r.memory.fits);
    let _ = writeln!(s, "bottleneck,{},", r.bottleneck.name());
    s
}

/// Plain-language notes on what limits the step (for people; not computed in `evaluate`).
pub fn notes(r: &TrainingReport) -> Vec<String> {
    let t = r.iteration_time.0;
    let b = &r.breakdown;
    let frac = |x: f64| if t > 0.0 { x / t } else { 0.0 };
    let mut n = vec![format!("largest contributor: {}", r.bottleneck.describe())];
    let m = &r.memory;
    if !m.fits {
        n.push(format!(
            "does not fit: peak {:.1} GiB > capacity {:.1} GiB (short by {:.1} GiB); \
             recompute, ZeRO, more TP/PP or a smaller micro-batch reduce it",
            m.peak.gib(),
            m.capacity.gib(),
            m.shortfall.gib()
        ));
    }
    if frac(b.bubble.0) > NOTE_SHARE {
        n.push(format!(
            "pipeline bubble is {:.0}% of the step: more micro-batches per step or \
             interleaving (vpp) shrink it",
            100.0 * frac(b.bubble.0)
        ));
    }
    for (what, x, hint) in [
        (
            "tensor-parallel",
            b.tp_comm.0,
            "overlap it (tp_comm_overlap) or lower tp",
        ),
        (
            "context-parallel",
            b.cp_comm.0,
            "lower cp or longer attention per step",
        ),
        (
            "data-parallel",
            b.dp_comm.0,
            "overlap the reduction or use more micro-batches",
        ),
        (
            "ZeRO",
            b.zero_comm.0,
            "a lower ZeRO stage or overlapped parameter gathers",
        ),
        (
            "expert-parallel",
            b.ep_comm.0,
            "keep the EP group inside the NVLink domain, a hierarchical dispatcher \
             (deepep) or ep_comm_overlap",
        ),
        (
            "pipeline hand-off",
            b.pp_comm.0,
            "fewer stages or fewer virtual stages",
        ),
    ] {
        if frac(x) > NOTE_COMM_SHARE {
            n.push(format!(
                "exposed {what} communication is {:.0}% of the step: {hint}",
                100.0 * frac(x)
            ));
        }
    }
    for (name, t) in b.axes.iter() {
        if frac(t.0) > NOTE_COMM_SHARE {
            n.push(format!(
                "exposed communication on the declared axis `{name}` is {:.0}% of the step: \
                 a lower degree of it, or an overlap its strategy offers",
                100.0 * frac(t.0)
            ));
        }
    }
    let c = &b.compute;
    let vector = c.total() - c.gemm - c.attention;
    if c.total() > 0.0 && vector / c.total() > NOTE_SHARE {
        n.push(format!(
            "memory-bound vector ops are {:.0}% of compute: fused kernels would help",
            100.0 * vector / c.total()
        ));
    }
    if frac(b.recompute.0) > NOTE_SHARE {
        n.push(format!(
            "recompute is {:.0}% of the step: selective recompute keeps most of the memory \
             saving at a fraction of the cost",
            100.0 * frac(b.recompute.0)
        ));
    }
    n
}

/// A readable table (its last part the [`notes`]).
pub fn table(r: &TrainingReport) -> String {
    let mut s = String::new();
    let t = r.iteration_time.0;
    let pct = |x: f64| if t > 0.0 { 100.0 * x / t } else { 0.0 };
    let _ = writeln!(s, "Training step");
    let _ = writeln!(s, "  iteration time        {:>12.4} s", t);
    let _ = writeln!(s, "  tokens/s              {:>12.0}", r.tokens_per_s);
    let _ = writeln!(
        s,
        "  tokens/s per GPU      {:>12.1}",
        r.tokens_per_s_per_gpu
    );
    let _ = writeln!(
        s,
        "  TFLOP/s per GPU       {:>12.1} model, {:.1} hardware (peak {:.0})",
        r.tflops_per_gpu_model, r.tflops_per_gpu_hardware, r.peak_tflops
    );
    let _ = writeln!(
        s,
        "  MFU / HFU             {:>11.1}% / {:.1}%",
        100.0 * r.mfu,
        100.0 * r.hfu
    );
    let _ = writeln!(
        s,
        "  devices, micro-batches{:>12} x {}",
        r.devices, r.micro_batches
    );
    let _ = writeln!(s, "Time breakdown (critical stage)");
    for (n, v) in r.breakdown.compute.fields() {
        if v > 0.0 {
            let _ = writeln!(s, "  compute {:<14}{:>12.4} s {:>6.1}%", n, v, pct(v));
        }
    }
    let b = &r.breakdown;
    for (n, v) in [
        ("(of which recompute)", b.recompute.0),
        ("exposed TP comm", b.tp_comm.0),
        ("exposed CP comm", b.cp_comm.0),
        ("pipeline p2p", b.pp_comm.0),
        ("exposed DP comm", b.dp_comm.0),
        ("exposed ZeRO comm", b.zero_comm.0),
        ("exposed EP comm", b.ep_comm.0),
    ] {
        if v > 0.0 {
            let _ = writeln!(s, "  {:<22}{:>12.4} s {:>6.1}%", n, v, pct(v));
        }
    }
    for (name, t) in b.axes.iter() {
        let label = format!("exposed {name} comm");
        let _ = writeln!(s, "  {:<22}{:>12.4} s {:>6.1}%", label, t.0, pct(t.0));
    }
    for (n, v) in [
        ("pipeline bubble", b.bubble.0),
        ("optimizer", b.optimizer.0),
        ("(comm hidden, overlap)", b.hidden_comm.0),
    ] {
        if v > 0.0 {
            let _ = writeln!(s, "  {:<22}{:>12.4} s {:>6.1}%", n, v, pct(v));
        }
    }
    let l = &r.layer;
    let _ = writeln!(
        s,
        "Per layer, one micro-batch: forward {:.3} ms, backward {:.3} ms (recompute {:.3} ms)",
        l.forward.millis(),
        l.backward.millis(),
        l.recompute.millis()
    );
    if let (Some(f), Some(b)) = (l.moe_block_forward, l.moe_block_backward) {
        let _ = writeln!(
            s,
            "MoE block, one micro-batch: forward {:.3} ms, backward {:.3} ms (dispatch and \
             combine included)",
            f.millis(),
            b.millis()
        );
    }
    let m = &r.memory;
    let _ = write!(s, "Memory per device (GiB) ");
    for (n, st) in r.stages() {
        let _ = write!(s, " {:>8} ({:>2})", n, st.stage);
    }
    let _ = writeln!(s);
    for f in &StageMemory::FIELDS {
        let _ = write!(s, "  {:<22}", f.label);
        for (_, st) in r.stages() {
            let _ = write!(s, " {:>13.2}", f.display_value(st));
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "  capacity {:.2} GiB: {}",
        m.capacity.gib(),
        if m.fits {
            "fits".to_string()
        } else {
            format!("DOES NOT FIT, short by {:.2} GiB", m.shortfall.gib())
        }
    );
    let _ = writeln!(s, "Notes");
    for note in notes(r) {
        let _ = writeln!(s, "  - {note}");
    }
    s
}
