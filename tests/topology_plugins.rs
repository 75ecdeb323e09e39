//! Topology plugins from shared libraries, end to end: two built-in topologies compiled as a
//! library (`topology-builtins-lib`: `lib/fat-tree`, `lib/rail-only`) give the compiled-in
//! results bit for bit, collective by collective and through a whole training evaluation;
//! the example third-party topology (`dragonfly-plus`) loads, answers its documented model
//! and refuses bad parameters naming the key.

use perfcast_core::op::CollectiveKind;
use perfcast_core::topology::{GroupAxis, GroupPlacement};
use perfcast_core::{Bytes, Interconnect, Registry};
use perfcast_engine::{Training, TrainingPlan};
use perfcast_loader::load_library;
use perfcast_testkit::plugins::build_rust;
use perfcast_testkit::{a100_from_registry, gpt};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

struct Libs {
    builtins: PathBuf,
    dragonfly_plus: PathBuf,
}

fn libs() -> &'static Libs {
    static L: OnceLock<Libs> = OnceLock::new();
    L.get_or_init(|| {
        let dir = perfcast_testkit::tmpdir("perfcast-topology-plugins");
        let v = build_rust(&["topology-builtins-lib", "dragonfly-plus"], &dir);
        Libs {
            builtins: v[0].clone(),
            dragonfly_plus: v[1].clone(),
        }
    })
}

/// The built-ins and one library.
fn registry(lib: &Path) -> Registry {
    let mut r = perfcast_builtins::registry().unwrap();
    load_library(lib, None, &mut r).unwrap();
    r
}

fn group(axes: &[(u64, u64)], devices: u64) -> GroupPlacement {
    let a: Vec<GroupAxis> = axes
        .iter()
        .map(|&(degree, stride)| GroupAxis { degree, stride })
        .collect();
    GroupPlacement::new(&a, devices).unwrap()
}

fn params() -> [Value; 3] {
    [
        json!({}),
        json!({"oversubscription": [2.0], "nvls": true, "sharp": true}),
        json!({"radix": 32, "oversubscription": [4.0],
               "collectives": {"algorithm": "hierarchical", "net_efficiency": 0.9}}),
    ]
}

#[test]
fn a_builtin_compiled_as_a_library_is_bit_identical() {
    let r = registry(&libs().builtins);
    let sys = a100_from_registry(&r, 1024).unwrap();
    let net: &[Arc<dyn Interconnect>] = &sys.network;
    let groups = [
        group(&[(8, 1)], 1024),
        group(&[(8, 128)], 1024),
        group(&[(16, 8)], 1024),
        group(&[(2, 1), (4, 2), (8, 32)], 1024),
        group(&[(1024, 1)], 1024),
    ];
    let kinds = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::AllToAll,
        CollectiveKind::SendRecv,
        CollectiveKind::Broadcast,
    ];
    for (builtin, lib) in [("fat-tree", "lib/fat-tree"), ("rail-only", "lib/rail-only")] {
        for p in params() {
            let a = r.topology(builtin, &p).unwrap();
            let b = r.topology(lib, &p).unwrap();
            assert_eq!(b.kind(), lib);
            a.check(net, 1024).unwrap();
            b.check(net, 1024).unwrap();
            assert_eq!(a.links(net, 1024).unwrap(), b.links(net, 1024).unwrap());
            assert_eq!(a.cost(net, 1024).unwrap(), b.cost(net, 1024).unwrap());
            for g in &groups {
                for k in kinds {
                    for s in [1024.0, 1e6, 3.3e9] {
                        let x = a.collective(net, g, k, Bytes(s)).unwrap();
                        let y = b.collective(net, g, k, Bytes(s)).unwrap();
                        assert_eq!(x, y, "{builtin} {p} {g:?} {k:?} {s}");
                    }
                }
            }
        }
    }
}

/// A whole evaluation on a system wired by the library's fat-tree equals the compiled-in one.
#[test]
fn an_evaluation_through_a_library_topology_is_bit_identical() {
    let r = registry(&libs().builtins);
    let plan = TrainingPlan {
        tp: 8,
        pp: 8,
        dp: 16,
        micro_batch: 1,
        global_batch: 512,
        recompute: "selective".into(),
        overlap_grad_reduce: true,
        ..TrainingPlan::default()
    };
    let p = json!({"oversubscription": [2.0]});
    let mut times = Vec::new();
    for kind in ["fat-tree", "lib/fat-tree"] {
        let mut sys = a100_from_registry(&r, 1024).unwrap();
        sys.topology = Some(r.topology(kind, &p).unwrap());
        let t = Training::new(gpt(96, 12288, 96), sys, &r).unwrap();
        times.push(t.evaluate(&plan).unwrap());
    }
    assert_eq!(
        serde_json::to_string(&times[0]).unwrap(),
        serde_json::to_string(&times[1]).unwrap()
    );
}

#[test]
fn the_example_topology_loads_and_answers_its_model() {
    let r = registry(&libs().dragonfly_plus);
    let info = r
        .plugins()
        .find(|p| p.name == "example/dragonfly-plus")
        .unwrap();
    assert_eq!(info.abi_version.as_deref(), Some("rust-abi_stable 1.4"));
    let p = json!({"nics_per_leaf": 32, "leaves_per_group": 8, "spines_per_group": 8,
                   "global_links_per_spine": 16});
    let t = r.topology("example/dragonfly-plus", &p).unwrap();
    let sys = a100_from_registry(&r, 1024).unwrap();
    t.check(&sys.network, 1024).unwrap();
    // One rank per node in 16 consecutive nodes (4 leaves of one group): a quarter of the
    // ring edges leave their leaf, 32 NICs share 8 uplinks: 0.25 x 4 = 1, no slowdown.
    let g = group(&[(16, 8)], 1024);
    let nic = &sys.network[1];
    let got = t
        .collective(&sys.network, &g, CollectiveKind::AllReduce, Bytes(1e9))
        .unwrap()
        .time
        .0;
    let want = nic.collective_overhead().0
        + 30.0 * nic.latency().0
        + 2.0 * 15.0 / 16.0 * 1e9 / nic.bandwidth().0;
    assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
    let cost = t.cost(&sys.network, 1024).unwrap().unwrap();
    assert!(cost.switches > 0.0 && cost.total_usd() > 0.0);
    let e = r
        .topology(
            "example/dragonfly-plus",
            &json!({"nics_per_leaf": 0, "leaves_per_group": 8,
                  "spines_per_group": 8, "global_links_per_spine": 16}),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nics_per_leaf"), "{e}");
    let e = r
        .topology("example/dragonfly-plus", &json!({"nics_per_leaf": "many"}))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("nics_per_leaf"), "{e}");
    // Too few global links for the groups: refused by check, naming the key and the plugin.
    let small = json!({"nics_per_leaf": 4, "leaves_per_group": 2, "spines_per_group": 1,
                       "global_links_per_spine": 1});
    let e = r
        .topology("example/dragonfly-plus", &small)
        .unwrap()
        .check(&sys.network, 1024)
        .unwrap_err()
        .to_string();
    assert!(e.contains("global_links_per_spine"), "{e}");
}

/// The example C topology (`plugins/examples/crossbar-c`, C ABI 1.5) loads and answers its
/// documented model: a ring on the innermost level one of whose domains holds the group,
/// `overhead + steps x latency + factor x bytes / bandwidth`; it names a link class per level
/// and refuses a system without levels naming the plugin.
#[test]
fn the_c_example_topology_answers_its_ring_model() {
    let dir = perfcast_testkit::tmpdir("perfcast-topology-crossbar-c");
    let src = perfcast_testkit::workspace_root().join("plugins/examples/crossbar-c/crossbar_c.c");
    let lib = perfcast_testkit::plugins::cc_shared(&dir, &src, "libcrossbar_c.so", &[]);
    let r = registry(&lib);
    let info = r
        .plugins()
        .find(|p| p.name == "example/crossbar-c")
        .unwrap();
    assert_eq!(info.abi_version.as_deref(), Some("c 1.7"));
    let t = r.topology("example/crossbar-c", &json!({})).unwrap();
    let sys = a100_from_registry(&r, 1024).unwrap();
    let net: &[Arc<dyn Interconnect>] = &sys.network;
    t.check(net, 1024).unwrap();
    let links = t.links(net, 1024).unwrap();
    assert_eq!(links.len(), net.len());
    assert_eq!(links[0].name, "level-0");
    let ring = |level: &Arc<dyn Interconnect>, steps: f64, factor: f64, s: f64| {
        level.collective_overhead().0 + steps * level.latency().0 + factor * s / level.bandwidth().0
    };
    let s = 1e8;
    // 8 neighbours: one NVLink domain.
    let inside = t
        .collective(
            net,
            &group(&[(8, 1)], 1024),
            CollectiveKind::AllReduce,
            Bytes(s),
        )
        .unwrap();
    let want = ring(&net[0], 14.0, 2.0 * 7.0 / 8.0, s);
    assert!(
        (inside.time.0 - want).abs() <= 1e-12 * want,
        "{inside:?} {want}"
    );
    assert!(inside.loads.is_empty());
    // 8 ranks 128 apart: the NIC level.
    let across = t
        .collective(
            net,
            &group(&[(8, 128)], 1024),
            CollectiveKind::AllGather,
            Bytes(s),
        )
        .unwrap();
    let last = net.last().unwrap();
    let want = ring(last, 7.0, 7.0 / 8.0, s);
    assert!(
        (across.time.0 - want).abs() <= 1e-12 * want,
        "{across:?} {want}"
    );
    let e = t.check(&[], 1024).unwrap_err().to_string();
    assert!(
        e.contains("example/crossbar-c") && e.contains("at least one network level"),
        "{e}"
    );
}
