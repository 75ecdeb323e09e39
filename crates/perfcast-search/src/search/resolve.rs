//! Space resolution: the inputs checked, and a [`SearchSpace`] with its [`Constraints`] turned
//! into what the walk takes: the outer tuples (device count, TP, PP, DP, CP) and, per
//! training, the lists of every other dimension ([`Lists`]).

use super::results::precision_code;
use crate::space::{Constraints, SearchSpace};
use crate::SearchError;
use perfcast_core::parallel::MAX_DECLARED_AXES;
use perfcast_core::DType;
use perfcast_engine::training::{Placement, Training, TrainingPlan};

/// Most plans one search reports (each is fully evaluated and printed).
const MAX_TOP: usize = 10_000;

/// Distinct pipeline schedules one search may walk.
pub(super) const MAX_SCHEDULES: usize = 16;

/// The outer tuple a worker takes: everything but the switches walked inside.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outer {
    /// Index of the training (device count).
    pub(super) t: usize,
    pub(super) devices: u32,
    pub(super) tp: u32,
    pub(super) pp: u32,
    pub(super) dp: u32,
    pub(super) cp: u32,
    /// Degrees of the declared axes (the run's numbering; 1 beyond them).
    pub(super) axes: [u32; MAX_DECLARED_AXES],
    /// The product of the declared axes' degrees that split the batch.
    pub(super) batch: u32,
}

/// The resolved lists of a space for one training.
pub(super) struct Lists {
    pub(super) ep: Option<Vec<u32>>,
    pub(super) etp: Option<Vec<u32>>,
    pub(super) vpp: Option<Vec<u32>>,
    pub(super) micro_batch: Option<Vec<u32>>,
    pub(super) sp: Vec<bool>,
    pub(super) recompute: Vec<u8>,
    pub(super) full: Option<u8>,
    pub(super) partial: bool,
    pub(super) zero: Vec<u8>,
    /// (schedule index, interleaved)
    pub(super) schedules: Vec<(u8, bool)>,
    pub(super) precision: Vec<DType>,
    pub(super) tpo: Vec<bool>,
    pub(super) ogr: Vec<bool>,
    pub(super) opg: Vec<bool>,
    /// Indices into `Placement::all()`.
    pub(super) placements: Vec<u8>,
}

/// The divisors of `n` (those that fit in a `u32`), ascending.
pub(super) fn divisors(n: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (1..=n)
        .take_while(|d| d * d <= n)
        .filter(|d| n.is_multiple_of(*d))
        .flat_map(|d| [d, n / d])
        .filter_map(|d| u32::try_from(d).ok())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The lists of every dimension walked inside an outer tuple, for `training` (its registered
/// recompute policies and schedules; the precisions `[search]` lists, else the plan's own,
/// `precision`), each checked.
pub(super) fn lists(
    training: &Training,
    space: &SearchSpace,
    precision: DType,
) -> Result<Lists, SearchError> {
    let rnames = training.recompute_names();
    let snames = training.schedule_names();
    let pick = |names: &[&str], list: &[String], key: &str| -> Result<Vec<u8>, SearchError> {
        list.iter()
            .map(|n| {
                names
                    .iter()
                    .position(|x| x == n)
                    .map(|i| i as u8)
                    .ok_or_else(|| SearchError::Invalid {
                        key: key.into(),
                        message: format!(
                            "`{n}` is not registered{}; registered: {}",
                            perfcast_core::suggest::did_you_mean(n, names.iter().copied()),
                            names.join(", ")
                        ),
                    })
            })
            .collect()
    };
    let recompute = match &space.recompute {
        Some(l) => pick(&rnames, l, "search.recompute")?,
        None => (0..rnames.len() as u8).collect(),
    };
    let full = rnames.iter().position(|n| *n == "full").map(|i| i as u8);
    let default_sched = vec!["1f1b".to_string(), "interleaved-1f1b".to_string()];
    let slist = space.schedule.as_ref().unwrap_or(&default_sched);
    let mut sidx = pick(&snames, slist, "search.schedule")?;
    sidx.sort_unstable();
    sidx.dedup();
    if sidx.len() > MAX_SCHEDULES {
        return Err(SearchError::Invalid {
            key: "search.schedule".into(),
            message: format!("at most {MAX_SCHEDULES} schedules per search"),
        });
    }
    let schedules = sidx
        .into_iter()
        .map(|i| (i, snames[i as usize].contains("interleaved")))
        .collect();
    let precision = match &space.precision {
        Some(l) => {
            for d in l {
                if precision_code(*d).is_none() {
                    return Err(SearchError::Invalid {
                        key: "search.precision".into(),
                        message: format!(
                            "`{}` is not a training precision; allowed: bf16, fp16, fp8, fp4",
                            d.name()
                        ),
                    });
                }
            }
            l.clone()
        }
        // A search keeps the precision the configuration names (it switched to FP8 unasked,
        // and ranked FP8 and BF16 plans against different peaks in one MFU column).
        None => vec![precision],
    };
    let all = Placement::all();
    let placements = match &space.placement {
        None => (0..all.len() as u8).collect(),
        Some(list) => {
            let mut v = Vec::with_capacity(list.len());
            for name in list {
                let p = Placement::parse(name).map_err(|e| SearchError::Invalid {
                    key: "search.placement".into(),
                    message: e.to_string(),
                })?;
                let i = all.iter().position(|a| *a == p).unwrap_or(0) as u8;
                if !v.contains(&i) {
                    v.push(i);
                }
            }
            v
        }
    };
    if let Some(z) = space
        .zero_stage
        .as_ref()
        .and_then(|z| z.iter().find(|s| **s > 3))
    {
        return Err(SearchError::Invalid {
            key: "search.zero_stage".into(),
            message: format!("{z} is not a ZeRO stage; allowed: 0, 1, 2, 3"),
        });
    }
    Ok(Lists {
        ep: space.ep.clone(),
        etp: space.etp.clone(),
        vpp: space.vpp.clone(),
        micro_batch: space.micro_batch.clone(),
        sp: space.sp.clone().unwrap_or(vec![false, true]),
        recompute,
        full,
        partial: space.partial_recompute.unwrap_or(true),
        zero: space.zero_stage.clone().unwrap_or(vec![0, 1, 2, 3]),
        schedules,
        precision,
        tpo: space.tp_comm_overlap.clone().unwrap_or(vec![false, true]),
        ogr: space.overlap_grad_reduce.clone().unwrap_or(vec![true]),
        opg: space.overlap_param_gather.clone().unwrap_or(vec![true]),
        placements,
    })
}

fn check_list(key: &str, list: &Option<Vec<u32>>) -> Result<(), SearchError> {
    if let Some(l) = list {
        if l.contains(&0) {
            return Err(SearchError::Invalid {
                key: key.into(),
                message: "values must be positive integers".into(),
            });
        }
    }
    Ok(())
}

/// The inputs every search checks before resolving anything: `top`, the device counts, the
/// memory headroom, the global batch and the degree lists.
pub(super) fn check(
    trainings: &[Training],
    space: &SearchSpace,
    constraints: &Constraints,
    top_n: usize,
) -> Result<(), SearchError> {
    if top_n == 0 || top_n > MAX_TOP {
        return Err(SearchError::Invalid {
            key: "top".into(),
            message: format!("{top_n} is not allowed: must be 1 to {MAX_TOP}"),
        });
    }
    if trainings.is_empty() {
        return Err(SearchError::Invalid {
            key: "search.devices".into(),
            message: "no device count to search".into(),
        });
    }
    if !(constraints.memory_headroom.is_finite()
        && (0.0..1.0).contains(&constraints.memory_headroom))
    {
        return Err(SearchError::Invalid {
            key: "search.memory_headroom".into(),
            message: format!(
                "{} is not allowed: a fraction in [0, 1)",
                constraints.memory_headroom
            ),
        });
    }
    if constraints.global_batch == 0 {
        return Err(SearchError::Invalid {
            key: "search.global_batch".into(),
            message: "must be a positive integer".into(),
        });
    }
    for (k, l) in [
        ("search.tp", &space.tp),
        ("search.pp", &space.pp),
        ("search.dp", &space.dp),
        ("search.cp", &space.cp),
        ("search.vpp", &space.vpp),
        ("search.micro_batch", &space.micro_batch),
        ("search.ep", &space.ep),
        ("search.etp", &space.etp),
    ] {
        check_list(k, l)?;
    }
    for (name, list) in space.axes.iter().flatten() {
        let key = format!("search.axes.{name}");
        check_list(&key, &Some(list.clone()))?;
        if list.is_empty() {
            return Err(SearchError::Invalid {
                key,
                message: "lists no degree".into(),
            });
        }
        if let Err(message) = trainings[0].declared_axis(name) {
            return Err(SearchError::Invalid { key, message });
        }
    }
    let dense = trainings.iter().any(|t| t.model().moe.is_none());
    for (k, l) in [("search.ep", &space.ep), ("search.etp", &space.etp)] {
        if let Some(v) = l.as_ref().and_then(|l| l.iter().find(|v| **v > 1)) {
            if dense {
                return Err(SearchError::Invalid {
                    key: k.into(),
                    message: format!(
                        "{v}: expert parallelism needs a mixture-of-experts model ([model.moe])"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The outer tuples (device count, TP, PP, DP, CP with tp x cp x pp x dp = devices) of the
/// space, or why there is none for any device count.
pub(super) fn outer_tuples(
    trainings: &[Training],
    space: &SearchSpace,
    constraints: &Constraints,
    template: &TrainingPlan,
) -> Result<Vec<Outer>, SearchError> {
    let mut outers = Vec::new();
    let mut why_empty: Vec<String> = Vec::new();
    for (ti, t) in trainings.iter().enumerate() {
        let n = t.system().devices;
        let domain = t
            .system()
            .network
            .first()
            .map(|l| l.domain_size())
            .unwrap_or(1);
        let max_tp = constraints.max_tp.unwrap_or(domain);
        let allowed =
            |list: &Option<Vec<u32>>, v: u32| list.as_ref().is_none_or(|l| l.contains(&v));
        let (before, reasons) = (outers.len(), why_empty.len());
        for (axes, batch) in declared_combinations(t, space, template) {
            let declared: u64 = axes.iter().map(|&d| d as u64).product();
            if !(n as u64).is_multiple_of(declared) {
                continue;
            }
            let m = (n as u64 / declared) as u32;
            let divs = divisors(m as u64);
            let tps: Vec<u32> = divs
                .iter()
                .copied()
                .filter(|v| *v <= max_tp && allowed(&space.tp, *v))
                .collect();
            if tps.is_empty() {
                why_empty.push(format!(
                    "{n} devices: no tensor-parallel degree in search.tp = {:?} divides {m} and is <= max_tp = {max_tp}",
                    space.tp
                ));
            }
            let cps: Vec<u32> = divs
                .iter()
                .copied()
                .filter(|v| match &space.cp {
                    Some(l) => l.contains(v),
                    None => *v == 1,
                })
                .collect();
            if cps.is_empty() {
                why_empty.push(format!(
                    "{n} devices: no context-parallel degree in search.cp = {:?} divides {m}",
                    space.cp
                ));
            }
            for &tp in &tps {
                for &cp in &cps {
                    if !(m as u64).is_multiple_of(tp as u64 * cp as u64) {
                        continue;
                    }
                    let rest = m / (tp * cp);
                    for pp in divisors(rest as u64) {
                        let dp = rest / pp;
                        if allowed(&space.pp, pp) && allowed(&space.dp, dp) {
                            outers.push(Outer {
                                t: ti,
                                devices: n,
                                tp,
                                pp,
                                dp,
                                cp,
                                axes,
                                batch,
                            });
                        }
                    }
                }
            }
        }
        if outers.len() == before && why_empty.len() == reasons {
            why_empty.push(format!(
                "{n} devices: no pp in search.pp = {:?} and dp in search.dp = {:?} with tp x cp x pp x dp{} = {n}",
                space.pp,
                space.dp,
                if space.axes.is_some() { " x the declared axes" } else { "" }
            ));
        }
    }
    if outers.is_empty() {
        why_empty.dedup();
        return Err(SearchError::Empty {
            reason: why_empty.join("; "),
        });
    }
    Ok(outers)
}

/// Every combination of the declared axes' degrees the space lists (each axis not listed at
/// the template's degree, else 1), with the product of those that split the batch.
fn declared_combinations(
    training: &Training,
    space: &SearchSpace,
    template: &TrainingPlan,
) -> Vec<([u32; MAX_DECLARED_AXES], u32)> {
    let mut out = vec![([1u32; MAX_DECLARED_AXES], 1u32)];
    for (k, decl) in training.declared_axes().enumerate().take(MAX_DECLARED_AXES) {
        let fixed = [template.axes.get(&decl.name).copied().unwrap_or(1)];
        let values: &[u32] = match space.axes.as_ref().and_then(|a| a.get(&decl.name)) {
            Some(l) => l,
            None => &fixed,
        };
        out = out
            .into_iter()
            .flat_map(|(axes, batch)| {
                values.iter().map(move |&d| {
                    let mut a = axes;
                    a[k] = d;
                    (a, if decl.divides.batch { batch * d } else { batch })
                })
            })
            .collect();
    }
    out
}
