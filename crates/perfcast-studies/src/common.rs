//! What every study shares: reading its config (errors name the file and the key path),
//! loading the model and system files it names through `perfcast-config`, and small helpers.

use crate::error::StudyError;
use crate::StudyInfo;
use perfcast_config::{Config, PluginSpec, Plugins, Sources};
use perfcast_core::{
    Bandwidth, Bytes, Collective, CollectiveAlgorithm, Interconnect, MemoryTier, ModelError,
    ModelSpec, PluginError, Registry, Seconds, System, TierLevel,
};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A study's config file and how it was invoked.
#[derive(Debug, Clone)]
pub struct StudyContext {
    pub info: StudyInfo,
    /// The config file (for a built-in config, `configs/studies/NAME.toml (built-in)`: a
    /// name, not a path on this machine).
    pub path: PathBuf,
    /// The directory relative paths in the config are resolved against; `None` for a
    /// built-in config, whose `../models/X.toml`-style paths name the built-in presets.
    pub dir: Option<PathBuf>,
    pub text: String,
    /// The command that reproduces the run (for the summary and the plot caption).
    pub command: String,
    /// The plugins the host chose: the study's engines and configurations resolve in them.
    pub plugins: Plugins,
    /// Plugin libraries the host loads into every configuration the study reads (`perfcast
    /// study --load`): what a study that runs its scenarios as `perfcast predict` does
    /// ([`StudyContext::scenario_config`]) resolves their kinds.
    pub libraries: Vec<PluginSpec>,
}

impl StudyContext {
    pub fn new(
        info: StudyInfo,
        path: &Path,
        command: String,
        plugins: &Plugins,
    ) -> Result<Self, StudyError> {
        let text = perfcast_config::input::read_text(path, perfcast_config::input::MAX_TEXT_BYTES)
            .map_err(|source| StudyError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(StudyContext {
            info,
            path: path.to_path_buf(),
            dir: Some(dir),
            text,
            command,
            plugins: plugins.clone(),
            libraries: Vec::new(),
        })
    }

    /// A context over the built-in config `text` of a study: its relative paths
    /// (`../models/gpt3-175b.toml`, `../systems/dgx-a100.toml`, `../hardware/...`) are the
    /// presets of the same name, so nothing is read from the file system.
    pub fn builtin(info: StudyInfo, text: &str, plugins: &Plugins) -> Self {
        StudyContext {
            info,
            path: PathBuf::from(format!("configs/studies/{}.toml (built-in)", info.name)),
            dir: None,
            text: text.to_string(),
            command: format!("perfcast study {}", info.name),
            plugins: plugins.clone(),
            libraries: Vec::new(),
        }
    }

    /// A context over a config given as text (tests; relative paths resolve against `dir`).
    pub fn from_text(info: StudyInfo, dir: &Path, text: &str, plugins: &Plugins) -> Self {
        StudyContext {
            info,
            path: dir.join(format!("{}.toml", info.name)),
            dir: Some(dir.to_path_buf()),
            text: text.to_string(),
            command: format!("perfcast study {}", info.name),
            plugins: plugins.clone(),
            libraries: Vec::new(),
        }
    }

    /// This context with the plugin libraries `libraries` loaded into its configurations.
    pub fn with_libraries(mut self, libraries: Vec<PluginSpec>) -> Self {
        self.libraries = libraries;
        self
    }

    /// Parse the config into `T` (a `deny_unknown_fields` struct), checking `study = NAME`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, StudyError> {
        let value: toml::Value = toml::from_str(&self.text).map_err(|e| StudyError::Config {
            file: self.path.clone(),
            key: "(syntax)".into(),
            message: e.to_string().trim().to_string(),
        })?;
        match value.get("study").and_then(|v| v.as_str()) {
            Some(s) if s == self.info.name => {}
            other => {
                return Err(self.bad(
                    "study",
                    format!(
                        "is {}; this config must say `study = \"{}\"` (it is read by that study)",
                        other
                            .map(|s| format!("`{s}`"))
                            .unwrap_or_else(|| "missing".into()),
                        self.info.name
                    ),
                ))
            }
        }
        serde_path_to_error::deserialize(value).map_err(|e| {
            let key = e.path().to_string();
            StudyError::Config {
                file: self.path.clone(),
                key: if key == "." {
                    "(top level)".into()
                } else {
                    key
                },
                message: e.into_inner().to_string(),
            }
        })
    }

    /// A config error at `key`.
    pub fn bad(&self, key: &str, message: impl Into<String>) -> StudyError {
        StudyError::Config {
            file: self.path.clone(),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// The file (or `preset:NAME`) that `rel` names: `preset:NAME` as it is, an absolute path
    /// as it is, a relative one against the config's directory, or, in a built-in config, the
    /// preset of the file's stem (`../models/gpt3-175b.toml` -> `preset:gpt3-175b`).
    fn resolve(&self, rel: &str) -> PathBuf {
        let p = Path::new(rel);
        if rel.starts_with("preset:") || p.is_absolute() {
            return p.to_path_buf();
        }
        match &self.dir {
            Some(dir) => dir.join(p),
            None => match p.file_stem().and_then(|s| s.to_str()) {
                Some(stem) if perfcast_config::layers::preset(stem).is_some() => {
                    PathBuf::from(format!("preset:{stem}"))
                }
                _ => p.to_path_buf(),
            },
        }
    }

    /// Load a perfcast config file (with its includes) named at `key`, with `sets` on top.
    pub fn host_config(&self, key: &str, rel: &str, sets: &[String]) -> Result<Config, StudyError> {
        self.scenario_config(&[(key, rel)], sets)
    }

    /// Load the perfcast config files (each with its includes) that `files` name, as
    /// `(key, path)` pairs, merged in order (later wins) as `perfcast predict FILE...` merges
    /// its arguments, with `sets` on top and the study's `--load` libraries: the
    /// configuration a study hands to the scenarios `perfcast predict` runs. Errors name the
    /// keys.
    pub fn scenario_config(
        &self,
        files: &[(&str, &str)],
        sets: &[String],
    ) -> Result<Config, StudyError> {
        let mut targets = Vec::with_capacity(files.len());
        for (key, rel) in files {
            let target = self.resolve(rel);
            let preset = target.to_str().is_some_and(|t| t.starts_with("preset:"));
            if !preset && !target.is_file() {
                let hint = if self.dir.is_some() {
                    "paths are relative to the study config's directory"
                } else {
                    "a built-in study config names presets: `preset:NAME` or `../models/NAME.toml`"
                };
                return Err(self.bad(
                    key,
                    format!("file `{}` does not exist ({hint})", target.display()),
                ));
            }
            targets.push(target);
        }
        let keys: Vec<&str> = files.iter().map(|(k, _)| *k).collect();
        Config::load(
            &Sources::files(&self.plugins, targets.iter().cloned())
                .without_env()
                .with_sets(sets.iter().cloned())
                .with_libraries(self.libraries.iter().cloned()),
        )
        .map_err(|source| StudyError::Host {
            file: self.path.clone(),
            key: keys.join(", "),
            target: join_paths(&targets),
            source: Box::new(source.into()),
        })
    }

    /// The `[model]` of the model file named at `key`.
    pub fn model(&self, key: &str, rel: &str) -> Result<ModelSpec, StudyError> {
        let cfg = self.host_config(key, rel, &[])?;
        perfcast_scenario::model(&cfg).map_err(|source| StudyError::Host {
            file: self.path.clone(),
            key: key.to_string(),
            target: self.resolve(rel),
            source: Box::new(source),
        })
    }

    /// The system of the system or hardware file named at `key`, with `devices` devices.
    pub fn system(&self, key: &str, rel: &str, devices: u32) -> Result<System, StudyError> {
        if devices == 0 {
            return Err(self.bad(key, "needs at least one device"));
        }
        let cfg = self.host_config(key, rel, &[format!("system.devices={devices}")])?;
        cfg.system().map_err(|source| StudyError::Host {
            file: self.path.clone(),
            key: key.to_string(),
            target: self.resolve(rel),
            source: Box::new(source.into()),
        })
    }
}

/// A registry of `plugins` (the host's: hardware, technology and execution plugins).
pub fn registry(plugins: &Plugins) -> Result<Registry, StudyError> {
    plugins.registry().map_err(|e| StudyError::Model {
        context: "plugin registry".into(),
        source: Box::new(ModelError::invalid(
            perfcast_core::Key::other("plugins"),
            e.to_string(),
            "the host's plugins must not clash",
        )),
    })
}

/// Wrap a model error with what was being evaluated.
pub fn model_err(context: impl Into<String>) -> impl FnOnce(ModelError) -> StudyError {
    let context = context.into();
    move |source| StudyError::Model {
        context,
        source: Box::new(source),
    }
}

/// A memory tier that takes its bandwidth, efficiency and latency from one tier and its
/// capacity from another (the factor swaps of `a100-to-b200`, the sweeps of `dram-scaling`).
pub struct MixedTier {
    pub speed: Arc<dyn MemoryTier>,
    pub capacity: Bytes,
}

impl MemoryTier for MixedTier {
    fn kind(&self) -> &str {
        self.speed.kind()
    }
    fn level(&self) -> TierLevel {
        self.speed.level()
    }
    fn capacity(&self) -> Bytes {
        self.capacity
    }
    fn bandwidth(&self) -> Bandwidth {
        self.speed.bandwidth()
    }
    fn efficiency(&self) -> f64 {
        self.speed.efficiency()
    }
    fn latency(&self) -> Seconds {
        self.speed.latency()
    }
}

/// A network level with another domain size (the NVLink-domain factor).
pub struct ResizedLink {
    pub link: Arc<dyn Interconnect>,
    pub domain: u32,
}

impl Interconnect for ResizedLink {
    fn kind(&self) -> &str {
        self.link.kind()
    }
    fn domain_size(&self) -> u32 {
        self.domain
    }
    fn bandwidth(&self) -> Bandwidth {
        self.link.bandwidth()
    }
    fn latency(&self) -> Seconds {
        self.link.latency()
    }
    fn collective_overhead(&self) -> Seconds {
        self.link.collective_overhead()
    }
    fn collective_time(&self, c: &Collective, algorithm: CollectiveAlgorithm) -> Seconds {
        self.link.collective_time(c, algorithm)
    }
    fn try_collective_time(
        &self,
        c: &Collective,
        algorithm: CollectiveAlgorithm,
    ) -> Result<Seconds, PluginError> {
        self.link.try_collective_time(c, algorithm)
    }
}

/// The device-memory tier of `s` and its index.
pub fn device_tier(s: &System) -> Option<(usize, Arc<dyn MemoryTier>)> {
    let i = s.memory.device_index()?;
    Some((i, s.memory.tiers[i].clone()))
}

/// The caption of a study's plot.
pub fn caption(ctx: &StudyContext) -> String {
    format!("perfcast (analytical model) - reproduce: {}", ctx.command)
}

/// Markdown summary: a heading, the finding and the command.
pub fn summary(ctx: &StudyContext, finding: &str) -> String {
    format!(
        "# {}\n\n{}\n\n![{}]({}.svg)\n\nReproduce: `{}` (config: `{}`; every number is in `{}.csv`).\n",
        ctx.info.title,
        finding.trim(),
        ctx.info.name,
        ctx.info.name,
        ctx.command,
        ctx.path.display(),
        ctx.info.name
    )
}

/// Paths for a message: one as it is, several joined by " + ".
fn join_paths(paths: &[PathBuf]) -> PathBuf {
    let parts: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    PathBuf::from(parts.join(" + "))
}
