//! A case prepared once and evaluated under any overlay: what no overlay key changes (the
//! model, the configuration sources, the system composed without an overlay, the engine
//! options as the case reads them) is worked out by [`Harness::prepare`]; [`Harness::evaluate`]
//! then recomposes only what the overlay's keys reach (the system when a key is outside
//! `[options]`, the options otherwise). `perfcast calibrate` evaluates each case hundreds of
//! times this way; `perfcast validate` once.

use crate::cases::{Case, Kind};
use crate::harness::{case_hardware, model_spec, unsupported_reason, Harness};
use crate::overlay::{json_set, Applies, CaseKeys, Entry};
use crate::presets::Hardware;
use crate::report::{CaseResult, MetricResult, Status};
use crate::serving::ServingRun;
use crate::{Error, Result};
use perfcast_core::workload::ModelSpec;
use perfcast_core::System;
use perfcast_engine::inference::{Inference, InferenceOptions};
use perfcast_engine::training::{Training, TrainingOptions, DEFAULT_STRATEGIES};

/// A case ready to evaluate.
pub struct Prepared<'c> {
    /// The case.
    pub case: &'c Case,
    /// The inputs, or why the case cannot run ([`Error::Unsupported`] for a case the engines
    /// do not model).
    setup: Result<Setup>,
}

/// What of a case does not depend on an overlay.
struct Setup {
    model: ModelSpec,
    /// The case's configuration sources (hardware + the case's settings).
    hardware: Hardware,
    /// Their merged configuration (an overlay's keys are merged on top of it).
    config: perfcast_config::Config,
    /// The system composed from `hardware` alone.
    system: System,
    /// The component name of `device.compute` (an overlay that reaches only its table
    /// rebuilds only the compute unit).
    compute: String,
    /// Every key of the case's configuration, `[options]` as the engine reads it included.
    keys: CaseKeys,
    /// `[options]` as the case's engine reads it (defaults filled in), as JSON.
    options: serde_json::Value,
    /// The stack profile the case is mapped to (what `stacks.NAME.KEY` keys name).
    stack: String,
    /// Whether the case runs the training engine (which engine's options a stack key sets).
    training: bool,
}

impl Prepared<'_> {
    /// The keys of the case's configuration (`None` when the case cannot run).
    pub fn keys(&self) -> Option<&CaseKeys> {
        self.setup.as_ref().ok().map(|s| &s.keys)
    }

    /// Whether the case can run at all (supported, and its system composes).
    pub fn runnable(&self) -> bool {
        self.setup.is_ok()
    }

    /// Why the case cannot run, with its status (`None` when it can).
    pub fn failure(&self) -> Option<(Status, &Error)> {
        self.setup.as_ref().err().map(|e| (status_of(e), e))
    }
}

impl Harness {
    /// Prepare `case`: unsupported cases and systems that do not compose are recorded, not
    /// errors.
    pub fn prepare<'c>(&self, case: &'c Case) -> Prepared<'c> {
        let setup = match unsupported_reason(case) {
            Some(why) => Err(Error::Unsupported(why)),
            None => self.setup(case),
        };
        Prepared { case, setup }
    }

    fn setup(&self, case: &Case) -> Result<Setup> {
        let hardware = case_hardware(case)?;
        let (config, system) = hardware.compose(self.plugins())?;
        let compute: String = config
            .extract("device.compute")
            .map_err(|e| hardware.error(e))?;
        // The stack's options where the configuration does not set them (as the CLI's
        // scenario applies a configuration's stack).
        let stack = self.stacks().of(case).1;
        let user_set = |k: &str| config.contains(k);
        let options = match case.kind {
            Kind::Training => {
                let resolved = perfcast_scenario::Scenario::training(&config);
                let mut o: TrainingOptions = perfcast_scenario::training::options(&resolved)?;
                stack.apply_training_options(&mut o, &user_set);
                // Every strategy in use has a parameter table (empty: its defaults), so that
                // `options.strategy_params.data.overlap_efficiency` has a parent to apply to.
                let names: Vec<String> = match &o.strategies {
                    Some(list) => list.clone(),
                    None => DEFAULT_STRATEGIES.iter().map(|s| s.to_string()).collect(),
                };
                for n in names {
                    o.strategy_params
                        .entry(n)
                        .or_insert_with(|| serde_json::Value::Object(Default::default()));
                }
                serde_json::to_value(o)
            }
            Kind::Inference => {
                // The harness's own options unless the configuration has an `[options]`.
                let mut o: InferenceOptions = if config.contains("options") {
                    perfcast_scenario::inference::options(&perfcast_scenario::Scenario::inference(
                        &config,
                    ))?
                } else {
                    self.inference_options.clone()
                };
                stack.apply_inference_options(&mut o, &user_set);
                serde_json::to_value(o)
            }
        }
        .map_err(|e| Error::Options {
            with: None,
            source: std::sync::Arc::new(e),
        })?;
        let mut all = serde_json::to_value(config.value())?;
        json_set(&mut all, &["options"], options.clone())?;
        let name = self.stacks().of(case).0.name;
        let training = case.kind == Kind::Training;
        json_set(
            &mut all,
            &["stacks", &name],
            stack_options(stack, training).map_err(|e| Error::Stack {
                stack: name.clone(),
                source: Box::new(e),
            })?,
        )?;
        Ok(Setup {
            model: model_spec(case, stack),
            hardware,
            config,
            system,
            compute,
            keys: CaseKeys::of(&all),
            options,
            stack: name,
            training,
        })
    }

    /// How overlay key `e` relates to the prepared case: in its configuration, a parameter its
    /// configuration accepts (parent table present, the case builds with it), or neither.
    pub fn applies(&self, p: &Prepared, e: &Entry) -> Applies {
        let Ok(s) = &p.setup else {
            return Applies::No;
        };
        if s.keys.contains(&e.key) {
            Applies::Present
        } else if s.keys.has_parent_table(&e.key) && self.probe(p, std::slice::from_ref(e)).is_ok()
        {
            Applies::Accepted
        } else {
            Applies::No
        }
    }

    /// The entries of `entries` that apply to the prepared case ([`Harness::applies`]).
    pub fn applicable(&self, p: &Prepared, entries: &[Entry]) -> Vec<Entry> {
        entries
            .iter()
            .filter(|e| self.applies(p, e) != Applies::No)
            .cloned()
            .collect()
    }

    /// Build the case's engine with `entries` set (nothing is evaluated): the error a plugin or
    /// the engine gives for them.
    pub fn probe(&self, p: &Prepared, entries: &[Entry]) -> Result<()> {
        let Ok(s) = &p.setup else {
            return Err(Error::invalid("the case cannot run"));
        };
        let system = s.system_with(entries);
        match p.case.kind {
            Kind::Training => self.training_engine(s, entries, system).map(|_| ()),
            Kind::Inference => self.inference_engine(s, entries, system).map(|_| ()),
        }
    }

    /// What the system of the prepared case with `entries` is composed from, as a key equal
    /// for two cases exactly when their systems are the same composition (so a caller
    /// evaluating many cases can compose each system once: [`Harness::compose`],
    /// [`Harness::evaluate_on`]); `None` when no entry reaches the system (or the case cannot
    /// run): the system composed at preparation is used.
    pub fn system_key(&self, p: &Prepared, entries: &[Entry]) -> Option<String> {
        let s = p.setup.as_ref().ok()?;
        let sets: Vec<&Entry> = entries.iter().filter(|e| !e.is_option()).collect();
        if sets.is_empty() {
            return None;
        }
        let mut key = match s.compute_only(&sets) {
            // The compute unit is built from its own table alone: the cases of one preset
            // share it whatever their device count or NIC.
            Some(prefix) => format!("{prefix} {:?}", s.hardware.files_and_sets(&prefix)),
            None => s.hardware.sources_key(),
        };
        for e in sets {
            key.push(' ');
            key.push_str(&e.set_arg());
        }
        Some(key)
    }

    /// The system of the prepared case with the `entries` outside `[options]` on top.
    pub fn compose(&self, p: &Prepared, entries: &[Entry]) -> Result<System> {
        match &p.setup {
            Ok(s) => s.system_with(entries),
            Err(why) => Err(why.clone()),
        }
    }

    /// Evaluate the prepared case with `entries` (those that apply to it) on top of its
    /// configuration. Never panics, never drops the case.
    pub fn evaluate(&self, p: &Prepared, entries: &[Entry]) -> CaseResult {
        self.evaluate_on(p, entries, None)
    }

    /// [`Harness::evaluate`] on `system` when given: [`Harness::compose`]'s for these entries
    /// for this case or another of the same [`Harness::system_key`] (whose compute unit alone
    /// is taken when the key is the compute unit's).
    pub fn evaluate_on(
        &self,
        p: &Prepared,
        entries: &[Entry],
        system: Option<Result<System>>,
    ) -> CaseResult {
        self.evaluate_with(p, entries, system, &mut ServingRun::Simulate)
    }

    /// [`Harness::evaluate_on`], a serving case's run had as `how` says.
    pub fn evaluate_with(
        &self,
        p: &Prepared,
        entries: &[Entry],
        system: Option<Result<System>>,
        how: &mut ServingRun,
    ) -> CaseResult {
        let case = p.case;
        let mut r = CaseResult {
            id: case.id.clone(),
            group: case.group.clone(),
            kind: case.kind,
            status: Status::Ok,
            reason: None,
            metrics: Vec::new(),
            first: None,
            breakdown: Vec::new(),
            reference: None,
            error_bars: None,
            stack: Some(self.stacks().of(case).0),
        };
        let unpredicted = |case: &Case| {
            case.measured
                .metrics()
                .map(|(m, v)| MetricResult::new(m, None, v))
                .collect::<Vec<_>>()
        };
        let outcome = match &p.setup {
            Err(why) => {
                r.status = status_of(why);
                r.reason = Some(why.to_string());
                r.metrics = unpredicted(case);
                return r;
            }
            Ok(s) => {
                let system = match system {
                    Some(shared) => shared.map(|x| s.adopt(entries, x)),
                    None => s.system_with(entries),
                };
                match case.kind {
                    Kind::Training => self
                        .training_engine(s, entries, system)
                        .and_then(|e| self.predict_training(case, &e, &mut r)),
                    Kind::Inference => self
                        .inference_engine(s, entries, system)
                        .and_then(|e| self.predict_inference(case, &e, &mut r, how)),
                }
            }
        };
        if let Err(e) = outcome {
            r.status = Status::Error;
            r.reason = Some(e.to_string());
            r.metrics = unpredicted(case);
            r.breakdown.clear();
            return r;
        }
        let mut warnings = Vec::new();
        if let Some(s) = &case.source_inconsistency {
            warnings.push(format!("source inconsistency: {s}"));
        }
        if let Some(w) = r.reason.take() {
            warnings.push(w);
        }
        if !warnings.is_empty() {
            r.reason = Some(warnings.join("; "));
        }
        r
    }

    fn training_engine(
        &self,
        s: &Setup,
        entries: &[Entry],
        system: Result<System>,
    ) -> Result<Training> {
        let options: TrainingOptions = serde_json::from_value(s.options_with(entries)?)
            .map_err(|e| options_error(entries, e))?;
        Ok(Training::with_options(
            s.model.clone(),
            system?,
            self.registry(),
            &options,
        )?)
    }

    fn inference_engine(
        &self,
        s: &Setup,
        entries: &[Entry],
        system: Result<System>,
    ) -> Result<Inference> {
        let options: InferenceOptions = serde_json::from_value(s.options_with(entries)?)
            .map_err(|e| options_error(entries, e))?;
        Ok(Inference::new(s.model.clone(), system?, options)?)
    }
}

/// The status of a case that cannot run because of `e`.
fn status_of(e: &Error) -> Status {
    match e {
        Error::Unsupported(_) => Status::Unsupported,
        _ => Status::Error,
    }
}

/// An `[options]` that the engine refuses once the overlay's keys are set.
fn options_error(entries: &[Entry], e: serde_json::Error) -> Error {
    let keys: Vec<String> = entries
        .iter()
        .filter(|e| e.is_option())
        .map(|e| e.key.clone())
        .collect();
    Error::Options {
        with: Some(keys),
        source: std::sync::Arc::new(e),
    }
}

impl Setup {
    /// This case's system from `shared`, composed for another case of the same
    /// [`Harness::system_key`]: when the key is the compute unit's alone, only the compute unit
    /// is shared (the memory tiers, network and device count are this case's).
    fn adopt(&self, entries: &[Entry], shared: System) -> System {
        let sets: Vec<&Entry> = entries.iter().filter(|e| !e.is_option()).collect();
        if self.compute_only(&sets).is_some() {
            System {
                compute: shared.compute,
                ..self.system.clone()
            }
        } else {
            shared
        }
    }

    /// `components.<compute>.` when every one of `sets` is below the compute unit's table.
    fn compute_only(&self, sets: &[&Entry]) -> Option<String> {
        let prefix = format!("components.{}.", self.compute);
        sets.iter()
            .all(|e| e.key.starts_with(&prefix))
            .then_some(prefix)
    }

    /// The system with the entries outside `[options]` on top (the one composed without them
    /// when there are none). Entries that reach only the compute unit's table rebuild only the
    /// compute unit (the memory tiers and network levels are those composed at preparation).
    fn system_with(&self, entries: &[Entry]) -> Result<System> {
        let sets: Vec<&Entry> = entries.iter().filter(|e| !e.is_option()).collect();
        if sets.is_empty() {
            return Ok(self.system.clone());
        }
        let args: Vec<String> = sets.iter().map(|e| e.set_arg()).collect();
        let config = self
            .config
            .with_sets(&args)
            .map_err(|e| self.hardware.error(e))?;
        if self.compute_only(&sets).is_none() {
            return config.system().map_err(|e| self.hardware.error(e));
        }
        // As the system composes it: wrapped in the device's kernel tables, if it names any.
        let compute = config
            .device_compute()
            .map_err(|e| self.hardware.error(e))?;
        Ok(System {
            compute,
            ..self.system.clone()
        })
    }

    /// `[options]` with the entries below it set, and the entries of this case's stack
    /// (`stacks.NAME.KEY`) set on the option each lands on.
    fn options_with(&self, entries: &[Entry]) -> Result<serde_json::Value> {
        let mut o = self.options.clone();
        for e in entries {
            let option = match e.stack_key() {
                Some((name, key)) if name == self.stack => {
                    match perfcast_scenario::stack::option_key(key, self.training) {
                        Some(k) => Some(k),
                        None => {
                            return Err(Error::OverlayEntry {
                                entry: e.key.clone(),
                                source: Box::new(Error::Invalid(format!(
                                    "`{key}` of stack {name} is no single {} option",
                                    if self.training {
                                        "training"
                                    } else {
                                        "inference"
                                    }
                                ))),
                            })
                        }
                    }
                }
                Some(_) => None,
                None => e.option_path().map(|p| p.join(".")),
            };
            if let Some(path) = option {
                let at = |x: Error| Error::OverlayEntry {
                    entry: e.key.clone(),
                    source: Box::new(x),
                };
                let v = serde_json::to_value(&e.value).map_err(|x| at(x.into()))?;
                let path: Vec<&str> = path.split('.').collect();
                json_set(&mut o, &path, v).map_err(at)?;
            }
        }
        Ok(o)
    }
}

/// The `[software]` keys of `stack` that land on one option of the training (or inference)
/// engine, with the stack's values (`null` where the stack leaves the engine's default): the
/// keys `stacks.NAME.KEY` a case mapped to the stack has.
fn stack_options(stack: &perfcast_scenario::Stack, training: bool) -> Result<serde_json::Value> {
    let mut out = serde_json::Value::Object(Default::default());
    let all = serde_json::to_value(stack)?;
    let mut leaves = Vec::new();
    leaves_of(&all, String::new(), &mut leaves);
    for (key, v) in leaves {
        if perfcast_scenario::stack::option_key(&key, training).is_some() {
            let path: Vec<&str> = key.split('.').collect();
            json_set(&mut out, &path, v)?;
        }
    }
    Ok(out)
}

/// Every leaf of a JSON value with its dotted path.
fn leaves_of(v: &serde_json::Value, key: String, out: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let sub = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                leaves_of(x, sub, out);
            }
        }
        other => out.push((key, other.clone())),
    }
}
