//! The in-project roofline baseline: the plainest model a spreadsheet would hold, scored on
//! the same cases and the same first metric as perfcast, so that a change which improves the
//! fit but not the physics shows up beside it (issue 42: "an honest yardstick").
//!
//! Six named parameters, shared by every case and fitted to the cases as perfcast's are:
//! one GEMM efficiency per width of the compute (16-, 8- and 4-bit), one memory-bandwidth
//! efficiency, one network efficiency and one fixed cost per inference forward step. The
//! rest is datasheet (the accelerator catalog's dense peaks, HBM bandwidth and capacity,
//! scale-up and scale-out bandwidth) and counting:
//!
//! - **Training**: the step's hardware FLOPs (`flops::hardware_flops`, recompute as
//!   published, attention as its full score matrix) at the efficiency of the step's
//!   precision, plus the 1F1B bubble `(pp - 1) / (m · vpp)` of it (`m` micro-batches per
//!   pipeline), or the gradients' all-reduce over data parallelism if that is longer (it
//!   overlaps the compute), plus the collectives on the critical path: tensor-parallel
//!   all-reduces and the expert all-to-alls (dispatch and combine: four per layer and
//!   micro-batch, two more with full recompute) and the context ring's keys and values.
//!   Collectives are rings, hierarchical across scale-up domains (a ring inside each, then
//!   one over the NICs on the domain's shard). No kernel tables, no stack.
//! - **Inference**: a forward step is the larger of its FLOPs at the GEMM efficiency and its
//!   bytes (weights, the experts a batch touches, the KV cache read) at the memory
//!   efficiency, plus its tensor-parallel all-reduces and the fixed step cost. A static batch:
//!   TTFT is the batch's prefill, TPOT the decode step at the mean context. Under a serving
//!   load (continuous batching of `batch` requests in flight): TTFT is one request's prefill
//!   and the decode step it waits behind, TPOT the decode step plus the prefills of the
//!   `batch / out` requests that join per step. The request latency is TTFT + (out - 1) TPOT,
//!   throughput the batch's output tokens over it on every replica. A batch of `"max"` is the
//!   concurrency, the engine limit, else what the KV cache left beside the weights holds (90%
//!   of HBM).
//!
//! A case is covered when its first published metric (`report::first_metric_order`) is one
//! the baseline predicts and its accelerator is in the catalog with the peaks it needs.

use crate::calibrate::optimize::{minimize, Settings};
use crate::cases::{
    AttentionFlops, Batch, Case, CaseModel, CasesFile, FlopsConvention, Kind, Metric, Mode,
    Precision, Recompute, Task,
};
use crate::flops::{self, StepShape};
use crate::report::first_metric_order;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

/// The baseline's parameters: name, starting value, lower and upper bound, meaning.
pub const PARAMS: [(&str, f64, f64, f64, &str); 6] = [
    (
        "gemm_efficiency_16bit",
        0.6,
        0.1,
        1.0,
        "16-bit matrix throughput / dense peak",
    ),
    (
        "gemm_efficiency_8bit",
        0.5,
        0.05,
        1.0,
        "8-bit matrix throughput / dense peak",
    ),
    (
        "gemm_efficiency_4bit",
        0.4,
        0.02,
        1.0,
        "4-bit matrix throughput / dense peak",
    ),
    (
        "memory_efficiency",
        0.7,
        0.1,
        1.0,
        "HBM bandwidth reached / datasheet",
    ),
    (
        "network_efficiency",
        0.6,
        0.05,
        1.0,
        "collective bus bandwidth / link bandwidth",
    ),
    (
        "step_overhead_ms",
        0.05,
        0.0,
        20.0,
        "fixed cost of one inference forward step",
    ),
];

/// Values of [`PARAMS`], in their order.
pub type Params = [f64; 6];

/// What the catalog says of an accelerator, in SI units.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Device {
    /// Dense peaks, FLOP/s, of 16-, 8- and 4-bit matrix math (0 when not published).
    peaks: [f64; 3],
    hbm_bytes_per_s: f64,
    hbm_bytes: f64,
    /// Scale-up bandwidth per device, one direction, bytes/s.
    up_bytes_per_s: f64,
    /// Devices per scale-up domain.
    domain: f64,
    /// Scale-out NIC bandwidth per device, bytes/s.
    out_bytes_per_s: f64,
}

fn catalog() -> &'static HashMap<String, Device> {
    static CATALOG: OnceLock<HashMap<String, Device>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let table: toml::Table = toml::from_str(crate::presets::ACCELERATORS).unwrap_or_default();
        let num = |v: Option<&toml::Value>| {
            v.and_then(|x| x.as_float().or(x.as_integer().map(|i| i as f64)))
                .unwrap_or(0.0)
        };
        let gpus = table.get("gpu").and_then(|g| g.as_array());
        gpus.into_iter()
            .flatten()
            .filter_map(|g| {
                let id = g.get("id")?.as_str()?.to_string();
                let p = g.get("peak_tflops_dense");
                let peak = |k: &str| num(p.and_then(|p| p.get(k))) * 1e12;
                let device = Device {
                    peaks: [peak("bf16").max(peak("fp16")), peak("fp8"), peak("fp4")],
                    hbm_bytes_per_s: num(g.get("hbm_bw_tbs")) * 1e12,
                    hbm_bytes: num(g.get("hbm_gb")) * 1e9,
                    up_bytes_per_s: num(g.get("scaleup_bw_gbs_bidir")) * 1e9 / 2.0,
                    domain: num(g.get("scaleup_domain")).max(1.0),
                    out_bytes_per_s: num(g.get("scaleout_gbps_per_gpu")) * 1e9 / 8.0,
                };
                Some((id, device))
            })
            .collect()
    })
}

/// The compute width a precision runs at on `d`: (index of [`PARAMS`]' GEMM efficiency,
/// peak FLOP/s). A width the device lacks runs at the next wider one it has (FP8 on A100 at
/// 16 bits; a weight-only integer format computes at 16 bits).
fn width(p: Precision, d: &Device) -> Option<(usize, f64)> {
    let want = match p {
        Precision::Fp16 | Precision::Bf16 | Precision::Int8 | Precision::Int4 => 0,
        Precision::Fp8 => 1,
        Precision::Fp4 => 2,
    };
    (0..=want)
        .rev()
        .find(|&i| d.peaks[i] > 0.0)
        .map(|i| (i, d.peaks[i]))
}

/// A case reduced to what the closed form needs: built once, evaluated by arithmetic.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub id: String,
    pub group: String,
    pub kind: Kind,
    /// The first published metric, and its measured value.
    pub metric: Metric,
    pub measured: f64,
    body: Body,
}

#[derive(Debug, Clone, PartialEq)]
enum Body {
    Training(TrainingShape),
    Inference(InferenceShape),
}

#[derive(Debug, Clone, PartialEq)]
struct TrainingShape {
    /// Hardware FLOPs per GPU per step.
    flops_per_gpu: f64,
    width: usize,
    peak: f64,
    /// The bubble as a fraction of the compute: `(pp - 1) / (m · vpp)`.
    bubble: f64,
    /// Seconds, at full link bandwidth, of the collectives on the critical path (tensor,
    /// expert and context parallelism) and of the gradients' reduction over data
    /// parallelism (overlapped with the compute: the longer of the two counts).
    exposed_s: f64,
    gradients_s: f64,
    tokens: f64,
    gpus: f64,
    f_model: f64,
    f_hw: f64,
    convention: Option<FlopsConvention>,
    peak_basis: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
struct InferenceShape {
    /// Per request on one instance: prefill FLOPs, its KV-cache bytes written and its
    /// all-reduce seconds at full bandwidth; one decode step's FLOPs at the mean context,
    /// KV-cache bytes read and all-reduce seconds.
    prefill: [f64; 3],
    decode: [f64; 3],
    /// Weight bytes every step reads (everything but the routed experts), all routed
    /// experts' bytes, and the share of the experts one token reaches (`top_k / experts`).
    dense_bytes: f64,
    expert_bytes: f64,
    expert_share: f64,
    width: usize,
    /// Instance peak FLOP/s and HBM bytes/s.
    peak: f64,
    hbm: f64,
    input_len: f64,
    output_len: f64,
    load: Load,
    replicas: f64,
    gpus: f64,
}

/// How many requests an instance runs at once.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Load {
    /// One static batch, prefilled together.
    Static(f64),
    /// Continuous batching with this many requests in flight (a closed loop).
    InFlight(f64),
    /// Requests arriving at this rate per instance, in flight as Little's law says, at most
    /// the second value.
    Rate(f64, f64),
}

/// Bytes of a 16-bit activation element, the width collectives move.
const ACT_BYTES: f64 = 2.0;

/// The ring all-reduce's traffic per device for `bytes` over `n` devices.
fn ring(bytes: f64, n: f64) -> f64 {
    if n > 1.0 {
        2.0 * (n - 1.0) / n * bytes
    } else {
        0.0
    }
}

/// Devices of a group of `n`, `stride` apart, that share one scale-up domain (or node).
fn per_domain(d: &Device, n: f64, stride: f64, per_node: f64) -> f64 {
    (d.domain.max(per_node) / stride).floor().clamp(1.0, n)
}

/// Seconds at full bandwidth of a hierarchical ring all-reduce of `bytes` over a group of `n`
/// devices `stride` apart: a ring over scale-up inside each domain, then over the NICs
/// between domains on the domain's shard of the data.
fn all_reduce(d: &Device, bytes: f64, n: f64, stride: f64, per_node: f64) -> f64 {
    let g = per_domain(d, n, stride, per_node);
    over(ring(bytes, g), d.up_bytes_per_s) + over(ring(bytes / g, n / g), d.out_bytes_per_s)
}

/// Seconds of `bytes` at `per_s`: none for no bytes, for ever on a link the catalog does not
/// give (the case is then not covered: its prediction is not finite).
fn over(bytes: f64, per_s: f64) -> f64 {
    if bytes <= 0.0 {
        0.0
    } else if per_s > 0.0 {
        bytes / per_s
    } else {
        f64::INFINITY
    }
}

/// Seconds at full bandwidth of an all-to-all in which each device sends `bytes` spread
/// evenly over a group of `n` consecutive devices: the share for its own domain over
/// scale-up, the rest over its NIC.
fn all_to_all(d: &Device, bytes: f64, n: f64, per_node: f64) -> f64 {
    let g = per_domain(d, n, 1.0, per_node);
    over(bytes * (g - 1.0) / n, d.up_bytes_per_s) + over(bytes * (n - g) / n, d.out_bytes_per_s)
}

/// (dense, expert) parameters of a model: the experts' are those of every routed expert.
fn param_split(m: &CaseModel) -> (f64, f64) {
    let total = flops::matmul_params_per_token(m);
    match &m.moe {
        None => (total, 0.0),
        Some(moe) => {
            let moe_layers =
                (m.layers.saturating_sub(moe.dense_layers) / moe.moe_layer_freq.max(1)) as f64;
            let expert =
                m.ffn_act.matrices() as f64 * m.hidden as f64 * moe.expert_ffn_hidden as f64;
            let active = moe_layers * moe.top_k as f64 * expert;
            let all = moe_layers * moe.experts as f64 * expert;
            (total - active, all)
        }
    }
}

/// Bytes of KV cache per token of context, over all layers.
fn kv_bytes_per_token(m: &CaseModel, bytes: f64) -> f64 {
    let per_layer = match &m.mla {
        Some(mla) => (mla.kv_lora_rank + mla.qk_rope_head_dim) as f64,
        None => {
            let d = m.head_dim.unwrap_or(m.hidden / m.heads.max(1)) as f64;
            2.0 * m.kv_heads as f64 * d
        }
    };
    m.layers as f64 * per_layer * bytes
}

impl Shape {
    /// The case as the baseline sees it, `None` when it does not cover the case.
    pub fn of(case: &Case) -> Option<Shape> {
        let metric = *first_metric_order(case.kind)
            .iter()
            .find(|m| case.measured.get(**m).is_some())?;
        let measured = case.measured.get(metric)?;
        let d = catalog().get(&case.system.gpu)?;
        let body = match case.kind {
            Kind::Training => Body::Training(training(case, d)?),
            Kind::Inference => Body::Inference(inference(case, d)?),
        };
        Some(Shape {
            id: case.id.clone(),
            group: case.group.clone(),
            kind: case.kind,
            metric,
            measured,
            body,
        })
    }

    /// The predicted first metric with parameters `p`; `None` when the baseline has no
    /// formula for it (e.g. a TFLOP/s without a FLOP convention).
    pub fn predict(&self, p: &Params) -> Option<f64> {
        let v = match &self.body {
            Body::Training(t) => t.metric(self.metric, p)?,
            Body::Inference(i) => i.metric(self.metric, p)?,
        };
        (v.is_finite() && v > 0.0).then_some(v)
    }
}

fn training(case: &Case, d: &Device) -> Option<TrainingShape> {
    let t = case.training.as_ref()?;
    let p = case.training_parallel()?;
    let m = &case.model;
    let (width, peak) = width(t.precision, d)?;
    let gpus = case.system.num_gpus as f64;
    let seq = m.seq_len? as f64;
    let shape = StepShape {
        global_batch: p.global_batch as f64,
        seq_len: seq,
        recompute: match t.recompute {
            Recompute::Unknown => Recompute::None,
            r => r,
        },
        recompute_layers: t.recompute_layers,
        pp: p.pp,
        task: t.task,
        attention: case.measured.attention_flops.unwrap_or_default(),
    };
    let f_model = flops::model_flops(m, &shape);
    let f_hw = flops::hardware_flops(m, &shape);
    // The work timed: attention as its full score matrix whatever convention the source
    // counted its TFLOP/s in (causal kernels skip half of it but run at about half the
    // GEMMs' efficiency, which one efficiency per width cannot say otherwise).
    let work = flops::hardware_flops(
        m,
        &StepShape {
            attention: AttentionFlops::Noncausal,
            ..shape
        },
    );
    let (tp, pp, dp, cp, ep) = (
        p.tp as f64,
        p.pp as f64,
        p.dp as f64,
        p.cp as f64,
        p.ep as f64,
    );
    let micro = (p.global_batch as f64 / (dp * p.micro_batch as f64)).max(1.0);
    let per_node = case.system.gpus_per_node as f64;
    let layers = m.layers as f64 / pp;
    // Tokens of one micro-batch on one rank of a context-parallel group.
    let mb_tokens = p.micro_batch as f64 * seq / cp;
    // With sequence parallelism each tensor-parallel rank dispatches its share of them.
    let dispatched = if p.sp { mb_tokens / tp } else { mb_tokens };
    let h = m.hidden as f64;
    let passes = if t.recompute == Recompute::Full {
        6.0
    } else {
        4.0
    };
    let tp_s =
        layers * micro * passes * all_reduce(d, mb_tokens * h * ACT_BYTES, tp, 1.0, per_node);
    let (dense, experts) = param_split(m);
    // LoRA's frozen weights have no gradients (its adapters', a fraction of a percent of the
    // weights, are left out).
    let trained = if t.task == Task::Lora { 0.0 } else { 1.0 };
    let grads = trained * 2.0 * (dense / (tp * pp) + experts / (tp * pp * ep));
    let dp_s = all_reduce(d, grads, dp, tp * cp, per_node);
    // Dispatch and combine forward, their gradients backward (and the forward again under
    // full recompute), on the stage's MoE layers.
    let ep_s = match &m.moe {
        Some(moe) if ep > 1.0 => {
            let moe_layers =
                (m.layers.saturating_sub(moe.dense_layers) / moe.moe_layer_freq.max(1)) as f64 / pp;
            let bytes = dispatched * moe.top_k as f64 * h * ACT_BYTES;
            moe_layers * micro * passes * all_to_all(d, bytes, ep, per_node)
        }
        _ => 0.0,
    };
    let cp_s = if cp > 1.0 {
        // A tensor-parallel rank holds its share of the key/value heads (the KV cache's bytes
        // per token and layer, at 16 bits).
        let kv = kv_bytes_per_token(m, ACT_BYTES)
            / m.layers.max(1) as f64
            / tp.min(m.kv_heads.max(1) as f64);
        // Each rank receives the other ranks' keys and values (a ring all-gather, half an
        // all-reduce's traffic): forward and, with their gradients, twice in backward.
        let bytes = p.micro_batch as f64 * seq * kv;
        layers * micro * 3.0 * 0.5 * all_reduce(d, bytes, cp, tp, per_node)
    } else {
        0.0
    };
    Some(TrainingShape {
        flops_per_gpu: work / gpus,
        width,
        peak,
        bubble: (pp - 1.0) / (micro * p.vpp.max(1) as f64),
        exposed_s: tp_s + ep_s + cp_s,
        gradients_s: dp_s,
        tokens: p.global_batch as f64 * seq,
        gpus,
        f_model,
        f_hw,
        convention: case.measured.flops_convention,
        peak_basis: case.measured.peak_tflops_basis,
    })
}

impl TrainingShape {
    fn metric(&self, metric: Metric, p: &Params) -> Option<f64> {
        let compute = self.flops_per_gpu / (self.peak * p[self.width]) * (1.0 + self.bubble);
        let time = compute.max(self.gradients_s / p[4]) + self.exposed_s / p[4];
        Some(match metric {
            Metric::IterationTimeS => time,
            Metric::TokensPerSPerGpu => self.tokens / time / self.gpus,
            Metric::TflopsPerGpu => {
                let f = match self.convention? {
                    FlopsConvention::Model => self.f_model,
                    FlopsConvention::Hardware => self.f_hw,
                };
                flops::tflops_per_gpu(f, time, self.gpus)
            }
            Metric::Mfu => flops::utilisation(self.f_model, time, self.gpus, self.peak_basis?),
            Metric::GpuHoursPerTrillionTokens => self.gpus * 1e12 / (self.tokens / time) / 3600.0,
            _ => return None,
        })
    }
}

fn inference(case: &Case, d: &Device) -> Option<InferenceShape> {
    let i = case.inference.as_ref()?;
    let p = case.inference_parallel()?;
    let m = &case.model;
    let (width, peak) = width(i.precision, d)?;
    let gpus = case.system.num_gpus as f64;
    let replicas = p.dp.max(1) as f64;
    let per_instance = (gpus / replicas).max(1.0);
    let (dense, experts) = param_split(m);
    let weight_bytes = i.precision.dtype().bytes();
    let kv_token = kv_bytes_per_token(m, crate::harness::kv_dtype(i).bytes());
    let (input, output) = (i.input_len as f64, i.output_len as f64);
    let limit = match i.max_batch {
        Some(b) => b as f64,
        None => {
            let free = 0.9 * d.hbm_bytes * per_instance - (dense + experts) * weight_bytes;
            let fits = (free / (kv_token * (input + output))).floor();
            if !fits.is_finite() {
                return None;
            }
            fits.clamp(1.0, 4096.0)
        }
    };
    // The load generator's clients are the deployment's: each replica serves its share.
    let fixed = match i.batch {
        Batch::Fixed(b) => Some(b as f64),
        Batch::Max => i.concurrency.map(|c| (c as f64 / replicas).max(1.0)),
    };
    let load = match (i.mode, i.request_rate, fixed) {
        (Mode::Server, Some(rate), _) => Load::Rate(rate / replicas, fixed.unwrap_or(limit)),
        (Mode::Server, None, b) => Load::InFlight(b.unwrap_or(limit)),
        (_, _, b) => Load::Static(b.unwrap_or(limit)),
    };
    let tp = p.tp as f64;
    let per_node = case.system.gpus_per_node as f64;
    let ar = |tokens: f64| {
        let bytes = tokens * m.hidden as f64 * ACT_BYTES;
        m.layers as f64 * 2.0 * all_reduce(d, bytes, tp, 1.0, per_node)
    };
    let attention = case
        .measured
        .attention_flops
        .unwrap_or(AttentionFlops::Causal);
    let prefill_flops = flops::inference_flops(m, 1.0, input, 1.0, attention);
    let request_flops = flops::inference_flops(m, 1.0, input, output, attention);
    // The mean decode step's FLOPs: the request's less its prefill, over its decode steps.
    let decode_flops = if output > 1.0 {
        (request_flops - prefill_flops) / (output - 1.0)
    } else {
        2.0 * flops::matmul_params_per_token(m)
    };
    Some(InferenceShape {
        prefill: [prefill_flops, input * kv_token, ar(input)],
        decode: [decode_flops, (input + output / 2.0) * kv_token, ar(1.0)],
        dense_bytes: dense * weight_bytes,
        expert_bytes: experts * weight_bytes,
        expert_share: m
            .moe
            .as_ref()
            .map_or(0.0, |e| e.top_k as f64 / e.experts.max(1) as f64),
        width,
        peak: peak * per_instance,
        hbm: d.hbm_bytes_per_s * per_instance,
        input_len: input,
        output_len: output,
        load,
        replicas,
        gpus,
    })
}

impl InferenceShape {
    /// Seconds of one forward step of `requests` requests over `tokens` tokens, each request
    /// costing `per` = `[FLOPs, KV bytes, all-reduce seconds]`.
    fn step(&self, per: &[f64; 3], requests: f64, tokens: f64, p: &Params) -> f64 {
        let compute = requests * per[0] / (self.peak * p[self.width]);
        let experts = self.expert_bytes * (tokens * self.expert_share).min(1.0);
        let bytes = self.dense_bytes + experts + requests * per[1];
        let memory = bytes / (self.hbm * p[3]);
        compute.max(memory) + requests * per[2] / p[4] + p[5] * 1e-3
    }

    /// (TTFT, TPOT) with `batch` requests in flight: one static batch, or continuous
    /// batching (`serving`).
    fn times(&self, batch: f64, serving: bool, p: &Params) -> (f64, f64) {
        let decode = self.step(&self.decode, batch, batch, p);
        if serving {
            let prefill = self.step(&self.prefill, 1.0, self.input_len, p);
            let joining = batch / self.output_len.max(1.0);
            (prefill + decode, decode + joining * prefill)
        } else {
            let prefill = self.step(&self.prefill, batch, batch * self.input_len, p);
            (prefill, decode)
        }
    }

    fn metric(&self, metric: Metric, p: &Params) -> Option<f64> {
        let latency_of = |(ttft, tpot): (f64, f64)| ttft + (self.output_len - 1.0).max(0.0) * tpot;
        let (batch, (ttft, tpot)) = match self.load {
            Load::Static(b) => (b, self.times(b, false, p)),
            Load::InFlight(b) => (b, self.times(b, true, p)),
            Load::Rate(rate, limit) => {
                // Little's law: the requests in flight `b = rate x latency(b)`, latency
                // growing with `b`; bisected on [1, limit] (saturated at the limit).
                let excess = |b: f64| rate * latency_of(self.times(b, true, p)) - b;
                let (mut lo, mut hi) = (1.0, limit.max(1.0));
                let b = if excess(lo) <= 0.0 {
                    lo
                } else if excess(hi) >= 0.0 {
                    hi
                } else {
                    for _ in 0..50 {
                        let mid = 0.5 * (lo + hi);
                        if excess(mid) > 0.0 {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    0.5 * (lo + hi)
                };
                (b, self.times(b, true, p))
            }
        };
        let latency = latency_of((ttft, tpot));
        let served = batch * self.output_len / latency;
        let tokens_per_s = self.replicas
            * match self.load {
                Load::Rate(rate, _) => (rate * self.output_len).min(served),
                _ => served,
            };
        Some(match metric {
            Metric::LatencyS => latency,
            Metric::TtftMs => ttft * 1e3,
            Metric::TpotMs => tpot * 1e3,
            Metric::TokensPerS => tokens_per_s,
            Metric::TokensPerSPerGpu => tokens_per_s / self.gpus,
            // An inference case's first metric is one of the above (`first_metric_order`).
            _ => return None,
        })
    }
}

/// The objective perfcast's calibration minimises: the mean `|ln(predicted / measured)|`;
/// `+inf` where a case has no prediction.
fn objective(shapes: &[&Shape], p: &Params) -> f64 {
    let n = shapes.len().max(1) as f64;
    shapes
        .iter()
        .map(|s| match s.predict(p) {
            Some(v) => (v / s.measured).ln().abs(),
            None => f64::INFINITY,
        })
        .sum::<f64>()
        / n
}

/// The parameters fitted to `shapes` (every case scored: those without a prediction are left
/// out first), from [`PARAMS`]' starting values. A parameter no case reaches (no 4-bit case,
/// no inference case) keeps its starting value.
pub fn fit(shapes: &[&Shape]) -> Params {
    let start: Params = PARAMS.map(|(_, v, ..)| v);
    let scored: Vec<&Shape> = shapes
        .iter()
        .copied()
        .filter(|s| s.predict(&start).is_some())
        .collect();
    let to_box = |i: usize, v: f64| (v - PARAMS[i].2) / (PARAMS[i].3 - PARAMS[i].2);
    let from_box = |x: &[f64]| -> Params {
        std::array::from_fn(|i| PARAMS[i].2 + x[i] * (PARAMS[i].3 - PARAMS[i].2))
    };
    let x0: Vec<f64> = (0..6).map(|i| to_box(i, start[i])).collect();
    let settings = Settings {
        max_evals: 3000,
        ..Settings::default()
    };
    let best = minimize(|x| objective(&scored, &from_box(x)), &x0, &settings);
    from_box(&best.x)
}

/// The baseline on a cases file: its parameters fitted on every covered case, and each
/// case's prediction in sample and with its own group left out of the fit (refitted without
/// it), as perfcast's `calibrate --cv groups` does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineRun {
    /// Fitted on all covered cases, by [`PARAMS`]' names.
    pub params: BTreeMap<String, f64>,
    /// Per covered case: (id, relative error in sample, relative error with its group out).
    pub cases: Vec<BaselineCase>,
}

/// One case's baseline errors (relative, signed: predicted / measured - 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineCase {
    pub id: String,
    pub group: String,
    pub kind: Kind,
    pub metric: String,
    /// The first metric's measured value.
    pub measured: f64,
    pub in_sample: f64,
    pub leave_group_out: f64,
}

/// Fit and cross-validate the baseline on the cases of `file` that `fitted_on` accepts (by
/// id: perfcast's scored cases, so that both are fitted on the same cases), reporting every
/// case it covers in `group` (all when `None`): the fit sees the whole file, as perfcast's
/// configuration does, and each reported group's fold all of it but that group.
pub fn run(file: &CasesFile, group: Option<&str>, fitted_on: &dyn Fn(&str) -> bool) -> BaselineRun {
    use rayon::prelude::*;
    let shapes: Vec<Shape> = file.cases.iter().filter_map(Shape::of).collect();
    let fitted: Vec<&Shape> = shapes.iter().filter(|s| fitted_on(&s.id)).collect();
    let params = fit(&fitted);
    let mut groups: Vec<&str> = shapes
        .iter()
        .map(|s| s.group.as_str())
        .filter(|g| group.is_none_or(|w| w == *g))
        .collect();
    groups.sort_unstable();
    groups.dedup();
    let folds: HashMap<&str, Params> = groups
        .par_iter()
        .map(|g| {
            let rest: Vec<&Shape> = fitted.iter().copied().filter(|s| s.group != *g).collect();
            (*g, fit(&rest))
        })
        .collect();
    let cases = shapes
        .iter()
        .filter(|s| folds.contains_key(s.group.as_str()))
        .filter_map(|s| {
            let err = |p: &Params| s.predict(p).map(|v| v / s.measured - 1.0);
            Some(BaselineCase {
                id: s.id.clone(),
                group: s.group.clone(),
                kind: s.kind,
                metric: s.metric.name().to_string(),
                measured: s.measured,
                in_sample: err(&params)?,
                leave_group_out: err(folds.get(s.group.as_str())?)?,
            })
        })
        .collect();
    BaselineRun {
        params: PARAMS
            .iter()
            .zip(params)
            .map(|((n, ..), v)| (n.to_string(), v))
            .collect(),
        cases,
    }
}

mod compare;
pub use compare::{calibration_sets, compare, Comparison, Versus};

#[cfg(test)]
mod tests;
