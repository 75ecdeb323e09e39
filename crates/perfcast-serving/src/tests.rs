//! Tests of the serving simulator: exact timelines of small cases against the step model,
//! the scheduler's limits, the KV policies, the options, determinism, and bad inputs.

use super::*;
use perfcast_engine::inference::{
    Inference, InferenceOptions, InferencePlan, PrefillChunk, StepBatch,
};
use perfcast_testkit::flat::h100;
use perfcast_testkit::llama2;

fn engine(size: u32, devices: u32) -> Inference {
    Inference::new(llama2(size), h100(devices), InferenceOptions::default()).unwrap()
}

fn cfg() -> ServingConfig {
    ServingConfig {
        input_len: Some(Length::Fixed(512)),
        output_len: Some(Length::Fixed(64)),
        requests: 50,
        ..ServingConfig::default()
    }
}

fn spec(c: &ServingConfig, load: Load) -> WorkloadSpec {
    WorkloadSpec {
        input_len: c.input_len.unwrap(),
        output_len: c.output_len.unwrap(),
        requests: c.requests,
        load,
        seed: c.seed,
    }
}

fn run(
    inf: &Inference,
    c: &ServingConfig,
    load: Load,
) -> Result<ServingReport, perfcast_core::ModelError> {
    let traffic = spec(c, load).traffic();
    let d = c.deployment(None, traffic.max_context())?;
    Simulator::new(inf).run(&d, &traffic, c.seed, &[])
}

fn poisson(rate: f64) -> Load {
    Load::Rate {
        rate,
        process: ArrivalProcess::Poisson,
    }
}

#[test]
fn one_request_follows_the_step_model_exactly() {
    let inf = engine(7, 1);
    let c = ServingConfig {
        requests: 1,
        ..cfg()
    };
    let r = run(&inf, &c, Load::Burst).unwrap();
    let plan = InferencePlan::new(1, 575, 1);
    let prompt = [PrefillChunk {
        tokens: 512,
        prior: 0,
        last: true,
    }];
    let ttft = inf
        .step_time(
            &plan,
            &StepBatch {
                chunks: &prompt,
                ..StepBatch::default()
            },
        )
        .unwrap();
    let mut e2e = ttft;
    for j in 1..64u64 {
        e2e += inf
            .step_time(
                &plan,
                &StepBatch {
                    decodes: 1,
                    decode_context: 512 + j,
                    decode_tokens: 1,
                    ..StepBatch::default()
                },
            )
            .unwrap();
    }
    assert_eq!(r.completed, 1);
    assert!(
        (r.ttft.mean.0 - ttft).abs() <= 1e-12 * ttft,
        "{:?} vs {ttft}",
        r.ttft
    );
    assert!(
        (r.e2e.mean.0 - e2e).abs() <= 1e-9 * e2e,
        "{:?} vs {e2e}",
        r.e2e
    );
    let tpot = (e2e - ttft) / 63.0;
    assert!((r.tpot.mean.0 - tpot).abs() <= 1e-9 * tpot);
    assert!((r.itl_mean.0 - tpot).abs() <= 1e-9 * tpot);
    assert!((r.output_tokens_per_s - 64.0 / e2e).abs() <= 1e-9 * 64.0 / e2e);
    assert_eq!(r.preemptions, 0);
    assert_eq!(r.pools[0].steps, 64);
}

#[test]
fn a_burst_is_prefilled_together_within_the_limits() {
    let inf = engine(7, 1);
    // 8 prompts of 512 fit one step of 8192 tokens: every request gets its first token at the
    // end of the first step, which is the step model's time for that batch.
    let c = ServingConfig {
        requests: 8,
        chunked_prefill: false,
        ..cfg()
    };
    let r = run(&inf, &c, Load::Burst).unwrap();
    let chunks = vec![
        PrefillChunk {
            tokens: 512,
            prior: 0,
            last: true
        };
        8
    ];
    let first = inf
        .step_time(
            &InferencePlan::new(1, 575, 1),
            &StepBatch {
                chunks: &chunks,
                ..StepBatch::default()
            },
        )
        .unwrap();
    assert!((r.ttft.max.0 - first).abs() <= 1e-12 * first);
    assert!((r.ttft.p50.0 - first).abs() <= 1e-12 * first);
    // max_batch 2: the third request waits for the first two to finish.
    let c2 = ServingConfig {
        max_batch: 2,
        ..c.clone()
    };
    let r2 = run(&inf, &c2, Load::Burst).unwrap();
    assert!(
        r2.ttft.max.0 > 2.0 * r.e2e.p50.0,
        "{:?} {:?}",
        r2.ttft,
        r.e2e
    );
    assert!(r2.pools[0].mean_batch <= 2.0);
    // A step budget of 1024 tokens without chunking takes two prompts per step.
    let c3 = ServingConfig {
        max_num_tokens: 1024,
        ..c
    };
    let r3 = run(&inf, &c3, Load::Burst).unwrap();
    assert!(r3.ttft.max.0 > r.ttft.max.0);
    assert!(r3.pools[0].mean_step_tokens <= 1024.0);
}

#[test]
fn chunked_prefill_splits_long_prompts_and_keeps_decoding() {
    let inf = engine(7, 1);
    let c = ServingConfig {
        input_len: Some(Length::Fixed(3000)),
        output_len: Some(Length::Fixed(200)),
        requests: 20,
        max_num_tokens: 1024,
        chunk_size: Some(512),
        ..cfg()
    };
    let r = run(&inf, &c, poisson(2.0)).unwrap();
    assert_eq!(r.completed, 20);
    assert!(r.pools[0].mean_step_tokens <= 1024.0);
    // Without chunking such prompts cannot be scheduled: a clear error.
    let nc = ServingConfig {
        chunked_prefill: false,
        chunk_size: None,
        ..c.clone()
    };
    let e = run(&inf, &nc, poisson(2.0)).unwrap_err().to_string();
    assert!(e.contains("max_num_tokens") && e.contains("3000"), "{e}");
    // Smaller chunks mean longer time to first token for a long prompt alone.
    let one = |chunk| {
        let c1 = ServingConfig {
            requests: 1,
            chunk_size: Some(chunk),
            ..c.clone()
        };
        run(&inf, &c1, Load::Burst).unwrap().ttft.mean.0
    };
    assert!(one(256) > one(1024));
}

#[test]
fn kv_policies_admission_and_preemption() {
    let inf = engine(7, 1);
    // A cache that holds ~10 requests of 1600 tokens.
    let base = ServingConfig {
        input_len: Some(Length::Fixed(1000)),
        output_len: Some(Length::Fixed(600)),
        requests: 40,
        kv_memory_fraction: 0.25,
        ..cfg()
    };
    let g = run(&inf, &base, Load::Burst).unwrap();
    assert_eq!(g.completed, 40);
    assert_eq!(g.preemptions, 0);
    assert!(g.pools[0].kv_peak_occupancy <= 1.0);
    let held = g.pools[0].kv_tokens / 1600;
    assert!(
        g.pools[0].mean_batch <= held as f64 + 1e-9,
        "{:?}",
        g.pools[0]
    );
    // On demand: more admitted at once, preemptions when the contexts grow, all complete.
    let od = ServingConfig {
        kv_admission: KvAdmission::OnDemand,
        ..base.clone()
    };
    let o = run(&inf, &od, Load::Burst).unwrap();
    assert_eq!(o.completed, 40);
    assert!(o.preemptions > 0, "{o:?}");
    assert!(o.pools[0].kv_peak_occupancy <= 1.0);
    // A fraction that leaves no room for one request says how much is missing.
    let tiny = ServingConfig {
        kv_memory_fraction: 0.001,
        ..base
    };
    let e = run(&inf, &tiny, Load::Burst).unwrap_err().to_string();
    assert!(
        e.contains("kv_memory_fraction") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn load_shapes_latency_and_is_deterministic() {
    let inf = engine(7, 1);
    let c = cfg();
    let low = run(&inf, &c, poisson(1.0)).unwrap();
    let high = run(&inf, &c, poisson(200.0)).unwrap();
    assert!(high.ttft.mean.0 > low.ttft.mean.0);
    assert!(high.output_tokens_per_s > low.output_tokens_per_s);
    // Below saturation the throughput is the offered load.
    let offered = 1.0 * 64.0;
    assert!(
        (low.output_tokens_per_s - offered).abs() < 0.3 * offered,
        "{low:?}"
    );
    let again = run(&inf, &c, poisson(200.0)).unwrap();
    assert_eq!(
        serde_json::to_string(&high).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
    let other = ServingConfig {
        seed: 9,
        ..c.clone()
    };
    let o = run(&inf, &other, poisson(200.0)).unwrap();
    assert_ne!(o.ttft.mean.0, high.ttft.mean.0);
    // Closed loop: never more requests in flight than clients.
    let closed = run(&inf, &c, Load::Concurrency(4)).unwrap();
    assert_eq!(closed.completed, 50);
    assert!(closed.pools[0].mean_batch <= 4.0);
    assert_eq!(closed.concurrency, Some(4));
    // Evenly spaced arrivals at the same rate.
    let even = run(
        &inf,
        &c,
        Load::Rate {
            rate: 1.0,
            process: ArrivalProcess::Constant,
        },
    )
    .unwrap();
    assert!((even.duration.0 - 49.0 - even.e2e.max.0).abs() < 1.0);
}

#[test]
fn slo_goodput_and_finite_reports() {
    let inf = engine(7, 1);
    let c = cfg();
    let r = run(&inf, &c, poisson(50.0)).unwrap();
    let traffic = spec(&c, poisson(50.0)).traffic();
    let d = c.deployment(None, traffic.max_context()).unwrap();
    let loose = Slo {
        ttft_ms: Some(1e6),
        tpot_ms: Some(1e6),
        e2e_ms: None,
        attainment: 0.9,
    };
    let tight = Slo {
        ttft_ms: Some(1e-3),
        ..loose
    };
    let mut sim = Simulator::new(&inf);
    let a = sim.run(&d, &traffic, 0, &[loose]).unwrap();
    let b = sim.run(&d, &traffic, 0, &[tight]).unwrap();
    let (sa, sb) = (a.slo[0], b.slo[0]);
    assert!(sa.met && (sa.attainment - 1.0).abs() < 1e-12);
    assert!((sa.goodput_requests_per_s - r.requests_per_s).abs() < 1e-9);
    assert!(!sb.met && sb.attainment == 0.0 && sb.goodput_requests_per_s == 0.0);
    assert!(
        sa.factor <= 1e-3 && sb.factor > 1.0,
        "{} {}",
        sa.factor,
        sb.factor
    );
    // The factor is what the limits must be relaxed by: relaxed by it, the load meets them.
    let relaxed = Slo {
        ttft_ms: Some(1e-3 * sb.factor * 1.000001),
        ..tight
    };
    assert!(sim.run(&d, &traffic, 0, &[relaxed]).unwrap().slo[0].met);
    let v = serde_json::to_value(&a).unwrap();
    fn finite(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
            serde_json::Value::Array(a) => a.iter().all(finite),
            serde_json::Value::Object(o) => o.values().all(finite),
            _ => true,
        }
    }
    assert!(finite(&v));
    assert!(Slo {
        attainment: 0.0,
        ..loose
    }
    .validate()
    .is_err());
    assert!(Slo {
        ttft_ms: Some(-1.0),
        ..loose
    }
    .validate()
    .is_err());
    let none = Slo {
        ttft_ms: None,
        tpot_ms: None,
        e2e_ms: None,
        attainment: 0.9,
    };
    assert!(none
        .validate()
        .unwrap_err()
        .to_string()
        .contains("no limit"));
}

#[test]
fn graphs_speculation_and_prefix_caching() {
    let inf = engine(7, 1);
    let c = cfg();
    let base = run(&inf, &c, poisson(2.0)).unwrap();
    // CUDA graphs remove the host launch cost of decode steps.
    let g = run(
        &inf,
        &ServingConfig {
            cuda_graphs: true,
            ..c.clone()
        },
        poisson(2.0),
    )
    .unwrap();
    assert!(g.tpot.mean.0 < base.tpot.mean.0);
    // Speculation that always succeeds makes k + 1 tokens per step: fewer, longer steps.
    let always = ServingConfig {
        speculative: Some(SpeculativeConfig {
            draft_len: 3,
            acceptance_rate: Some(1.0),
            draft_cost: Some(0.0),
            method: DraftMethod::Ratio,
            draft_model: None,
        }),
        ..c.clone()
    };
    let s = run(&inf, &always, poisson(2.0)).unwrap();
    assert!(
        s.tpot.mean.0 < 0.5 * base.tpot.mean.0,
        "{:?} {:?}",
        s.tpot,
        base.tpot
    );
    // Never accepted: one token per (longer) step, and the draft costs time too.
    let never = ServingConfig {
        speculative: Some(SpeculativeConfig {
            draft_len: 3,
            acceptance_rate: Some(0.0),
            draft_cost: Some(0.1),
            method: DraftMethod::Ratio,
            draft_model: None,
        }),
        ..c.clone()
    };
    let n = run(&inf, &never, poisson(2.0)).unwrap();
    assert!(n.tpot.mean.0 > base.tpot.mean.0);
    let sp = Speculative {
        draft_len: 4,
        acceptance_rate: 0.5,
        draft_cost: 0.0,
        method: DraftMethod::Ratio,
    };
    assert!((sp.expected_tokens() - 1.9375).abs() < 1e-12);
    // Half of every prompt cached: shorter prefills.
    let p = run(
        &inf,
        &ServingConfig {
            prefix_cache_hit_rate: 0.5,
            ..c.clone()
        },
        poisson(2.0),
    )
    .unwrap();
    assert!(p.ttft.mean.0 < base.ttft.mean.0);
}

#[test]
fn replicas_pipeline_and_disaggregation() {
    let inf = engine(13, 8);
    let c = ServingConfig {
        requests: 200,
        ..cfg()
    };
    let one = run(&inf, &c, poisson(40.0)).unwrap();
    let two = run(
        &inf,
        &ServingConfig {
            replicas: Some(2),
            ..c.clone()
        },
        poisson(40.0),
    )
    .unwrap();
    assert_eq!(two.gpus, 2);
    assert!(two.ttft.mean.0 < one.ttft.mean.0);
    let pp = run(
        &inf,
        &ServingConfig {
            pp: Some(2),
            ..c.clone()
        },
        poisson(40.0),
    )
    .unwrap();
    assert_eq!((pp.completed, pp.pools[0].pp), (200, 2));
    // One prefill instance (TP 2) feeding two decode instances (TP 1) over NVLink.
    let dis = ServingConfig {
        disaggregated: Some(DisaggregatedConfig {
            prefill: PoolConfig {
                tp: 2,
                pp: 1,
                instances: 1,
                max_batch: None,
                max_num_tokens: None,
                ep: None,
                attention_dp: None,
                attention_tp: None,
            },
            decode: PoolConfig {
                tp: 1,
                pp: 1,
                instances: 2,
                max_batch: None,
                max_num_tokens: None,
                ep: None,
                attention_dp: None,
                attention_tp: None,
            },
            transfer_overhead_us: 0.0,
        }),
        ..c.clone()
    };
    let d = run(&inf, &dis, poisson(40.0)).unwrap();
    assert_eq!((d.completed, d.gpus, d.pools.len()), (200, 4, 2));
    let t = d.kv_transfer.unwrap();
    // 512 tokens x 13B's 0.8 MB per token / 2 TP ranks over 360 GB/s: about a millisecond.
    assert!(t.p50.0 > 1e-4 && t.p50.0 < 1e-2, "{t:?}");
    assert_eq!(d.pools[0].role, PoolRole::Prefill);
    assert!(d.pools[1].mean_step_tokens <= d.pools[1].mean_batch + 1e-9);
    // More devices than the system has: an error naming the key.
    let big = ServingConfig {
        replicas: Some(9),
        ..c
    };
    let e = run(&inf, &big, Load::Burst).unwrap_err().to_string();
    assert!(
        e.contains("serving.replicas") && e.contains("more than"),
        "{e}"
    );
}

#[test]
fn bad_values_name_their_keys() {
    let inf = engine(7, 1);
    for (c, key) in [
        (
            ServingConfig {
                max_batch: 0,
                ..cfg()
            },
            "serving.max_batch",
        ),
        (
            ServingConfig {
                rate: Some(0.0),
                ..cfg()
            },
            "serving.rate",
        ),
        (
            ServingConfig {
                rate: Some(-3.0),
                ..cfg()
            },
            "serving.rate",
        ),
        (
            ServingConfig {
                chunk_size: Some(9000),
                ..cfg()
            },
            "serving.max_num_tokens",
        ),
        (
            ServingConfig {
                kv_memory_fraction: 1.5,
                ..cfg()
            },
            "serving.kv_memory_fraction",
        ),
        (
            ServingConfig {
                prefix_cache_hit_rate: 1.0,
                ..cfg()
            },
            "serving.prefix_cache_hit_rate",
        ),
        (
            ServingConfig {
                input_len: Some(Length::Range { min: 9, max: 3 }),
                ..cfg()
            },
            "serving.input_len",
        ),
        (
            ServingConfig {
                rate: Some(1.0),
                concurrency: Some(3),
                ..cfg()
            },
            "serving.rate",
        ),
        (
            ServingConfig {
                speculative: Some(SpeculativeConfig {
                    draft_len: 2,
                    acceptance_rate: Some(1.2),
                    draft_cost: Some(0.0),
                    method: DraftMethod::Ratio,
                    draft_model: None,
                }),
                ..cfg()
            },
            "serving.speculative.acceptance_rate",
        ),
    ] {
        let e = c.deployment(None, 600).unwrap_err().to_string();
        assert!(e.contains(key), "{key}: {e}");
    }
    assert!(check_rate(f64::INFINITY, perfcast_core::Key::serving("rate")).is_err());
    // A model whose weights do not fit leaves no memory for the KV cache.
    let big = engine(70, 1);
    let e = run(&big, &cfg(), Load::Burst).unwrap_err().to_string();
    assert!(e.contains("no memory is left for the KV cache"), "{e}");
    let _ = inf;
}

#[test]
fn traces_parse_and_name_bad_lines() {
    let csv = "# a comment\narrival_s,input_len,output_len,prompt\n0.5,100,20,x\n0.1,200,10,y\n\n";
    let r = parse_trace(csv, TraceFormat::Csv).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].arrival, r[0].input, r[1].arrival), (0.0, 200, 0.4));
    let jsonl = "{\"arrival_s\": 1.0, \"input_len\": 5, \"output_len\": 6}\n{\"arrival_s\": 2, \"input_len\": 7, \"output_len\": 8, \"x\": null}\n";
    let j = parse_trace(jsonl, TraceFormat::Jsonl).unwrap();
    assert_eq!((j.len(), j[1].output, j[1].arrival), (2, 8, 1.0));
    // More requests than a run may simulate are refused with the limit (the generated load's
    // `requests` alike).
    let many = format!(
        "arrival_s,input_len,output_len\n{}",
        "0,1,1\n".repeat(MAX_REQUESTS as usize + 1)
    );
    let e = parse_trace(&many, TraceFormat::Csv)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("10000001 requests: a trace must be at most 10000000"),
        "{e}"
    );
    let mut c = cfg();
    c.requests = MAX_REQUESTS + 1;
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("serving.requests") && e.contains("at most 10000000"),
        "{e}"
    );
    // The longest span served is kept to the microsecond.
    let far = "arrival_s,input_len,output_len\n1e9,2,3\n0,4,3\n";
    let f = parse_trace(far, TraceFormat::Csv).unwrap();
    assert_eq!((f[0].input, f[1].arrival), (4, MAX_TRACE_SPAN_S));
    for (text, fmt, want) in [
        (
            "arrival_s,input_len\n1,2\n",
            TraceFormat::Csv,
            "line 1: the header has no `output_len`",
        ),
        (
            "arrival_s,input_len,output_len\n1,2,3\n2,-4,3\n",
            TraceFormat::Csv,
            "line 3: `input_len` = -4 is negative",
        ),
        (
            "arrival_s,input_len,output_len\n1,,3\n",
            TraceFormat::Csv,
            "line 2: no `input_len`",
        ),
        (
            "arrival_s,input_len,output_len\n1,2.5,3\n",
            TraceFormat::Csv,
            "line 2: `input_len` = 2.5 is not a whole number",
        ),
        (
            "arrival_s,input_len,output_len\n1,abc,3\n",
            TraceFormat::Csv,
            "line 2: `input_len` = `abc` is not a number",
        ),
        (
            "arrival_s,input_len,output_len\n",
            TraceFormat::Csv,
            "no requests",
        ),
        (
            "{\"arrival_s\": 1, \"input_len\": 2}\n",
            TraceFormat::Jsonl,
            "line 1: no `output_len`",
        ),
        (
            "{\"arrival_s\": -1, \"input_len\": 2, \"output_len\": 2}\n",
            TraceFormat::Jsonl,
            "line 1: `arrival_s` = -1 is negative",
        ),
        (
            "\n[1, 2]\n",
            TraceFormat::Jsonl,
            "line 2: not a JSON object",
        ),
        ("{oops\n", TraceFormat::Jsonl, "line 1: not a JSON object"),
        (
            "{\"arrival_s\": 1, \"input_len\": \"2\", \"output_len\": 2}\n",
            TraceFormat::Jsonl,
            "line 1: `input_len` = \"2\" is not a number",
        ),
        (
            "{\"arrival_s\": 1, \"input_len\": 0, \"output_len\": 2}\n",
            TraceFormat::Jsonl,
            "not a whole number of tokens >= 1",
        ),
        // Arrivals 10^15 s apart gave a time to first token of 0 (the clock's resolution
        // there is 0.125 s): refused, naming the line and the span.
        (
            "arrival_s,input_len,output_len\n5,2,3\n1e15,2,3\n",
            TraceFormat::Csv,
            "line 3: `arrival_s` = 1000000000000000 is 1.000e15 s after the first arrival (line 2)",
        ),
    ] {
        let e = parse_trace(text, fmt).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    // A trace runs as open traffic.
    let inf = engine(7, 1);
    let traffic = Traffic::Open(r);
    let d = cfg().deployment(None, traffic.max_context()).unwrap();
    let rep = Simulator::new(&inf).run(&d, &traffic, 0, &[]).unwrap();
    assert_eq!(rep.completed, 2);
    // Two equal requests 10^9 s apart (the longest span) each meet an idle system: the same
    // time to first token, to well under a microsecond.
    let far = parse_trace(
        "arrival_s,input_len,output_len\n0,100,5\n1e9,100,5\n",
        TraceFormat::Csv,
    )
    .unwrap();
    let traffic = Traffic::Open(far);
    let d = cfg().deployment(None, traffic.max_context()).unwrap();
    let rep = Simulator::new(&inf).run(&d, &traffic, 0, &[]).unwrap();
    let (lo, hi) = (rep.ttft.p50.0, rep.ttft.max.0);
    assert!(lo > 0.0 && (hi - lo).abs() < 1e-6, "{lo} {hi}");
}

#[test]
fn stats_quantiles() {
    let mut v = vec![4.0, 1.0, 3.0, 2.0, 5.0];
    let s = Stats::of(&mut v);
    assert_eq!((s.mean.0, s.p50.0, s.max.0), (3.0, 3.0, 5.0));
    assert!((s.p90.0 - 4.6).abs() < 1e-12 && (s.p99.0 - 4.96).abs() < 1e-12);
    assert_eq!(Stats::of(&mut []).mean.0, 0.0);
    let w = WorkloadSpec {
        input_len: Length::Range { min: 10, max: 20 },
        output_len: Length::Fixed(5),
        requests: 100,
        load: poisson(3.0),
        seed: 1,
    };
    let t = w.traffic();
    let r = t.requests();
    assert!(r.iter().all(|x| (10..=20).contains(&x.input)));
    assert!(r.windows(2).all(|p| p[0].arrival <= p[1].arrival));
    // Same seed, same lengths at another rate.
    let w2 = WorkloadSpec {
        load: poisson(30.0),
        ..w.clone()
    };
    let lens = |t: &Traffic| t.requests().iter().map(|x| x.input).collect::<Vec<_>>();
    assert_eq!(lens(&t), lens(&w2.traffic()));
}

/// Rates slower than one request per 17 minutes are refused naming the key: the simulator's
/// absolute clock would lose the latencies' digits (issue 24: 1e-320 gave NaN, 1e-12 a TTFT
/// 27% off).
#[test]
fn rates_below_the_minimum_are_refused() {
    let key = perfcast_core::Key::serving("rate");
    for r in [1e-320, 1e-12, 9.99e-4] {
        let e = check_rate(r, key.clone()).unwrap_err().to_string();
        assert!(
            e.contains("serving.rate") && e.contains("at least 0.001"),
            "{e}"
        );
    }
    check_rate(crate::MIN_RATE, key).unwrap();
}

/// A draft timed on the devices: one pass of the draft engine per draft token on top of the
/// verification step, its weights and KV cache beside the target's; a host that built no
/// draft engine gets an error naming the key.
#[test]
fn timed_drafts() {
    let target = engine(13, 1);
    let draft = engine(7, 1);
    let timed = |method| ServingConfig {
        speculative: Some(SpeculativeConfig {
            draft_len: 3,
            acceptance_rate: Some(0.8),
            draft_cost: None,
            method,
            draft_model: (method == DraftMethod::DraftModel).then(|| "llama2-7b".into()),
        }),
        ..cfg()
    };
    let c = timed(DraftMethod::DraftModel);
    let traffic = spec(&c, poisson(2.0)).traffic();
    let d = c.deployment(None, traffic.max_context()).unwrap();
    let e = Simulator::new(&target)
        .run(&d, &traffic, 0, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("serving.speculative.method"), "{e}");
    let with = Simulator::new(&target)
        .with_draft(Some(&draft))
        .run(&d, &traffic, 0, &[])
        .unwrap();
    let free = run(&target, &timed(DraftMethod::Ratio), poisson(2.0)).unwrap();
    assert_eq!(free.pools.len(), with.pools.len());
    assert!(with.tpot.mean.0 > free.tpot.mean.0);
    // A 7B draft beside a 13B target: its weights leave fewer KV blocks.
    assert!(with.pools[0].kv_blocks < free.pools[0].kv_blocks);
}
