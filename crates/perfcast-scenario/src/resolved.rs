//! A configuration read once for a command ([`Scenario::resolve`]): the model, the system
//! (plugins built, `system.devices` as configured), the software stack it selects (checked
//! against the engines the command drives) and the GPU generation the stack's per-generation
//! choices key on. Every view of the configuration (the training plan and
//! options, the inference plan and options, the serving scenario, the search's template and
//! space) derives from one `Scenario`, so a command resolves its stack once.
//!
//! A model, system, stack or generation that does not resolve is reported where it is first used, so a
//! command's errors come in the order they always did (a missing section before a stack of
//! the wrong kind); errors are not `Clone`, so that error is read again from the
//! configuration when asked for.

use crate::stack::{generation, user_set, GpuGeneration};
use crate::{ScenarioError, Stack, StackKind};
use perfcast_config::Config;
use perfcast_core::workload::ModelSpec;
use perfcast_core::System;
use std::cell::OnceCell;

/// A configuration with its model, system, stack and generation resolved.
pub struct Scenario<'c> {
    cfg: &'c Config,
    kind: StackKind,
    /// `None`: the stack does not resolve ([`Scenario::stack`] says why).
    stack: Option<Stack>,
    /// `None`: `device.generation` does not parse.
    generation: Option<Option<GpuGeneration>>,
    /// Read on first use (`None`: `[model]` is absent or does not resolve).
    model: OnceCell<Option<ModelSpec>>,
    /// Built on first use, so that a command that needs no system (`config explain`) starts
    /// no isolated plugin (`None`: the system does not resolve).
    system: OnceCell<Option<System>>,
}

impl<'c> Scenario<'c> {
    /// Read `cfg`'s stack for engines of `kind` (a stack of the other kind is an error at
    /// `stack`, reported on use; [`StackKind::Any`] accepts every stack) and its
    /// `device.generation`.
    pub fn resolve(cfg: &'c Config, kind: StackKind) -> Self {
        Scenario {
            cfg,
            kind,
            stack: Stack::from_config(cfg, kind).ok(),
            generation: generation(cfg).ok(),
            model: OnceCell::new(),
            system: OnceCell::new(),
        }
    }

    /// [`Scenario::resolve`] for a training command (`predict`, `search`, `sweep`).
    pub fn training(cfg: &'c Config) -> Self {
        Self::resolve(cfg, StackKind::Training)
    }

    /// [`Scenario::resolve`] for an inference command (`infer`, `serve`, `roofline`).
    pub fn inference(cfg: &'c Config) -> Self {
        Self::resolve(cfg, StackKind::Inference)
    }

    /// The configuration.
    pub fn config(&self) -> &'c Config {
        self.cfg
    }

    /// The software stack (its defaults when the configuration names none), or why it does
    /// not resolve.
    pub fn stack(&self) -> Result<&Stack, ScenarioError> {
        match &self.stack {
            Some(s) => Ok(s),
            None => Err(self.again("stack", Stack::from_config(self.cfg, self.kind).err())),
        }
    }

    /// The `[model]`, or why there is none.
    pub fn model(&self) -> Result<&ModelSpec, ScenarioError> {
        match self.model.get_or_init(|| crate::model(self.cfg).ok()) {
            Some(m) => Ok(m),
            None => Err(self.again("model", crate::model(self.cfg).err())),
        }
    }

    /// The system with `system.devices` as configured (a training or inference scenario
    /// reconciles it with its plan), or why it does not resolve.
    pub fn system(&self) -> Result<&System, ScenarioError> {
        match self.system.get_or_init(|| self.cfg.system().ok()) {
            Some(s) => Ok(s),
            None => Err(self.again("system", self.cfg.system().err().map(Into::into))),
        }
    }

    /// `device.generation`, if set, or why it does not parse.
    pub fn generation(&self) -> Result<Option<GpuGeneration>, ScenarioError> {
        match self.generation {
            Some(g) => Ok(g),
            None => Err(self.again("device.generation", generation(self.cfg).err())),
        }
    }

    /// Whether the user set `key` (any layer above the built-in defaults).
    pub fn user_set(&self) -> impl Fn(&str) -> bool + 'c {
        user_set(self.cfg)
    }

    /// The error of a resolution that failed, read again (resolution is deterministic, so it
    /// fails again; should it not, say so rather than go on).
    fn again(&self, key: &str, e: Option<ScenarioError>) -> ScenarioError {
        e.unwrap_or_else(|| {
            self.cfg
                .invalid(key, "it resolved differently on a second reading")
                .into()
        })
    }
}
