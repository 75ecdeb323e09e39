//! The layers of a configuration, lowest first: built-in defaults, config files (with their
//! includes beneath them), `PERFCAST_*` environment variables, `--set key=value`.
//!
//! Each layer is a figment [`Provider`] whose [`Metadata`] says where its values came from; the
//! merged figment tags every value with its provider, which is how errors and
//! `config explain` name the origin of a value.

use crate::error::HostError;
use figment::providers::{Env, Format, Json, Toml, Yaml};
use figment::value::{Dict, Map, Value};
use figment::{Error as FigmentError, Metadata, Profile, Provider, Source};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

mod embedded {
    pub use perfcast_assets::PRESETS;
}

/// Prefix of configuration environment variables (`PERFCAST_PLAN__TP=4` sets `plan.tp`).
pub const ENV_PREFIX: &str = "PERFCAST_";
/// How a config file names a built-in preset: `include = ["preset:a100-sxm4-80gb"]`
/// (hardware), `"preset:dgx-h100"` (a node), `"preset:gpt3-175b"` (a model).
pub const PRESET_SCHEME: &str = "preset:";

/// The group of the built-in presets that are software stacks (`configs/stacks/`): selected
/// with `stack = "NAME"`, never included.
pub const STACKS_GROUP: &str = "stacks";

/// How origins name a built-in stack: `stack:megatron-lm-2021:12`.
pub const STACK_SCHEME: &str = "stack:";

/// Names of the built-in presets that a config can include (the files of
/// `configs/hardware/`, `configs/systems/` and `configs/models/`), sorted.
pub fn preset_names() -> Vec<String> {
    embedded::PRESETS
        .iter()
        .filter(|(_, g, _)| *g != STACKS_GROUP)
        .map(|(n, _, _)| n.to_string())
        .collect()
}

/// `(name, group)` of every built-in preset; the group is `hardware`, `systems`, `models`,
/// `stacks` or `experiments`.
pub fn preset_groups() -> Vec<(&'static str, &'static str)> {
    embedded::PRESETS.iter().map(|(n, g, _)| (*n, *g)).collect()
}

/// The TOML text of a built-in preset (stacks included).
pub fn preset(name: &str) -> Option<&'static str> {
    embedded::PRESETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, t)| *t)
}

/// The group of a built-in preset.
pub fn preset_group(name: &str) -> Option<&'static str> {
    embedded::PRESETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, g, _)| *g)
}

/// Where a layer's values came from.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerOrigin {
    Default,
    File {
        path: PathBuf,
        included_by: Option<String>,
    },
    Preset {
        name: String,
        included_by: Option<String>,
    },
    Env,
    Set {
        arg: String,
    },
    /// A built-in stack preset (`stack = "NAME"`), beneath every file; `base_of` when another
    /// stack builds on it.
    Stack {
        name: String,
        base_of: Option<String>,
    },
}

impl LayerOrigin {
    /// A short label: `file configs/x.toml`, `preset:a100-sxm4-80gb (built-in)`,
    /// `--set plan.tp=4`...
    pub fn label(&self) -> String {
        self.label_at(None)
    }

    /// The label with a line in the file or preset: `file configs/x.toml:12 (included by
    /// y.toml)`.
    pub fn label_at(&self, line: Option<usize>) -> String {
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        match self {
            LayerOrigin::Default => "built-in default".into(),
            LayerOrigin::File { path, included_by } => match included_by {
                Some(by) => format!("file {}{at} (included by {by})", path.display()),
                None => format!("file {}{at}", path.display()),
            },
            LayerOrigin::Preset { name, included_by } => match included_by {
                Some(by) => format!("{PRESET_SCHEME}{name}{at} (built-in, included by {by})"),
                None => format!("{PRESET_SCHEME}{name}{at} (built-in)"),
            },
            LayerOrigin::Env => "environment".into(),
            LayerOrigin::Set { arg } => format!("--set {arg}"),
            LayerOrigin::Stack { name, base_of } => match base_of {
                Some(of) => format!("{}{name}{at} (base of {of})", STACK_SCHEME),
                None => format!("{}{name}{at}", STACK_SCHEME),
            },
        }
    }
}

/// One parsed configuration layer.
#[derive(Debug, Clone)]
pub struct Layer {
    pub origin: LayerOrigin,
    pub data: Dict,
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let md = Metadata::named(self.origin.label());
        match &self.origin {
            LayerOrigin::File { path, .. } => md.source(Source::File(path.clone())),
            LayerOrigin::Preset { name, .. } => {
                md.source(Source::Custom(format!("{PRESET_SCHEME}{name}")))
            }
            LayerOrigin::Set { arg } => md.source(Source::Custom(format!("--set {arg}"))),
            LayerOrigin::Stack { name, .. } => {
                md.source(Source::Custom(format!("{}{name}", STACK_SCHEME)))
            }
            _ => md,
        }
    }

    fn data(&self) -> Result<Map<Profile, Dict>, FigmentError> {
        let profile = match self.origin {
            // Environment and command line override every profile (figment pitfall 1).
            LayerOrigin::Env | LayerOrigin::Set { .. } => Profile::Global,
            _ => Profile::Default,
        };
        let mut m = Map::new();
        m.insert(profile, self.data.clone());
        Ok(m)
    }
}

/// The built-in defaults: the lowest layer.
pub fn defaults() -> Layer {
    let mut system = Dict::new();
    system.insert("devices".into(), Value::from(1u32));
    let mut data = Dict::new();
    data.insert("system".into(), Value::from(system));
    Layer {
        origin: LayerOrigin::Default,
        data,
    }
}

/// The `PERFCAST_*` environment as a layer: `PERFCAST_A__B=v` sets `a.b` (keys lower-cased).
/// Values are parsed like figment parses environment values (numbers, booleans, arrays).
/// Only variables whose first key is one of `sections` are configuration; the others (e.g.
/// `PERFCAST_ROOT`, a variable of some other tool) are left out: [`ignored_env_vars`] names
/// them for a warning.
pub fn environment(sections: &[&str]) -> Result<Layer, HostError> {
    let allowed: Vec<String> = sections.iter().map(|s| s.to_ascii_lowercase()).collect();
    let env = Env::prefixed(ENV_PREFIX)
        .filter(move |k| allowed.iter().any(|a| a == &first_segment(k.as_str())))
        .split("__")
        .global();
    let map = env.data().map_err(|e| HostError::Invalid {
        key: e.path.join("."),
        origin: Some("environment".into()),
        message: e.kind.to_string(),
    })?;
    let data = map.into_values().next().unwrap_or_default();
    Ok(Layer {
        origin: LayerOrigin::Env,
        data,
    })
}

/// The top-level key a `PERFCAST_`-stripped variable name sets (lower-cased).
fn first_segment(name: &str) -> String {
    name.split("__").next().unwrap_or("").to_ascii_lowercase()
}

/// The `PERFCAST_*` variables of the environment that set no key of `sections` (so
/// [`environment`] leaves them out), sorted: what a host warns about, in one line each.
pub fn ignored_env_vars(sections: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| {
            k.strip_prefix(ENV_PREFIX).is_some_and(|rest| {
                !sections
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(&first_segment(rest)))
            })
        })
        .collect();
    out.sort();
    out
}

/// The environment variable that sets `key_path` (for provenance).
pub fn env_var_name(key_path: &[&str]) -> String {
    let keys: Vec<String> = key_path.iter().map(|k| k.to_ascii_uppercase()).collect();
    format!("{ENV_PREFIX}{}", keys.join("__"))
}

/// Parse one `--set key=value`: the value is read as a TOML value (numbers, booleans, quoted
/// strings, arrays, inline tables), else as JSON, else taken as a plain string.
pub fn parse_set(arg: &str) -> Result<Layer, HostError> {
    let bad = |message: &str| HostError::BadSet {
        arg: arg.to_string(),
        message: message.to_string(),
    };
    let (key, raw) = arg.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(bad("empty key"));
    }
    set_layer(key, parse_scalar(raw.trim()), arg)
}

/// The layer of `--set {arg}` whose key is `key` and value `value` (already parsed: what a
/// host that holds typed values, such as a sweep, hands in without writing and parsing text).
pub fn set_layer(key: &str, mut value: Value, arg: &str) -> Result<Layer, HostError> {
    let bad = |message: &str| HostError::BadSet {
        arg: arg.to_string(),
        message: message.to_string(),
    };
    let segments = key_segments(key).map_err(|m| bad(&m))?;
    for seg in segments.iter().rev() {
        let mut d = Dict::new();
        d.insert(seg.clone(), value);
        value = Value::from(d);
    }
    let data = match value {
        Value::Dict(_, d) => d,
        _ => return Err(bad("empty key")),
    };
    Ok(Layer {
        origin: LayerOrigin::Set {
            arg: arg.to_string(),
        },
        data,
    })
}

/// The segments of a dotted `--set` key: bare (letters, digits, `_`, `-`) or in double quotes
/// (any characters but `"`, for a namespaced plugin's name: `options.strategy_params.
/// "example/ulysses".separate_qkv`), as TOML spells keys.
fn key_segments(key: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = key;
    loop {
        let (seg, after) = if let Some(q) = rest.strip_prefix('"') {
            let end = q
                .find('"')
                .ok_or_else(|| format!("key segment `{rest}` has no closing `\"`"))?;
            (&q[..end], &q[end + 1..])
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            let seg = &rest[..end];
            if !seg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "key segment `{seg}` must be non-empty letters, digits, `_` or `-`, or \
                     quoted (`\"a/b\"`)"
                ));
            }
            (seg, &rest[end..])
        };
        if seg.is_empty() {
            return Err(format!(
                "key segment `{seg}` must be non-empty letters, digits, `_` or `-`, or quoted \
                 (`\"a/b\"`)"
            ));
        }
        out.push(seg.to_string());
        if after.is_empty() {
            return Ok(out);
        }
        rest = after
            .strip_prefix('.')
            .ok_or_else(|| format!("expected `.` after key segment `{seg}`"))?;
    }
}

/// A value given on the command line: TOML, then JSON, then a plain string.
pub fn parse_scalar(raw: &str) -> Value {
    if let Ok(mut d) = Toml::from_str::<Dict>(&format!("v = {raw}")) {
        if let Some(v) = d.remove("v") {
            return v;
        }
    }
    if let Ok(v) = Json::from_str::<Value>(raw) {
        return v;
    }
    Value::from(raw.to_string())
}

/// Identity of a source for cycle detection.
fn identity(spec: &Spec) -> String {
    match spec {
        Spec::File(p) => p
            .canonicalize()
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string(),
        Spec::Preset(n) => format!("{PRESET_SCHEME}{n}"),
    }
}

#[derive(Debug, Clone)]
enum Spec {
    File(PathBuf),
    Preset(String),
}

impl Spec {
    fn parse(s: &Path) -> Spec {
        match s.to_str().and_then(|s| s.strip_prefix(PRESET_SCHEME)) {
            Some(name) => Spec::Preset(name.to_string()),
            None => Spec::File(s.to_path_buf()),
        }
    }
    fn label(&self) -> String {
        match self {
            Spec::File(p) => p.display().to_string(),
            Spec::Preset(n) => format!("{PRESET_SCHEME}{n}"),
        }
    }
}

/// Read a config file (or `preset:NAME`) and, beneath it, everything it includes, recursively.
/// The layers come out lowest first: a file's includes (in order) precede the file itself.
/// A file or preset reached again by another path (a diamond of includes) is merged once, at
/// its first place: `base` included by both `a` and `b` gives `base`, `a`, `b`, so `b` does
/// not undo what `a` set over `base`.
pub fn read_config(path: &Path) -> Result<Vec<Layer>, HostError> {
    let mut reader = Reader::default();
    reader.read(Spec::parse(path), None)?;
    Ok(reader.out)
}

/// Largest configuration file read (the largest shipped one, `configs/validation/cases.toml`,
/// is 464 kB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// A config file must be a regular file (not a device such as `/dev/zero`, nor a FIFO, which
/// would read forever or block) of a sensible size.
fn check_config_file(path: &Path, included_by: &Option<String>) -> Result<(), HostError> {
    let bad = |message: String| HostError::Format {
        origin: match included_by {
            Some(by) => format!("{} (included by {by})", path.display()),
            None => path.display().to_string(),
        },
        message,
    };
    let Ok(meta) = std::fs::metadata(path) else {
        // Missing or unreadable: the read reports it with its own error.
        return Ok(());
    };
    // A directory fails the read with its own "cannot read" error.
    if !meta.is_file() && !meta.is_dir() {
        return Err(bad("not a regular file (a config is read whole)".into()));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(bad(format!(
            "{} bytes, more than a configuration may have ({MAX_CONFIG_BYTES})",
            meta.len()
        )));
    }
    Ok(())
}

/// Deepest include nesting a configuration may have.
const MAX_INCLUDE_DEPTH: usize = 64;
/// Most files and presets one configuration may read.
const MAX_LAYERS: usize = 4096;

/// The layers read so far, and the includes being read.
#[derive(Default)]
struct Reader {
    /// (identity, label) of the files and presets whose includes are being read, outermost
    /// first: one met again is a cycle.
    stack: Vec<(String, String)>,
    /// The identities of the layers read (a file met again is not read again).
    seen: HashSet<String>,
    out: Vec<Layer>,
}

impl Reader {
    fn read(&mut self, spec: Spec, included_by: Option<String>) -> Result<(), HostError> {
        let Reader { stack, seen, out } = self;
        if stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(HostError::TooManyIncludes {
                origin: spec.label(),
                what: format!("includes nested {} deep", stack.len() + 1),
                limit: MAX_INCLUDE_DEPTH,
            });
        }
        let id = identity(&spec);
        if let Some(pos) = stack.iter().position(|(i, _)| *i == id) {
            let mut chain: Vec<String> = stack[pos..].iter().map(|(_, l)| l.clone()).collect();
            chain.push(spec.label());
            return Err(HostError::IncludeCycle { chain });
        }
        if seen.contains(&id) {
            return Ok(());
        }
        if out.len() >= MAX_LAYERS {
            return Err(HostError::TooManyIncludes {
                origin: spec.label(),
                what: format!("more than {MAX_LAYERS} files and presets read"),
                limit: MAX_LAYERS,
            });
        }
        let (text, origin, format, dir) = match &spec {
        Spec::File(path) => {
            check_config_file(path, &included_by)?;
            let text = crate::input::read_text(path, crate::input::MAX_TEXT_BYTES).map_err(|source| HostError::Read {
                path: path.clone(),
                included_by: included_by.clone(),
                source,
            })?;
            let format = match path.extension().and_then(|e| e.to_str()) {
                Some("toml") => "TOML",
                Some("yaml") | Some("yml") => "YAML",
                Some("json") => "JSON",
                other => {
                    return Err(HostError::Format {
                        origin: path.display().to_string(),
                        message: format!(
                            "unsupported config format {}; use .toml, .yaml, .yml or .json",
                            other
                                .map(|e| format!("`.{e}`"))
                                .unwrap_or("(no extension)".into())
                        ),
                    })
                }
            };
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let origin = LayerOrigin::File {
                path: path.clone(),
                included_by,
            };
            (text.to_string(), origin, format, Some(dir))
        }
        Spec::Preset(name) if preset_group(name) == Some(STACKS_GROUP) => {
            return Err(HostError::Format {
                origin: included_by.unwrap_or_else(|| "the command line".into()),
                message: format!(
                    "`{PRESET_SCHEME}{name}` is a software stack: select it with `stack = \"{name}\"` (a top-level key), not by including it"
                ),
            })
        }
        Spec::Preset(name) => {
            let text = preset(name).ok_or_else(|| HostError::UnknownPreset {
                name: name.clone(),
                included_by: included_by.clone(),
                known: preset_names(),
            })?;
            let origin = LayerOrigin::Preset {
                name: name.clone(),
                included_by,
            };
            (text.to_string(), origin, "TOML", None)
        }
    };
        let label = spec.label();
        let mut data = parse(&text, format, &label)?;

        let includes = take_includes(&mut data, &label)?;
        if let Some(dir) = &dir {
            absolutize_plugin_paths(&mut data, dir);
        }
        stack.push((id.clone(), label.clone()));
        for inc in includes {
            let child = match Spec::parse(Path::new(&inc)) {
                Spec::File(p) => match &dir {
                    Some(dir) if p.is_relative() => Spec::File(dir.join(p)),
                    Some(_) => Spec::File(p),
                    // Inside a preset, `../hardware/x.toml` names the preset `x`.
                    None => match p.file_stem().and_then(|s| s.to_str()) {
                        Some(stem) if preset(stem).is_some() => Spec::Preset(stem.to_string()),
                        _ => {
                            return Err(HostError::Format {
                                origin: label,
                                message: format!(
                                    "a built-in preset can only include other presets, not `{inc}`"
                                ),
                            })
                        }
                    },
                },
                preset => preset,
            };
            self.read(child, Some(label.clone()))?;
        }
        self.stack.pop();
        self.seen.insert(id);
        self.out.push(Layer { origin, data });
        Ok(())
    }
}

/// The deepest nesting of YAML flow collections (`[...]`, `{...}`) read: serde_yaml's own
/// recursion limit, checked before parsing because its parser takes time quadratic in the
/// depth before reaching the limit (80,000 brackets: 42 s; a 2 MB file: hours), where TOML
/// and JSON refuse at once.
const MAX_YAML_DEPTH: usize = 128;

/// Refuse YAML whose flow collections nest deeper than [`MAX_YAML_DEPTH`], naming the line
/// and column of the first bracket too deep. Brackets in quotes and comments do not count; a
/// bracket inside a plain scalar may, which can only refuse a file no configuration resembles.
fn yaml_depth_ok(text: &str, origin: &str) -> Result<(), HostError> {
    let (mut depth, mut quote) = (0usize, None::<char>);
    for (line, l) in text.lines().enumerate() {
        // A quoted scalar may span lines; a comment ends with its line.
        let (mut comment, mut prev) = (false, '\n');
        let mut chars = l.char_indices().peekable();
        while let Some((col, c)) = chars.next() {
            match (quote, c) {
                _ if comment => {}
                (Some('"'), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') if prev.is_whitespace() => comment = true,
                (None, '[' | '{') => {
                    depth += 1;
                    if depth > MAX_YAML_DEPTH {
                        return Err(HostError::Syntax {
                            origin: origin.to_string(),
                            format: "YAML",
                            line: line + 1,
                            column: col + 1,
                            message: format!(
                                "collections nested deeper than {MAX_YAML_DEPTH} levels"
                            ),
                        });
                    }
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
    }
    Ok(())
}

/// Parse a file's text; syntax errors carry line and column.
pub(crate) fn parse(text: &str, format: &'static str, origin: &str) -> Result<Dict, HostError> {
    let value: Value = match format {
        "TOML" => Toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
            HostError::Syntax {
                origin: origin.to_string(),
                format,
                line,
                column,
                message: e.message().trim().replace('\n', " "),
            }
        })?,
        "YAML" => yaml_depth_ok(text, origin).and_then(|()| {
            Yaml::from_str(text).map_err(|e| {
                let (line, column) = e
                    .location()
                    .map(|l| (l.line(), l.column()))
                    .unwrap_or((0, 0));
                HostError::Syntax {
                    origin: origin.to_string(),
                    format,
                    line,
                    column,
                    message: strip_location(&e.to_string()),
                }
            })
        })?,
        _ => Json::from_str(text).map_err(|e| HostError::Syntax {
            origin: origin.to_string(),
            format,
            line: e.line(),
            column: e.column(),
            message: strip_location(&e.to_string()),
        })?,
    };
    match value {
        Value::Dict(_, d) => Ok(d),
        // An empty YAML document is no configuration at all.
        Value::Empty(..) => Ok(Dict::new()),
        other => Err(HostError::Format {
            origin: origin.to_string(),
            message: format!(
                "the top level must be a table of keys, found {}",
                kind_name(&other)
            ),
        }),
    }
}

/// serde_json and serde_yaml end their messages with " at line L column C"; we report those
/// separately.
fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let column = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, column)
}

/// The 1-based line of the key `segs` in block-style YAML `text` (`plan:` then, indented
/// beneath it, `tp:`): each segment is looked up among the keys of its parent's block, at the
/// block's own indentation. Where the path goes into a list or an inline mapping, the line of
/// the deepest key found; `None` when not even the first is.
pub(crate) fn yaml_key_line(text: &str, segs: &[String]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut parent, mut line) = (0usize, -1isize, None);
    for seg in segs {
        let mut level = None;
        let mut hit = None;
        for (i, l) in lines.iter().enumerate().skip(from) {
            let t = l.trim_start();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let ind = (l.len() - t.len()) as isize;
            if ind <= parent {
                break;
            }
            if ind != *level.get_or_insert(ind) {
                continue;
            }
            let Some((key, _)) = t.split_once(':') else {
                continue;
            };
            if key.trim().trim_matches(|c| c == '"' || c == '\'') == seg.as_str() {
                hit = Some((i, ind));
                break;
            }
        }
        let Some((i, ind)) = hit else {
            return line;
        };
        line = Some(i + 1);
        from = i + 1;
        parent = ind;
    }
    line
}

/// 1-based line of the key path `segs` (array indices as numbers) in TOML `text`: where a
/// value that failed to deserialise was written (figment itself gives positions only for
/// syntax errors).
pub(crate) fn toml_key_line(text: &str, segs: &[String]) -> Option<usize> {
    use toml_edit::{Item, Table, Value as TValue};
    enum Node<'a> {
        Item(&'a Item),
        Table(&'a Table),
        Value(&'a TValue),
    }
    type Span = Option<std::ops::Range<usize>>;
    fn child<'a>(n: Node<'a>, seg: &str) -> Option<(Span, Node<'a>)> {
        let in_table = |t: &'a Table| {
            t.get_key_value(seg)
                .map(|(k, i)| (k.span().or_else(|| i.span()), Node::Item(i)))
        };
        match n {
            Node::Table(t) | Node::Item(Item::Table(t)) => in_table(t),
            Node::Item(Item::ArrayOfTables(a)) => {
                let t = a.get(seg.parse().ok()?)?;
                Some((t.span(), Node::Table(t)))
            }
            Node::Item(Item::Value(v)) | Node::Value(v) => match v {
                TValue::InlineTable(t) => t
                    .get_key_value(seg)
                    .map(|(k, i)| (k.span().or_else(|| i.span()), Node::Item(i))),
                TValue::Array(a) => {
                    let v = a.get(seg.parse().ok()?)?;
                    Some((v.span(), Node::Value(v)))
                }
                _ => None,
            },
            Node::Item(Item::None) => None,
        }
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut node = Node::Table(doc.as_table());
    let mut span = None;
    for seg in segs {
        let (s, next) = child(node, seg)?;
        span = s.or(span);
        node = next;
    }
    span.map(|s| line_col(text, s.start).0)
}

pub(crate) fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::String(..) => "a string",
        Value::Char(..) => "a character",
        Value::Bool(..) => "a boolean",
        Value::Num(..) => "a number",
        Value::Empty(..) => "nothing",
        Value::Dict(..) => "a table",
        Value::Array(..) => "an array",
    }
}

fn take_includes(data: &mut Dict, origin: &str) -> Result<Vec<String>, HostError> {
    let Some(v) = data.remove("include") else {
        return Ok(Vec::new());
    };
    let bad = |found: &Value| HostError::Invalid {
        key: "include".into(),
        origin: Some(origin.to_string()),
        message: format!(
            "expected an array of file paths or `{PRESET_SCHEME}NAME` strings, found {}",
            kind_name(found)
        ),
    };
    match &v {
        Value::String(_, s) => Ok(vec![s.clone()]),
        Value::Array(_, items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(|| bad(i)))
            .collect(),
        other => Err(bad(other)),
    }
}

/// `[[plugins]] path = "..."` is relative to the file that says it.
fn absolutize_plugin_paths(data: &mut Dict, dir: &Path) {
    if let Some(Value::Array(_, items)) = data.get_mut("plugins") {
        for item in items {
            if let Value::Dict(_, d) = item {
                if let Some(Value::String(_, p)) = d.get_mut("path") {
                    let pb = PathBuf::from(&*p);
                    if pb.is_relative() {
                        *p = dir.join(pb).display().to_string();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_are_typed() {
        let table: &[(&str, Value)] = &[
            ("plan.tp=4", Value::from(4i64)),
            ("a=2.5", Value::from(2.5f64)),
            ("a=true", Value::from(true)),
            ("a=\"4\"", Value::from("4".to_string())),
            ("a=My Cluster", Value::from("My Cluster".to_string())),
            ("a=h100", Value::from("h100".to_string())),
        ];
        for (arg, want) in table {
            let l = parse_set(arg).unwrap();
            let v = Value::from(l.data.clone());
            let key = arg.split_once('=').unwrap().0;
            let got = v.find(key).unwrap();
            assert_eq!(&got, want, "{arg}");
        }
        let arr = parse_set("device.memory=[\"a\", \"b\"]").unwrap();
        let v = Value::from(arr.data).find("device.memory").unwrap();
        assert_eq!(v.into_array().map(|a| a.len()), Some(2));
        // A quoted segment: a namespaced plugin's name, slashes and dots kept.
        let q =
            parse_set("options.strategy_params.\"example/ulysses.v2\".separate_qkv=true").unwrap();
        let params = &q.data["options"].as_dict().unwrap()["strategy_params"];
        let plugin = &params.as_dict().unwrap()["example/ulysses.v2"];
        assert_eq!(plugin.as_dict().unwrap()["separate_qkv"], Value::from(true));
        for bad in [
            "novalue",
            "=3",
            "a..b=1",
            "a b=1",
            "a.\"b=1",
            "a.\"\".c=1",
            "a.\"b\"c=1",
            "a.=1",
        ] {
            assert!(
                matches!(parse_set(bad), Err(HostError::BadSet { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn key_lines_in_toml() {
        let t = "a = 1\n[comp.x]\nkind = \"gpu\"\nsm = 3\n[comp.x.peaks]\nbf16 = 1.0\n\
                 [[ops]]\nm = 1\n[[ops]]\nm = 2\nv = [1, { q = 3 }]\n";
        let seg = |k: &str| crate::config::key_segments(k);
        let table = [
            ("a", Some(1)),
            ("comp.x.sm", Some(4)),
            ("comp.x.peaks.bf16", Some(6)),
            ("ops[1].m", Some(10)),
            ("ops.0.m", Some(8)),
            ("ops[1].v[1].q", Some(11)),
            ("comp.y", None),
        ];
        for (k, want) in table {
            assert_eq!(toml_key_line(t, &seg(k)), want, "{k}");
        }
    }

    #[test]
    fn line_and_column() {
        let t = "a = 1\nb = \n";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 10), (2, 5));
        let e = parse(t, "TOML", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = parse("{\"a\": 1,\n \"b\": }", "JSON", "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2, column"), "{e}");
        let e = parse("a: 1\nb: [1, 2\n", "YAML", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("YAML syntax error in `x.yaml` at line"), "{e}");
        // A key's line in block-style YAML, for errors about its value.
        let y = "# c\nplan:\n  tp: 4\n  # x\n  pp: 2\nmodel:\n  tp: 9\n  moe:\n    experts: 8\n";
        let segs = |k: &str| k.split('.').map(String::from).collect::<Vec<_>>();
        assert_eq!(yaml_key_line(y, &segs("plan.tp")), Some(3));
        assert_eq!(yaml_key_line(y, &segs("plan.pp")), Some(5));
        assert_eq!(yaml_key_line(y, &segs("model.tp")), Some(7));
        assert_eq!(yaml_key_line(y, &segs("model.moe.experts")), Some(9));
        assert_eq!(yaml_key_line(y, &segs("plan.dp")), Some(2));
        assert_eq!(yaml_key_line(y, &segs("system.devices")), None);
        // Deep flow nesting is refused before the parser sees it, at the first bracket too
        // deep; brackets in quotes and comments do not count.
        let deep = format!("a: 1\nb: {}1{}\n", "[".repeat(80_000), "]".repeat(80_000));
        let start = std::time::Instant::now();
        let e = parse(&deep, "YAML", "x.yaml").unwrap_err().to_string();
        assert!(start.elapsed().as_secs_f64() < 1.0);
        assert!(
            e.contains("at line 2, column 132") && e.contains("nested deeper than 128"),
            "{e}"
        );
        let fine = format!(
            "a: '{}' # {}\nb: \"[\\\"{}\"\nc: [[1], {{d: 2}}]\n",
            "[".repeat(200),
            "{".repeat(200),
            "[".repeat(200)
        );
        assert!(parse(&fine, "YAML", "x.yaml").is_ok());
        let e = parse("[1, 2]", "JSON", "x.json").unwrap_err().to_string();
        assert!(e.contains("top level must be a table"), "{e}");
    }

    #[test]
    fn presets_are_embedded() {
        let names = preset_names();
        assert!(names.iter().any(|n| n == "a100-sxm4-80gb"), "{names:?}");
        for (n, group) in preset_groups() {
            if group == STACKS_GROUP {
                // A stack is selected with `stack = NAME`, never included.
                let e = read_config(Path::new(&format!("preset:{n}")))
                    .unwrap_err()
                    .to_string();
                assert!(e.contains(&format!("stack = \"{n}\"")), "{e}");
                assert!(!preset_names().contains(&n.to_string()), "{n}");
                continue;
            }
            let layers = read_config(Path::new(&format!("preset:{n}"))).unwrap();
            let top = &layers.last().unwrap().data;
            match group {
                "hardware" => assert!(top.contains_key("device"), "{n}"),
                "systems" => {
                    // A node preset includes its hardware preset (`../hardware/x.toml`).
                    assert!(layers.len() >= 2, "{n}");
                    assert!(top.contains_key("system"), "{n}");
                }
                // A shipped experiment includes its model and system presets.
                "experiments" => assert!(layers.len() >= 2, "{n}"),
                _ => assert!(top.contains_key("model"), "{n}"),
            }
        }
        assert!(names.iter().any(|n| n == "dgx-h100"), "{names:?}");
        assert!(names.iter().any(|n| n == "gpt3-175b"), "{names:?}");
        let e = read_config(Path::new("preset:nope"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a100-sxm4-80gb"), "{e}");
    }
}
