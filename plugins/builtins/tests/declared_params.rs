//! Every built-in declares its parameters, and the declarations are true: each declared name
//! is a key the plugin accepts, each fixed default is a value it accepts, each required
//! parameter is refused when left out, and no accepted key goes undeclared (the plugin's own
//! "unknown key" error lists what it accepts).

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_core::{Component, ParamDefault, Registry};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The smallest valid parameters of each kind that has required ones.
fn minimal(kind: &str) -> Value {
    match kind {
        "gpu" => {
            json!({"matrix_tflops": {"bf16": 312.0}, "vector_tflops": {"fp32": 19.5}, "sm_count": 108})
        }
        "hbm" | "dram" | "host-dram" => json!({"capacity_gb": 80.0, "bandwidth_tbs": 2.0}),
        "sram" => json!({"capacity_mb": 40.0, "bandwidth_tbs": 7.0}),
        "nvlink" => json!({"bandwidth_gbs_bidir": 600.0, "domain_size": 8}),
        "infiniband" | "roce" => json!({"bandwidth_gbps": 200.0}),
        "torus" => json!({"dims": [4, 4], "link_bandwidth_gbs": 50.0}),
        "tech/dram-generation" => json!({"generation": "HBM3", "units": 5}),
        "tech/link-generation" => json!({"generation": "nvlink4"}),
        "tech/node-scaled-gpu" | "tech/node-sram" => json!({"node_nm": 7}),
        "dragonfly" => {
            json!({"nics_per_router": 4, "routers_per_group": 8, "global_links_per_router": 4})
        }
        _ => json!({}),
    }
}

/// What a hardware component computes from its parameters, for comparing a component built
/// with a default left out against one with the declared default written in (`None` for
/// the execution plugins, whose behaviour has no such fingerprint).
fn fingerprint(c: &Component) -> Option<Vec<f64>> {
    use perfcast_core::{Bytes, Collective, CollectiveAlgorithm, CollectiveKind, DType, Engine};
    let gemm =
        perfcast_core::ComputeOp::Gemm(perfcast_core::Gemm::new(2048, 4608, 96, DType::Bf16));
    match c {
        Component::ComputeUnit(u) => Some(vec![
            u.peak(Engine::Matrix, DType::Bf16).map_or(0.0, |p| p.0),
            u.peak(Engine::Vector, DType::Fp32).map_or(0.0, |p| p.0),
            u.efficiency(&gemm),
            u.launch_overhead().0,
            u.gemm_tile() as f64,
        ]),
        Component::MemoryTier(t) => Some(vec![
            t.capacity().0,
            t.bandwidth().0,
            t.efficiency(),
            t.latency().0,
        ]),
        Component::Interconnect(l) => {
            let c = Collective {
                kind: CollectiveKind::AllReduce,
                bytes: Bytes(1e6),
                ranks: 8,
            };
            Some(vec![
                l.bandwidth().0,
                l.latency().0,
                l.domain_size() as f64,
                l.collective_time(&c, CollectiveAlgorithm::Auto).0,
            ])
        }
        _ => None,
    }
}

/// The keys a plugin's "unknown key" error says it allows.
fn accepted_keys(r: &Registry, cat: perfcast_core::Category, kind: &str) -> BTreeSet<String> {
    let mut p = minimal(kind);
    p["__perfcast_probe__"] = json!(1);
    let e = r
        .build(cat, kind, &p)
        .err()
        .expect("a probe key is refused")
        .to_string();
    let allowed = e
        .split("(allowed: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{kind}: no allowed list in: {e}"));
    allowed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

#[test]
fn every_builtin_declares_its_parameters_truthfully() {
    let r = perfcast_builtins::registry().unwrap();
    let infos: Vec<_> = r.plugins().cloned().collect();
    assert!(infos.len() >= 27, "{}", infos.len());
    for info in infos {
        let (cat, kind) = (info.category, info.name.as_str());
        let params = info
            .params
            .unwrap_or_else(|| panic!("{cat} `{kind}` declares no parameters"));
        let base = minimal(kind);
        assert!(
            r.build(cat, kind, &base).is_ok(),
            "{kind}: minimal params refused"
        );
        let declared: BTreeSet<String> = params.iter().map(|p| p.name.to_string()).collect();
        assert_eq!(
            declared.len(),
            params.len(),
            "{kind}: a name declared twice"
        );
        assert_eq!(
            declared,
            accepted_keys(&r, cat, kind),
            "{kind}: declared vs accepted"
        );
        for p in &params {
            assert!(
                !p.doc.is_empty() && !p.source.is_empty(),
                "{kind}.{}: no doc or source",
                p.name
            );
            match &p.default {
                ParamDefault::Value(v) => {
                    let t: toml::Table = toml::from_str(&format!("v = {v}")).unwrap_or_else(|e| {
                        panic!("{kind}.{}: default `{v}` is not TOML: {e}", p.name)
                    });
                    let mut with = base.clone();
                    with[p.name.as_ref()] = serde_json::to_value(&t["v"]).unwrap();
                    let got = r.build(cat, kind, &with);
                    assert!(
                        got.is_ok(),
                        "{kind}.{} = {v}: {:?}",
                        p.name,
                        got.as_ref().err().map(|e| e.to_string())
                    );
                    // The declared default is the one in force when the key is left out.
                    let left_out = r.build(cat, kind, &base).unwrap();
                    assert_eq!(
                        fingerprint(&got.unwrap()),
                        fingerprint(&left_out),
                        "{kind}.{}: the declared default {v} is not the one in force",
                        p.name
                    );
                }
                ParamDefault::Required => {
                    let mut without = base.clone();
                    without.as_object_mut().unwrap().remove(p.name.as_ref());
                    assert!(
                        r.build(cat, kind, &without).is_err(),
                        "{kind}.{} is not required",
                        p.name
                    );
                }
                ParamDefault::Derived(how) => assert!(!how.is_empty()),
            }
        }
    }
}
