//! A serving scenario: `[model]`, the system, `[serving]` (falling back on `[inference]` for
//! the plan's fields and the request lengths), `[options]` and `[slo]`; a trace file named
//! by `serving.trace` is read here, relative to the file that names it.
//!
//! Devices: `system.devices` left at its built-in default becomes the deployment's devices;
//! otherwise the deployment may use at most `system.devices`.

use crate::{engine_error, is_set, ScenarioError};
use perfcast_engine::inference::{Inference, InferencePlan};
use perfcast_engine::serving::{
    parse_trace, Deployment, Length, Load, Request, ServingConfig, Slo, TraceFormat, Traffic,
    WorkloadSpec,
};
use perfcast_host::Config;
use std::path::{Path, PathBuf};

/// The config's top-level sections this module reads (hosts add them to the allowed ones).
pub const SECTIONS: [&str; 2] = ["serving", "slo"];

/// Where the requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Requests {
    /// Generated from lengths, a count, a load and a seed.
    Generated(WorkloadSpec),
    /// Read from a trace file.
    Trace {
        /// The file.
        path: PathBuf,
        /// Its requests, sorted by arrival.
        requests: Vec<Request>,
    },
}

/// A model on a system with a serving deployment, its traffic and its objectives.
pub struct ServingScenario {
    /// The model on the system, with the inference engine's options of `[options]`.
    pub inference: Inference,
    /// `[serving]`.
    pub config: ServingConfig,
    /// `[inference]`, when present: the defaults of the plan's fields.
    pub defaults: Option<InferencePlan>,
    /// The requests.
    pub requests: Requests,
    /// `[slo]`, when present.
    pub slo: Option<Slo>,
}

impl ServingScenario {
    /// The scenario of `cfg`: a `[model]`, a system and a `[serving]` (or an `[inference]`)
    /// section are required.
    pub fn from_config(cfg: &Config) -> Result<Self, ScenarioError> {
        let model = crate::model(cfg)?;
        let mut system = cfg.system()?;
        if !cfg.contains("serving") && !cfg.contains("inference") {
            return Err(ScenarioError::Missing {
                section: "serving",
                hint: "it needs the deployment and its traffic (tp, pp, replicas, max_batch, max_num_tokens, input_len, output_len, rate or concurrency or trace, ...; README.md, \"serve\"); an [inference] section gives defaults",
            });
        }
        let config: ServingConfig = cfg.extract_opt("serving")?.unwrap_or_default();
        let defaults: Option<InferencePlan> = cfg.extract_opt("inference")?;
        let slo: Option<Slo> = cfg.extract_opt("slo")?;
        if let Some(s) = &slo {
            s.validate().map_err(|e| engine_error(cfg, e))?;
        }
        let d = config
            .deployment(defaults.as_ref(), 2)
            .map_err(|e| engine_error(cfg, e))?;
        if !is_set(cfg, "system.devices") {
            system.devices = d.gpus().max(1);
        }
        let requests = requests(cfg, &config, defaults.as_ref())?;
        let options = crate::inference::options(cfg)?;
        let inference = Inference::new(model, system, options).map_err(|e| engine_error(cfg, e))?;
        Ok(ServingScenario {
            inference,
            config,
            defaults,
            requests,
            slo,
        })
    }

    /// The traffic of the scenario's requests.
    pub fn traffic(&self) -> Traffic {
        match &self.requests {
            Requests::Generated(w) => w.traffic(),
            Requests::Trace { requests, .. } => Traffic::Open(requests.clone()),
        }
    }

    /// The deployment for `traffic` (its longest request bounds the context).
    pub fn deployment(&self, traffic: &Traffic) -> Result<Deployment, perfcast_core::ModelError> {
        self.config
            .deployment(self.defaults.as_ref(), traffic.max_context())
    }

    /// The seed of the random draws.
    pub fn seed(&self) -> u64 {
        match &self.requests {
            Requests::Generated(w) => w.seed,
            Requests::Trace { .. } => self.config.seed,
        }
    }
}

fn requests(
    cfg: &Config,
    c: &ServingConfig,
    defaults: Option<&InferencePlan>,
) -> Result<Requests, ScenarioError> {
    if let Some(t) = &c.trace {
        let path = crate::model::relative_to_origin(cfg, "serving.trace", t);
        let requests =
            read_trace(&path).map_err(|e| ScenarioError::Host(cfg.invalid("serving.trace", e)))?;
        return Ok(Requests::Trace { path, requests });
    }
    let length = |l: Option<Length>, d: Option<u32>, key: &str| {
        l.or(d.map(Length::Fixed)).ok_or_else(|| {
            ScenarioError::Host(cfg.invalid(
                key,
                "missing: set it (a token count or { min, max }), give an [inference] section with it, or use serving.trace",
            ))
        })
    };
    let load = match (c.rate, c.concurrency) {
        (Some(rate), _) => Load::Rate {
            rate,
            process: c.arrivals,
        },
        (None, Some(n)) => Load::Concurrency(n),
        (None, None) => Load::Burst,
    };
    Ok(Requests::Generated(WorkloadSpec {
        input_len: length(
            c.input_len,
            defaults.map(|d| d.input_len),
            "serving.input_len",
        )?,
        output_len: length(
            c.output_len,
            defaults.map(|d| d.output_len),
            "serving.output_len",
        )?,
        requests: c.requests,
        load,
        seed: c.seed,
    }))
}

/// Read a trace: CSV (`.csv`) or JSON lines (`.jsonl`, `.ndjson`, `.json`); errors name the
/// file and the line.
pub fn read_trace(path: &Path) -> Result<Vec<Request>, String> {
    let format = match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => TraceFormat::Csv,
        Some("jsonl" | "ndjson" | "json") => TraceFormat::Jsonl,
        _ => {
            return Err(format!(
                "{}: unknown trace format (the extension must be .csv, .jsonl, .ndjson or .json)",
                path.display()
            ))
        }
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_trace(&text, format).map_err(|e| format!("{}: {e}", path.display()))
}
