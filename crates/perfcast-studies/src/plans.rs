//! The studies' best-plan searches, run by perfcast-search.
//!
//! A study config's `[search]` section is perfcast-search's own flat section
//! ([`perfcast_search::SearchConfig`]: the per-dimension value lists and the constraints);
//! the study sets the device count and the global batch per job, so `devices`,
//! `global_batch`, `top` and `objective` are refused there. Every dimension the section leaves
//! out gets the studies' default, a small space so that a study searching a few hundred
//! systems stays quick: TP and PP in 1..64, micro-batch 1, 2, 4, 8, recompute none /
//! selective / full (no partial recompute), bf16 and fp8 where the device has an fp8 matrix
//! path, ZeRO 1 (the distributed optimizer), sequence parallelism on with TP > 1 (Korthikanti
//! et al. 2022: it only saves memory), the plain 1F1B schedule (no interleaving), no TP
//! communication overlap, Megatron-LM's placement (`tp-cp-pp-dp`), no context parallelism.
//! TP may cross the NVLink domain (`max_tp` defaults to the largest listed TP).

use crate::common::{model_err, StudyContext};
use crate::error::StudyError;
use perfcast_core::{DType, Engine};
use perfcast_engine::training::{Training, TrainingPlan, TrainingReport};
use perfcast_search::{Constraints, SearchConfig, SearchError, SearchSpace};

/// The memory a study's searches keep free by default: none, as in Calculon's searches (a
/// plan fits when its memory is at most the capacity), with which the studies' figures were
/// compared; `search.memory_headroom` in a study file sets another (the plan search's own
/// default is `perfcast_search::DEFAULT_MEMORY_HEADROOM`).
const STUDY_MEMORY_HEADROOM: f64 = 0.0;

/// A study's search: the space with every default filled in, and the constraints but the
/// global batch (set per job).
#[derive(Debug, Clone, PartialEq)]
pub struct StudySearch {
    pub space: SearchSpace,
    pub memory_headroom: f64,
    pub max_tp: u32,
    pub max_micro_batch: u32,
}

/// The best plan found.
#[derive(Debug, Clone)]
pub struct Best {
    pub plan: TrainingPlan,
    pub report: TrainingReport,
    /// Plans of the space the engine accepts for the model and device count.
    pub valid: u64,
    /// Of those, the plans that fit in memory.
    pub fit: u64,
}

/// Resolve the `[search]` section found at `key` (e.g. `search`, `training.search`): the
/// studies' defaults for what it leaves out; an error naming `key.field` for what a study
/// cannot take.
pub fn resolve(
    ctx: &StudyContext,
    key: &str,
    sc: &SearchConfig,
) -> Result<StudySearch, StudyError> {
    for (field, set) in [
        ("devices", sc.devices.is_some()),
        ("global_batch", sc.global_batch.is_some()),
        ("top", sc.top.is_some()),
        ("objective", sc.objective.is_some()),
    ] {
        if set {
            return Err(ctx.bad(
                &format!("{key}.{field}"),
                "is set by the study (GPUs and global batch per job, the fastest plan); \
                 allowed here: the value lists (tp, pp, micro_batch, recompute, precision, \
                 zero_stage, ...), memory_headroom, max_tp, max_micro_batch",
            ));
        }
    }
    let mut s = sc.space();
    fill_defaults(&mut s);
    check_lists(ctx, key, &s)?;
    let d = Constraints::default();
    let memory_headroom = sc.memory_headroom.unwrap_or(STUDY_MEMORY_HEADROOM);
    if !(memory_headroom.is_finite() && (0.0..1.0).contains(&memory_headroom)) {
        return Err(ctx.bad(
            &format!("{key}.memory_headroom"),
            format!("{memory_headroom}: a fraction in [0, 1)"),
        ));
    }
    let max_micro_batch = sc.max_micro_batch.unwrap_or(d.max_micro_batch);
    let max_tp = sc
        .max_tp
        .unwrap_or_else(|| s.tp.iter().flatten().copied().max().unwrap_or(1));
    if max_micro_batch == 0 || max_tp == 0 {
        return Err(ctx.bad(
            &format!(
                "{key}.{}",
                if max_tp == 0 {
                    "max_tp"
                } else {
                    "max_micro_batch"
                }
            ),
            "must be an integer >= 1",
        ));
    }
    Ok(StudySearch {
        space: s,
        memory_headroom,
        max_tp,
        max_micro_batch,
    })
}

/// The studies' defaults for the lists a `[search]` section leaves out.
fn fill_defaults(s: &mut SearchSpace) {
    let fill = |v: &mut Option<Vec<u32>>, d: &[u32]| {
        v.get_or_insert_with(|| d.to_vec());
    };
    let up_to_64 = [1, 2, 4, 8, 16, 32, 64];
    fill(&mut s.tp, &up_to_64);
    fill(&mut s.pp, &up_to_64);
    fill(&mut s.cp, &[1]);
    fill(&mut s.micro_batch, &[1, 2, 4, 8]);
    s.recompute
        .get_or_insert_with(|| ["none", "selective", "full"].map(String::from).to_vec());
    s.partial_recompute.get_or_insert(false);
    s.precision
        .get_or_insert_with(|| vec![DType::Bf16, DType::Fp8]);
    s.zero_stage.get_or_insert_with(|| vec![1]);
    s.sp.get_or_insert_with(|| vec![true]);
    s.schedule.get_or_insert_with(|| vec!["1f1b".into()]);
    s.tp_comm_overlap.get_or_insert_with(|| vec![false]);
    s.placement
        .get_or_insert_with(|| vec!["tp-cp-pp-dp".into()]);
}

/// Every list of the space non-empty and within what the training engine takes; an error
/// naming `key.field`.
fn check_lists(ctx: &StudyContext, key: &str, s: &SearchSpace) -> Result<(), StudyError> {
    // Lists that must not be empty (an empty list would silently search nothing).
    let lists: [(&str, usize); 8] = [
        ("tp", s.tp.as_ref().map_or(1, Vec::len)),
        ("pp", s.pp.as_ref().map_or(1, Vec::len)),
        ("cp", s.cp.as_ref().map_or(1, Vec::len)),
        ("micro_batch", s.micro_batch.as_ref().map_or(1, Vec::len)),
        ("recompute", s.recompute.as_ref().map_or(1, Vec::len)),
        ("precision", s.precision.as_ref().map_or(1, Vec::len)),
        ("zero_stage", s.zero_stage.as_ref().map_or(1, Vec::len)),
        ("sp", s.sp.as_ref().map_or(1, Vec::len)),
    ];
    if let Some((field, _)) = lists.iter().find(|(_, n)| *n == 0) {
        return Err(ctx.bad(
            &format!("{key}.{field}"),
            "is empty: list one or more values (or leave the key out for the default)",
        ));
    }
    for (field, v) in [
        ("tp", &s.tp),
        ("pp", &s.pp),
        ("micro_batch", &s.micro_batch),
    ] {
        if let Some(v) = v.as_ref().filter(|v| v.contains(&0)) {
            return Err(ctx.bad(
                &format!("{key}.{field}"),
                format!("{v:?}: needs integers >= 1"),
            ));
        }
    }
    if let Some(r) = s
        .recompute
        .iter()
        .flatten()
        .find(|r| !matches!(r.as_str(), "none" | "selective" | "full"))
    {
        return Err(ctx.bad(
            &format!("{key}.recompute"),
            format!("`{r}`: allowed are none, selective, full"),
        ));
    }
    if let Some(p) = s
        .precision
        .iter()
        .flatten()
        .find(|p| !matches!(p, DType::Bf16 | DType::Fp16 | DType::Fp8 | DType::Fp4))
    {
        return Err(ctx.bad(
            &format!("{key}.precision"),
            format!("`{p}`: the training engine trains in bf16, fp16, fp8 or fp4 (NVFP4)"),
        ));
    }
    if let Some(z) = s.zero_stage.iter().flatten().find(|z| **z > 3) {
        return Err(ctx.bad(
            &format!("{key}.zero_stage"),
            format!("{z}: allowed are 0, 1, 2, 3"),
        ));
    }
    Ok(())
}

impl StudySearch {
    /// The fastest plan of the space for `training` (its model, system and device count) and
    /// `global_batch` that fits, with the precisions restricted to `precisions` and to the
    /// formats the device computes in. `key` and `what` name the job in errors.
    pub fn best(
        &self,
        ctx: &StudyContext,
        key: &str,
        what: &str,
        training: &Training,
        global_batch: u32,
        precisions: &[DType],
    ) -> Result<Best, StudyError> {
        self.best_fitting(ctx, key, what, training, global_batch, precisions)?
            .map_err(|reason| {
                ctx.bad(
                    key,
                    format!(
                        "{what}: no plan of the search space fits ({reason}); widen the search \
                         section (tp, pp, recompute) or add GPUs"
                    ),
                )
            })
    }

    /// As [`StudySearch::best`], with "no plan of the space fits" an answer (`Err(reason)`
    /// inside `Ok`) rather than an error: for a study whose points may not all fit.
    pub fn best_fitting(
        &self,
        ctx: &StudyContext,
        key: &str,
        what: &str,
        training: &Training,
        global_batch: u32,
        precisions: &[DType],
    ) -> Result<Result<Best, String>, StudyError> {
        let unit = training.system().compute.clone();
        let precision: Vec<DType> = self
            .space
            .precision
            .iter()
            .flatten()
            .copied()
            .filter(|p| precisions.contains(p) && unit.peak(Engine::Matrix, *p).is_some())
            .collect();
        if precision.is_empty() {
            return Err(ctx.bad(
                key,
                format!(
                    "{what}: no format of the search's precision list {:?} is both allowed here \
                     ({precisions:?}) and computed by the device's matrix engine",
                    self.space.precision.as_deref().unwrap_or_default()
                ),
            ));
        }
        let space = SearchSpace {
            precision: Some(precision),
            ..self.space.clone()
        };
        let constraints = Constraints {
            global_batch,
            memory_headroom: self.memory_headroom,
            max_tp: Some(self.max_tp),
            max_micro_batch: self.max_micro_batch,
        };
        let r = match perfcast_search::best_plans(training, &space, &constraints, 1) {
            Err(SearchError::Empty { reason }) => return Ok(Err(reason)),
            r => r,
        };
        let r = r.map_err(|e| match e {
            SearchError::Invalid { key: k, message } => {
                ctx.bad(&format!("{key}: {k}"), format!("{what}: {message}"))
            }
            SearchError::Model { context, source } => {
                model_err(format!("{what}: {context}"))(source)
            }
            other => ctx.bad(key, format!("{what}: {other}")),
        })?;
        let s = &r.summary;
        let valid = s.enumerated - s.pruned_invalid;
        let fit = valid - s.pruned_memory;
        let best = r
            .plans
            .into_iter()
            .next()
            .ok_or_else(|| ctx.bad(key, format!("{what}: the search returned no plan")))?;
        Ok(Ok(Best {
            plan: best.plan,
            report: best.report,
            valid,
            fit,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> StudyContext {
        StudyContext::from_text(
            crate::info("a100-to-b200").unwrap(),
            std::path::Path::new("."),
            "",
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
    }

    /// (edit of an empty section, key expected in the complaint or None).
    #[test]
    fn section_checks_name_the_key() {
        type Edit = fn(&mut SearchConfig);
        let table: [(Edit, Option<&str>); 9] = [
            (|_| {}, None),
            (|s| s.tp = Some(vec![]), Some("search.tp")),
            (|s| s.pp = Some(vec![0, 2]), Some("search.pp")),
            (
                |s| s.recompute = Some(vec!["some".into()]),
                Some("search.recompute"),
            ),
            (
                |s| s.precision = Some(vec![DType::Int8]),
                Some("search.precision"),
            ),
            (|s| s.zero_stage = Some(vec![4]), Some("search.zero_stage")),
            (|s| s.global_batch = Some(8), Some("search.global_batch")),
            (
                |s| s.memory_headroom = Some(1.0),
                Some("search.memory_headroom"),
            ),
            (|s| s.max_tp = Some(0), Some("search.max_tp")),
        ];
        for (edit, want) in table {
            let mut s = SearchConfig::default();
            edit(&mut s);
            let got = resolve(&ctx(), "search", &s).err().map(|e| match e {
                StudyError::Config { key, .. } => key,
                other => panic!("{other}"),
            });
            assert_eq!(got.as_deref(), want);
        }
    }

    #[test]
    fn defaults_fill_the_small_space_and_keep_what_is_given() {
        let sc = SearchConfig {
            tp: Some(vec![2, 16]),
            ..SearchConfig::default()
        };
        let s = resolve(&ctx(), "search", &sc).unwrap();
        assert_eq!(s.space.tp, Some(vec![2, 16]));
        assert_eq!(s.max_tp, 16);
        assert_eq!(s.space.zero_stage, Some(vec![1]));
        assert_eq!(s.space.schedule, Some(vec!["1f1b".to_string()]));
        assert_eq!(s.space.partial_recompute, Some(false));
    }
}
