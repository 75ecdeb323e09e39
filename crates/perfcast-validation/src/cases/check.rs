//! The semantic rules of the schema that serde cannot express, one function per section of a
//! case; each message names the key. The order of the messages is the order of the sections
//! (identity, model, system, parallel and the kind's own table, measured, reference).

use super::schema::{
    AttentionType, Batch, Case, CaseModel, CaseSystem, Fp8Recipe, Kind, Metric, Mode, Precision,
    Recompute,
};

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Every rule of the schema that serde cannot express; each message names the key.
pub(super) fn check_case(c: &Case) -> Vec<String> {
    let mut e = Vec::new();
    identity(c, &mut e);
    model(c, &mut e);
    moe_facts(c, &mut e);
    system(&c.system, &mut e);
    match c.kind {
        Kind::Training => training(c, &mut e),
        Kind::Inference => inference(c, &mut e),
    }
    measured(c, &mut e);
    reference(c, &mut e);
    e
}

/// `id`, `group`, `source`.
fn identity(c: &Case, e: &mut Vec<String>) {
    if !valid_id(&c.id) {
        e.push(format!(
            "id = \"{}\": expected [a-z0-9][a-z0-9_-]* (lowercase, digits, '_' or '-')",
            c.id
        ));
    }
    for (k, v) in [("group", &c.group), ("source", &c.source)] {
        if v.trim().is_empty() {
            e.push(format!("{k} is empty"));
        }
    }
    if c.software.as_deref().is_some_and(|s| s.trim().is_empty()) {
        e.push("software is empty".into());
    }
}

/// `[case.model]`.
fn model(c: &Case, e: &mut Vec<String>) {
    let m = &c.model;
    for (k, v) in [
        ("layers", m.layers),
        ("hidden", m.hidden),
        ("heads", m.heads),
        ("kv_heads", m.kv_heads),
        ("ffn_hidden", m.ffn_hidden),
        ("vocab", m.vocab),
    ] {
        if v == 0 {
            e.push(format!("model.{k} = 0: expected a positive integer"));
        }
    }
    if m.head_dim == Some(0) {
        e.push("model.head_dim = 0: expected a positive integer".into());
    }
    if m.seq_len == Some(0) {
        e.push("model.seq_len = 0: expected a positive integer".into());
    }
    if c.kind == Kind::Training && m.seq_len.is_none() {
        e.push("model.seq_len missing (required for a training case)".into());
    }
    if m.kv_heads > 0 && !m.heads.is_multiple_of(m.kv_heads) {
        e.push(format!(
            "model.heads ({}) not divisible by model.kv_heads ({})",
            m.heads, m.kv_heads
        ));
    }
    match m.attention {
        Some(AttentionType::Mha) if m.kv_heads != m.heads => {
            e.push("model.attention = \"mha\" but kv_heads != heads".into())
        }
        Some(AttentionType::Mqa) if m.kv_heads != 1 => {
            e.push("model.attention = \"mqa\" but kv_heads != 1".into())
        }
        Some(AttentionType::Gqa) if !(1 < m.kv_heads && m.kv_heads < m.heads) => {
            e.push("model.attention = \"gqa\" but kv_heads is not in (1, heads)".into())
        }
        _ => {}
    }
    if let Some(p) = m.params_b {
        if !(p.is_finite() && p > 0.0) {
            e.push(format!("model.params_b = {p}: expected a positive number"));
        }
    }
    moe(m, e);
}

/// `[case.model.moe]`.
/// `parallel.ep_comm_overlap` and `parallel.moe_routing` describe MoE layers (SCHEMA.md);
/// the overlaps and the schedule are training facts.
fn moe_facts(c: &Case, e: &mut Vec<String>) {
    let p = &c.parallel;
    if c.model.moe.is_none() {
        if p.ep_comm_overlap == Some(true) {
            e.push("parallel.ep_comm_overlap = true for a dense model (MoE models only)".into());
        }
        if p.moe_routing.is_some() {
            e.push("parallel.moe_routing for a dense model (MoE models only)".into());
        }
    }
    if c.kind == Kind::Inference && p.ep_comm_overlap.is_some() {
        e.push(
            "unknown key `parallel.ep_comm_overlap` for an inference case (training only)".into(),
        );
    }
}

fn moe(m: &CaseModel, e: &mut Vec<String>) {
    let Some(moe) = &m.moe else {
        return;
    };
    if moe.experts == 0 || moe.top_k == 0 || moe.expert_ffn_hidden == 0 {
        e.push("model.moe: experts, top_k and expert_ffn_hidden must be positive".into());
    }
    if moe.top_k > moe.experts {
        e.push("model.moe.top_k > model.moe.experts".into());
    }
    if moe.dense_layers >= m.layers {
        e.push("model.moe.dense_layers >= model.layers".into());
    }
    if moe.moe_layer_freq == 0 {
        e.push("model.moe.moe_layer_freq = 0: expected a positive integer".into());
    }
}

/// `[case.system]`.
fn system(s: &CaseSystem, e: &mut Vec<String>) {
    if s.num_gpus == 0 {
        e.push("system.num_gpus = 0: expected a positive integer".into());
    }
    if s.gpus_per_node == 0 {
        e.push("system.gpus_per_node = 0: expected a positive integer".into());
    }
    if let Some(g) = s.scaleout_gbps_per_gpu {
        if !(g.is_finite() && g > 0.0) {
            e.push(format!(
                "system.scaleout_gbps_per_gpu = {g}: expected a positive number"
            ));
        }
    }
}

/// A training case: its tables, `[case.parallel]` (every degree required), their
/// consistency, and `[case.training]`.
fn training(c: &Case, e: &mut Vec<String>) {
    let p = &c.parallel;
    if c.inference.is_some() {
        e.push("[case.inference] present in a training case".into());
    }
    if c.training.is_none() {
        e.push("[case.training] missing (required for kind = \"training\")".into());
    }
    let req: [(&str, Option<u64>); 9] = [
        ("tp", p.tp),
        ("pp", p.pp),
        ("dp", p.dp),
        ("cp", p.cp),
        ("ep", p.ep),
        ("vpp", p.vpp),
        ("zero_stage", p.zero_stage),
        ("micro_batch", p.micro_batch),
        ("global_batch", p.global_batch),
    ];
    for (k, v) in req {
        match v {
            None => e.push(format!(
                "parallel.{k} missing (required for a training case)"
            )),
            Some(0) if k != "zero_stage" => {
                e.push(format!("parallel.{k} = 0: expected a positive integer"))
            }
            _ => {}
        }
    }
    if p.sp.is_none() {
        e.push("parallel.sp missing (required for a training case)".into());
    }
    if let Some(z) = p.zero_stage {
        if z > 3 {
            e.push(format!("parallel.zero_stage = {z}: expected 0, 1, 2 or 3"));
        }
    }
    training_degrees(c, e);
    training_table(c, e);
}

/// The consistency of a training case's degrees (when all are present and positive): with
/// the GPU count, EP, the global batch, virtual stages, a dense model. A case whose source is
/// known to be inconsistent skips the first and the third.
fn training_degrees(c: &Case, e: &mut Vec<String>) {
    let inconsistent = c.source_inconsistency.is_some();
    let Some(t) = c
        .training_parallel()
        .filter(|t| t.tp > 0 && t.pp > 0 && t.dp > 0 && t.cp > 0 && t.ep > 0 && t.micro_batch > 0)
    else {
        return;
    };
    let prod = t.tp * t.pp * t.dp * t.cp;
    if prod != c.system.num_gpus && !inconsistent {
        e.push(format!(
            "parallel: tp*pp*dp*cp = {prod} != system.num_gpus = {}",
            c.system.num_gpus
        ));
    }
    let etp = c.parallel.etp.unwrap_or(1).max(1);
    if (t.tp * t.dp * t.cp) % (t.ep * etp) != 0 {
        e.push(format!(
            "parallel: ep*etp = {} does not divide tp*dp*cp = {} (the expert-parallel group is carved out of TP*DP*CP)",
            t.ep * etp,
            t.tp * t.dp * t.cp
        ));
    }
    if let Some(fs) = c.parallel.fsdp_shard {
        if fs == 0 || (t.tp * t.dp * t.cp) % fs != 0 {
            e.push(format!(
                "parallel.fsdp_shard = {fs} does not divide tp*dp*cp = {}",
                t.tp * t.dp * t.cp
            ));
        }
        if t.zero_stage < 2 {
            e.push(
                "parallel.fsdp_shard given but zero_stage < 2 (FSDP/HSDP shards at least gradients)"
                    .into(),
            );
        }
    }
    if t.global_batch % (t.dp * t.micro_batch) != 0 && !inconsistent {
        e.push(format!(
            "parallel.global_batch = {} is not a multiple of dp*micro_batch = {}",
            t.global_batch,
            t.dp * t.micro_batch
        ));
    }
    if t.vpp > 1 && t.pp == 1 {
        e.push("parallel.vpp > 1 requires parallel.pp > 1".into());
    }
    if t.ep > 1 && c.model.moe.is_none() {
        e.push("parallel.ep > 1 for a dense model".into());
    }
}

/// `[case.training]`: the precision, its FP8 recipe, partial recompute.
fn training_table(c: &Case, e: &mut Vec<String>) {
    let Some(t) = &c.training else {
        return;
    };
    match (t.fp8_recipe, t.precision) {
        (Some(Fp8Recipe::Nvfp4), p) if p != Precision::Fp4 => {
            e.push("training.fp8_recipe = \"nvfp4\" requires training.precision = \"fp4\"".into())
        }
        (Some(r), p) if r != Fp8Recipe::Nvfp4 && p != Precision::Fp8 => {
            e.push("training.fp8_recipe given but training.precision is not \"fp8\"".into())
        }
        _ => {}
    }
    if !matches!(
        t.precision,
        Precision::Fp16 | Precision::Bf16 | Precision::Fp8 | Precision::Fp4
    ) {
        e.push(format!(
            "training.precision = {:?}: expected one of fp16, bf16, fp8, fp4",
            t.precision
        ));
    }
    if let Some(n) = t.recompute_layers {
        if n == 0 {
            e.push("training.recompute_layers = 0: expected a positive integer".into());
        }
        if t.recompute != Recompute::Full {
            e.push("training.recompute_layers requires recompute = \"full\"".into());
        }
    }
}

/// An inference case: its tables, `[case.parallel]` (TP, PP, DP required, EP optional, no
/// training degree), the GPU count, and `[case.inference]`.
fn inference(c: &Case, e: &mut Vec<String>) {
    let p = &c.parallel;
    if c.training.is_some() {
        e.push("[case.training] present in an inference case".into());
    }
    if c.inference.is_none() {
        e.push("[case.inference] missing (required for kind = \"inference\")".into());
    }
    if c.reference.is_some() {
        e.push("[case.reference] is only defined for training cases".into());
    }
    for (k, v) in [
        ("cp", p.cp),
        ("vpp", p.vpp),
        ("zero_stage", p.zero_stage),
        ("micro_batch", p.micro_batch),
        ("global_batch", p.global_batch),
    ] {
        if v.is_some() {
            e.push(format!(
                "unknown key `parallel.{k}` for an inference case (allowed: tp, pp, dp, ep)"
            ));
        }
    }
    if p.sp.is_some() {
        e.push("unknown key `parallel.sp` for an inference case (allowed: tp, pp, dp, ep)".into());
    }
    if p.fsdp_shard.is_some() {
        e.push("unknown key `parallel.fsdp_shard` for an inference case".into());
    }
    if let Some(tp) = p.tp {
        let (ep, etp) = (p.ep.unwrap_or(1), p.etp.unwrap_or(1));
        if ep > 0 && etp > 0 && tp % (ep * etp) != 0 {
            e.push(format!(
                "parallel: ep*etp = {} does not divide tp = {tp} (experts are spread over one TP group)",
                ep * etp
            ));
        }
        if c.model.moe.is_none() && (ep > 1 || etp > 1) {
            e.push("parallel.ep/etp > 1 for a dense model".into());
        }
    }
    for (k, v) in [("tp", p.tp), ("pp", p.pp), ("dp", p.dp)] {
        match v {
            None => e.push(format!(
                "parallel.{k} missing (required for an inference case)"
            )),
            Some(0) => e.push(format!("parallel.{k} = 0: expected a positive integer")),
            _ => {}
        }
    }
    if p.ep == Some(0) {
        e.push("parallel.ep = 0: expected a positive integer".into());
    }
    if let Some(atp) = p.attention_tp {
        if p.attention_dp != Some(true) {
            e.push(format!(
                "parallel.attention_tp = {atp} without parallel.attention_dp = true (it is the tensor parallelism inside each attention data-parallel group)"
            ));
        }
        if atp == 0 || p.tp.is_some_and(|tp| tp % atp != 0) {
            e.push(format!(
                "parallel.attention_tp = {atp}: expected a positive divisor of parallel.tp = {}",
                p.tp.unwrap_or(0)
            ));
        }
    }
    if let (Some(tp), Some(pp), Some(dp)) = (p.tp, p.pp, p.dp) {
        if tp * pp * dp != c.system.num_gpus && c.source_inconsistency.is_none() {
            e.push(format!(
                "parallel: tp*pp*dp = {} != system.num_gpus = {}",
                tp * pp * dp,
                c.system.num_gpus
            ));
        }
    }
    if let Some(i) = &c.inference {
        if i.input_len == 0 || i.output_len == 0 {
            e.push("inference.input_len and inference.output_len must be positive".into());
        }
        if i.batch == Batch::Max && !matches!(i.mode, Mode::OfflineMaxThroughput | Mode::Server) {
            e.push(
                "inference.batch = \"max\" requires mode \"offline-max-throughput\" or \"server\""
                    .into(),
            );
        }
        for (k, v) in [
            ("num_requests", i.num_requests),
            ("concurrency", i.concurrency),
            ("max_batch", i.max_batch),
        ] {
            if v == Some(0) {
                e.push(format!("inference.{k} = 0: expected a positive integer"));
            }
        }
        load(i, e);
        if let (Some(c), Some(n)) = (i.concurrency, i.num_requests) {
            if c > n {
                e.push(format!(
                    "inference.concurrency = {c} is above inference.num_requests = {n}: a closed loop of more clients than requests never has them all in flight"
                ));
            }
        }
    }
}

/// The load: a request rate the simulator takes (positive, at least `MIN_RATE`, in server
/// mode), at most `MAX_REQUESTS` requests, said or implied by a closed loop that does not say
/// its count (two per client, `serving::workload`).
fn load(i: &crate::cases::CaseInference, e: &mut Vec<String>) {
    if let Some(r) = i.request_rate {
        if !(r.is_finite() && r > 0.0) {
            e.push(format!(
                "inference.request_rate = {r}: expected a positive number"
            ));
        } else if r < perfcast_serving::MIN_RATE {
            // (1e-320 once simulated a run of infinite duration and 0 tokens/s)
            e.push(format!(
                "inference.request_rate = {r:e}: {}",
                perfcast_serving::MIN_RATE_RULE
            ));
        }
        if i.mode != Mode::Server {
            e.push("inference.request_rate only with mode = \"server\"".into());
        }
    }
    let max = u64::from(perfcast_serving::MAX_REQUESTS);
    match (i.num_requests, i.concurrency) {
        (Some(n), _) if n > max => e.push(format!(
            "inference.num_requests = {n}: {}",
            perfcast_serving::MAX_REQUESTS_RULE
        )),
        (None, Some(c)) if c.saturating_mul(2) > max => e.push(format!(
            "inference.concurrency = {c}: without num_requests a closed loop runs two \
             requests per client, and the simulator runs at most {max}; give num_requests \
             or lower concurrency"
        )),
        _ => {}
    }
}

/// `[case.measured]`: each metric belongs to the kind and is positive (MFU and HFU are
/// fractions); at least one; the metadata FLOP metrics need.
fn measured(c: &Case, e: &mut Vec<String>) {
    let me = &c.measured;
    let mut any = false;
    for (metric, v) in me.metrics() {
        any = true;
        if !metric.allowed(c.kind) {
            e.push(format!(
                "measured.{metric} is not a metric of a {} case",
                c.kind.name()
            ));
        }
        if !(v.is_finite() && v > 0.0) {
            e.push(format!(
                "measured.{metric} = {v}: expected a positive number"
            ));
        }
        if matches!(metric, Metric::Mfu | Metric::Hfu) && v > 1.0 {
            e.push(format!(
                "measured.{metric} = {v}: expected a fraction in (0, 1]"
            ));
        }
    }
    if !any {
        e.push("[case.measured] has no published metric".into());
    }
    let flop_metric = me.tflops_per_gpu.is_some() || me.mfu.is_some() || me.hfu.is_some();
    if flop_metric && me.flops_convention.is_none() {
        e.push(
            "measured.flops_convention missing (required with tflops_per_gpu, mfu or hfu): expected \"model\" or \"hardware\""
                .into(),
        );
    }
    if !flop_metric && me.flops_convention.is_some() {
        e.push("measured.flops_convention given without tflops_per_gpu, mfu or hfu".into());
    }
    if (me.mfu.is_some() || me.hfu.is_some()) && me.peak_tflops_basis.is_none() {
        e.push("measured.peak_tflops_basis missing (required with mfu or hfu)".into());
    }
    if me.layer_scope.is_some() && me.layer_fwd_ms.is_none() && me.layer_bwd_ms.is_none() {
        e.push("measured.layer_scope without layer_fwd_ms/layer_bwd_ms".into());
    }
    let serving_mode = c
        .inference
        .as_ref()
        .is_some_and(|i| crate::serving::models_mode(i.mode));
    let per_request = me.ttft_ms.is_some() || me.tpot_ms.is_some() || me.latency_s.is_some();
    if let Some(s) = me.statistic {
        if !(serving_mode && per_request) {
            e.push(format!(
                "measured.statistic = \"{}\": a statistic over a serving run's requests needs mode \"server\" or \"offline-max-throughput\" and ttft_ms, tpot_ms or latency_s",
                s.name()
            ));
        }
    }
    if let Some(b) = me.peak_tflops_basis {
        if !(b.is_finite() && b > 0.0) {
            e.push(format!(
                "measured.peak_tflops_basis = {b}: expected a positive number"
            ));
        }
    }
}

/// `[case.reference]`: a positive step time, only where nothing was measured.
fn reference(c: &Case, e: &mut Vec<String>) {
    let Some(r) = &c.reference else {
        return;
    };
    if !(r.iteration_time_s.is_finite() && r.iteration_time_s > 0.0) {
        e.push("reference.iteration_time_s: expected a positive number".into());
    }
    if c.measured.iteration_time_s.is_some() {
        e.push("reference.iteration_time_s given although measured.iteration_time_s exists".into());
    }
}
