use super::*;
use perfcast_core::op::CollectiveKind::{self, *};
use perfcast_core::topology::{CollectiveCost, GroupAxis, GroupPlacement};
use perfcast_core::{Bytes, Interconnect, Registry, Topology};
use serde_json::{json, Value};

fn registry() -> Registry {
    let mut r = Registry::new();
    register(&mut r).unwrap();
    perfcast_plugin_network::register(&mut r).unwrap();
    r
}

/// A DGX-like node: NVLink 450 GB/s per direction at line rate, 8 GPUs; NDR 50 GB/s NICs;
/// no latencies (closed forms).
fn net() -> Vec<Arc<dyn Interconnect>> {
    let r = registry();
    vec![
        r.interconnect(
            "nvlink",
            &json!({"bandwidth_gbs_bidir": 900.0, "domain_size": 8, "efficiency": 1.0,
                    "latency_us": 0.0, "base_latency_us": 0.0}),
        )
        .unwrap(),
        r.interconnect(
            "infiniband",
            &json!({"bandwidth_gbps": 400.0, "efficiency": 1.0, "latency_us": 0.0,
                    "base_latency_us": 0.0}),
        )
        .unwrap(),
    ]
}

/// No NCCL latencies either: bandwidth terms only, at full efficiency.
fn quiet() -> Value {
    json!({"ring_base_us": [0.0, 0.0, 0.0], "tree_base_us": [0.0, 0.0, 0.0],
           "ring_nvlink_hop_us": [0.0, 0.0, 0.0], "tree_nvlink_hop_us": [0.0, 0.0, 0.0],
           "ring_net_hop_us": [0.0, 0.0, 0.0], "tree_net_hop_us": [0.0, 0.0, 0.0],
           "nvls_hop_us": 0.0, "nvls_tree_net_hop_us": 0.0, "sharp_net_hop_us": 0.0,
           "net_efficiency": 1.0, "protocol": "simple"})
}

fn topo(kind: &str, mut params: Value) -> Arc<dyn Topology> {
    if params.get("collectives").is_none() && kind != "hierarchical" {
        params["collectives"] = quiet();
    }
    registry().topology(kind, &params).unwrap()
}

fn group(axes: &[(u64, u64)], devices: u64) -> GroupPlacement {
    let a: Vec<GroupAxis> = axes
        .iter()
        .map(|&(degree, stride)| GroupAxis { degree, stride })
        .collect();
    GroupPlacement::new(&a, devices).unwrap()
}

fn time(t: &Arc<dyn Topology>, g: &GroupPlacement, kind: CollectiveKind, s: f64) -> f64 {
    cost(t, g, kind, s).time.0
}

fn cost(t: &Arc<dyn Topology>, g: &GroupPlacement, kind: CollectiveKind, s: f64) -> CollectiveCost {
    let n = net();
    t.check(&n, g.devices()).unwrap();
    t.collective(&n, g, kind, Bytes(s)).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

const GB: f64 = 1e9;

/// Ring all-reduce over 8 ranks in one node: `2 (p-1)/p S / B_up`.
#[test]
fn ring_in_one_node_is_the_alpha_beta_formula() {
    let t = topo("fat-tree", json!({}));
    let g = group(&[(8, 1)], 1024);
    assert!(close(time(&t, &g, AllReduce, GB), 1.75 * GB / 450e9));
}

/// NVLS sends and receives `S (1 + 1/p)` per device at `nvls_efficiency` of the link.
#[test]
fn nvls_all_reduce_traffic_model() {
    let mut c = quiet();
    c["algorithm"] = json!("nvls");
    let t = topo("fat-tree", json!({"nvls": true, "collectives": c}));
    for p in [4u64, 8] {
        let g = group(&[(p, 1)], 1024);
        let want = GB * (1.0 + 1.0 / p as f64) / (450e9 * 0.8);
        assert!(close(time(&t, &g, AllReduce, GB), want), "p = {p}");
    }
    // Without NVLS in the switches the algorithm is refused, naming the key.
    let e = registry()
        .topology("fat-tree", &json!({"collectives": {"algorithm": "nvls"}}))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("collectives.algorithm") && e.contains("nvls = true"),
        "{e}"
    );
}

/// The data-parallel groups of a TP 8 x PP 4 x DP 32 plan (one rank per leaf) on a fat-tree
/// of 64-port switches (4 nodes per leaf): every ring edge leaves its leaf, so a 2:1
/// oversubscribed leaf halves the bandwidth and 4:1 quarters it; on a rail-optimised fabric
/// the same groups stay on their rail's leaf inside a scalable unit (32 nodes or more), but
/// for the few edges between units, and keep it.
#[test]
fn oversubscription_slows_groups_that_leave_their_leaf() {
    let devices = 1024;
    // TP 8 x PP 4 x DP 32: DP members 32 devices (4 nodes, one leaf) apart.
    let dp = group(&[(32, 32)], devices);
    let full = time(&topo("fat-tree", json!({})), &dp, AllReduce, GB);
    let ring = 2.0 * 31.0 / 32.0 * GB / 50e9;
    assert!(close(full, ring), "{full} vs {ring}");
    for o in [2.0, 4.0] {
        let t = topo("fat-tree", json!({"oversubscription": [o]}));
        assert!(close(time(&t, &dp, AllReduce, GB), o * full), "{o}");
        let rail = topo("rail-optimized", json!({"oversubscription": [o]}));
        assert!(close(time(&rail, &dp, AllReduce, GB), full), "{o}");
    }
    // The loads: every NIC of the group, and the leaf uplinks at the taper.
    let c = cost(
        &topo("fat-tree", json!({"oversubscription": [2.0]})),
        &dp,
        AllReduce,
        GB,
    );
    let l = c.loads.as_slice();
    assert_eq!(l[0].class, 0);
    assert!(
        close(l[0].busy.0, full) && close(l[1].busy.0, 2.0 * full),
        "{l:?}"
    );
}

/// Rail-only: rail-aligned rings as on a rail-optimised fabric; all-to-all across rails is
/// forwarded through NVLink; without forwarding a group across rails cannot be placed.
#[test]
fn rail_only_forwarding_and_refusal() {
    let devices = 256;
    let ep = group(&[(16, 1)], devices); // two nodes, all rails
    let only = topo("rail-only", json!({}));
    let opt = topo("rail-optimized", json!({"cross_rail": "spine"}));
    assert!(time(&only, &ep, AllToAll, GB) > 0.0);
    assert!(close(
        time(&only, &group(&[(32, 8)], devices), AllReduce, GB),
        time(&opt, &group(&[(32, 8)], devices), AllReduce, GB)
    ));
    let strict = topo("rail-only", json!({"forwarding": false}));
    let n = net();
    let e = strict
        .collective(&n, &ep, AllToAll, Bytes(GB))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rail-only") && e.contains("forwarding") && e.contains("rails"),
        "{e}"
    );
    // A misplaced key is refused.
    let e = registry()
        .topology("fat-tree", &json!({"forwarding": true}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("forwarding") && e.contains("rail-only"), "{e}");
}

/// SHARP all-reduce: each NIC sends and receives its share once (`S / r`) at the SHARP
/// efficiency; the busbw approaches `2 r B_nic 0.765`.
#[test]
fn sharp_all_reduce() {
    let mut c = quiet();
    c["algorithm"] = json!("sharp");
    let t = topo("rail-optimized", json!({"sharp": true, "collectives": c}));
    let g = group(&[(128, 1)], 1024);
    // Inside each node a reduce-scatter and an all-gather (no NVLS): 2 (r-1)/r S on NVLink,
    // pipelined with the fabric's part.
    let fabric = GB / 8.0 / (50e9 * 0.765);
    let nvlink = 2.0 * 7.0 / 8.0 * GB / 450e9;
    assert!(close(time(&t, &g, AllReduce, GB), fabric.max(nvlink)));
    let nvls = topo(
        "rail-optimized",
        json!({"sharp": true, "nvls": true, "collectives": c}),
    );
    assert!(close(time(&nvls, &g, AllReduce, GB), fabric));
}

#[test]
fn torus_rings_and_bad_dims() {
    let r = registry();
    // 4 x 4 x 2 torus of 8-GPU nodes = 256 devices; links 100 GB/s per direction.
    let t = r
        .topology(
            "torus",
            &json!({"dims": [4, 4, 2], "link_bandwidth_gbs": 100.0, "efficiency": 1.0,
                    "hop_latency_us": 0.0, "collectives": quiet()}),
        )
        .unwrap();
    let n = net();
    t.check(&n, 256).unwrap();
    // One rank per node along x (stride 8 devices = 1 node): a full ring of 4, both
    // directions: reduce-scatter + all-gather of S over 2 links.
    let g = group(&[(4, 8)], 256);
    let got = t.collective(&n, &g, AllReduce, Bytes(GB)).unwrap().time.0;
    assert!(close(got, 2.0 * 0.75 * GB / 200e9), "{got}");
    // Every other node along x: 2 members 2 hops apart both ways round the ring, each link
    // shared with the sibling group in between.
    let g2 = group(&[(2, 16)], 256);
    let got2 = t.collective(&n, &g2, AllReduce, Bytes(GB)).unwrap().time.0;
    assert!(close(got2, 2.0 * 0.5 * GB * 2.0 / 200e9), "{got2}");
    // Along y (stride 4 nodes): a full ring of 4 again.
    let gy = group(&[(4, 32)], 256);
    let goty = t.collective(&n, &gy, AllReduce, Bytes(GB)).unwrap().time.0;
    assert!(close(goty, got), "{goty}");
    let e = t.check(&n, 512).unwrap_err().to_string();
    assert!(e.contains("dims") && e.contains("512"), "{e}");
}

#[test]
fn dragonfly_minimal_is_slower_than_adaptive_across_groups() {
    // 4 NICs per router, 8 routers per group (32 devices per group), 4 global links each.
    let p = |routing: &str| {
        json!({"nics_per_router": 4, "routers_per_group": 8, "global_links_per_router": 4,
               "routing": routing})
    };
    let g = group(&[(16, 8)], 512); // one rank per node, 16 nodes across 4 groups
    let min = time(&topo("dragonfly", p("minimal")), &g, AllReduce, GB);
    let ada = time(&topo("dragonfly", p("adaptive")), &g, AllReduce, GB);
    assert!(min > ada, "{min} vs {ada}");
    let e = registry()
        .topology(
            "dragonfly",
            &json!({"nics_per_router": 0, "routers_per_group": 8,
                                        "global_links_per_router": 4}),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nics_per_router"), "{e}");
}

#[test]
fn nvl72_checks_the_rack_and_costs_its_trays() {
    let t = topo("nvl72", json!({}));
    let n = net(); // 8-GPU domains: not an NVL72
    let e = t.check(&n, 144).unwrap_err().to_string();
    assert!(
        e.contains("rack") && e.contains("72") && e.contains("8 GPUs"),
        "{e}"
    );
}

/// 16,384 GPUs of 64-port switches: rail-optimised needs three tiers, rail-only two per rail
/// (no spine), so fewer switches and optics; a 2:1 fat-tree fewer than a full-bisection one.
#[test]
fn costs_follow_the_wiring() {
    let n = net();
    let bill = |kind: &str, p: Value| topo(kind, p).cost(&n, 16384).unwrap().unwrap();
    let full = bill("fat-tree", json!({}));
    let half = bill("fat-tree", json!({"oversubscription": [2.0]}));
    let rail = bill("rail-optimized", json!({}));
    let only = bill("rail-only", json!({}));
    assert!(half.switches < full.switches && half.total_usd() < full.total_usd());
    assert!(only.switches < rail.switches && only.optics < rail.optics);
    assert!(only.total_usd() > 0.0);
}

#[test]
fn bad_parameters_name_the_key() {
    let r = registry();
    let cases = [
        ("fat-tree", json!({"radix": "64"}), "radix"),
        (
            "fat-tree",
            json!({"oversubscription": [0.5]}),
            "oversubscription[0]",
        ),
        ("fat-tree", json!({"tiers": 9}), "tiers"),
        (
            "fat-tree",
            json!({"collectives": {"net_efficiency": 1.5}}),
            "collectives.net_efficiency",
        ),
        (
            "fat-tree",
            json!({"prices": {"optic_usd": -1.0}}),
            "prices.optic_usd",
        ),
        ("rail-only", json!({"radixx": 64}), "radixx"),
        (
            "torus",
            json!({"dims": [], "link_bandwidth_gbs": 1.0}),
            "dims",
        ),
        ("hierarchical", json!({"levels": 2}), "levels"),
    ];
    for (kind, p, key) in cases {
        let e = r.topology(kind, &p).err().unwrap().to_string();
        assert!(e.contains(key), "{kind}: {e}");
    }
}
