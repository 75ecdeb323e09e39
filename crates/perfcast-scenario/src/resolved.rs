//! A configuration read once for a command ([`Scenario::resolve`]): the software stack it
//! selects (checked against the engines the command drives) and the GPU generation the stack's
//! per-generation choices key on. Every view of the configuration (the training plan and
//! options, the inference plan and options, the serving scenario, the search's template and
//! space) derives from one `Scenario`, so a command resolves its stack once.
//!
//! A stack or generation that does not resolve is reported where it is first used, so a
//! command's errors come in the order they always did (a missing section before a stack of
//! the wrong kind); errors are not `Clone`, so that error is read again from the
//! configuration when asked for.

use crate::stack::{generation, user_set, GpuGeneration};
use crate::{ScenarioError, Stack, StackKind};
use perfcast_config::Config;

/// A configuration with its stack and generation resolved.
pub struct Scenario<'c> {
    cfg: &'c Config,
    kind: StackKind,
    /// `None`: the stack does not resolve ([`Scenario::stack`] says why).
    stack: Option<Stack>,
    /// `None`: `device.generation` does not parse.
    generation: Option<Option<GpuGeneration>>,
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
            None => Err(self.again(Stack::from_config(self.cfg, self.kind).err())),
        }
    }

    /// `device.generation`, if set, or why it does not parse.
    pub fn generation(&self) -> Result<Option<GpuGeneration>, ScenarioError> {
        match self.generation {
            Some(g) => Ok(g),
            None => Err(self.again(generation(self.cfg).err())),
        }
    }

    /// Whether the user set `key` (any layer above the built-in defaults).
    pub fn user_set(&self) -> impl Fn(&str) -> bool + 'c {
        user_set(self.cfg)
    }

    /// The error of a resolution that failed, read again (resolution is deterministic, so it
    /// fails again; should it not, say so rather than go on).
    fn again(&self, e: Option<ScenarioError>) -> ScenarioError {
        e.unwrap_or_else(|| {
            self.cfg
                .invalid(
                    "stack",
                    "the stack resolved differently on a second reading",
                )
                .into()
        })
    }
}
