//! The merged configuration: loading, typed extraction with provenance, `config explain`.

use crate::error::HostError;
use crate::layers::{self, Layer, LayerOrigin};
use crate::plugins::{self, LibraryInfo, PluginSpec, Plugins};
use figment::value::{Tag, Value};
use figment::Figment;
use perfcast_core::Registry;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

mod derive;

/// Top-level sections perfcast reads. Any other top-level key is an error (a typo would
/// otherwise be silently ignored). Hosts with sections of their own add them to
/// [`Sources::sections`].
pub const SECTIONS: &[&str] = &[
    "stack",
    "software",
    "plugins",
    "components",
    "device",
    "system",
    "model",
    "plan",
    "inference",
    "options",
    "ops",
    // Published figures of the scenario, shown beside predictions (perfcast-scenario).
    "reference",
];

/// What a configuration is made of, lowest layer last-but-one: built-in defaults, `files` in
/// order (each with its includes beneath it), the `PERFCAST_*` environment (if `env`), then
/// `sets` in order. `plugins` are the plugins the host chose (its components resolve in a
/// registry of them); `libraries` are plugin libraries to load in addition to `[[plugins]]`.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The plugins the host chose ([`Plugins::none`]: enough to read a configuration's
    /// data, not to resolve its components).
    pub plugins: Plugins,
    /// Config files (`.toml`, `.yaml`/`.yml`, `.json`) or `preset:NAME`.
    pub files: Vec<PathBuf>,
    /// `key.path=value` overrides.
    pub sets: Vec<String>,
    /// Read `PERFCAST_*` environment variables.
    pub env: bool,
    /// Plugin libraries to load (`--load PATH`, pinned by `--sha256 HEX`).
    pub libraries: Vec<PluginSpec>,
    /// Allowed top-level keys.
    pub sections: Vec<&'static str>,
    /// How to run an isolated library (`--isolate`, `isolate = true`): the plugin host
    /// program and its time limit per call. `None`: isolation is not available to this host
    /// (an `isolate = true` entry is then an error).
    pub plugin_host: Option<perfcast_loader::isolate::IsolateOptions>,
    /// Isolate every library (`--isolate`), not only the `[[plugins]]` entries that ask.
    pub isolate_all: bool,
    /// The host's check of everything a library cannot change (the model, the plans' values),
    /// run on the merged configuration before any library loads, so that a mistake there is
    /// reported before any library code runs ([`Sources::checked_by`]).
    pub precheck: Option<Precheck>,
    /// Which of the named libraries may run their code ([`LibraryPolicy`]).
    pub policy: LibraryPolicy,
}

/// Which libraries a configuration may load: loading a library runs its code, so by default
/// only the libraries named on the command line (`--load`) or in `[[plugins]]` of a file the
/// command was given ([`Sources::files`]) load; `[[plugins]]` that comes from an included file
/// is refused unless the user opts in, and a read-only command loads none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LibraryPolicy {
    /// `--load` and the `[[plugins]]` of the files given; an included file's `[[plugins]]`
    /// is an error naming the file and the opt-in.
    #[default]
    Named,
    /// `[[plugins]]` of included files load too (`--allow-included-plugins`).
    IncludedToo,
    /// No `[[plugins]]` code runs: every entry is checked (file, ELF headers, pin) and listed
    /// by [`Config::unloaded`], none loaded; `--load` libraries, asked for on the command
    /// line, still load (`config explain` without `--load-plugins`).
    CheckOnly,
}

/// A host's check of a configuration before its libraries load (its registry is empty then:
/// components resolve once the libraries have loaded).
pub type Precheck = fn(&Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;

impl Sources {
    /// Nothing but the built-in defaults and the environment, resolving components in a
    /// registry of `plugins` ([`Plugins::none`] for a configuration read for its data only).
    pub fn new(plugins: &Plugins) -> Self {
        Sources {
            plugins: plugins.clone(),
            files: Vec::new(),
            sets: Vec::new(),
            env: true,
            libraries: Vec::new(),
            sections: SECTIONS.to_vec(),
            plugin_host: None,
            isolate_all: false,
            precheck: None,
            policy: LibraryPolicy::Named,
        }
    }
    /// Files only, environment read, no overrides.
    pub fn files<P: Into<PathBuf>>(plugins: &Plugins, files: impl IntoIterator<Item = P>) -> Self {
        Sources {
            files: files.into_iter().map(Into::into).collect(),
            ..Sources::new(plugins)
        }
    }
    pub fn with_sets<S: Into<String>>(mut self, sets: impl IntoIterator<Item = S>) -> Self {
        self.sets.extend(sets.into_iter().map(Into::into));
        self
    }
    pub fn with_libraries<P: Into<PluginSpec>>(
        mut self,
        libs: impl IntoIterator<Item = P>,
    ) -> Self {
        self.libraries.extend(libs.into_iter().map(Into::into));
        self
    }
    pub fn without_env(mut self) -> Self {
        self.env = false;
        self
    }
    /// Run `check` on the merged configuration before any library loads.
    pub fn checked_by(mut self, check: Precheck) -> Self {
        self.precheck = Some(check);
        self
    }
    pub fn with_policy(mut self, policy: LibraryPolicy) -> Self {
        self.policy = policy;
        self
    }
}

/// Loading a library runs its code: only the files a user names (their includes by opt-in,
/// [`LibraryPolicy`]) and `--load` choose libraries, never the environment or `--set` (refused naming where the
/// key came from).
fn libraries_from_files_only(layers: &[Layer]) -> Result<(), HostError> {
    for l in layers {
        let origin = match &l.origin {
            LayerOrigin::Env => "the environment (PERFCAST_PLUGINS...)".to_string(),
            o @ LayerOrigin::Set { .. } => o.label(),
            _ => continue,
        };
        if l.data.contains_key("plugins") {
            return Err(HostError::Invalid {
                key: "plugins".into(),
                origin: Some(origin),
                message: "plugin libraries load only from `[[plugins]]` in a config file or \
                          from `--load PATH` (loading a library runs its code)"
                    .into(),
            });
        }
    }
    Ok(())
}

/// One line of `config explain`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Explained {
    /// Key path (`components.a100_sxm4_80gb.sm_count`, `ops[2].m`).
    pub key: String,
    /// The value, as JSON.
    pub value: String,
    /// Where it came from (`file x.toml`, `PERFCAST_PLAN__TP`, `--set plan.tp=4`, ...).
    pub source: String,
}

/// A loaded configuration and the registry its components resolve in.
pub struct Config {
    /// The layers loaded (shared by the configurations [`Config::with_sets`] derives).
    figment: Arc<Figment>,
    /// The layers [`Config::with_sets`] added (what their values' tags resolve in).
    sets: Figment,
    /// The merged value of every layer.
    value: Value,
    layers: Vec<LayerOrigin>,
    /// Shared by the configurations [`Config::with_sets`] derives.
    registry: Arc<Registry>,
    /// The components built from its tables, shared with the configurations
    /// [`Config::with_sets`] derives (same registry, so the same tables build the same).
    pub(crate) built: Arc<crate::compose::Built>,
    /// The host's plugins this configuration was loaded with (what a configuration derived
    /// from another file starts from: [`Config::plugins`]).
    plugins: Plugins,
    libraries: Vec<LibraryInfo>,
    /// Libraries named and checked but not loaded ([`LibraryPolicy::CheckOnly`]).
    unloaded: Vec<PathBuf>,
    ignored_env: Vec<String>,
    sections: Vec<&'static str>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("layers", &self.layers)
            .field("libraries", &self.libraries)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Merge the sources, check the top-level keys, and build the registry (the host's
    /// `sources.plugins`, then the `[[plugins]]` libraries, then `sources.libraries`).
    pub fn load(sources: &Sources) -> Result<Config, HostError> {
        let mut all: Vec<Layer> = vec![layers::defaults()];
        for f in &sources.files {
            all.extend(layers::read_config(f)?);
        }
        let ignored_env = if sources.env {
            all.push(layers::environment(&sources.sections)?);
            layers::ignored_env_vars(&sources.sections)
        } else {
            Vec::new()
        };
        for s in &sources.sets {
            all.push(layers::parse_set(s)?);
        }
        libraries_from_files_only(&all)?;
        // The selected stack sits right above the built-in defaults, beneath every file.
        let stack = crate::stacks::stack_layers(&all)?;
        all.splice(1..1, stack);
        let mut figment = Figment::new();
        let mut origins = Vec::with_capacity(all.len());
        for l in all {
            origins.push(l.origin.clone());
            figment = figment.merge(l);
        }
        let value = merged(&figment)?;
        let mut registry = sources.plugins.registry()?;
        let mut cfg = Config {
            figment: Arc::new(figment),
            sets: Figment::new(),
            value,
            layers: origins,
            registry: Arc::new(Registry::default()),
            built: Default::default(),
            plugins: sources.plugins.clone(),
            libraries: Vec::new(),
            unloaded: Vec::new(),
            ignored_env,
            sections: sources.sections.clone(),
        };
        cfg.check_top_level(&sources.sections)?;
        cfg.check_finite()?;
        if let Some(check) = sources.precheck {
            check(&cfg).map_err(HostError::Precheck)?;
        }
        cfg.load_libraries(sources, &mut registry)?;
        cfg.registry = Arc::new(registry);
        Ok(cfg)
    }

    /// Load the libraries: the `[[plugins]]` entries, then `sources.libraries`, each file
    /// once. Every entry is checked first (its file exists and is a library file, its pin is
    /// a digest and matches, its time limit, whether it can be isolated), so a mistake in any
    /// entry is reported before any library's code runs; then they load in order.
    fn load_libraries(
        &mut self,
        sources: &Sources,
        registry: &mut Registry,
    ) -> Result<(), HostError> {
        // (entry, where it is named, whether it loads once checked)
        let mut wanted: Vec<(PluginSpec, Option<String>, bool)> = Vec::new();
        if let Some(specs) = self.extract_opt::<Vec<PluginSpec>>("plugins")? {
            self.included_plugins_allowed(sources.policy)?;
            let run = sources.policy != LibraryPolicy::CheckOnly;
            for (i, s) in specs.into_iter().enumerate() {
                let origin = self.origin_of(&format!("plugins[{i}].path"));
                wanted.push((s, origin, run));
            }
        }
        for p in &sources.libraries {
            wanted.push((p.clone(), Some("--load".into()), true));
        }
        let mut seen = Vec::new();
        let mut checked = Vec::new();
        for (spec, origin, run) in wanted {
            let id = spec
                .path
                .canonicalize()
                .unwrap_or_else(|_| spec.path.clone());
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let fail = |message: String| HostError::Library {
                path: spec.path.clone(),
                origin: origin.clone(),
                message,
            };
            let isolate = match (spec.isolate || sources.isolate_all, &sources.plugin_host) {
                (false, _) => None,
                (true, Some(host)) => {
                    let mut host = host.clone();
                    if let Some(t) = spec.timeout_s {
                        if !(t.is_finite() && t > 0.0) {
                            return Err(fail(format!(
                                "timeout_s = {t}: a positive number of seconds"
                            )));
                        }
                        host.timeout = std::time::Duration::from_secs_f64(t.min(1e6));
                    }
                    Some(host)
                }
                (true, None) => {
                    return Err(fail(
                        "isolate = true, but this host cannot run a plugin host".into(),
                    ))
                }
            };
            perfcast_loader::check_library_file(&spec.path, spec.sha256.as_deref())
                .map_err(|e| fail(e.to_string()))?;
            if run {
                checked.push((spec, origin, isolate));
            } else {
                self.unloaded.push(spec.path);
            }
        }
        for (spec, origin, isolate) in checked {
            let info = plugins::load_library(
                &spec.path,
                spec.sha256.as_deref(),
                registry,
                isolate.as_ref(),
            )
            .map_err(|message| HostError::Library {
                path: spec.path.clone(),
                origin,
                message,
            })?;
            self.libraries.push(info);
        }
        Ok(())
    }

    /// `PERFCAST_*` environment variables that set no allowed top-level key and were left out
    /// (hosts warn about them: a typo in a section name, or another tool's variable).
    pub fn ignored_env(&self) -> &[String] {
        &self.ignored_env
    }

    /// The metadata of the layer the value at `key` came from (its name and source).
    pub fn metadata_of(&self, key: &str) -> Option<&figment::Metadata> {
        self.metadata(lookup(&self.value, key)?.tag())
    }

    /// The metadata of the layer a value's tag names.
    fn metadata(&self, tag: Tag) -> Option<&figment::Metadata> {
        self.sets
            .get_metadata(tag)
            .or_else(|| self.figment.get_metadata(tag))
    }

    /// The merged configuration as one value.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The layers merged, lowest first.
    pub fn layers(&self) -> &[LayerOrigin] {
        &self.layers
    }

    /// Built-in plugins plus the loaded libraries'.
    /// The plugins the host handed in (not the libraries this configuration loaded).
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The plugin libraries loaded for this configuration.
    pub fn libraries(&self) -> &[LibraryInfo] {
        &self.libraries
    }

    /// The libraries this configuration names that were checked and not loaded
    /// ([`LibraryPolicy::CheckOnly`]).
    pub fn unloaded(&self) -> &[PathBuf] {
        &self.unloaded
    }

    /// `[[plugins]]` from an included file loads only under [`LibraryPolicy::IncludedToo`]
    /// (an array is replaced whole by a higher layer, so one layer holds every entry).
    fn included_plugins_allowed(&self, policy: LibraryPolicy) -> Result<(), HostError> {
        if policy != LibraryPolicy::Named {
            return Ok(());
        }
        let Some(v) = lookup(&self.value, "plugins") else {
            return Ok(());
        };
        let label = self.metadata(v.tag()).map(|m| m.name.to_string());
        let layer = self.layers.iter().find(|l| Some(l.label()) == label);
        if let Some(LayerOrigin::File {
            included_by: Some(by),
            ..
        }) = layer
        {
            return Err(HostError::Invalid {
                key: "plugins".into(),
                origin: self.origin_of("plugins"),
                message: format!(
                    "a library named in an included file does not load by default (loading a \
                     library runs its code): name it in `[[plugins]]` of {by}, or with `--load \
                     PATH`, or pass `--allow-included-plugins`"
                ),
            });
        }
        Ok(())
    }

    /// Whether `key` (dotted path) is set.
    pub fn contains(&self, key: &str) -> bool {
        lookup(&self.value, key).is_some()
    }

    /// Deserialise the value at `key` (dotted path, `""` for the whole configuration). Errors
    /// name the full key path and where the bad value came from.
    ///
    /// It reads the value merged at load (no layer is merged again: what makes a sweep's
    /// points cheap); perfcast uses none of figment's magic types, which need the layers.
    pub fn extract<T: DeserializeOwned>(&self, key: &str) -> Result<T, HostError> {
        let Some(v) = lookup(&self.value, key) else {
            return Err(HostError::Invalid {
                key: key.to_string(),
                origin: None,
                message: "missing: this configuration does not set it".into(),
            });
        };
        T::deserialize(v).map_err(|e| self.figment_error(e.with_path(key), key))
    }

    /// Like [`Config::extract`], `None` when `key` is not set.
    pub fn extract_opt<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, HostError> {
        if key.is_empty() || lookup(&self.value, key).is_some() {
            self.extract(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The name of the layer the value at `key` came from, without the line [`origin_of`]
    /// finds by reading its file again (`None` where `origin_of` is `None`): what a check of
    /// whether a user set the key needs, at a hash lookup's cost.
    ///
    /// [`origin_of`]: Config::origin_of
    pub fn layer_of(&self, key: &str) -> Option<&str> {
        let v = lookup(&self.value, key)?;
        Some(&self.metadata(v.tag())?.name)
    }

    /// Where the value at `key` came from (`file configs/x.toml`, `PERFCAST_PLAN__TP`,
    /// `--set plan.tp=4`, ...). Array elements are addressed as `ops[2].m`.
    /// For values from a TOML file or preset the line is added (`file x.toml:12`).
    pub fn origin_of(&self, key: &str) -> Option<String> {
        let v = lookup(&self.value, key)?;
        let label = self.tag_label(v.tag(), key);
        let md = self.metadata(v.tag())?;
        // The file's text to find the key's line in, and whether it is YAML (else TOML: a
        // TOML file or a preset).
        let (text, yaml) = match md.source.as_ref() {
            Some(figment::Source::File(p)) => {
                let ext = p
                    .extension()
                    .and_then(|e| e.to_str())
                    .map(str::to_ascii_lowercase);
                match ext.as_deref() {
                    Some("toml") => (
                        crate::input::read_text(p, crate::input::MAX_TEXT_BYTES).ok(),
                        false,
                    ),
                    Some("yaml" | "yml") => (
                        crate::input::read_text(p, crate::input::MAX_TEXT_BYTES).ok(),
                        true,
                    ),
                    _ => (None, false),
                }
            }
            Some(figment::Source::Custom(c)) => (
                c.strip_prefix(layers::PRESET_SCHEME)
                    .or_else(|| c.strip_prefix(crate::layers::STACK_SCHEME))
                    .and_then(layers::preset)
                    .map(str::to_string),
                false,
            ),
            _ => (None, false),
        };
        let segs = key_segments(key);
        let line = text.and_then(|t| {
            if yaml {
                layers::yaml_key_line(&t, &segs)
            } else {
                layers::toml_key_line(&t, &segs)
            }
        });
        let layer = self.layers.iter().find(|l| l.label() == md.name);
        Some(match (layer, line) {
            (Some(l), Some(_)) => l.label_at(line),
            _ => label,
        })
    }

    /// An error about the value at `key` that names where it came from: for checks a host
    /// or the engine makes after extraction (`config.invalid("plan.tp", "must divide heads
    /// (96)")`).
    pub fn invalid(&self, key: &str, message: impl Into<String>) -> HostError {
        HostError::Invalid {
            key: key.to_string(),
            origin: self.origin_of(key),
            message: message.into(),
        }
    }

    fn tag_label(&self, tag: Tag, key: &str) -> String {
        match self.metadata(tag) {
            Some(md) if md.name == LayerOrigin::Env.label() => {
                let segs = key_segments(key);
                let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
                format!("environment variable {}", layers::env_var_name(&segs))
            }
            Some(md) => md.name.to_string(),
            None => "unknown".into(),
        }
    }

    /// Turn a figment error at `root` into a [`HostError::Invalid`] with the full key path.
    pub fn figment_error(&self, e: figment::Error, root: &str) -> HostError {
        // extract_inner appends the root's segments after the inner path.
        let root_n = root.split('.').filter(|s| !s.is_empty()).count();
        let mut path = e.path.clone();
        let inner_n = path.len().saturating_sub(root_n);
        path.rotate_left(inner_n);
        let key = path.join(".");
        // A missing field has no value of its own: the nearest enclosing value's origin.
        let origin = self
            .origin_of(&key)
            .or_else(|| e.metadata.as_ref().map(|m| m.name.to_string()))
            .or_else(|| {
                let segs = key_segments(&key);
                (0..segs.len())
                    .rev()
                    .find_map(|n| self.origin_of(&segs[..n].join(".")))
            });
        let message = figment_message(&e.kind);
        HostError::Invalid {
            key: if key.is_empty() {
                root.to_string()
            } else {
                key
            },
            origin,
            message,
        }
    }

    fn check_top_level(&self, sections: &[&'static str]) -> Result<(), HostError> {
        let Some(d) = self.value.as_dict() else {
            return Ok(());
        };
        for (k, v) in d {
            if !sections.contains(&k.as_str()) {
                return Err(HostError::UnknownKey {
                    key: k.clone(),
                    origin: self.tag_label(v.tag(), k),
                    allowed: sections.to_vec(),
                });
            }
        }
        Ok(())
    }

    /// `nan` and `inf` (which TOML and YAML can spell) are not values perfcast accepts
    /// anywhere: reject them at load, naming the key.
    fn check_finite(&self) -> Result<(), HostError> {
        match non_finite(&self.value) {
            Some((key, x)) => Err(HostError::Invalid {
                origin: self.origin_of(&key),
                message: format!("{x} is not allowed: every number must be finite"),
                key,
            }),
            None => Ok(()),
        }
    }

    /// Every value of the merged configuration with where it came from, in key order.
    /// Tables are walked; arrays of tables are walked by index (`ops[0].m`); other arrays are
    /// one value.
    pub fn explain(&self) -> Vec<Explained> {
        let mut out = Vec::new();
        self.walk(&self.value, String::new(), &mut out);
        out
    }

    fn walk(&self, v: &Value, key: String, out: &mut Vec<Explained>) {
        match v {
            Value::Dict(_, d) if !d.is_empty() => {
                for (k, child) in d {
                    let key = if key.is_empty() {
                        k.clone()
                    } else {
                        format!("{key}.{k}")
                    };
                    self.walk(child, key, out);
                }
            }
            Value::Array(_, items)
                if !items.is_empty() && items.iter().all(|i| i.as_dict().is_some()) =>
            {
                for (i, child) in items.iter().enumerate() {
                    self.walk(child, format!("{key}[{i}]"), out);
                }
            }
            leaf => out.push(Explained {
                value: serde_json::to_string(leaf).unwrap_or_else(|_| format!("{leaf:?}")),
                source: self
                    .origin_of(&key)
                    .unwrap_or_else(|| self.tag_label(leaf.tag(), &key)),
                key,
            }),
        }
    }
}

/// `a.b[2].c` -> `["a", "b", "2", "c"]`.
/// The value of `figment`'s layers merged.
fn merged(figment: &Figment) -> Result<Value, HostError> {
    figment.find_value("").map_err(|e| HostError::Invalid {
        key: e.path.join("."),
        origin: e.metadata.as_ref().map(|m| m.name.to_string()),
        message: e.kind.to_string(),
    })
}

/// The key (`a.b[2].c`) and value of the first number under `v` that is not finite; the key
/// is only written for the one found (a check of every value at each sweep point stays cheap).
fn non_finite(v: &Value) -> Option<(String, f64)> {
    // `rest` below the segment `seg`: `seg.rest`, or `seg[i]` for an index.
    let under = |seg: String, rest: String| match rest.chars().next() {
        None | Some('[') => seg + &rest,
        Some(_) => format!("{seg}.{rest}"),
    };
    match v {
        Value::Num(_, n) => n
            .to_f64()
            .filter(|x| !x.is_finite())
            .map(|x| (String::new(), x)),
        Value::Dict(_, d) => d
            .iter()
            .find_map(|(k, c)| non_finite(c).map(|(rest, x)| (under(k.clone(), rest), x))),
        Value::Array(_, a) => a
            .iter()
            .enumerate()
            .find_map(|(i, c)| non_finite(c).map(|(rest, x)| (under(format!("[{i}]"), rest), x))),
        _ => None,
    }
}

pub(crate) fn key_segments(key: &str) -> Vec<String> {
    key.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Find `key` (dotted, with `[i]` or `.i` array indices) in `v`.
pub(crate) fn lookup<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let mut cur = v;
    // The segments of key_segments, without allocating them (lookups are on the hot path of
    // a sweep's points).
    let segs = key
        .split(['.', '['])
        .map(|s| s.strip_suffix(']').unwrap_or(s))
        .filter(|s| !s.is_empty());
    for seg in segs {
        cur = match cur {
            Value::Dict(_, d) => d.get(seg)?,
            Value::Array(_, a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Keys a training run has and inference and serving do not, with why (issue 22: a
/// strategy's declared axes and the strategies themselves are training's).
const TRAINING_ONLY: [(&str, &str); 2] = [
    (
        "axes",
        "a strategy's declared axes are for training and its search (`plan.axes.NAME`, \
         `[search] axes.NAME`); inference and serving shard over the built-in axes only",
    ),
    (
        "strategies",
        "parallel strategies are chosen for training (`options.strategies`); inference and \
         serving shard over the built-in axes only",
    ),
];

/// A figment error's kind in perfcast's words: an unknown key or value with the nearest
/// allowed ones, a wrong type as the rule the value breaks and the value itself
/// (`expected a non-negative integer (at most 4294967295), got -4`), not serde's type names.
fn figment_message(kind: &figment::error::Kind) -> String {
    use figment::error::Kind;
    use perfcast_core::suggest::{did_you_mean, rewrite_serde};
    let unknown = |what: &str, word: &str, expected: &[&str]| {
        let allowed: Vec<String> = expected.iter().map(|e| format!("`{e}`")).collect();
        format!(
            "unknown {what} `{word}`{} (allowed: {})",
            did_you_mean(word, expected.iter().copied()),
            if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            }
        )
    };
    match kind {
        // Keys of a training run that an inference or serving section does not have: say so.
        Kind::UnknownField(f, expected) => match TRAINING_ONLY.iter().find(|(k, _)| k == f) {
            Some((_, why)) => format!("{}; {why}", unknown("key", f, expected)),
            None => unknown("key", f, expected),
        },
        Kind::UnknownVariant(v, expected) => unknown("value", v, expected),
        Kind::InvalidType(actual, exp) | Kind::InvalidValue(actual, exp) => {
            rewrite_serde(&format!("invalid type: {actual}, expected {exp}"))
        }
        Kind::Message(m) => rewrite_serde(m),
        other => other.to_string(),
    }
}
