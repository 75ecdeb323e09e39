//! Software stacks through the scenario layer: every shipped stack resolves; the stack sits
//! beneath everything the user sets; origins, bad names, bad keys and bad values are named.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_config::{stack_names, Config, Sources};
use perfcast_core::parallel::CpComm;
use perfcast_core::AttentionKind;
use perfcast_engine::inference::InferenceOptions;
use perfcast_engine::software::SelectiveRecompute;
use perfcast_engine::training::Fp8Recipe;
use perfcast_engine::TrainingOptions;
use perfcast_scenario::stack::{option_key, GpuGeneration, TpComm, MAPPING};
use perfcast_scenario::{Stack, StackKind};
use std::path::{Path, PathBuf};

/// The views a command reads, each from the configuration resolved as that command resolves it.
fn tplan(
    cfg: &Config,
) -> Result<Option<perfcast_engine::TrainingPlan>, perfcast_scenario::ScenarioError> {
    perfcast_scenario::training::plan(&perfcast_scenario::Scenario::training(cfg))
}
fn topts(
    cfg: &Config,
) -> Result<perfcast_engine::TrainingOptions, perfcast_scenario::ScenarioError> {
    perfcast_scenario::training::options(&perfcast_scenario::Scenario::training(cfg))
}
fn iopts(
    cfg: &Config,
) -> Result<perfcast_engine::inference::InferenceOptions, perfcast_scenario::ScenarioError> {
    perfcast_scenario::inference::options(&perfcast_scenario::Scenario::inference(cfg))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh directory under the target directory (not `$TMPDIR`).
fn tmpdir() -> PathBuf {
    perfcast_testkit::tmpdir("perfcast-scenario-stacks")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load(files: &[PathBuf], sets: &[&str]) -> Result<Config, String> {
    Config::load(
        &Sources::files(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            files.iter().cloned(),
        )
        .with_sets(sets.iter().map(|s| s.to_string()))
        .without_env(),
    )
    .map_err(|e| e.to_string())
}

/// A training configuration: Llama 3 8B on a DGX node (`node` a systems preset).
fn training_file(dir: &Path, node: &str, extra: &str) -> PathBuf {
    write(
        dir,
        "train.toml",
        &format!(
            "include = [\"preset:llama3-8b\", \"preset:{node}\"]\n{extra}\n[plan]\ntp = 2\nsp = true\nglobal_batch = 128\nzero_stage = 1\n"
        ),
    )
}

/// Where a `[software]` key lands among the options, by the one mapping table: (software key,
/// training option, inference option).
#[test]
fn option_key_follows_the_mapping() {
    let table: &[(&str, Option<&str>, Option<&str>)] = &[
        (
            "efficiency.gemm",
            Some("engine.efficiency.gemm"),
            Some("efficiency.gemm"),
        ),
        ("efficiency.", None, None),
        (
            "host.kernel_launch_us",
            Some("engine.host.kernel_launch_us"),
            Some("host_launch_us"),
        ),
        ("fused.norm", Some("engine.fused.norm"), None),
        (
            "overlap.tp_comm_efficiency",
            Some("strategy_params.tensor.overlap_efficiency"),
            None,
        ),
        // A plan field, several options, a key no row has.
        ("attention.kernel", None, None),
        ("overlap.param_gather_efficiency", None, None),
        ("efficency.gemm", None, None),
        (
            "serving.collective_overhead_us",
            None,
            Some("collective_overhead_us"),
        ),
    ];
    for &(sw, train, infer) in table {
        assert_eq!(option_key(sw, true).as_deref(), train, "{sw} (training)");
        assert_eq!(option_key(sw, false).as_deref(), infer, "{sw} (inference)");
    }
}

#[test]
fn every_shipped_stack_resolves_and_cites_its_sources() {
    let names = stack_names();
    assert!(names.len() >= 15, "{names:?}");
    for name in &names {
        let cfg = load(&[], &[&format!("stack={name}")]).unwrap();
        let s = Stack::from_config(&cfg, StackKind::Any).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!s.description.is_empty() && !s.family.is_empty(), "{name}");
        let text =
            std::fs::read_to_string(repo().join(format!("configs/stacks/{name}.toml"))).unwrap();
        if name.as_str() != "generic" {
            assert!(text.contains("Sources"), "{name}: no sources");
            assert_ne!(s.kind, StackKind::Any, "{name}");
        }
    }
    for needed in [
        "megatron-lm-2021",
        "megatron-core-2024",
        "megatron-core-2025",
        "meta-llama3-2024",
        "torchtitan-eager-2025",
        "torchtitan-compile-2025",
        "torchtitan-compile-asynctp-2025",
        "megatron-deepspeed-2022",
        "llm-foundry-2023",
        "tensorrt-llm-0.x",
        "tensorrt-llm-1.x",
        "vllm-2025",
    ] {
        assert!(names.iter().any(|n| n == needed), "{needed}");
    }
}

/// No stack at all is `generic`: the same plans and options, training and inference; those
/// are the engines' defaults but for the efficiencies (the cross-validated middle of the
/// known stacks' fitted values, `configs/stacks/generic.toml`).
#[test]
fn no_stack_is_generic_the_engines_defaults_with_the_middle_efficiencies() {
    let d = tmpdir();
    let f = training_file(&d, "dgx-h100", "");
    let none = load(std::slice::from_ref(&f), &[]).unwrap();
    let generic = load(&[f], &["stack=generic"]).unwrap();
    assert_eq!(tplan(&none).unwrap(), tplan(&generic).unwrap());
    assert_eq!(topts(&none).unwrap(), topts(&generic).unwrap());
    let mut o = topts(&none).unwrap();
    let e = o.engine.efficiency;
    assert!(
        e.gemm < 1.0 && e.attention == e.gemm && e.vector == 1.0,
        "{e:?}"
    );
    o.engine.efficiency = Default::default();
    assert_eq!(o, TrainingOptions::default());
    let i = write(
        &d,
        "infer.toml",
        "include = [\"preset:llama2-7b\", \"preset:dgx-h100\"]\n[inference]\nbatch = 8\ninput_len = 128\noutput_len = 64\n",
    );
    let none = load(std::slice::from_ref(&i), &[]).unwrap();
    let generic = load(&[i], &["stack=generic"]).unwrap();
    assert_eq!(iopts(&none).unwrap(), iopts(&generic).unwrap());
    let mut o = iopts(&none).unwrap();
    o.efficiency = Default::default();
    assert_eq!(o, InferenceOptions::default());
}

/// A plan that names an interleaved schedule but no degree runs its framework's default
/// (torchtitan: 2 stages per rank); a degree the user gives, another schedule or a stack
/// without a default keeps the plan's.
#[test]
fn an_interleaved_schedule_without_a_degree_takes_the_stacks() {
    let d = tmpdir();
    let f = training_file(&d, "dgx-h100", "");
    let vpp = |sets: &[&str]| {
        let mut all = vec!["plan.pp=4"];
        all.extend_from_slice(sets);
        tplan(&load(std::slice::from_ref(&f), &all).unwrap())
            .unwrap()
            .unwrap()
            .vpp
    };
    let titan = "stack=torchtitan-compile-2025";
    let looped = "plan.schedule=\"interleaved-1f1b\"";
    assert_eq!(vpp(&[titan, looped]), 2);
    assert_eq!(vpp(&[titan, looped, "plan.vpp=4"]), 4);
    assert_eq!(vpp(&[titan]), 1);
    assert_eq!(vpp(&["stack=megatron-core-2024", looped]), 1);
}

#[test]
fn the_stack_sits_beneath_everything_the_user_sets() {
    let d = tmpdir();
    let f = training_file(&d, "dgx-a100", "stack = \"megatron-lm-2021\"\n");
    let cfg = load(std::slice::from_ref(&f), &[]).unwrap();
    let p = tplan(&cfg).unwrap().unwrap();
    assert_eq!(p.attention, AttentionKind::Plain);
    assert!(!p.overlap_grad_reduce && !p.overlap_param_gather && !p.tp_comm_overlap);
    // The user's [software] beats the stack; the user's [plan] beats both.
    let over = write(&d, "over.toml", "[software.overlap]\ngrad_reduce = true\nparam_gather = true\n[plan]\noverlap_param_gather = false\n");
    let cfg = load(&[f.clone(), over], &["plan.attention=\"cudnn\""]).unwrap();
    let p = tplan(&cfg).unwrap().unwrap();
    assert!(p.overlap_grad_reduce && !p.overlap_param_gather);
    assert_eq!(p.attention, AttentionKind::Cudnn);
    // --set stack= replaces the file's stack.
    let cfg = load(std::slice::from_ref(&f), &["stack=meta-llama3-2024"]).unwrap();
    let p = tplan(&cfg).unwrap().unwrap();
    assert_eq!(
        (p.cp_comm, p.overlap_grad_reduce),
        (CpComm::AllGather, true)
    );
    let o = topts(&cfg).unwrap();
    assert_eq!(
        o.strategy_params["zero"]["reshard_after_forward"],
        serde_json::json!(false)
    );
    // A strategy parameter the user set, and strategies not in use, are left alone.
    let cfg = load(
        std::slice::from_ref(&f),
        &[
            "stack=meta-llama3-2024",
            "options.strategy_params.zero.reshard_after_forward=true",
        ],
    )
    .unwrap();
    let o = topts(&cfg).unwrap();
    assert_eq!(
        o.strategy_params["zero"]["reshard_after_forward"],
        serde_json::json!(true)
    );
    let cfg = load(
        &[f],
        &[
            "stack=meta-llama3-2024",
            "options.strategies=[\"tensor\", \"pipeline\", \"data\"]",
        ],
    )
    .unwrap();
    assert!(topts(&cfg).unwrap().strategy_params.is_empty());
}

#[test]
fn option_fields_follow_the_stack() {
    let d = tmpdir();
    let f = training_file(&d, "dgx-h100", "stack = \"torchtitan-compile-2025\"\n");
    let cfg = load(
        std::slice::from_ref(&f),
        &["options.engine.host.kernel_launch_us=3.0"],
    )
    .unwrap();
    let e = topts(&cfg).unwrap().engine;
    assert_eq!(e.selective_recompute, SelectiveRecompute::OpSac);
    assert!(e.fsdp.per_parameter && e.fused.cross_entropy && !e.host.cuda_graphs);
    assert_eq!(e.host.kernel_launch_us, 3.0, "the user's value wins");
    // The compiled stack keeps the engine's fused quantisation costs; the eager one sets its
    // own, field by field, over them.
    assert!(e.fp8_recipes.is_empty());
    // torchao recasts each micro-batch's weights and Megatron-Core's schedule does not
    // overlap them; Megatron-Core (and the stacks built on it) caches Transformer Engine's
    // quantised weights per step and overlaps interleaved hand-offs, unless the user says
    // otherwise.
    assert!(!e.fp8_weight_cache);
    assert!(!topts(&cfg)
        .unwrap()
        .strategy_params
        .contains_key("pipeline"));
    for stack in ["megatron-core-2024", "megatron-core-2025"] {
        let cfg = load(std::slice::from_ref(&f), &[&format!("stack={stack}")]).unwrap();
        let o = topts(&cfg).unwrap();
        assert!(o.engine.fp8_weight_cache, "{stack}");
        assert_eq!(
            o.strategy_params["pipeline"]["overlap_p2p"], true,
            "{stack}"
        );
    }
    let cfg = load(
        std::slice::from_ref(&f),
        &[
            "stack=megatron-core-2024",
            "options.engine.fp8_weight_cache=false",
            "options.strategy_params.pipeline.overlap_p2p=false",
        ],
    )
    .unwrap();
    let o = topts(&cfg).unwrap();
    assert!(!o.engine.fp8_weight_cache);
    assert_eq!(o.strategy_params["pipeline"]["overlap_p2p"], false);
    let cfg = load(std::slice::from_ref(&f), &["stack=torchtitan-eager-2025"]).unwrap();
    let e = topts(&cfg).unwrap().engine;
    let t = e.recipe_costs(Fp8Recipe::Tensorwise);
    let fused = Fp8Recipe::Tensorwise.costs();
    assert_eq!((t.cast, t.amax, t.kernels), (27.0, 6.0, 7));
    assert_eq!(t.scale, fused.scale, "unset fields keep the engine's");
    assert_eq!(e.recipe_costs(Fp8Recipe::Mx), Fp8Recipe::Mx.costs());
    // The stack's recipe for an fp8 plan that names none; a named one stays.
    let p = tplan(&load(std::slice::from_ref(&f), &["plan.precision=\"fp8\""]).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(p.fp8_recipe, Some(Fp8Recipe::Tensorwise));
    let p = tplan(
        &load(
            std::slice::from_ref(&f),
            &["plan.precision=\"fp8\"", "plan.fp8_recipe=\"rowwise\""],
        )
        .unwrap(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(p.fp8_recipe, Some(Fp8Recipe::Rowwise));
    let p = tplan(&load(std::slice::from_ref(&f), &[]).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(p.fp8_recipe, None, "a bf16 plan takes no recipe");
    let i = write(
        &d,
        "infer.toml",
        "stack = \"vllm-2025\"\ninclude = [\"preset:llama2-7b\", \"preset:dgx-h100\"]\n[inference]\nbatch = 8\ninput_len = 128\noutput_len = 64\n",
    );
    let cfg = load(&[i], &[]).unwrap();
    let o = iopts(&cfg).unwrap();
    assert_eq!(
        (o.usable_memory_fraction, o.decode_kv_group_reread),
        (0.9, 0.0)
    );
    // The kernel tables time TensorRT-LLM 1.x's fused MoE and attention kernels: the 0.x
    // engines' MoE plugin is not that module (their attention kernels are those of the
    // tables, v0.5-v0.6's are not), vLLM runs kernels of its own.
    for (stack, moe, attention) in [
        ("tensorrt-llm-0.5", false, false),
        ("tensorrt-llm-0.x", false, true),
        ("tensorrt-llm-1.x", true, true),
        ("vllm-2025", false, false),
    ] {
        let f = write(
            &d,
            "moe.toml",
            &format!("stack = \"{stack}\"\ninclude = [\"preset:mixtral-8x7b\", \"preset:dgx-h100\"]\n[inference]\nbatch = 8\ninput_len = 128\noutput_len = 64\n"),
        );
        let o = iopts(&load(&[f], &[]).unwrap()).unwrap();
        assert_eq!(
            (o.measured_moe, o.measured_attention),
            (moe, attention),
            "{stack}"
        );
    }
    let s = perfcast_scenario::InferenceScenario::from_config(&cfg).unwrap();
    assert!(s.plan.graph_capture);
    assert_eq!(
        s.plan.attention,
        AttentionKind::Flash3,
        "FlashAttention-3 on Hopper"
    );
}

#[test]
fn the_gpu_generation_picks_the_kernel() {
    let d = tmpdir();
    for (node, want) in [
        ("dgx-a100", AttentionKind::Flash),
        ("dgx-h100", AttentionKind::Cudnn),
    ] {
        let f = training_file(&d, node, "stack = \"megatron-core-2025\"\n");
        let cfg = load(&[f], &[]).unwrap();
        assert!(perfcast_scenario::stack::generation(&cfg)
            .unwrap()
            .is_some());
        assert_eq!(tplan(&cfg).unwrap().unwrap().attention, want, "{node}");
    }
    let f = training_file(&d, "dgx-h100", "stack = \"megatron-core-2024\"\n");
    let cfg = load(&[f], &["device.generation=\"pascal\""]).unwrap();
    let e = tplan(&cfg).unwrap_err().to_string();
    assert!(
        e.contains("device.generation") && e.contains("--set") && e.contains("hopper"),
        "{e}"
    );
    assert_eq!(GpuGeneration::parse("Hopper"), Some(GpuGeneration::Hopper));
}

#[test]
fn origins_name_the_stack_file_and_line() {
    let cfg = load(&[], &["stack=megatron-lm-2022"]).unwrap();
    let line_of = |name: &str, key: &str| {
        let text =
            std::fs::read_to_string(repo().join(format!("configs/stacks/{name}.toml"))).unwrap();
        1 + text.lines().position(|l| l.starts_with(key)).unwrap()
    };
    let own = line_of("megatron-lm-2022", "selective =");
    assert_eq!(
        cfg.origin_of("software.recompute.selective").unwrap(),
        format!("stack:megatron-lm-2022:{own}")
    );
    let base = line_of("megatron-lm-2021", "tp_comm =");
    assert_eq!(
        cfg.origin_of("software.overlap.tp_comm").unwrap(),
        format!("stack:megatron-lm-2021:{base} (base of stack:megatron-lm-2022)")
    );
    let rows = cfg.explain();
    let row = rows
        .iter()
        .find(|r| r.key == "software.attention.kernel")
        .unwrap();
    assert!(row.source.starts_with("stack:megatron-lm-2022:"), "{row:?}");
    let row = rows.iter().find(|r| r.key == "stack").unwrap();
    assert_eq!(row.source, "--set stack=megatron-lm-2022");
}

#[test]
fn bad_stacks_are_named() {
    let d = tmpdir();
    // An unknown name lists the nearest ones.
    let e = load(&[], &["stack=torchtitan-compiled-2025"]).unwrap_err();
    assert!(
        e.contains("unknown stack `torchtitan-compiled-2025`")
            && e.contains("nearest: torchtitan-compile-2025")
            && e.contains("--set stack="),
        "{e}"
    );
    // A stack file with an unknown key: named with its file and line when read.
    let my = write(
        &d,
        "my-stack.toml",
        "stack = \"megatron-core-2024\"\n[software.overlap]\ntp_comms = \"on\"\n",
    );
    let cfg = load(&[], &[&format!("stack={}", my.display())]).unwrap();
    let e = Stack::from_config(&cfg, StackKind::Any)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("software.overlap.tp_comms") && e.contains("my-stack.toml:3"),
        "{e}"
    );
    // A stack file may hold only [software] and its base.
    let bad = write(&d, "plan-stack.toml", "[plan]\ntp = 2\n");
    let e = load(&[], &[&format!("stack={}", bad.display())]).unwrap_err();
    assert!(
        e.contains("plan-stack.toml") && e.contains("found `plan`"),
        "{e}"
    );
    // A cycle of stack files.
    let a = d.join("a.toml");
    write(&d, "b.toml", &format!("stack = \"{}\"\n", a.display()));
    write(&d, "a.toml", "stack = \"b.toml\"\n");
    let e = load(&[], &[&format!("stack={}", a.display())]).unwrap_err();
    assert!(e.contains("cycle"), "{e}");
    // Not a string; a stack included like a preset.
    let e = load(&[], &["stack=3"]).unwrap_err();
    assert!(e.contains("`stack`") && e.contains("a number"), "{e}");
    let inc = write(&d, "inc.toml", "include = [\"preset:vllm-2025\"]\n");
    let e = load(&[inc], &[]).unwrap_err();
    assert!(e.contains("stack = \"vllm-2025\""), "{e}");
    // Values out of range, named at their key.
    for (set, key) in [
        (
            "software.overlap.tp_comm_efficiency=1.5",
            "software.overlap.tp_comm_efficiency",
        ),
        ("software.fp8.recipe=\"mxfp8\"", "software.fp8.recipe"),
        (
            "software.attention.by_generation.hopper=\"plain\"",
            "software.attention.by_generation.hopper",
        ),
        ("software.efficiency.gemm=0", "software.efficiency.gemm"),
        (
            "software.fp8.recipes.mx.cast_bytes=-1",
            "software.fp8.recipes.mx.cast_bytes",
        ),
        (
            "software.fsdp.prefetch_depth=0",
            "software.fsdp.prefetch_depth",
        ),
        (
            "software.parallel.stages_per_rank=1",
            "software.parallel.stages_per_rank",
        ),
    ] {
        let cfg = load(&[], &[set]).unwrap();
        let e = Stack::from_config(&cfg, StackKind::Any)
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains("--set"), "{set}: {e}");
    }
    // A stack of the other kind.
    let f = training_file(&d, "dgx-h100", "stack = \"vllm-2025\"\n");
    let cfg = load(&[f], &[]).unwrap();
    let e = tplan(&cfg).unwrap_err().to_string();
    assert!(
        e.contains("inference runtime") && e.contains("training stack"),
        "{e}"
    );
}

#[test]
fn the_search_space_narrows_to_what_the_stack_has() {
    let cfg = load(&[], &["stack=megatron-lm-2021"]).unwrap();
    let s = Stack::from_config(&cfg, StackKind::Training).unwrap();
    let (mut tpo, mut ogr, mut opg) = (None, None, Some(vec![true, false]));
    s.narrow_search(&mut tpo, &mut ogr, &mut opg);
    assert_eq!(
        (tpo, ogr, opg),
        (
            Some(vec![false]),
            Some(vec![false]),
            Some(vec![true, false])
        )
    );
    let g = Stack::default();
    assert_eq!(g.overlap.tp_comm, TpComm::Available);
    let (mut tpo, mut ogr, mut opg) = (None, None, None);
    g.narrow_search(&mut tpo, &mut ogr, &mut opg);
    assert_eq!((tpo, ogr, opg), (None, None, None));
    // Megatron-LM v2 had no ZeRO, no sequence parallelism and whole-layer recompute only; a
    // dimension the [search] section sets is left as set.
    let (mut zero, mut sp, mut rc) = (None, None, Some(vec!["selective".to_string()]));
    s.narrow_parallel(&mut zero, &mut sp, &mut rc);
    assert_eq!(zero, Some(vec![0]));
    assert_eq!(sp, Some(vec![false]));
    assert_eq!(rc, Some(vec!["selective".to_string()]));
    let (mut zero, mut sp, mut rc) = (None, None, None);
    s.narrow_parallel(&mut zero, &mut sp, &mut rc);
    assert_eq!(rc, Some(vec!["none".to_string(), "full".to_string()]));
    g.narrow_parallel(&mut zero, &mut sp, &mut rc);
    let (mut zero, mut sp, mut rc) = (None, None, None);
    g.narrow_parallel(&mut zero, &mut sp, &mut rc);
    assert_eq!((zero, sp, rc), (None, None, None));
}

/// The user guide's "Software stacks" table (docs/configuration.md) lists every row of the
/// mapping.
#[test]
fn the_guide_shows_the_mapping() {
    let page = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    for (software, training, inference, what) in MAPPING {
        let row = format!(
            "| `{software}` | {} | {} | {what} |",
            cell(training),
            cell(inference)
        );
        assert!(
            page.contains(&row),
            "docs/configuration.md lacks the row\n{row}"
        );
    }
}

fn cell(s: &str) -> String {
    if s == "-" {
        "-".into()
    } else {
        format!("`{s}`")
    }
}
