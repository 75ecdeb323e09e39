//! Design-space sweeps: a grid (or a list of points) over any config keys, hardware
//! parameters included, each point evaluated with the config's `[plan]` or searched for its
//! best plan; one CSV row per point, streamed in point order.
//!
//! A sweep file (TOML; paths relative to it):
//!
//! ```toml
//! configs = ["../experiments/gpt3-175b-a100.toml"]  # merged in order (or `preset:NAME`)
//! mode = "search"          # or "evaluate" (the config's [plan])
//! max_seconds = 300        # refuse a sweep estimated to take longer (unless forced)
//! [grid]                   # every combination (keys in alphabetical order, first outermost)
//! "components.a100_sxm4_80gb_hbm.bandwidth_tbs" = [1.555, 2.039, 3.0]
//! "components.a100_sxm4_80gb_nvlink.bandwidth_gbs_bidir" = [300.0, 600.0]
//! include = ["preset:a100-sxm4-80gb", "preset:h100-sxm5-80gb"]  # a config layer per value
//! # or instead of [grid]: [[points]] tables of key = value
//! ```

use crate::config::{load_scenario, SECTION};
use crate::SearchError;
use perfcast_config::{Config, Plugins, Sources};
use perfcast_engine::training::{Placement, TrainingPlan};
use perfcast_render::csv_cell;
use serde::Deserialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The grid key whose values are extra config layers (files or `preset:NAME`) per point.
pub const INCLUDE_KEY: &str = "include";

fn d_max_seconds() -> f64 {
    300.0
}

/// How each point is computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Search the point's best plan (the config's `[search]`).
    #[default]
    Search,
    /// Evaluate the config's `[plan]`.
    Evaluate,
}

/// A sweep file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    pub configs: Vec<String>,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default = "d_max_seconds")]
    pub max_seconds: f64,
    #[serde(default)]
    pub grid: Option<toml::Table>,
    #[serde(default)]
    pub points: Option<Vec<toml::Table>>,
}

/// A parsed sweep: its points, each a list of (key, value).
#[derive(Debug, Clone)]
pub struct Sweep {
    pub path: PathBuf,
    pub name: String,
    pub file: SweepFile,
    pub keys: Vec<String>,
    pub points: Vec<Vec<(String, toml::Value)>>,
    /// The plugins every point's configuration resolves in (the host's choice).
    pub plugins: Plugins,
    /// Libraries every point loads on top of its configuration's `[[plugins]]` (the host's
    /// `--load`), with where isolated ones run and whether all are.
    pub libraries: Vec<perfcast_config::PluginSpec>,
    pub plugin_host: Option<perfcast_config::isolate::IsolateOptions>,
    pub isolate_all: bool,
    /// Which libraries may load: the `[[plugins]]` of the files the sweep names as its
    /// configuration, and of their includes only by opt-in (the host's
    /// `--allow-included-plugins`).
    pub policy: perfcast_config::LibraryPolicy,
    /// The configuration without any point's keys, loaded on first use (after the host has
    /// set the fields above): a point that changes no file, stack or library is this with its
    /// keys merged on top ([`Config::with_sets`]), its files not read again.
    base: std::sync::Arc<std::sync::OnceLock<Config>>,
}

fn bad(path: &Path, message: impl Into<String>) -> SearchError {
    SearchError::File {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Every leaf key path of a JSON value (`a.b.c`; arrays as leaves).
fn leaf_keys(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_keys(x, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// The keys of `cfg` nearest to `key` (at most 5, by edit distance).
pub fn near_keys(cfg: &Config, key: &str) -> Vec<String> {
    let v = serde_json::to_value(cfg.value()).unwrap_or(serde_json::Value::Null);
    let mut keys = Vec::new();
    leaf_keys(&v, "", &mut keys);
    let limit = (key.len() / 2).max(3);
    perfcast_core::suggest::closest(key, keys.iter().map(String::as_str), 5, Some(limit))
        .into_iter()
        .map(String::from)
        .collect()
}

fn set_arg(key: &str, v: &toml::Value) -> Result<String, String> {
    let json = serde_json::to_string(v).map_err(|e| e.to_string())?;
    Ok(format!("{key}={json}"))
}

impl Sweep {
    /// Read and check a sweep file (not its keys: see [`Sweep::check_keys`]); its points
    /// resolve their components in `plugins`.
    pub fn load(path: &Path, plugins: &Plugins) -> Result<Sweep, SearchError> {
        let text = perfcast_config::input::read_text(path, perfcast_config::input::MAX_TEXT_BYTES)
            .map_err(|e| bad(path, format!("cannot read the sweep file: {e}")))?;
        let file: SweepFile = toml::from_str(&text).map_err(|e| bad(path, e.to_string()))?;
        if file.configs.is_empty() {
            return Err(bad(path, "`configs` must list at least one config file"));
        }
        if !(file.max_seconds.is_finite() && file.max_seconds > 0.0) {
            return Err(bad(
                path,
                format!(
                    "`max_seconds` = {} must be a positive number",
                    file.max_seconds
                ),
            ));
        }
        let (keys, points) = match (&file.grid, &file.points) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(bad(
                    path,
                    "give either a [grid] table or [[points]], not both or neither",
                ))
            }
            (Some(grid), None) => {
                let mut keys = Vec::new();
                let mut points: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
                for (k, v) in grid {
                    let vals = match v {
                        toml::Value::Array(a) if !a.is_empty() => a.clone(),
                        _ => {
                            return Err(bad(
                                path,
                                format!("grid.\"{k}\" must be a non-empty array of values"),
                            ))
                        }
                    };
                    keys.push(k.clone());
                    let mut next = Vec::with_capacity(points.len() * vals.len());
                    for p in &points {
                        for x in &vals {
                            let mut q = p.clone();
                            q.push((k.clone(), x.clone()));
                            next.push(q);
                        }
                    }
                    points = next;
                }
                (keys, points)
            }
            (None, Some(list)) => {
                if list.is_empty() {
                    return Err(bad(path, "[[points]] is empty"));
                }
                let mut keys: Vec<String> = Vec::new();
                for p in list {
                    for k in p.keys() {
                        if !keys.contains(k) {
                            keys.push(k.clone());
                        }
                    }
                }
                let points = list
                    .iter()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .collect();
                (keys, points)
            }
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "sweep".into());
        Ok(Sweep {
            path: path.to_path_buf(),
            name,
            file,
            keys,
            points,
            plugins: plugins.clone(),
            libraries: Vec::new(),
            plugin_host: None,
            isolate_all: false,
            policy: perfcast_config::LibraryPolicy::Named,
            base: Default::default(),
        })
    }

    fn resolve(&self, f: &str) -> PathBuf {
        if f.starts_with(perfcast_config::PRESET_SCHEME) {
            return PathBuf::from(f);
        }
        let base = self.path.parent().unwrap_or(Path::new("."));
        base.join(f)
    }

    /// The merged config of one point: the base configuration with the point's keys on top,
    /// or, for a point that names files (`include`), the stack or libraries (what a loaded
    /// configuration cannot take on: [`Config::with_sets`]), its files loaded again.
    pub fn config_of(&self, point: &[(String, toml::Value)]) -> Result<Config, SearchError> {
        let structural = point.iter().any(|(k, _)| {
            let top = k.split('.').next().unwrap_or_default();
            top == INCLUDE_KEY || top == "stack" || top == "plugins"
        });
        if structural {
            return self.load_point(point);
        }
        let base = match self.base.get() {
            Some(b) => b,
            None => {
                let b = self.load_point(&[])?;
                self.base.get_or_init(|| b)
            }
        };
        let sets: Vec<(&str, &toml::Value)> = point.iter().map(|(k, v)| (k.as_str(), v)).collect();
        Ok(base.with_values(&sets)?)
    }

    /// The merged config of one point, its files read.
    fn load_point(&self, point: &[(String, toml::Value)]) -> Result<Config, SearchError> {
        let mut files: Vec<PathBuf> = self.file.configs.iter().map(|f| self.resolve(f)).collect();
        let mut sets = Vec::new();
        for (k, v) in point {
            if k == INCLUDE_KEY {
                match v {
                    toml::Value::String(s) => files.push(self.resolve(s)),
                    other => {
                        return Err(bad(
                            &self.path,
                            format!("`{INCLUDE_KEY}` values must be config paths or preset:NAME strings, not {other}"),
                        ))
                    }
                }
            } else {
                sets.push(set_arg(k, v).map_err(|e| bad(&self.path, e))?);
            }
        }
        let mut sources = Sources::files(&self.plugins, files)
            .with_sets(sets)
            .with_libraries(self.libraries.iter().cloned())
            .without_env();
        sources.sections.push(SECTION);
        sources.plugin_host.clone_from(&self.plugin_host);
        sources.isolate_all = self.isolate_all;
        sources.policy = self.policy;
        Ok(Config::load(&sources)?)
    }

    /// Every swept key must exist in the merged base config (a typo would otherwise add a
    /// new, ignored or rejected, key): the error lists the nearest existing keys.
    pub fn check_keys(&self) -> Result<(), SearchError> {
        let base = self.config_of(&[])?;
        for k in &self.keys {
            if k == INCLUDE_KEY || base.contains(k) {
                continue;
            }
            let near = near_keys(&base, k);
            let hint = if near.is_empty() {
                "no similar key".to_string()
            } else {
                format!("did you mean: {}", near.join(", "))
            };
            return Err(SearchError::Invalid {
                key: k.clone(),
                message: format!(
                    "not a key of the merged config of {} ({hint})",
                    self.path.display()
                ),
            });
        }
        Ok(())
    }
}

/// One point's outcome.
#[derive(Debug, Clone)]
pub struct PointResult {
    pub values: Vec<String>,
    pub devices: u32,
    pub time_s: f64,
    pub mfu: f64,
    pub tokens_per_s: f64,
    pub memory_gib: f64,
    pub fits: bool,
    pub plan: TrainingPlan,
    /// Order of the mesh axes on the devices (`tp-cp-pp-dp`).
    pub placement: String,
    pub evaluated: u64,
    pub seconds: f64,
}

/// CSV header of a sweep's rows.
pub fn csv_header(keys: &[String]) -> String {
    let mut cols: Vec<String> = keys.iter().map(|k| csv_cell(k)).collect();
    for c in [
        "devices",
        "time_s",
        "mfu",
        "tokens_per_s",
        "memory_gib",
        "fits",
    ] {
        cols.push(c.to_string());
    }
    cols.extend(crate::PLAN_COLUMNS.iter().map(|(c, _)| c.to_string()));
    for c in ["placement", "plans_evaluated", "seconds"] {
        cols.push(c.to_string());
    }
    cols.join(",") + "\n"
}

impl PointResult {
    pub fn csv_row(&self) -> String {
        let p = &self.plan;
        let mut cols: Vec<String> = self.values.iter().map(|v| csv_cell(v)).collect();
        cols.extend([
            self.devices.to_string(),
            format!("{}", self.time_s),
            format!("{}", self.mfu),
            format!("{}", self.tokens_per_s),
            format!("{}", self.memory_gib),
            self.fits.to_string(),
        ]);
        cols.extend(crate::plan_cells(p));
        cols.extend([
            self.placement.clone(),
            self.evaluated.to_string(),
            format!("{}", self.seconds),
        ]);
        cols.join(",") + "\n"
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Sweep {
    /// Compute one point.
    pub fn run_point(&self, i: usize) -> Result<PointResult, SearchError> {
        let start = Instant::now();
        let point = &self.points[i];
        let cfg = self.config_of(point)?;
        let sc = load_scenario(&perfcast_scenario::Scenario::training(&cfg))?;
        let values: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                point
                    .iter()
                    .find(|(pk, _)| pk == k)
                    .map(|(_, v)| value_text(v))
                    .unwrap_or_default()
            })
            .collect();
        let (plan, report, devices, evaluated, placement) = match self.file.mode {
            Mode::Evaluate => {
                let plan = sc.plan.clone().ok_or_else(|| {
                    bad(
                        &self.path,
                        "mode = \"evaluate\" needs a [plan] in the configs",
                    )
                })?;
                let t = sc
                    .trainings
                    .iter()
                    .find(|t| t.system().devices as u64 == plan.devices())
                    .unwrap_or(&sc.trainings[0]);
                let r = t.evaluate(&plan).map_err(|e| SearchError::Model {
                    context: format!("point {}", i + 1),
                    source: e,
                })?;
                (plan, r, t.system().devices, 1, Placement::MEGATRON.name())
            }
            Mode::Search => {
                let mut sc = sc;
                sc.top = 1;
                let res = sc.search().map_err(|e| match e {
                    SearchError::Empty { reason } => SearchError::Empty {
                        reason: format!("point {} ({}): {reason}", i + 1, values.join(", ")),
                    },
                    other => other,
                })?;
                let best = res
                    .plans
                    .into_iter()
                    .next()
                    .ok_or_else(|| SearchError::Empty {
                        reason: format!("point {}: no plan", i + 1),
                    })?;
                let d = best.report.devices;
                (
                    best.plan,
                    best.report,
                    d,
                    res.summary.evaluated,
                    best.placement,
                )
            }
        };
        Ok(PointResult {
            values,
            devices,
            time_s: report.iteration_time.0,
            mfu: report.mfu,
            tokens_per_s: report.tokens_per_s,
            memory_gib: report.memory.peak.gib(),
            fits: report.memory.fits,
            plan,
            placement,
            evaluated,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Run every point in order, writing the CSV header and one row per point to `out`
    /// ([`Sweep::run_range`] over all points).
    pub fn run(
        &self,
        out: &mut dyn Write,
        force: bool,
        progress: &mut dyn FnMut(usize, usize, f64),
    ) -> Result<usize, SearchError> {
        self.run_range(out, 0..self.points.len(), force, progress)
    }

    /// Run the points of `range` (0-based, end excluded: a distributed sweep's chunk),
    /// writing the CSV header and their rows, in order, to `out`. The first point is timed
    /// alone; when `points x its time` exceeds `max_seconds` the sweep stops with the estimate
    /// unless `force`. The others run on every core, a batch at a time, each batch written
    /// in order as it completes; `progress(done, total, elapsed_s)` is called after each.
    pub fn run_range(
        &self,
        out: &mut dyn Write,
        range: std::ops::Range<usize>,
        force: bool,
        progress: &mut dyn FnMut(usize, usize, f64),
    ) -> Result<usize, SearchError> {
        use rayon::prelude::*;
        self.check_keys()?;
        let n = self.points.len();
        if range.start > range.end || range.end > n {
            return Err(bad(
                &self.path,
                format!(
                    "points {}..{} are not within the sweep's {n} points (0..{n})",
                    range.start, range.end
                ),
            ));
        }
        let start = Instant::now();
        let total = range.len();
        let io = |e: std::io::Error| bad(&self.path, format!("cannot write the results: {e}"));
        let header = csv_header(&self.keys);
        let Some(first) = range.clone().next() else {
            out.write_all(header.as_bytes()).map_err(io)?;
            return Ok(0);
        };
        let r = self.run_point(first)?;
        if !force {
            let estimate = r.seconds.max(1e-3) * total as f64;
            if estimate > self.file.max_seconds {
                return Err(SearchError::Invalid {
                    key: "max_seconds".into(),
                    message: format!(
                        "the sweep has {total} points at about {:.2} s each (~{:.0} s in all), \
                         more than max_seconds = {} of {}: shrink the grid, raise max_seconds, \
                         or pass --force",
                        r.seconds,
                        estimate,
                        self.file.max_seconds,
                        self.path.display()
                    ),
                });
            }
        }
        out.write_all(header.as_bytes()).map_err(io)?;
        out.write_all(r.csv_row().as_bytes()).map_err(io)?;
        out.flush().map_err(io)?;
        progress(1, total, start.elapsed().as_secs_f64());
        // Batches of about BATCH_SECONDS each (sized from the previous one's time): small
        // enough for progress and a prompt stop, large enough that waking the threads and
        // writing a batch cost little beside the points (a batch of 8 points of 60 us each
        // spent a fifth of the sweep's CPU in the threads' hand-overs).
        const BATCH_SECONDS: f64 = 0.1;
        let least = 4 * rayon::current_num_threads().max(1);
        let mut batch = least;
        let mut done = 1;
        let rest: Vec<usize> = range.skip(1).collect();
        let mut at = 0;
        while at < rest.len() {
            let ids = &rest[at..(at + batch).min(rest.len())];
            let t = Instant::now();
            let rows: Vec<Result<PointResult, SearchError>> =
                ids.par_iter().map(|&i| self.run_point(i)).collect();
            for r in rows {
                out.write_all(r?.csv_row().as_bytes()).map_err(io)?;
            }
            out.flush().map_err(io)?;
            at += ids.len();
            done += ids.len();
            progress(done, total, start.elapsed().as_secs_f64());
            let per_point = t.elapsed().as_secs_f64() / ids.len() as f64;
            batch = ((BATCH_SECONDS / per_point.max(1e-9)) as usize).clamp(least, 1 << 16);
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_table() {
        let table = [
            ("", "", 0),
            ("abc", "abc", 0),
            ("bandwith_tbs", "bandwidth_tbs", 1),
            ("kitten", "sitting", 3),
            ("", "abc", 3),
        ];
        for (a, b, want) in table {
            assert_eq!(
                perfcast_core::suggest::edit_distance(a, b),
                want,
                "{a} / {b}"
            );
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn dir() -> PathBuf {
        static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        DIR.get_or_init(|| perfcast_testkit::tmpdir("perfcast-sweep-unit"))
            .clone()
    }

    #[test]
    fn grid_expands_first_key_outermost() {
        let p = write(
            &dir(),
            "g.toml",
            "configs = [\"x.toml\"]\n[grid]\n\"a.x\" = [1, 2]\n\"b.y\" = [\"p\", \"q\", \"r\"]\n",
        );
        let s = Sweep::load(&p, &Plugins::none()).unwrap();
        assert_eq!(s.keys, vec!["a.x", "b.y"]);
        assert_eq!(s.points.len(), 6);
        let texts: Vec<String> = s
            .points
            .iter()
            .map(|p| {
                p.iter()
                    .map(|(_, v)| value_text(v))
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect();
        assert_eq!(texts, ["1/p", "1/q", "1/r", "2/p", "2/q", "2/r"]);
        assert_eq!(s.name, "g");
        assert_eq!(
            set_arg("a.x", &toml::Value::String("s".into())).unwrap(),
            "a.x=\"s\""
        );
    }

    /// A point's configuration is the same whether its keys go on top of the loaded base or
    /// its files are read again; a point that names the stack is read again.
    #[test]
    fn a_point_on_the_base_equals_the_point_loaded() {
        let d = dir();
        write(
            &d,
            "base.toml",
            "include = [\"preset:gpt3-175b\", \"preset:dgx-a100\"]\n[system]\ndevices = 64\n\
             [plan]\ntp = 8\npp = 8\ndp = 1\nmicro_batch = 1\nglobal_batch = 64\n",
        );
        let p = write(
            &d,
            "points.toml",
            "configs = [\"base.toml\"]\n[[points]]\n\"plan.micro_batch\" = 2\n\
             \"components.a100_sxm4_80gb_hbm.bandwidth_tbs\" = 1.5\n\
             [[points]]\nstack = \"megatron-lm-2021\"\n\"plan.tp\" = 4\n[[points]]\n",
        );
        let s = Sweep::load(&p, &Plugins::none()).unwrap();
        assert_eq!(s.points.len(), 3);
        for point in &s.points {
            let fast = s.config_of(point).unwrap();
            let read = s.load_point(point).unwrap();
            assert_eq!(fast.value(), read.value(), "{point:?}");
            assert_eq!(fast.layers(), read.layers(), "{point:?}");
        }
        assert!(s.base.get().is_some());
    }

    #[test]
    fn bad_sweep_files() {
        // (file text, words the error must contain)
        let table = [
            ("configs = []\n[grid]\na = [1]\n", "at least one config"),
            ("configs = [\"x\"]\n", "either a [grid]"),
            ("configs = [\"x\"]\n[grid]\na = 1\n", "non-empty array"),
            (
                "configs = [\"x\"]\n[[points]]\n[grid]\na = [1]\n",
                "not both",
            ),
            (
                "configs = [\"x\"]\nmax_seconds = -1\n[grid]\na = [1]\n",
                "max_seconds",
            ),
            ("configs = [\"x\"]\nwhat = 1\n[grid]\na = [1]\n", "what"),
        ];
        for (i, (text, want)) in table.into_iter().enumerate() {
            let p = write(&dir(), &format!("bad{i}.toml"), text);
            let e = Sweep::load(&p, &Plugins::none()).unwrap_err().to_string();
            assert!(e.contains(want), "case {i}: `{want}` not in {e}");
            assert!(e.contains(&format!("bad{i}.toml")), "{e}");
        }
        let e = Sweep::load(Path::new("/nonexistent/sweep.toml"), &Plugins::none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }
}
