//! Tests of the engines' scheduling policies: prefill-first batching (SGLang) against mixed
//! batches (TensorRT-LLM, vLLM), and the admission reserve of on-demand KV allocation.

use super::*;
use perfcast_engine::inference::{Inference, InferenceOptions};
use perfcast_testkit::flat::h100;
use perfcast_testkit::llama2;

fn run(c: &ServingConfig, load: Load) -> Result<ServingReport, perfcast_core::ModelError> {
    let inf = Inference::new(llama2(7), h100(1), InferenceOptions::default()).unwrap();
    let spec = WorkloadSpec {
        input_len: c.input_len.unwrap(),
        output_len: c.output_len.unwrap(),
        requests: c.requests,
        load,
        seed: c.seed,
    };
    let traffic = spec.traffic();
    let d = c.deployment(None, traffic.max_context())?;
    Simulator::new(&inf).run(&d, &traffic, c.seed, &[])
}

fn cfg() -> ServingConfig {
    ServingConfig {
        input_len: Some(Length::Fixed(2000)),
        output_len: Some(Length::Fixed(200)),
        requests: 60,
        ..ServingConfig::default()
    }
}

/// Prefill-first runs each prompt in a step of its own, the decodes paused: under arrivals
/// spread in time, a shorter time to first token than mixed batches (a prompt's step carries
/// no decodes). (In a closed loop of equal requests it keeps the clients in waves, which a
/// mixed batch spreads out: the order can turn there, and the time per output token is not
/// ordered in general.)
#[test]
fn prefill_first_trades_decode_stalls_for_first_tokens() {
    let load = Load::Rate {
        rate: 3.0,
        process: ArrivalProcess::Poisson,
    };
    let mixed = run(&cfg(), load).unwrap();
    let pf = run(
        &ServingConfig {
            batching: Batching::PrefillFirst,
            ..cfg()
        },
        load,
    )
    .unwrap();
    assert_eq!((mixed.completed, pf.completed), (60, 60));
    assert!(pf.ttft.mean.0 < mixed.ttft.mean.0, "{pf:?}\n{mixed:?}");
    assert_ne!(pf.pools[0].steps, mixed.pools[0].steps);
    // A lone request sees no difference: nothing to pause.
    let one = |b| {
        let c = ServingConfig {
            requests: 1,
            batching: b,
            ..cfg()
        };
        run(&c, Load::Burst).unwrap().e2e.mean.0
    };
    assert_eq!(one(Batching::Mixed), one(Batching::PrefillFirst));
}

/// Under on-demand allocation, a reserve of the running requests' whole remaining output
/// admits no more than the cache can finish (no preemption); none admits greedily and
/// preempts; both complete every request.
#[test]
fn the_admission_reserve_prevents_preemption() {
    let base = ServingConfig {
        input_len: Some(Length::Fixed(1000)),
        output_len: Some(Length::Fixed(600)),
        requests: 40,
        kv_memory_fraction: 0.25,
        kv_admission: KvAdmission::OnDemand,
        ..cfg()
    };
    for batching in [Batching::Mixed, Batching::PrefillFirst] {
        let greedy = run(
            &ServingConfig {
                batching,
                ..base.clone()
            },
            Load::Burst,
        )
        .unwrap();
        let reserved = run(
            &ServingConfig {
                batching,
                admission_reserve: 1.0,
                ..base.clone()
            },
            Load::Burst,
        )
        .unwrap();
        assert_eq!((greedy.completed, reserved.completed), (40, 40));
        assert!(greedy.preemptions > 0, "{batching:?}: {greedy:?}");
        assert_eq!(reserved.preemptions, 0, "{batching:?}: {reserved:?}");
    }
}

#[test]
fn a_reserve_outside_zero_to_one_is_refused() {
    for bad in [-0.1, 1.5, f64::NAN] {
        let c = ServingConfig {
            admission_reserve: bad,
            ..cfg()
        };
        let e = run(&c, Load::Burst).unwrap_err().to_string();
        assert!(e.contains("serving.admission_reserve"), "{e}");
    }
    // The key and the policy parse from a configuration.
    let c: ServingConfig =
        toml::from_str("batching = \"prefill-first\"\nadmission_reserve = 0.7").unwrap();
    assert_eq!(
        (c.batching, c.admission_reserve),
        (Batching::PrefillFirst, 0.7)
    );
    let e = toml::from_str::<ServingConfig>("batching = \"prefill-last\"").unwrap_err();
    assert!(e.to_string().contains("prefill-first"), "{e}");
}
