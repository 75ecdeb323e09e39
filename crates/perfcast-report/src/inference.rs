//! `perfcast infer`'s report in the style of `predict`'s: labelled lines, times in ms, memory
//! in GiB, the time breakdown of both phases with shares, notes on what limits them; and a
//! `metric,value,unit` CSV at full precision in SI units (s, B, tok/s, fractions).

use perfcast_engine::inference::{InferenceReport, PhaseBreakdown};
use std::fmt::Write as _;

/// Share of a phase above which its notes name a part of the time.
const NOTE_SHARE: f64 = 0.25;

/// The parts of a phase's time, `(label, CSV key, seconds)`.
fn parts(b: &PhaseBreakdown) -> [(&'static str, &'static str, f64); 5] {
    [
        ("GEMMs", "gemm", b.gemm.0),
        ("attention", "attention", b.attention.0),
        ("other ops", "other_ops", b.other_ops.0),
        ("communication", "communication", b.communication.0),
        ("launch and step overheads", "overheads", b.overheads.0),
    ]
}

/// Plain-language notes on what limits each phase and on memory.
pub fn notes(r: &InferenceReport) -> Vec<String> {
    let mut n = Vec::new();
    for (phase, b) in [("prefill", &r.prefill), ("decode", &r.decode)] {
        let total = b.total.0;
        if total <= 0.0 {
            continue;
        }
        let mut ps = parts(b);
        ps.sort_by(|a, b| b.2.total_cmp(&a.2));
        let (label, _, t) = ps[0];
        n.push(format!(
            "{phase}: largest part {label}, {:.0}% of the phase",
            100.0 * t / total
        ));
        let over = b.overheads.0 / total;
        if phase == "decode" && over > NOTE_SHARE && !r.plan.graph_capture {
            n.push(format!(
                "decode: launch and step overheads are {:.0}% of it: CUDA-graph capture \
                 (inference.graph_capture = true) removes most host launch costs",
                100.0 * over
            ));
        }
        let comm = b.communication.0 / total;
        if comm > NOTE_SHARE {
            n.push(format!(
                "{phase}: communication is {:.0}% of it (inference.tp = {}): a smaller TP degree \
                 with more replicas trades latency for throughput",
                100.0 * comm,
                r.plan.tp
            ));
        }
    }
    let m = &r.memory;
    if m.fits && m.capacity.0 > 0.0 {
        n.push(format!(
            "memory: {:.0}% of the usable capacity; the KV cache takes {:.2} GiB ({:.1} KiB per token{})",
            100.0 * m.total.0 / m.capacity.0,
            m.kv_cache.gib(),
            m.kv_per_token.0 / 1024.0,
            kv_spans_note(&m.kv_spans)
        ));
    } else if !m.fits {
        n.push(format!(
            "does not fit: {:.2} GiB needed, {:.2} GiB usable (short by {:.2} GiB)",
            m.total.gib(),
            m.capacity.gib(),
            m.shortfall.gib()
        ));
    }
    n
}

/// The table: the plan, the serving metrics, both phases' breakdown, memory, notes.
pub fn table(r: &InferenceReport, notes: &[String]) -> String {
    let p = &r.plan;
    let mut s = format!(
        "{} on {}, {} devices\n  tp={} pp={} replicas={} batch={} input={} output={} weights={} \
         activations={} kv={} graph_capture={}\n",
        r.model,
        r.system,
        r.gpus,
        p.tp,
        p.pp,
        p.replicas,
        p.batch,
        p.input_len,
        p.output_len,
        p.weight_dtype,
        p.activation_dtype,
        p.kv_dtype,
        p.graph_capture
    );
    let _ = writeln!(s, "Serving (static batch)");
    let _ = writeln!(s, "  time to first token   {:>12.3} ms", r.ttft.millis());
    let _ = writeln!(s, "  time per output token {:>12.3} ms", r.tpot.millis());
    let _ = writeln!(s, "  end-to-end latency    {:>12.3} ms", r.latency.millis());
    let _ = writeln!(
        s,
        "  output tokens/s       {:>12.1} batch, {:.1} deployment, {:.1} per GPU",
        r.tokens_per_s_batch, r.tokens_per_s, r.tokens_per_s_per_gpu
    );
    let _ = writeln!(
        s,
        "  prefill MFU           {:>11.1}%",
        100.0 * r.prefill_mfu
    );
    let _ = writeln!(
        s,
        "  decode bandwidth use  {:>11.1}% of the peak device bandwidth",
        100.0 * r.decode_bandwidth_utilization
    );
    let _ = writeln!(
        s,
        "  kernels per decode step {:>10}",
        r.kernels_per_decode_step
    );
    let _ = writeln!(
        s,
        "Time breakdown            prefill (ms)       decode (ms)"
    );
    let (pf, dc) = (&r.prefill, &r.decode);
    let pct = |x: f64, t: f64| if t > 0.0 { 100.0 * x / t } else { 0.0 };
    for ((label, _, a), (_, _, b)) in parts(pf).into_iter().zip(parts(dc)) {
        let _ = writeln!(
            s,
            "  {label:<26}{:>10.3} {:>5.1}%  {:>10.3} {:>5.1}%",
            a * 1e3,
            pct(a, pf.total.0),
            b * 1e3,
            pct(b, dc.total.0)
        );
    }
    let _ = writeln!(
        s,
        "  {:<26}{:>10.3}         {:>10.3}        ({} decode steps)",
        "total",
        pf.total.millis(),
        dc.total.millis(),
        dc.steps
    );
    let m = &r.memory;
    let _ = writeln!(s, "Memory per device (GiB)");
    for (label, v) in [
        ("weights", m.weights),
        ("KV cache", m.kv_cache),
        ("workspace", m.workspace),
        ("reserve", m.reserve),
        ("total", m.total),
    ] {
        let _ = writeln!(s, "  {label:<22}{:>10.2}", v.gib());
    }
    let _ = writeln!(
        s,
        "  usable capacity {:.2} GiB: {}",
        m.capacity.gib(),
        if m.fits {
            "fits".to_string()
        } else {
            format!("DOES NOT FIT, short by {:.2} GiB", m.shortfall.gib())
        }
    );
    let _ = writeln!(s, "Notes");
    for n in notes {
        let _ = writeln!(s, "  - {n}");
    }
    s
}

/// `metric,value,unit` at full precision, SI units; `warnings` (suspicious hardware) as
/// `warning` rows, as `predict --format csv` has them.
pub fn csv(r: &InferenceReport, warnings: &[String]) -> String {
    let mut s = String::from("metric,value,unit\n");
    let mut row = |k: &str, v: String, u: &str| {
        let _ = writeln!(s, "{k},{v},{u}");
    };
    row("ttft", r.ttft.0.to_string(), "s");
    row("tpot", r.tpot.0.to_string(), "s");
    row("latency", r.latency.0.to_string(), "s");
    row(
        "tokens_per_s_batch",
        r.tokens_per_s_batch.to_string(),
        "tok/s",
    );
    row("tokens_per_s", r.tokens_per_s.to_string(), "tok/s");
    row(
        "tokens_per_s_per_gpu",
        r.tokens_per_s_per_gpu.to_string(),
        "tok/s",
    );
    for (phase, b) in [("prefill", &r.prefill), ("decode", &r.decode)] {
        row(&format!("{phase}.total"), b.total.0.to_string(), "s");
        for (_, key, v) in parts(b) {
            row(&format!("{phase}.{key}"), v.to_string(), "s");
        }
    }
    row("decode.steps", r.decode.steps.to_string(), "");
    row("prefill_mfu", r.prefill_mfu.to_string(), "fraction");
    row(
        "decode_bandwidth_utilization",
        r.decode_bandwidth_utilization.to_string(),
        "fraction",
    );
    row(
        "kernels_per_decode_step",
        r.kernels_per_decode_step.to_string(),
        "",
    );
    let m = &r.memory;
    for (k, v) in [
        ("weights", m.weights),
        ("kv_cache", m.kv_cache),
        ("workspace", m.workspace),
        ("reserve", m.reserve),
        ("total", m.total),
        ("capacity", m.capacity),
        ("shortfall", m.shortfall),
        ("kv_per_token", m.kv_per_token),
    ] {
        row(&format!("memory.{k}"), v.0.to_string(), "B");
    }
    row("memory.fits", m.fits.to_string(), "");
    for w in warnings {
        row("warning", perfcast_render::csv_cell(w), "");
    }
    s
}

/// What the KV cache per token leaves out when some layers keep only a window or a chunk of
/// each sequence: `""` when every layer attends fully.
fn kv_spans_note(s: &perfcast_core::workload::LayerSpans) -> String {
    let mut parts = Vec::new();
    if s.sliding > 0 {
        parts.push(format!(
            "{} of {} layers keep at most the last {} positions (sliding window)",
            s.sliding,
            s.layers(),
            s.window
        ));
    }
    if s.chunked > 0 {
        parts.push(format!(
            "{} of {} layers keep at most one {}-position chunk (chunked attention)",
            s.chunked,
            s.layers(),
            s.chunk
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" were every layer caching it; {}", parts.join(", "))
    }
}
