//! The validation harness: each case mapped to a scenario of the engine, every published
//! metric the engine can predict compared with the measurement.
//!
//! Mapping (every rule shared by all cases; none is per case):
//!
//! * **Model**: `[case.model]` -> [`ModelSpec`] (`head_dim`, `kv_heads`, `ffn_act`; norms,
//!   positions and biases follow `ffn_act` as the core's defaults do). `tied_embeddings`, when
//!   the case does not say, follows the model family: GeLU models are Megatron/GPT style and
//!   share the input embedding with the output layer (Megatron-LM's default), gated (SwiGLU)
//!   and squared-ReLU models (Llama, Nemotron) keep them separate (their released configs set
//!   `tie_word_embeddings = false`).
//! * **System**: `system.gpu` -> its hardware preset of `configs/hardware/`, read through
//!   perfcast-config (or, for an accelerator without one, a generic GPU built from the catalog;
//!   [`presets`]); `num_gpus` devices;
//!   `scaleout_gbps_per_gpu` overrides the scale-out NIC rate. The scale-up domain is the
//!   preset's NVLink domain (the catalog's `scaleup_domain`), as the schema says.
//! * **Software stack** ([`crate::stacks`]): the case's `software` string is matched against
//!   the ordered rules of `configs/validation/stacks.toml`, the one documented table; the
//!   stack preset it names (`configs/stacks/`, read as `stack = "NAME"` is) sets the plan's
//!   attention kernel, overlaps and context-parallel exchange and the engine options, as for
//!   any configuration. Per-case facts stay with the case: `parallel.tp_comm_overlap` (a
//!   Megatron `--tp-comm-overlap`) turns TP overlap on where the stack offers it
//!   (`overlap.tp_comm = "available"`).
//! * **Placement**: expert-parallel plans use Megatron-Core's MoE rank order (pipeline
//!   stages outermost: [`placement`]); the others the engine's default. MoE token dispatch
//!   overlapped with another micro-batch's compute where the case sets
//!   `parallel.ep_comm_overlap`; `parallel.moe_routing = "balanced"` routes without load
//!   imbalance; `parallel.schedule` names GPipe, 1F1B or DualPipe (the zero-bubble
//!   schedules, not built in, run as 1F1B and the case's note says so).
//! * **Recompute** `unknown` (not published): the least recompute that fits in device memory
//!   (none, else selective, else full), the choice a practitioner makes.
//! * **Interleaving** listed in `assumed` (not published; the schema calls assumed values soft
//!   inputs): an interleaved schedule (`vpp` > 1) on a framework with a default degree
//!   (`software.parallel.stages_per_rank`: torchtitan's 2) runs that degree; otherwise the
//!   fastest plan that fits among the interleavings the layers allow
//!   ([`perfcast_core::parallel::interleaving_degrees`]), the degree a practitioner tunes.
//! * **Inference**: `fp8`/`fp4` precision is W8A8/W4A4 (fp8/fp4 GEMMs, as TensorRT-LLM runs
//!   FP8 on Hopper); `int8`/`int4` are weight-only (16-bit activations). KV cache in
//!   `kv_precision` (default: the precision, no narrower than fp8: `kv_dtype`). Static and latency modes are one batch prefilled
//!   then decoded; offline-max-throughput and server modes are simulated under in-flight
//!   batching by [`crate::serving`].
//!
//! Derived metrics follow the schema's FLOP conventions ([`crate::flops`]): TFLOP/s in the
//! case's `flops_convention` (and `attention_flops`), MFU/HFU against `peak_tflops_basis`.

use crate::cases::{
    Batch, Case, CaseSchedule, CasesFile, FlopsConvention, LayerScope, Metric, Mode, MoeRouting,
    Precision, Recompute, Task,
};
use crate::flops::{self, StepShape};
use crate::intervals::Residuals;
use crate::overlay::Overlay;
use crate::presets;
use crate::report::{CaseResult, MetricResult, Report};
use crate::stacks::{generation_of, StackTable};
use crate::{Error, Result};
use perfcast_config::Plugins;
use perfcast_core::parallel::interleaving_degrees;
use perfcast_core::registry::Registry;
use perfcast_core::workload::{FfnAct, ModelSpec};
use perfcast_core::{DType, System};
use perfcast_engine::inference::{Inference, InferenceOptions, InferencePlan, InferenceReport};
use perfcast_engine::training::{Placement, Training, TrainingPlan, TrainingReport};
use perfcast_scenario::stack::{BalancedGate, TpComm};
use perfcast_scenario::Stack;

/// Why a case cannot be modelled (before the engine is asked).
pub fn unsupported_reason(case: &Case) -> Option<String> {
    if let Some(i) = &case.inference {
        match i.mode {
            // Serving hook (issue 12): server and offline-max-throughput cases are simulated
            // by `crate::serving`.
            // An engine no profile knows runs with the fallback profile, never refused.
            Mode::OfflineMaxThroughput | Mode::Server => return None,
            Mode::Static | Mode::Latency => {}
        }
        if i.batch == Batch::Max {
            return Some(
                "inference.batch = \"max\": the engine-chosen batch is not published".into(),
            );
        }
    }
    None
}

/// The assumption behind every LoRA case: the schema has no rank or targets, so the stack's
/// adapters (on the projections the model has) stand in.
fn lora_note(engine: &Training) -> String {
    let l = engine.params().lora.for_model(engine.model());
    let targets: Vec<_> = l.targets.iter().map(|t| t.name()).collect();
    format!(
        "LoRA adapters not in the case: the stack's, rank {} on {}",
        l.rank,
        targets.join(", ")
    )
}

/// How an unpublished interleaving degree is chosen ([`Harness::assumed_interleaving`]).
enum Interleaving {
    /// The framework's default degree for an interleaved schedule.
    StackDefault(u32),
    /// The fastest degree that fits.
    Fastest,
}

/// The model of a case run on `stack`.
pub fn model_spec(case: &Case, stack: &Stack) -> ModelSpec {
    let m = &case.model;
    let seq_len = m.seq_len.unwrap_or_else(|| {
        case.inference
            .as_ref()
            .map(|i| i.input_len + i.output_len)
            .unwrap_or(2048)
    });
    ModelSpec {
        name: m.name.clone(),
        kv_heads: Some(m.kv_heads),
        head_dim: m.head_dim,
        tied_embeddings: m.tied_embeddings.unwrap_or(m.ffn_act == FfnAct::Gelu),
        moe: m.moe.map(|mut x| {
            // Balanced routing gives every expert the same share of the tokens (no load
            // imbalance); where it sends a token's experts is the stack's
            // (`software.moe.balanced_gate`).
            if case.parallel.moe_routing == Some(MoeRouting::Balanced) {
                x.load_imbalance = Some(1.0);
                if stack.moe.balanced_gate == BalancedGate::Consecutive
                    && x.experts.is_multiple_of(x.top_k)
                {
                    x.expert_groups = Some(x.experts / x.top_k);
                    x.group_top_k = Some(1);
                }
            }
            x
        }),
        attention: m.attention,
        mla: m.mla,
        ..ModelSpec::dense(
            m.layers,
            m.hidden,
            m.heads,
            m.ffn_hidden,
            m.ffn_act,
            m.vocab,
            seq_len,
        )
    }
}

/// The configuration sources of a case's system: the hardware of `system.gpu`
/// ([`presets::Hardware`]) with the case's scale-out NIC and device count.
pub fn case_hardware(case: &Case) -> Result<presets::Hardware> {
    let s = &case.system;
    let mut hw = presets::Hardware::of(&s.gpu)?;
    if let Some(g) = s.scaleout_gbps_per_gpu {
        // With no scale-out level in the hardware, the case's NIC becomes one.
        hw.set_scaleout_nic(g)?;
    }
    let devices = u32_of("system.num_gpus", s.num_gpus)?;
    hw.set("system.devices", devices);
    Ok(hw)
}

/// The system of a case ([`case_hardware`]), composed by perfcast-config through `plugins`.
pub fn system_for(case: &Case, plugins: &Plugins) -> Result<System> {
    case_hardware(case)?.system(plugins)
}

/// The training plan of a case with recompute policy `recompute` (a registry name), on
/// `stack`.
pub fn training_plan(case: &Case, recompute: &str, stack: &Stack) -> Result<TrainingPlan> {
    let p = case
        .training_parallel()
        .ok_or_else(|| Error::invalid("not a training case with all parallel degrees"))?;
    let t = training_of(case)?;
    let mut plan = TrainingPlan {
        tp: u32_of("parallel.tp", p.tp)?,
        pp: u32_of("parallel.pp", p.pp)?,
        dp: u32_of("parallel.dp", p.dp)?,
        cp: u32_of("parallel.cp", p.cp)?,
        ep: u32_of("parallel.ep", p.ep)?,
        vpp: u32_of("parallel.vpp", p.vpp)?,
        sp: p.sp,
        zero_stage: p.zero_stage as u8,
        micro_batch: u32_of("parallel.micro_batch", p.micro_batch)?,
        global_batch: u32_of("parallel.global_batch", p.global_batch)?,
        recompute: recompute.to_string(),
        recompute_layers: t
            .recompute_layers
            .map(|n| u32_of("training.recompute_layers", n))
            .transpose()?,
        etp: u32_of("parallel.etp", p_etp(case))?,
        moe_dispatcher: case.parallel.moe_dispatcher.unwrap_or_default(),
        ep_comm_overlap: p_flag(case.parallel.ep_comm_overlap),
        schedule: schedule_of(case),
        precision: t.precision.dtype(),
        fp8_recipe: t.fp8_recipe,
        fp32_grad_accum: false,
        dropout: None,
        // LoRA's rank and targets are not in the schema: the stack's defaults
        // (`EngineParams::lora`), an assumption of every LoRA case.
        task: t.task,
        ..TrainingPlan::default()
    };
    stack.apply_training_plan(&mut plan, &|_| false, generation_of(&case.system.gpu));
    if stack.overlap.tp_comm == TpComm::Available {
        plan.tp_comm_overlap = p_flag(case.parallel.tp_comm_overlap);
    }
    Ok(plan)
}

/// `v` as a `u32` field of the engines; [`Error::TooLarge`] names case key `key`.
pub(crate) fn u32_of(key: &str, v: u64) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::TooLarge {
        key: key.to_string(),
        value: v,
    })
}

/// `[case.training]`, which a training case has.
fn training_of(case: &Case) -> Result<&crate::cases::CaseTraining> {
    case.training
        .as_ref()
        .ok_or_else(|| Error::invalid("[case.training] missing"))
}

/// `[case.inference]`, which an inference case has.
pub(crate) fn inference_of(case: &Case) -> Result<&crate::cases::CaseInference> {
    case.inference
        .as_ref()
        .ok_or_else(|| Error::invalid("[case.inference] missing"))
}

fn p_flag(v: Option<bool>) -> bool {
    v.unwrap_or(false)
}

/// The engine's schedule for a case's `parallel.schedule`: 1F1B (interleaved by `vpp`) is
/// the engine's default; GPipe and DualPipe are built in; the zero-bubble schedules are not
/// built-in schedules, so their cases run as 1F1B and say so in their notes
/// ([`schedule_note`]).
fn schedule_of(case: &Case) -> Option<String> {
    match case.parallel.schedule? {
        CaseSchedule::Gpipe => Some("gpipe".into()),
        CaseSchedule::DualPipe => Some("dualpipe".into()),
        _ => None,
    }
}

/// What a case's result says about a schedule the engine ran in another's place.
pub(crate) fn schedule_note(case: &Case) -> Option<String> {
    match case.parallel.schedule? {
        s @ (CaseSchedule::ZbH1 | CaseSchedule::ZbV) => Some(format!(
            "schedule \"{}\" is not a built-in schedule: modelled as 1F1B",
            s.name()
        )),
        _ => None,
    }
}

fn p_etp(case: &Case) -> u64 {
    case.parallel.etp.unwrap_or(1)
}

/// Where a case's mesh axes sit on the devices. Expert-parallel runs use Megatron-Core's
/// rank order for MoE models, `tp-cp-ep-dp-pp` (pipeline stages outermost, so a stage's
/// expert-parallel group takes consecutive devices; Megatron-Core `parallel_state`
/// `RankGenerator`, MoE parallel folding, Liu et al. 2024 §3): with `cp = 1` that is the
/// placement `tp-dp-pp-cp`. Every other plan keeps the engine's default (`tp-cp-pp-dp`).
pub fn placement(plan: &TrainingPlan) -> Placement {
    if plan.ep > 1 && plan.cp == 1 && plan.pp > 1 {
        Placement::parse("tp-dp-pp-cp").unwrap_or(Placement::MEGATRON)
    } else {
        Placement::MEGATRON
    }
}

/// The inference plan of a case, on `stack`.
pub fn inference_plan(case: &Case, stack: &Stack) -> Result<InferencePlan> {
    let p = case
        .inference_parallel()
        .ok_or_else(|| Error::invalid("not an inference case with tp, pp and dp"))?;
    let i = inference_of(case)?;
    let batch = match i.batch {
        Batch::Fixed(b) => b,
        Batch::Max => {
            return Err(Error::invalid(
                "inference.batch = \"max\" has no fixed batch",
            ))
        }
    };
    let weights = i.precision.dtype();
    let activations = match i.precision {
        Precision::Fp8 | Precision::Fp16 | Precision::Bf16 => weights,
        // MXFP4/NVFP4 weights on a GPU without FP4 matrix units run weight-only: dequantised
        // into 16-bit GEMMs (TensorRT-LLM's W4A16_MXFP4 on SM90, `get_mxfp4_quant_algo` in
        // tensorrt_llm/_torch/model_config.py; vLLM's Marlin MXFP4 kernels on Hopper).
        Precision::Fp4 if !crate::stacks::has_fp4_matrix(&case.system.gpu) => DType::Bf16,
        Precision::Fp4 => weights,
        // Weight-only quantisation: 16-bit activations and GEMMs.
        Precision::Int8 | Precision::Int4 => DType::Fp16,
    };
    // Expert parallelism inside the TP group: `ep x etp = tp` (TensorRT-LLM's moe_ep_size x
    // moe_tp_size); the engine derives etp from tp / ep.
    let ep = case.parallel.ep.unwrap_or(1);
    if let Some(etp) = case.parallel.etp {
        if ep * etp != p.tp {
            return Err(Error::Invalid(format!(
                "parallel.ep x parallel.etp = {ep} x {etp} must equal parallel.tp = {} in inference (experts spread over ep ranks of the TP group, each expert's width over etp)",
                p.tp
            )));
        }
    }
    let mut plan = InferencePlan {
        ep: u32_of("parallel.ep", ep)?,
        attention_dp: case.parallel.attention_dp.unwrap_or(false),
        attention_tp: case
            .parallel
            .attention_tp
            .map(|a| u32_of("parallel.attention_tp", a))
            .transpose()?,
        tp: u32_of("parallel.tp", p.tp)?,
        pp: u32_of("parallel.pp", p.pp)?,
        replicas: u32_of("parallel.dp", p.dp)?,
        batch: u32_of("inference.batch", batch)?,
        input_len: u32_of("inference.input_len", i.input_len)?,
        output_len: u32_of("inference.output_len", i.output_len)?,
        weight_dtype: weights,
        activation_dtype: activations,
        kv_dtype: kv_dtype(i),
        ..InferencePlan::new(1, 1, 1)
    };
    stack.apply_inference_plan(&mut plan, &|_| false, generation_of(&case.system.gpu));
    Ok(plan)
}

/// The KV cache's format of an inference case: `kv_precision`, else the precision, but no
/// narrower than 8 bits (the runtimes of the sources cache no 4-bit KV: TensorRT-LLM's
/// NVFP4 checkpoints from NVIDIA's ModelOpt collection quantise the KV cache to FP8, its
/// `kv_cache_quant_algo`, as `trtllm_bench_settings` sizes it).
pub(crate) fn kv_dtype(i: &crate::cases::CaseInference) -> DType {
    let kv = i.kv_precision.unwrap_or(i.precision).dtype();
    if kv.bytes() < 1.0 {
        DType::Fp8
    } else {
        kv
    }
}

/// Runs cases against the engines.
pub struct Harness {
    /// The plugins the host handed in, and the registry of them the engines resolve in.
    plugins: Plugins,
    registry: Registry,
    /// The `software` -> stack rules and their stacks (`configs/validation/stacks.toml`).
    stacks: StackTable,
    pub inference_options: InferenceOptions,
    /// Treat an unpublished (`assumed`) `parallel.vpp` as a soft input: model the stack's
    /// default degree of an interleaved schedule, or the fastest interleaving of
    /// [`interleaving_degrees`] that fits (`Harness::assumed_interleaving`; default true;
    /// the schema calls assumed values soft inputs).
    pub soft_assumed_vpp: bool,
    /// Keys set on top of every case's configuration where they apply ([`crate::overlay`]).
    pub overlay: Overlay,
    /// Error bars: the residuals and the level (e.g. 0.8) of the interval given to each
    /// predicted metric ([`crate::intervals`]); `None` for none.
    pub intervals: Option<(Residuals, f64)>,
}

impl Harness {
    /// The software stack of a case (`configs/validation/stacks.toml`). Serving hook (issue
    /// 12): `crate::serving` times its steps on the case's stack.
    pub(crate) fn stack_of(&self, case: &Case) -> &Stack {
        self.stacks.of(case).1
    }

    /// A harness over the plugins its host chose.
    pub fn new(plugins: &Plugins) -> Result<Harness> {
        let registry = plugins.registry()?;
        Ok(Harness {
            plugins: plugins.clone(),
            registry,
            stacks: StackTable::builtin()?,
            inference_options: InferenceOptions::default(),
            soft_assumed_vpp: std::env::var("PERFCAST_VALIDATION_HARD_VPP").is_err(),
            overlay: Overlay::empty(),
            intervals: None,
        })
    }

    /// This harness with every case mapped to the fallback stack of its rules (a software
    /// string no rule knows): how a held-out stack family is predicted.
    pub fn on_fallback_stack(&self) -> Result<Harness> {
        let mut h = Harness::new(&self.plugins)?;
        h.stacks = self.stacks.fallback_only();
        h.inference_options = self.inference_options.clone();
        h.soft_assumed_vpp = self.soft_assumed_vpp;
        Ok(h)
    }

    /// The harness with `overlay` set on top of every case's configuration (each key where
    /// it applies: [`crate::overlay`]).
    pub fn with_overlay(mut self, overlay: Overlay) -> Harness {
        self.overlay = overlay;
        self
    }

    /// The harness giving each predicted metric an interval of `level` (e.g. 0.8) from
    /// `residuals`, those of the case's own group left out ([`crate::intervals`]).
    pub fn with_intervals(mut self, residuals: Residuals, level: f64) -> Harness {
        self.intervals = Some((residuals, level));
        self
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The plugins the host handed in (what each case's system is composed through).
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// The stack rules and their resolved stacks.
    pub fn stacks(&self) -> &StackTable {
        &self.stacks
    }

    /// Every overlay key must apply to some case of `group` (all when `None`): a key that
    /// applies nowhere is an error naming it (a typo would otherwise change nothing, silently).
    pub fn check_overlay(&self, file: &CasesFile, group: Option<&str>) -> Result<()> {
        if self.overlay.is_empty() {
            return Ok(());
        }
        let prepared: Vec<_> = file.group(group).map(|c| self.prepare(c)).collect();
        for e in &self.overlay.entries {
            if prepared
                .iter()
                .any(|p| self.applies(p, e) != crate::overlay::Applies::No)
            {
                continue;
            }
            let mut near: Vec<String> = Vec::new();
            for k in prepared.iter().filter_map(|p| p.keys()) {
                for n in k.nearest(&e.key, 3) {
                    if !near.contains(&n) {
                        near.push(n);
                    }
                }
            }
            near.sort_by_key(|n| perfcast_core::suggest::edit_distance(n, &e.key));
            near.truncate(3);
            return Err(Error::OverlayKey {
                overlay: self.overlay.source.clone(),
                key: e.key.clone(),
                group: group.map(str::to_string),
                nearest: near,
            });
        }
        Ok(())
    }

    /// Validate the cases of `group` (all when `None`).
    pub fn run(&self, file: &CasesFile, group: Option<&str>) -> Report {
        use rayon::prelude::*;
        use std::io::IsTerminal as _;
        let cases: Vec<&Case> = file.group(group).collect();
        // On a terminal, the cases done so far, at most every two seconds (the serving runs
        // take a minute or more over the public file).
        let tty = std::io::stderr().is_terminal();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let t0 = std::time::Instant::now();
        let last = std::sync::Mutex::new(0.0f64);
        let results = cases
            .par_iter()
            .map(|c| {
                let r = self.run_case(c);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if tty {
                    let now = t0.elapsed().as_secs_f64();
                    let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
                    if now - *l >= 2.0 {
                        *l = now;
                        eprintln!("validate: {n} of {} cases, {now:.0} s", cases.len());
                    }
                }
                r
            })
            .collect();
        Report::new(results)
    }

    /// One case: never panics, never drops the case. The overlay's keys apply where the
    /// case's configuration has them ([`Harness::applicable`]).
    pub fn run_case(&self, case: &Case) -> CaseResult {
        let p = self.prepare(case);
        let entries = self.applicable(&p, &self.overlay.entries);
        let mut r = self.evaluate(&p, &entries);
        if let Some((residuals, level)) = &self.intervals {
            let family = &self.stacks.of(case).1.family;
            r.attach_interval(case, family, residuals, *level);
        }
        r
    }

    /// How an unpublished (`assumed`) interleaving is resolved, when it is and
    /// `soft_assumed_vpp`: an interleaved schedule (`vpp` > 1) runs the framework's default
    /// degree where its stack declares one (`software.parallel.stages_per_rank`); otherwise
    /// (a framework that needs the degree given, or no schedule published) the fastest that
    /// fits, the practitioner's choice.
    fn assumed_interleaving(&self, case: &Case, stack: &Stack) -> Option<Interleaving> {
        let p = case.training_parallel()?;
        if !self.soft_assumed_vpp || p.pp <= 1 || !case.assumed.iter().any(|a| a == "parallel.vpp")
        {
            return None;
        }
        Some(match stack.parallel.stages_per_rank {
            Some(v) if p.vpp > 1 => Interleaving::StackDefault(v),
            _ => Interleaving::Fastest,
        })
    }

    /// Evaluate a training case: the published plan, with the soft inputs of the schema
    /// resolved by shared rules (module documentation): an unknown recompute policy becomes
    /// the least recompute that fits; an *assumed* (unpublished) interleaving degree becomes
    /// the framework's default or the fastest that fits ([`Harness::assumed_interleaving`]).
    /// Returns the report, the recompute policy and the interleaving used.
    fn evaluate_training(
        &self,
        case: &Case,
        engine: &Training,
    ) -> Result<(TrainingReport, String, u32)> {
        let t = training_of(case)?;
        let policies: &[&str] = match t.recompute {
            Recompute::None => &["none"],
            Recompute::Selective => &["selective"],
            Recompute::Full => &["full"],
            Recompute::Unknown => &["none", "selective", "full"],
        };
        let stack = self.stacks.of(case).1;
        let base = training_plan(case, policies[0], stack)?;
        let vpps: Vec<u32> = match self.assumed_interleaving(case, stack) {
            Some(Interleaving::StackDefault(v)) => vec![v],
            Some(Interleaving::Fastest) => interleaving_degrees(case.model.layers, base.pp),
            None => vec![base.vpp],
        };
        let mut best: Option<(TrainingReport, String, u32)> = None;
        let mut first_err = None;
        for &v in &vpps {
            // The least recompute that fits, at this interleaving.
            let mut chosen = None;
            for name in policies {
                let mut plan = training_plan(case, name, stack)?;
                plan.vpp = v;
                match engine.evaluate_placed(&plan, &placement(&plan)) {
                    Ok(rep) => {
                        let fits = rep.memory.fits;
                        chosen = Some((rep, name.to_string(), v));
                        if fits {
                            break;
                        }
                    }
                    Err(e) => {
                        first_err.get_or_insert(Error::from(e));
                        break;
                    }
                }
            }
            let Some(c) = chosen else { continue };
            best = match best {
                None => Some(c),
                Some(b) => {
                    let better = match (c.0.memory.fits, b.0.memory.fits) {
                        (true, false) => true,
                        (false, true) => false,
                        _ => c.0.iteration_time.0 < b.0.iteration_time.0,
                    };
                    Some(if better { c } else { b })
                }
            };
        }
        best.ok_or_else(|| first_err.unwrap_or_else(|| Error::invalid("no plan to evaluate")))
    }

    /// Predict every published metric of a training case on `engine`.
    pub(crate) fn predict_training(
        &self,
        case: &Case,
        engine: &Training,
        r: &mut CaseResult,
    ) -> Result<()> {
        let (rep, policy, vpp) = self.evaluate_training(case, engine)?;
        let t = training_of(case)?;
        let p = case
            .training_parallel()
            .ok_or_else(|| Error::invalid("parallel degrees missing"))?;
        let me = &case.measured;
        let time = rep.iteration_time.0;
        let gpus = case.system.num_gpus as f64;
        let shape = StepShape {
            global_batch: p.global_batch as f64,
            seq_len: case.model.seq_len.unwrap_or(0) as f64,
            recompute: match t.recompute {
                Recompute::Unknown => match policy.as_str() {
                    "selective" => Recompute::Selective,
                    "full" => Recompute::Full,
                    _ => Recompute::None,
                },
                other => other,
            },
            recompute_layers: t.recompute_layers,
            pp: p.pp,
            task: t.task,
            attention: me.attention_flops.unwrap_or_default(),
        };
        let tokens = shape.global_batch * shape.seq_len;
        let f_model = flops::model_flops(&case.model, &shape);
        let f_hw = flops::hardware_flops(&case.model, &shape);
        for (metric, measured) in me.metrics() {
            let predicted = match metric {
                Metric::IterationTimeS => Some(time),
                Metric::TokensPerSPerGpu => Some(tokens / time / gpus),
                Metric::TokensPerS => Some(tokens / time),
                Metric::TflopsPerGpu => me.flops_convention.map(|c| {
                    let f = match c {
                        FlopsConvention::Model => f_model,
                        FlopsConvention::Hardware => f_hw,
                    };
                    flops::tflops_per_gpu(f, time, gpus)
                }),
                Metric::Mfu => me
                    .peak_tflops_basis
                    .map(|b| flops::utilisation(f_model, time, gpus, b)),
                Metric::Hfu => me
                    .peak_tflops_basis
                    .map(|b| flops::utilisation(f_hw, time, gpus, b)),
                Metric::MemoryGibPerGpu => Some(rep.memory.peak.gib()),
                // Device-hours per 10^12 tokens at the predicted step time (the published
                // figure averages a production run, its overheads included).
                Metric::GpuHoursPerTrillionTokens => Some(gpus * 1e12 / (tokens / time) / 3600.0),
                Metric::LayerFwdMs => Some(match me.layer_scope {
                    Some(LayerScope::Moe) => rep.layer.moe_block_forward.map(|t| t.millis()),
                    _ => Some(rep.layer.forward.millis()),
                })
                .flatten(),
                Metric::LayerBwdMs => Some(match me.layer_scope {
                    Some(LayerScope::Moe) => rep.layer.moe_block_backward.map(|t| t.millis()),
                    _ => Some(rep.layer.backward.millis()),
                })
                .flatten(),
                _ => None,
            };
            r.metrics
                .push(MetricResult::new(metric, predicted, measured));
        }
        if let Some(refc) = &case.reference {
            r.reference = Some((refc.iteration_time_s, Some(time)));
        }
        let b = &rep.breakdown;
        let frac = |x: f64| x / time;
        r.breakdown = vec![
            ("step s".into(), time),
            ("compute".into(), frac(b.compute_total().0)),
            ("recompute".into(), frac(b.recompute.0)),
            ("tp".into(), frac(b.tp_comm.0)),
            ("cp".into(), frac(b.cp_comm.0)),
            ("pp".into(), frac(b.pp_comm.0)),
            ("dp".into(), frac(b.dp_comm.0)),
            ("zero".into(), frac(b.zero_comm.0)),
            ("ep".into(), frac(b.ep_comm.0)),
            ("bubble".into(), frac(b.bubble.0)),
            ("optimizer".into(), frac(b.optimizer.0)),
            ("mem GiB".into(), rep.memory.peak.gib()),
        ];
        r.breakdown.retain(|(k, v)| *v > 0.0005 || k == "step s");
        let mut notes = Vec::new();
        if t.recompute == Recompute::Unknown {
            notes.push(format!(
                "recompute not published: modelled as \"{policy}\" (the least recompute that fits)"
            ));
        }
        if vpp as u64 != p.vpp {
            let why = match self.assumed_interleaving(case, self.stacks.of(case).1) {
                Some(Interleaving::StackDefault(_)) => "the stack's default",
                _ => "the fastest that fits",
            };
            notes.push(format!(
                "interleaving not published (assumed vpp = {}): modelled as vpp = {vpp} ({why})",
                p.vpp
            ));
        }
        notes.extend(schedule_note(case));
        notes.extend((t.task == Task::Lora).then(|| lora_note(engine)));
        notes.extend((!rep.memory.fits).then(|| {
            format!(
                "predicted peak memory {:.1} GiB exceeds the device's {:.1} GiB",
                rep.memory.peak.gib(),
                rep.memory.capacity.gib()
            )
        }));
        if !notes.is_empty() {
            r.reason = Some(notes.join("; "));
        }
        Ok(())
    }

    /// Predict every published metric of an inference case on `engine`.
    pub(crate) fn predict_inference(
        &self,
        case: &Case,
        engine: &Inference,
        r: &mut CaseResult,
        how: &mut crate::serving::ServingRun,
    ) -> Result<()> {
        // The serving modes are simulated step by step on this engine (`crate::serving`).
        if case
            .inference
            .as_ref()
            .is_some_and(|i| crate::serving::models_mode(i.mode))
        {
            return crate::serving::predict(self, case, engine, r, how);
        }
        let stack = self.stacks.of(case).1;
        let plan = inference_plan(case, stack)?;
        let rep: InferenceReport = engine.evaluate(&plan)?;
        let me = &case.measured;
        // Whole deployment: every replica runs the batch.
        let flops = plan.replicas as f64
            * flops::inference_flops(
                &case.model,
                plan.batch as f64,
                plan.input_len as f64,
                plan.output_len as f64,
                me.attention_flops.unwrap_or_default(),
            );
        let gpus = case.system.num_gpus as f64;
        let latency = rep.latency.0;
        for (metric, measured) in me.metrics() {
            let predicted = match metric {
                Metric::TflopsPerGpu => Some(flops::tflops_per_gpu(flops, latency, gpus)),
                Metric::Mfu => me
                    .peak_tflops_basis
                    .map(|b| flops::utilisation(flops, latency, gpus, b)),
                Metric::TtftMs => Some(rep.ttft.millis()),
                Metric::TpotMs => Some(rep.tpot.millis()),
                Metric::LatencyS => Some(rep.latency.0),
                Metric::TokensPerS => Some(rep.tokens_per_s),
                Metric::TokensPerSPerGpu => Some(rep.tokens_per_s_per_gpu),
                Metric::MemoryGibPerGpu => Some(rep.memory.total.gib()),
                _ => None,
            };
            r.metrics
                .push(MetricResult::new(metric, predicted, measured));
        }
        let lat = rep.latency.0;
        let frac = |x: f64| x / lat;
        r.breakdown = vec![
            ("latency s".into(), lat),
            ("prefill".into(), frac(rep.prefill.total.0)),
            ("decode".into(), frac(rep.decode.total.0)),
            ("gemm".into(), frac(rep.prefill.gemm.0 + rep.decode.gemm.0)),
            (
                "attention".into(),
                frac(rep.prefill.attention.0 + rep.decode.attention.0),
            ),
            (
                "other".into(),
                frac(rep.prefill.other_ops.0 + rep.decode.other_ops.0),
            ),
            (
                "comm".into(),
                frac(rep.prefill.communication.0 + rep.decode.communication.0),
            ),
            (
                "overheads".into(),
                frac(rep.prefill.overheads.0 + rep.decode.overheads.0),
            ),
            ("mem GiB".into(), rep.memory.total.gib()),
        ];
        r.breakdown.retain(|(k, v)| *v > 0.0005 || k == "latency s");
        if !rep.memory.fits {
            r.reason = Some(format!(
                "predicted memory {:.1} GiB exceeds the device's {:.1} GiB",
                rep.memory.total.gib(),
                rep.memory.capacity.gib()
            ));
        }
        Ok(())
    }
}
