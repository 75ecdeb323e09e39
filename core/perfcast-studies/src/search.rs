//! A small, bounded search for the fastest training plan that fits in memory.
//!
//! Scope: this is the studies' own exhaustive search over a config-given grid (TP, PP,
//! micro-batch, recompute policy, precision, ZeRO stage), with DP the remaining factor of the
//! device count; sequence parallelism is on whenever TP > 1 (Korthikanti et al. 2022: it only
//! saves memory and never costs time in Megatron's implementation), pipeline interleaving
//! off. It is not the project's plan-search crate: no pruning beyond divisibility and the
//! device's formats, no context or expert parallelism.

use perfcast_core::{DType, Engine};
use perfcast_engine::training::{Training, TrainingPlan, TrainingReport};
use serde::Deserialize;

fn d_tp() -> Vec<u32> {
    vec![1, 2, 4, 8, 16, 32, 64]
}
fn d_pp() -> Vec<u32> {
    vec![1, 2, 4, 8, 16, 32, 64]
}
fn d_mb() -> Vec<u32> {
    vec![1, 2, 4, 8]
}
fn d_rc() -> Vec<String> {
    vec!["none".into(), "selective".into(), "full".into()]
}
fn d_prec() -> Vec<DType> {
    vec![DType::Bf16, DType::Fp8]
}
fn d_zero() -> Vec<u8> {
    vec![1]
}

/// The grid searched (each list in config order).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchSpace {
    #[serde(default = "d_tp")]
    pub tp: Vec<u32>,
    #[serde(default = "d_pp")]
    pub pp: Vec<u32>,
    #[serde(default = "d_mb")]
    pub micro_batch: Vec<u32>,
    #[serde(default = "d_rc")]
    pub recompute: Vec<String>,
    /// Formats tried where the device supports them.
    #[serde(default = "d_prec")]
    pub precision: Vec<DType>,
    #[serde(default = "d_zero")]
    pub zero_stage: Vec<u8>,
}

impl Default for SearchSpace {
    fn default() -> Self {
        SearchSpace {
            tp: d_tp(),
            pp: d_pp(),
            micro_batch: d_mb(),
            recompute: d_rc(),
            precision: d_prec(),
            zero_stage: d_zero(),
        }
    }
}

impl SearchSpace {
    /// The first problem with the grid, as `(key, message)`.
    pub fn check(&self) -> Option<(&'static str, String)> {
        for (k, v) in [
            ("tp", &self.tp),
            ("pp", &self.pp),
            ("micro_batch", &self.micro_batch),
        ] {
            if v.is_empty() || v.contains(&0) {
                return Some((k, format!("{v:?}: needs one or more integers >= 1")));
            }
        }
        if self.recompute.is_empty() {
            return Some(("recompute", "needs one or more policies".into()));
        }
        if let Some(r) = self
            .recompute
            .iter()
            .find(|r| !matches!(r.as_str(), "none" | "selective" | "full"))
        {
            return Some((
                "recompute",
                format!("`{r}`: allowed are none, selective, full"),
            ));
        }
        if self.precision.is_empty() {
            return Some(("precision", "needs one or more formats".into()));
        }
        if let Some(p) = self
            .precision
            .iter()
            .find(|p| !matches!(p, DType::Bf16 | DType::Fp16 | DType::Fp8))
        {
            return Some((
                "precision",
                format!("`{p}`: the training engine trains in bf16, fp16 or fp8"),
            ));
        }
        if self.zero_stage.is_empty() || self.zero_stage.iter().any(|z| *z > 3) {
            return Some((
                "zero_stage",
                format!("{:?}: allowed are 0, 1, 2, 3", self.zero_stage),
            ));
        }
        None
    }
}

/// The best plan found.
#[derive(Debug, Clone)]
pub struct Best {
    pub plan: TrainingPlan,
    pub report: TrainingReport,
    /// Plans evaluated (valid for the model and device count).
    pub evaluated: usize,
    /// Plans that fit in memory.
    pub feasible: usize,
}

/// Search `space` for the fastest plan of `training` that fits, for `global_batch` sequences
/// per step; `precisions` restricts the formats further (e.g. the precision factor off).
/// `template` gives every plan field the grid does not set. `None` when nothing fits.
pub fn best_plan(
    training: &Training,
    global_batch: u32,
    space: &SearchSpace,
    precisions: &[DType],
    template: &TrainingPlan,
) -> Option<Best> {
    let sys = training.system();
    let devices = sys.devices;
    let model = training.model();
    let mut best: Option<Best> = None;
    let (mut evaluated, mut feasible) = (0, 0);
    for &tp in &space.tp {
        if !model.heads.is_multiple_of(tp as u64) || tp > devices {
            continue;
        }
        for &pp in &space.pp {
            if tp * pp > devices || !devices.is_multiple_of(tp * pp) || pp as u64 > model.layers {
                continue;
            }
            let dp = devices / (tp * pp);
            for &mb in &space.micro_batch {
                if !global_batch.is_multiple_of(mb * dp) {
                    continue;
                }
                for rc in &space.recompute {
                    for &prec in &space.precision {
                        if !precisions.contains(&prec)
                            || sys.compute.peak(Engine::Matrix, prec).is_none()
                        {
                            continue;
                        }
                        for &zero in &space.zero_stage {
                            if zero > 0 && dp == 1 {
                                continue;
                            }
                            let plan = TrainingPlan {
                                tp,
                                pp,
                                dp,
                                sp: tp > 1,
                                micro_batch: mb,
                                global_batch,
                                recompute: rc.clone(),
                                precision: prec,
                                zero_stage: zero,
                                ..template.clone()
                            };
                            let Ok(r) = training.evaluate(&plan) else {
                                continue;
                            };
                            evaluated += 1;
                            if !r.memory.fits {
                                continue;
                            }
                            feasible += 1;
                            let better = best
                                .as_ref()
                                .is_none_or(|b| r.iteration_time.0 < b.report.iteration_time.0);
                            if better {
                                best = Some(Best {
                                    plan,
                                    report: r,
                                    evaluated: 0,
                                    feasible: 0,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    best.map(|mut b| {
        b.evaluated = evaluated;
        b.feasible = feasible;
        b
    })
}

/// A plan as short text: `TP8 PP8 DP16 mb1 selective bf16 Z1`.
pub fn describe(p: &TrainingPlan) -> String {
    format!(
        "TP{} PP{} DP{} mb{} {} {}{}",
        p.tp,
        p.pp,
        p.dp,
        p.micro_batch,
        p.recompute,
        p.precision,
        if p.zero_stage > 0 {
            format!(" Z{}", p.zero_stage)
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (edit of the default grid, key expected in the complaint or None).
    #[test]
    fn grid_checks_name_the_key() {
        type Edit = fn(&mut SearchSpace);
        let table: [(Edit, Option<&str>); 6] = [
            (|_| {}, None),
            (|s| s.tp = vec![], Some("tp")),
            (|s| s.pp = vec![0, 2], Some("pp")),
            (|s| s.recompute = vec!["some".into()], Some("recompute")),
            (|s| s.precision = vec![DType::Fp4], Some("precision")),
            (|s| s.zero_stage = vec![4], Some("zero_stage")),
        ];
        for (edit, want) in table {
            let mut s = SearchSpace::default();
            edit(&mut s);
            assert_eq!(s.check().map(|(k, _)| k), want);
        }
    }

    #[test]
    fn describe_is_compact() {
        let p = TrainingPlan {
            tp: 8,
            pp: 4,
            dp: 2,
            micro_batch: 2,
            global_batch: 64,
            recompute: "selective".into(),
            zero_stage: 1,
            ..TrainingPlan::default()
        };
        assert_eq!(describe(&p), "TP8 PP4 DP2 mb2 selective bf16 Z1");
    }
}
