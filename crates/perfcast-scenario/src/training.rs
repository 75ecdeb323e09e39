//! A training scenario: `[model]`, the system, `[plan]` and `[options]`.
//!
//! Devices: `system.devices` and `plan.dp` may each be left out. With `plan.dp` omitted it is
//! derived as `system.devices / (tp x pp x cp)` (which must divide); with `system.devices`
//! left at its built-in default it becomes `tp x pp x dp x cp`; with both given, the product
//! must equal `system.devices`. The degrees of declared axes (`plan.axes.NAME`) multiply in
//! beside `tp x pp x cp`.
//!
//! The stack (`stack = "NAME"`, [`crate::stack`]) fills the plan and option fields the
//! configuration leaves unset.

use crate::{engine_error, is_set, Scenario, ScenarioError};
use perfcast_config::{Config, HostError};
use perfcast_core::System;
use perfcast_engine::{Training, TrainingOptions, TrainingPlan};

/// A model on a system with a training plan, ready to evaluate.
pub struct TrainingScenario {
    /// The model on the system, with the engine options of `[options]`.
    pub training: Training,
    /// The `[plan]`, its devices reconciled with the system's.
    pub plan: TrainingPlan,
}

impl TrainingScenario {
    /// The scenario of `cfg` (its stack resolved once: [`Scenario::training`]).
    pub fn from_config(cfg: &Config) -> Result<Self, ScenarioError> {
        Self::of(&Scenario::training(cfg))
    }

    /// The training scenario of `sc`: a `[model]`, a `[plan]` and a system are required.
    pub fn of(sc: &Scenario) -> Result<Self, ScenarioError> {
        let cfg = sc.config();
        let model = sc.model()?.clone();
        let mut system = sc.system()?.clone();
        let mut plan = plan(sc)?.ok_or(ScenarioError::Missing {
            section: "plan",
            hint: "`perfcast predict` needs the training plan (tp, pp, dp, micro_batch, global_batch, recompute, ...; docs/commands/predict.md)",
        })?;
        resolve_devices(cfg, &mut plan, &mut system)?;
        let training = Training::with_options(model, system, cfg.registry(), &options(sc)?)
            .map_err(|e| engine_error(cfg, e))?;
        Ok(TrainingScenario { training, plan })
    }
}

/// The `[plan]`, if the configuration has one (devices not yet reconciled), with the
/// stack's plan fields where `[plan]` leaves them unset ([`crate::stack`]).
pub fn plan(sc: &Scenario) -> Result<Option<TrainingPlan>, ScenarioError> {
    let Some(mut p) = sc.config().extract_opt::<TrainingPlan>("plan")? else {
        return Ok(None);
    };
    sc.stack()?
        .apply_training_plan(&mut p, &sc.user_set(), sc.generation()?);
    Ok(Some(p))
}

/// What a plan is made from when `[plan]` leaves a field out: the `[plan]` (stack applied),
/// else the engine's default plan with the stack's fields (the search's template).
pub fn template(sc: &Scenario) -> Result<TrainingPlan, ScenarioError> {
    match plan(sc)? {
        Some(p) => Ok(p),
        None => {
            let mut p = TrainingPlan::default();
            sc.stack()?
                .apply_training_plan(&mut p, &sc.user_set(), sc.generation()?);
            Ok(p)
        }
    }
}

/// The training engine's options of `[options]` (defaults when absent), with the stack's
/// option fields where `[options]` leaves them unset.
pub fn options(sc: &Scenario) -> Result<TrainingOptions, ScenarioError> {
    let mut o: TrainingOptions = sc.config().extract_opt("options")?.unwrap_or_default();
    sc.stack()?.apply_training_options(&mut o, &sc.user_set());
    Ok(o)
}

/// The device count of a user value, checked.
fn product(parts: &[u32]) -> Option<u32> {
    parts
        .iter()
        .try_fold(1u32, |acc, p| acc.checked_mul(*p))
        .filter(|p| *p > 0)
}

/// Reconcile `plan.dp` and `system.devices` (see the module documentation).
pub fn resolve_devices(
    cfg: &Config,
    plan: &mut TrainingPlan,
    system: &mut System,
) -> Result<(), HostError> {
    let devices_set = is_set(cfg, "system.devices");
    let mut parts = vec![plan.tp, plan.pp, plan.cp];
    parts.extend(plan.axes.values());
    let Some(per) = product(&parts) else {
        return Ok(()); // a zero or absurd degree: the engine names it
    };
    // The factors beside dp, named and valued for messages.
    let axes: String = plan
        .axes
        .keys()
        .map(|k| format!(" x plan.axes.{k}"))
        .collect();
    let values: String = plan.axes.values().map(|v| format!(" x {v}")).collect();
    if is_set(cfg, "plan.dp") {
        let Some(all) = product(&[per, plan.dp]) else {
            return Ok(());
        };
        if !devices_set {
            system.devices = all;
        } else if all != system.devices {
            return Err(cfg.invalid(
                "plan.dp",
                format!(
                    "plan.tp x plan.pp x plan.dp x plan.cp{axes} = {} x {} x {} x {}{values} = {all} must equal system.devices = {}{}; or omit plan.dp to derive it",
                    plan.tp,
                    plan.pp,
                    plan.dp,
                    plan.cp,
                    system.devices,
                    cfg.origin_of("system.devices")
                        .map(|o| format!(" (from {o})"))
                        .unwrap_or_default()
                ),
            ));
        }
    } else if devices_set {
        if !system.devices.is_multiple_of(per) {
            return Err(cfg.invalid(
                "system.devices",
                format!(
                    "{} devices cannot be split into data-parallel replicas of plan.tp x plan.pp x plan.cp{axes} = {} x {} x {}{values} = {per} devices: it must be a multiple of {per} (or set plan.dp)",
                    system.devices, plan.tp, plan.pp, plan.cp
                ),
            ));
        }
        plan.dp = system.devices / per;
    } else {
        system.devices = per;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_reject_zero_and_overflow() {
        let table: [(&[u32], Option<u32>); 4] = [
            (&[8, 16, 1], Some(128)),
            (&[8, 0, 1], None),
            (&[u32::MAX, 2], None),
            (&[], Some(1)),
        ];
        for (parts, want) in table {
            assert_eq!(product(parts), want, "{parts:?}");
        }
    }
}
