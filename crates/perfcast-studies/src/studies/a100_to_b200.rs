//! `a100-to-b200`: the same training job on an A100 cluster and on a Blackwell cluster of the
//! same GPU count, each with its best plan, and the speed-up split into seven factors by
//! swapping one component at a time (Shapley values over all 2^7 hybrids, in log space so the
//! factors multiply to the total exactly).

use crate::common::{caption, device_tier, model_err, MixedTier, ResizedLink, StudyContext};
use crate::error::StudyError;
use crate::plans::{resolve, Best};
use crate::shapley::speedup_factors;
use crate::StudyOutput;
use perfcast_core::{DType, Engine, Interconnect, MemoryHierarchy, MemoryTier, System};
use perfcast_engine::training::{Training, TrainingPlan};
use perfcast_render::figure::{Axis, Figure, Panel, PanelKind};
use perfcast_render::fmt_factor;
use perfcast_render::{num6, plan_label, PlanStyle, Table};
use perfcast_search::SearchConfig;
use rayon::prelude::*;
use serde::Deserialize;
use std::sync::Arc;

/// The factors, in the order of the bits of a coalition mask.
pub const FACTORS: [&str; 7] = [
    "matrix throughput",
    "lower precision",
    "HBM bandwidth",
    "HBM capacity",
    "NVLink bandwidth",
    "NVLink domain size",
    "scale-out bandwidth",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    study: String,
    jobs: Vec<Job>,
    /// The plan search of every hybrid (perfcast-search's `[search]` section).
    #[serde(default)]
    search: SearchConfig,
    /// The format every plan may use (the precision factor adds the narrower ones).
    #[serde(default = "bf16")]
    base_precision: DType,
    /// Speed-up the paper reports (for the comparison in the summary).
    #[serde(default)]
    paper_speedup: Option<f64>,
}

fn bf16() -> DType {
    DType::Bf16
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    label: String,
    model: String,
    gpus: u32,
    global_batch: u32,
    /// The A100 system file.
    baseline: String,
    /// The Blackwell system file.
    target: String,
    /// This job's own plan search (the study's `[search]` when absent): a mixture-of-experts
    /// job lists its expert layouts and fp4 here without widening the dense jobs' grids.
    #[serde(default)]
    search: Option<SearchConfig>,
}

/// The components a factor swaps, taken apart from a system.
#[derive(Clone)]
struct Parts {
    compute: Arc<dyn perfcast_core::ComputeUnit>,
    on_chip: Vec<Arc<dyn MemoryTier>>,
    hbm: Arc<dyn MemoryTier>,
    scale_up: Arc<dyn Interconnect>,
    scale_out: Arc<dyn Interconnect>,
}

fn parts(ctx: &StudyContext, key: &str, s: &System) -> Result<Parts, StudyError> {
    let (i, hbm) =
        device_tier(s).ok_or_else(|| ctx.bad(key, "the system has no device-memory tier"))?;
    if s.network.len() != 2 {
        return Err(ctx.bad(
            key,
            format!(
                "needs exactly two network levels (scale-up, scale-out), has {}",
                s.network.len()
            ),
        ));
    }
    Ok(Parts {
        compute: s.compute.clone(),
        on_chip: s
            .memory
            .tiers
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, t)| t.clone())
            .collect(),
        hbm,
        scale_up: s.network[0].clone(),
        scale_out: s.network[1].clone(),
    })
}

/// The hybrid system with the factors of `mask` from `b`, the rest from `a`.
fn hybrid(a: &Parts, b: &Parts, mask: usize, devices: u32) -> System {
    let pick = |bit: usize| mask & (1 << bit) != 0;
    let side = |bit: usize| if pick(bit) { b } else { a };
    let mut tiers: Vec<Arc<dyn MemoryTier>> = side(0).on_chip.clone();
    tiers.push(Arc::new(MixedTier {
        speed: side(2).hbm.clone(),
        capacity: side(3).hbm.capacity(),
    }));
    let up = Arc::new(ResizedLink {
        link: side(4).scale_up.clone(),
        domain: side(5).scale_up.domain_size(),
    });
    System {
        name: format!("hybrid {mask:07b}"),
        compute: side(0).compute.clone(),
        memory: MemoryHierarchy::new(tiers),
        network: vec![up, side(6).scale_out.clone()],
        topology: None,
        devices,
    }
}

/// Result of one job.
pub struct JobResult {
    pub label: String,
    /// Best iteration time per coalition mask.
    pub times: Vec<f64>,
    pub plans: Vec<TrainingPlan>,
    pub baseline: Best,
    pub target: Best,
    /// Shapley factors (multiply to `total`).
    pub factors: Vec<f64>,
    pub total: f64,
    /// Dense matrix peaks, TFLOP/s: baseline bf16, target bf16, fp8, fp4 (0 if absent).
    pub peaks: [f64; 4],
}

/// Evaluate every job of the config.
pub fn evaluate(ctx: &StudyContext) -> Result<(Vec<JobResult>, Option<f64>), StudyError> {
    let cfg: Config = ctx.parse()?;
    let study_search = resolve(ctx, "search", &cfg.search)?;
    if cfg.jobs.is_empty() {
        return Err(ctx.bad("jobs", "needs at least one [[jobs]] entry"));
    }
    if !matches!(cfg.base_precision, DType::Bf16 | DType::Fp16) {
        return Err(ctx.bad(
            "base_precision",
            format!("`{}`: allowed are bf16, fp16", cfg.base_precision),
        ));
    }
    let registry = crate::common::registry(&ctx.plugins)?;
    let n = FACTORS.len();
    let mut out = Vec::new();
    for (j, job) in cfg.jobs.iter().enumerate() {
        let key = format!("jobs[{j}]");
        if job.gpus == 0 || job.global_batch == 0 {
            return Err(ctx.bad(&key, "gpus and global_batch must be >= 1"));
        }
        let search = match &job.search {
            Some(s) => resolve(ctx, &format!("{key}.search"), s)?,
            None => study_search.clone(),
        };
        let model = ctx.model(&format!("{key}.model"), &job.model)?;
        let sa = ctx.system(&format!("{key}.baseline"), &job.baseline, job.gpus)?;
        let sb = ctx.system(&format!("{key}.target"), &job.target, job.gpus)?;
        let pa = parts(ctx, &format!("{key}.baseline"), &sa)?;
        let pb = parts(ctx, &format!("{key}.target"), &sb)?;
        // Every hybrid searches its own best plan (in parallel: they are independent).
        let results: Vec<Result<Best, StudyError>> = (0..(1usize << n))
            .into_par_iter()
            .map(|mask| {
                let sys = hybrid(&pa, &pb, mask, job.gpus);
                // The precision factor adds the search's narrower formats.
                let precisions: Vec<DType> = if mask & 2 != 0 {
                    search.space.precision.clone().unwrap_or_default()
                } else {
                    vec![cfg.base_precision]
                };
                let what = format!(
                    "`{}` on {} GPUs of the {} system",
                    job.label,
                    job.gpus,
                    match mask {
                        0 => "baseline".to_string(),
                        m if m == (1 << n) - 1 => "target".to_string(),
                        m => format!("hybrid {m:07b}"),
                    }
                );
                let training = Training::new(model.clone(), sys, &registry)
                    .map_err(model_err(format!("{}: hybrid {mask:07b}", job.label)))?;
                search.best(ctx, &key, &what, &training, job.global_batch, &precisions)
            })
            .collect();
        let mut bests = Vec::with_capacity(results.len());
        for r in results {
            bests.push(r?);
        }
        let times: Vec<f64> = bests.iter().map(|b| b.report.iteration_time.0).collect();
        let plans: Vec<TrainingPlan> = bests.iter().map(|b| b.plan.clone()).collect();
        let (factors, total) = speedup_factors(n, &times);
        let target = bests.swap_remove((1usize << n) - 1);
        let baseline = bests.swap_remove(0);
        let peak = |s: &System, d: DType| {
            s.compute
                .peak(Engine::Matrix, d)
                .map(|p| p.tflops())
                .unwrap_or(0.0)
        };
        let peaks = [
            peak(&sa, DType::Bf16),
            peak(&sb, DType::Bf16),
            peak(&sb, DType::Fp8),
            peak(&sb, DType::Fp4),
        ];
        out.push(JobResult {
            peaks,
            label: job.label.clone(),
            times,
            plans,
            baseline,
            target,
            factors,
            total,
        });
    }
    Ok((out, cfg.paper_speedup))
}

/// Run the study: the CSV, the figure and the finding.
pub fn run(ctx: &StudyContext) -> Result<StudyOutput, StudyError> {
    let (jobs, paper) = evaluate(ctx)?;
    StudyOutput::new(ctx, table(&jobs), figure(ctx, &jobs), finding(&jobs, paper))
}

/// Every number: per job the Shapley factors, the total, both best plans and every hybrid.
fn table(jobs: &[JobResult]) -> Table {
    let mut csv = Table::with_headers(&[
        "job",
        "row",
        "factor_or_mask",
        "value",
        "iteration_time_s",
        "plan",
        "tokens_per_s",
        "mfu",
    ]);
    for j in jobs {
        for (i, f) in j.factors.iter().enumerate() {
            csv.push(vec![
                j.label.clone(),
                "shapley_factor".into(),
                FACTORS[i].into(),
                num6(*f),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        csv.push(vec![
            j.label.clone(),
            "total_speedup".into(),
            "all".into(),
            num6(j.total),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
        for (name, b) in [("baseline", &j.baseline), ("target", &j.target)] {
            csv.push(vec![
                j.label.clone(),
                format!("{name}_best_plan"),
                format!("{} of {} valid plans fit", b.fit, b.valid),
                num6(b.report.iteration_time.0),
                num6(b.report.iteration_time.0),
                plan_label(&b.plan, PlanStyle::Brief),
                num6(b.report.tokens_per_s),
                num6(b.report.mfu),
            ]);
        }
        for (mask, t) in j.times.iter().enumerate() {
            let on: Vec<&str> = (0..FACTORS.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| FACTORS[i])
                .collect();
            csv.push(vec![
                j.label.clone(),
                "hybrid".into(),
                if on.is_empty() {
                    "(baseline)".into()
                } else {
                    on.join(" + ")
                },
                num6(j.times[0] / t),
                num6(*t),
                plan_label(&j.plans[mask], PlanStyle::Brief),
                String::new(),
                String::new(),
            ]);
        }
    }
    csv
}

/// One waterfall per job: the factors multiplying up to the speed-up.
fn figure(ctx: &StudyContext, jobs: &[JobResult]) -> Figure {
    let panels = jobs
        .iter()
        .map(|j| Panel {
            title: format!(
                "{}: x{}\nbest plans: {} -> {}",
                j.label,
                fmt_factor(j.total),
                plan_label(&j.baseline.plan, PlanStyle::Brief),
                plan_label(&j.target.plan, PlanStyle::Brief)
            ),
            y: Axis::log("cumulative speed-up over A100 (x, log)"),
            kind: PanelKind::Waterfall {
                factors: FACTORS
                    .iter()
                    .zip(&j.factors)
                    .map(|(n, f)| (n.to_string(), *f))
                    .collect(),
                total_label: "total".into(),
            },
        })
        .collect();
    Figure {
        title: ctx.info.title.to_string(),
        width: 1100.0,
        panel_height: 420.0,
        panels,
        caption: caption(ctx),
    }
}

/// The share of a best plan's step spent in matrix GEMMs (what the matrix peak speeds up).
fn gemm_share(b: &Best) -> f64 {
    let r = &b.report;
    r.breakdown.compute.gemm / r.iteration_time.0.max(f64::MIN_POSITIVE)
}

/// The range over the jobs of the step share outside GEMMs of one side's best plans
/// (`41%` or `14-39%`).
fn rest_range(jobs: &[JobResult], side: fn(&JobResult) -> &Best) -> String {
    let rest = |j: &JobResult| 100.0 * (1.0 - gemm_share(side(j)));
    let lo = jobs.iter().map(rest).fold(f64::INFINITY, f64::min);
    let hi = jobs.iter().map(rest).fold(0.0, f64::max);
    if (hi - lo).abs() < 0.5 {
        format!("{hi:.0}%")
    } else {
        format!("{lo:.0}-{hi:.0}%")
    }
}

/// The finding: each job's speed-up and its leading factors, against the paper's figure.
fn finding(jobs: &[JobResult], paper: Option<f64>) -> String {
    let mut parts = Vec::new();
    for j in jobs {
        let mut order: Vec<(usize, f64)> = j.factors.iter().copied().enumerate().collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = order
            .iter()
            .take(3)
            .map(|(i, f)| format!("{} x{}", FACTORS[*i], fmt_factor(*f)))
            .collect();
        let small: Vec<String> = order
            .iter()
            .filter(|(i, f)| (*f - 1.0).abs() < 0.02 && *i != 5)
            .map(|(i, _)| FACTORS[*i].to_string())
            .collect();
        parts.push(format!(
            "{}: x{} ({:.2} s -> {:.2} s per step, GEMMs {:.0}% -> {:.0}% of it; best plans {} -> {}), led by {} (NVLink domain size x{}){}",
            j.label,
            fmt_factor(j.total),
            j.baseline.report.iteration_time.0,
            j.target.report.iteration_time.0,
            100.0 * gemm_share(&j.baseline),
            100.0 * gemm_share(&j.target),
            plan_label(&j.baseline.plan, PlanStyle::Brief),
            plan_label(&j.target.plan, PlanStyle::Brief),
            top.join(", "),
            fmt_factor(j.factors[5]),
            if small.is_empty() {
                String::new()
            } else {
                format!("; negligible: {}", small.join(", "))
            }
        ));
    }
    let paper_text = match (
        paper,
        jobs.iter().max_by(|a, b| a.total.total_cmp(&b.total)),
    ) {
        (Some(p), Some(j)) => {
            let pk = j.peaks;
            format!(
                " The paper reports about x{p:.0}; this model gives at most x{} ({}). Per GPU, the dense matrix peak rises x{:.1} in bf16, x{:.1} in fp8 and x{:.1} in fp4 over A100 bf16 ({:.0} -> {:.0} / {:.0} / {:.0} TFLOP/s): a ~x{p:.0} that \"closely follows NVIDIA's trend\" matches the ratio of peak matrix FLOP/s in the newest format, not a training step. The paper's workload and factor split could not be read (seed digest §3.4). Only a step's GEMMs scale with the matrix peak: the rest (attention, vector ops, format casts, exposed communication, the pipeline bubble) is {} of the A100 steps and {} of the Blackwell ones, which caps the speed-up well below the peak ratio.",
                fmt_factor(j.total),
                j.label,
                pk[1] / pk[0],
                pk[2] / pk[0],
                pk[3] / pk[0],
                pk[0],
                pk[1],
                pk[2],
                pk[3],
                rest_range(jobs, |j| &j.baseline),
                rest_range(jobs, |j| &j.target),
            )
        }
        _ => String::new(),
    };
    format!(
        "Same GPU count, best plan on each side: {}. The factors are Shapley values over all 128 hybrids of the two systems (each hybrid re-searches its best plan), computed in log space so they multiply to the total.{}",
        parts.join("; "),
        paper_text
    )
}
