//! A serving scenario: `[model]`, the system, `[serving]` (falling back on `[inference]` for
//! the plan's fields and the request lengths, and on the software stack for the attention
//! kernel, CUDA graphs and the host costs), `[options]` and `[slo]`; a trace file named by
//! `serving.trace` is read here, relative to the file that names it.
//!
//! Devices: `system.devices` left at its built-in default becomes the deployment's devices;
//! otherwise the deployment may use at most `system.devices`.

use crate::{engine_error, is_set, ScenarioError};
use perfcast_config::Config;
use perfcast_core::{Key, ModelError, ModelSpec};
use perfcast_engine::inference::{Inference, InferencePlan};
use perfcast_serving::{
    parse_trace, Deployment, DraftMethod, Length, Load, Request, ServingConfig, Slo,
    SpeculativeConfig, TraceFormat, Traffic, WorkloadSpec,
};
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
    /// `[inference]`, when present: the defaults of the request lengths.
    pub defaults: Option<InferencePlan>,
    /// The defaults of the deployment's plan fields: `[inference]`'s, with the software
    /// stack's beneath them.
    pub plan: InferencePlan,
    /// The requests.
    pub requests: Requests,
    /// `[slo]`, when present.
    pub slo: Option<Slo>,
    /// The engine of a timed speculative draft (`serving.speculative.method = "mtp"`: the
    /// model's MTP module as a one-layer model; `"draft_model"`: the named preset), on the
    /// same system and options; for `Simulator::with_draft`.
    pub draft: Option<Inference>,
}

impl ServingScenario {
    /// The scenario of `cfg`: a `[model]`, a system and a `[serving]` (or an `[inference]`)
    /// section are required.
    pub fn from_config(cfg: &Config) -> Result<Self, ScenarioError> {
        Self::of(&crate::Scenario::inference(cfg))
    }

    /// The serving scenario of `sc` (see [`ServingScenario::from_config`]).
    pub fn of(sc: &crate::Scenario) -> Result<Self, ScenarioError> {
        let cfg = sc.config();
        let model = sc.model()?.clone();
        let mut system = sc.system()?.clone();
        if !cfg.contains("serving") && !cfg.contains("inference") {
            return Err(ScenarioError::Missing {
                section: "serving",
                hint: "it needs the deployment and its traffic (tp, pp, replicas, max_batch, max_num_tokens, input_len, output_len, rate or concurrency or trace, ...; docs/serving-and-search.md); an [inference] section gives defaults",
            });
        }
        let mut config: ServingConfig = cfg.extract_opt("serving")?.unwrap_or_default();
        let defaults: Option<InferencePlan> = cfg.extract_opt("inference")?;
        // The plan fields a software stack sets (attention kernel, CUDA graphs), beneath
        // [inference]'s and [serving]'s own.
        let mut plan = defaults
            .clone()
            .unwrap_or_else(|| InferencePlan::new(1, 1, 1));
        sc.stack()?
            .apply_inference_plan(&mut plan, &sc.user_set(), sc.generation()?);
        if !is_set(cfg, "serving.cuda_graphs") {
            config.cuda_graphs = plan.graph_capture;
        }
        let slo: Option<Slo> = cfg.extract_opt("slo")?;
        if let Some(s) = &slo {
            s.validate().map_err(|e| engine_error(cfg, e))?;
        }
        let d = config
            .deployment(Some(&plan), 2)
            .map_err(|e| crate::serving_error(cfg, e))?;
        if !is_set(cfg, "system.devices") {
            system.devices = d.gpus().max(1);
        }
        let requests = requests(cfg, &config, defaults.as_ref())?;
        let options = crate::inference::options(sc)?;
        let draft = match config.speculative.as_ref() {
            Some(s) => draft_model(&model, s).map_err(|e| engine_error(cfg, e))?,
            None => None,
        };
        let draft = draft
            .map(|m| Inference::new(m, system.clone(), options.clone()))
            .transpose()
            .map_err(|e| engine_error(cfg, e))?;
        let inference = Inference::new(model, system, options).map_err(|e| engine_error(cfg, e))?;
        Ok(ServingScenario {
            inference,
            config,
            plan,
            defaults,
            requests,
            slo,
            draft,
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
            .deployment(Some(&self.plan), traffic.max_context())
    }

    /// The seed of the random draws.
    pub fn seed(&self) -> u64 {
        match &self.requests {
            Requests::Generated(w) => w.seed,
            Requests::Trace { .. } => self.config.seed,
        }
    }
}

/// The model a timed draft runs: the MTP module of `model` (one more layer of its kind,
/// full attention, with the embedding and LM head it shares; its `2h -> h` projection and
/// two norms are left out, about a sixth of an MoE layer's active weights for DeepSeek-V3),
/// or the named model preset. `None` for a draft costed by ratio.
fn draft_model(model: &ModelSpec, s: &SpeculativeConfig) -> Result<Option<ModelSpec>, ModelError> {
    match s.method {
        DraftMethod::Ratio => Ok(None),
        DraftMethod::Mtp => {
            if model.mtp_layers == 0 {
                return Err(ModelError::invalid(
                    Key::serving("speculative.method"),
                    "mtp",
                    format!(
                        "model `{}` has no multi-token-prediction module (model.mtp_layers = \
                         0): use method = \"draft_model\" or \"ratio\"",
                        model.name
                    ),
                ));
            }
            let mut m = ModelSpec {
                name: format!("{} MTP module", model.name),
                layers: 1,
                mtp_layers: 0,
                sliding_window: None,
                sliding_window_layers: None,
                layer_pattern: None,
                attention_chunk: None,
                ..model.clone()
            };
            if let Some(moe) = &mut m.moe {
                moe.dense_layers = 0;
                moe.moe_layer_freq = 1;
            }
            m.validate()?;
            Ok(Some(m))
        }
        DraftMethod::DraftModel => {
            let name = s.draft_model.as_deref().unwrap_or_default();
            let key = || Key::serving("speculative.draft_model");
            let models = || {
                perfcast_config::preset_groups()
                    .into_iter()
                    .filter(|(_, g)| *g == "models")
                    .map(|(n, _)| n)
            };
            let text = models()
                .any(|n| n == name)
                .then(|| perfcast_config::preset(name))
                .flatten()
                .ok_or_else(|| {
                    ModelError::invalid(
                        key(),
                        name,
                        format!(
                            "is no model preset{}; `perfcast config presets` lists them",
                            perfcast_core::suggest::did_you_mean(name, models())
                        ),
                    )
                })?;
            let m: ModelSpec = figment::Figment::from(
                <figment::providers::Toml as figment::providers::Format>::string(text),
            )
            .extract_inner("model")
            .map_err(|e| ModelError::invalid(key(), name, e.to_string()))?;
            m.validate()
                .map_err(|e| ModelError::invalid(key(), name, e.to_string()))?;
            if m.vocab != model.vocab {
                return Err(ModelError::invalid(
                    key(),
                    name,
                    format!(
                        "has a vocabulary of {} tokens, the target `{}` {}: a draft must share \
                         the target's tokenizer",
                        m.vocab, model.name, model.vocab
                    ),
                ));
            }
            Ok(Some(m))
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
    // `serving.X`, else `inference.X` (checked here as `infer` checks it: a request of no
    // prompt or no output token has no TTFT or TPOT).
    let length = |l: Option<Length>, d: Option<u32>, key: &str| {
        match (l, d) {
        (Some(l), _) => Ok(l),
        (None, Some(0)) => {
            let from = key.replace("serving.", "inference.");
            Err(ScenarioError::Host(cfg.invalid(
                &from,
                format!("got `0`; must be >= 1 (serve reads it for {key}, which is unset)"),
            )))
        }
        (None, Some(d)) => Ok(Length::Fixed(d)),
        (None, None) => Err(ScenarioError::Host(cfg.invalid(
            key,
            "missing: set it (a token count or { min, max }), give an [inference] section with it, or use serving.trace",
        ))),
    }
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
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{}: not a regular file (a trace is read whole)",
            path.display()
        ));
    }
    if meta.len() > MAX_TRACE_BYTES {
        return Err(format!(
            "{}: {} bytes, more than a trace may have ({MAX_TRACE_BYTES}: {} requests of \
             about 100 bytes a line)",
            path.display(),
            meta.len(),
            perfcast_serving::MAX_REQUESTS
        ));
    }
    let text = perfcast_config::input::read_text(path, MAX_TRACE_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse_trace(&text, format).map_err(|e| format!("{}: {e}", path.display()))
}

/// The largest trace file read: room for [`perfcast_serving::MAX_REQUESTS`] lines of about
/// 100 bytes (a JSON-lines request with long field names is about 60).
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_config::Sources;

    fn config(sets: &[&str]) -> Result<Config, perfcast_config::HostError> {
        let mut s = Sources::files(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            ["preset:llama3.1-8b", "preset:h100-sxm5-80gb"],
        )
        .without_env()
        .with_sets(sets.iter().map(|x| x.to_string()));
        s.sections.extend(SECTIONS);
        Config::load(&s)
    }

    fn scenario(sets: &[&str]) -> Result<ServingScenario, ScenarioError> {
        ServingScenario::from_config(&config(sets)?)
    }

    #[test]
    fn serving_over_inference_defaults() {
        let sc = scenario(&[
            "inference={ tp = 2, batch = 1, input_len = 300, output_len = 40, kv_dtype = \"fp8\" }",
            "serving.rate=3.0",
            "serving.requests=20",
        ])
        .unwrap();
        let t = sc.traffic();
        let d = sc.deployment(&t).unwrap();
        assert_eq!(
            (d.pools[0].plan.tp, d.pools[0].plan.kv_dtype),
            (2, perfcast_core::DType::Fp8)
        );
        assert_eq!(
            (t.requests().len(), t.max_input(), t.max_context()),
            (20, 300, 340)
        );
        // The system takes the deployment's devices when system.devices is not set.
        assert_eq!(sc.inference.system().devices, 2);
        match &sc.requests {
            Requests::Generated(w) => {
                assert!(matches!(w.load, Load::Rate { rate, .. } if rate == 3.0))
            }
            other => panic!("{other:?}"),
        }
        // [serving] wins over [inference].
        let sc = scenario(&[
            "inference={ tp = 2, batch = 1, input_len = 300, output_len = 40 }",
            "serving.tp=1",
            "serving.input_len={ min = 10, max = 20 }",
            "serving.concurrency=4",
        ])
        .unwrap();
        let t = sc.traffic();
        assert_eq!(sc.deployment(&t).unwrap().pools[0].plan.tp, 1);
        assert!(t
            .requests()
            .iter()
            .all(|r| (10..=20).contains(&r.input) && r.output == 40));
        assert!(matches!(t, Traffic::Closed { clients: 4, .. }));
    }

    #[test]
    fn bad_serving_sections_name_the_key() {
        for (sets, want) in [
            (&["serving.output_len=10"][..], "serving.input_len"),
            (
                &[
                    "serving.input_len=10",
                    "serving.output_len=10",
                    "serving.rate=0.0",
                ],
                "serving.rate",
            ),
            (
                &[
                    "serving.input_len=10",
                    "serving.output_len=10",
                    "serving.max_btach=3",
                ],
                "max_btach",
            ),
            (
                &[
                    "serving.input_len=10",
                    "serving.output_len=10",
                    "serving.kv_memory_fraction=2.0",
                ],
                "serving.kv_memory_fraction",
            ),
            (
                &[
                    "serving.input_len=10",
                    "serving.output_len=10",
                    "slo.ttft_ms=-5.0",
                ],
                "slo.ttft_ms",
            ),
            (
                &[
                    "serving.input_len=10",
                    "serving.output_len=10",
                    "serving.trace=\"no/such.csv\"",
                ],
                "serving.trace",
            ),
            (
                &[
                    "serving.input_len=10",
                    "serving.output_len=10",
                    "serving.trace=\"x.txt\"",
                ],
                "unknown trace format",
            ),
        ] {
            let e = match scenario(sets) {
                Ok(_) => panic!("{sets:?} accepted"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(want), "{sets:?}: {e}");
        }
        let e = match ServingScenario::from_config(&config(&[]).unwrap()) {
            Ok(_) => panic!("no [serving] accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("[serving]"), "{e}");
    }

    #[test]
    fn traces_are_read_relative_and_checked() {
        let dir = perfcast_testkit::tmpdir("perfcast-trace");
        let good = dir.join("t.csv");
        std::fs::write(&good, "arrival_s,input_len,output_len\n0,10,5\n1,20,5\n").unwrap();
        assert_eq!(read_trace(&good).unwrap().len(), 2);
        let bad = dir.join("b.jsonl");
        std::fs::write(&bad, "{\"arrival_s\": 0, \"input_len\": 10, \"output_len\": 5}\n{\"arrival_s\": 1, \"input_len\": -2, \"output_len\": 5}\n").unwrap();
        let e = read_trace(&bad).unwrap_err();
        assert!(
            e.contains("b.jsonl: line 2: `input_len` = -2 is negative"),
            "{e}"
        );
        // A directory (or FIFO, or device) is refused before reading; so is a file above the
        // size limit (a sparse file: no disk used).
        let e = read_trace(&dir.join("sub.csv")).unwrap_err();
        assert!(e.contains("sub.csv"), "{e}");
        std::fs::create_dir_all(dir.join("d.csv")).unwrap();
        let e = read_trace(&dir.join("d.csv")).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let big = dir.join("big.csv");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_TRACE_BYTES + 1)
            .unwrap();
        let e = read_trace(&big).unwrap_err();
        assert!(e.contains("more than a trace may have"), "{e}");
        // A trace named in a file is read relative to that file.
        let cfg_file = dir.join("serve.toml");
        std::fs::write(
            &cfg_file,
            "include = [\"preset:llama3.1-8b\", \"preset:h100-sxm5-80gb\"]\n[serving]\ntrace = \"t.csv\"\n",
        )
        .unwrap();
        let mut s = Sources::files(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            [cfg_file],
        )
        .without_env();
        s.sections.extend(SECTIONS);
        let sc = ServingScenario::from_config(&Config::load(&s).unwrap()).unwrap();
        assert!(matches!(&sc.requests, Requests::Trace { requests, .. } if requests.len() == 2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
