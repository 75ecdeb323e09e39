//! Error bars: an interval for every predicted time or rate, from the cross-validated
//! residuals of comparable cases.
//!
//! **Residuals** are data (`configs/validation/residuals.toml`, embedded in the binary;
//! schema [`SCHEMA`]): `perfcast calibrate --residuals FILE` writes, for every case it scored,
//! the case's first published metric as predicted *out of fold* (by the parameters fitted
//! without the case's group, or without the case for `--cv cases`) and as measured. A
//! residual is `r = ln(predicted time / measured time)`, a rate's ratio inverted
//! ([`Direction`]), so residuals of iteration times, latencies, tokens/s and MFU are on one
//! scale: `r > 0` means the model predicted a longer time (a lower rate) than was measured.
//!
//! **Comparable** cases share a [`Class`]: the kind (training or inference), the software
//! stack's `family` (a case's: the stack its `software` maps to, `configs/validation/
//! stacks.toml`; a configuration's: the stack it names) and the hardware generation
//! ([`generation`]). The
//! interval of a prediction uses the first of these sets with enough residuals for the
//! level's order statistics ([`min_residuals`]: 9 for 80%):
//!
//! 1. same kind, stack family and generation;
//! 2. same kind and stack family (any generation);
//! 3. same kind and generation (any stack);
//! 4. same kind (the broadest class of a kind);
//! 5. every residual.
//!
//! A prediction without a stack (a config that names none) skips 1 and 2; one whose hardware
//! generation is not known skips 1 and 3. A stack family or a generation that is *known* but
//! that no residual of the kind has is a prediction outside what was validated: it gets the
//! broadest class (4, else 5) and the interval says so.
//!
//! **Interval**: with the class's residuals sorted, the measured value of a new case lies
//! below the k-th smallest with probability k/(n+1) (exchangeability), so the bounds are the
//! residuals' quantiles at (1 ∓ level)/2 at position p(n+1) (Hyndman and Fan 1996, type 6):
//! `measured time ∈ [predicted x exp(-q_hi), predicted x exp(-q_lo)]`. A class is biased when
//! its residuals are: the interval is then not centred on the prediction.

use crate::cases::{Case, Kind, Metric};
use crate::presets::ACCELERATORS;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// Schema name of a residuals file.
pub const SCHEMA: &str = "perfcast-residuals/1";

/// The residuals shipped with perfcast (`configs/validation/residuals.toml`).
pub const EMBEDDED: &str = perfcast_assets::validation::RESIDUALS;

/// The default interval level.
pub const DEFAULT_LEVEL: f64 = 0.8;

/// How a metric relates to time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A duration (or a cost proportional to one): larger is slower.
    Time,
    /// A rate (throughput, FLOP/s, utilisation): larger is faster.
    Rate,
}

/// The direction of a schema metric; `None` for memory, which gets no interval (its errors
/// are not those of the time model).
pub fn direction(m: Metric) -> Option<Direction> {
    use Metric::*;
    match m {
        IterationTimeS
        | LayerFwdMs
        | LayerBwdMs
        | TtftMs
        | TpotMs
        | LatencyS
        | TimeToTrainMin
        | GpuHoursPerTrillionTokens => Some(Direction::Time),
        TokensPerSPerGpu | TokensPerS | TflopsPerGpu | Mfu | Hfu | RequestsPerS => {
            Some(Direction::Rate)
        }
        MemoryGibPerGpu => None,
    }
}

/// The direction of a scored metric's name (a schema name or `layer_fwd_ms+layer_bwd_ms`).
pub fn direction_of_name(name: &str) -> Option<Direction> {
    if name == "layer_fwd_ms+layer_bwd_ms" {
        return Some(Direction::Time);
    }
    Metric::ALL
        .into_iter()
        .find(|m| m.name() == name)
        .and_then(direction)
}

/// The accelerator catalog, parsed once (every prediction with error bars asks it).
fn catalog() -> Option<&'static toml::Table> {
    static CATALOG: std::sync::OnceLock<Option<toml::Table>> = std::sync::OnceLock::new();
    CATALOG
        .get_or_init(|| toml::from_str(ACCELERATORS).ok())
        .as_ref()
}

/// The hardware generation of a catalog accelerator id: the first word of its catalog
/// `arch` (`Ampere GA100` -> `Ampere`, `Blackwell Ultra (2 dies)` -> `Blackwell`), with a
/// version word kept (`TPU v5e`, `Gaudi 3`). `None` for an id not in the catalog.
pub fn generation(accelerator: &str) -> Option<String> {
    let cat = catalog()?;
    let arch = cat
        .get("gpu")?
        .as_array()?
        .iter()
        .find(|g| g.get("id").and_then(|i| i.as_str()) == Some(accelerator))?
        .get("arch")?
        .as_str()?;
    let mut words = arch.split_whitespace();
    let first = words.next()?.trim_end_matches(',');
    let version = words.next().filter(|w| {
        let w = w.strip_prefix('v').unwrap_or(w);
        w.chars().next().is_some_and(|c| c.is_ascii_digit())
    });
    Some(match version {
        Some(v) => format!("{first} {v}"),
        None => first.to_string(),
    })
}

/// The catalog accelerator a device's compute component is, if any: the component's name
/// or its `name` parameter names a catalog id (`h100_sxm5_80gb`, `NVIDIA H100-SXM5-80GB`;
/// case, `-` and `_` ignored; the longest id found).
pub fn catalog_id(component: &str, display_name: Option<&str>) -> Option<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let cat = catalog()?;
    let ids: Vec<&str> = cat
        .get("gpu")?
        .as_array()?
        .iter()
        .filter_map(|g| g.get("id").and_then(|i| i.as_str()))
        .collect();
    if let Some(id) = ids.iter().find(|id| norm(id) == norm(component)) {
        return Some(id.to_string());
    }
    let name = norm(display_name?);
    ids.into_iter()
        .filter(|id| name.contains(&norm(id)))
        .max_by_key(|id| id.len())
        .map(str::to_string)
}

/// What makes cases comparable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// Training or inference.
    pub kind: Kind,
    /// The stack's family (`configs/stacks/`: `family`); `None` when no stack is known.
    pub stack: Option<String>,
    /// The hardware generation ([`generation`]); `None` when not known.
    pub generation: Option<String>,
}

impl Class {
    /// The class of a validation case: its kind, `family` (of the stack its `software` maps
    /// to: [`crate::stacks::StackTable::of`]), the generation of its accelerator.
    pub fn of_case(case: &Case, family: &str) -> Class {
        Class {
            kind: case.kind,
            stack: Some(family.to_string()),
            generation: generation(&case.system.gpu),
        }
    }

    /// The class of a prediction from the resolved scenario `sc`: `kind`; the family of the
    /// stack its configuration names (`stack = "NAME"`; the name when the stack has no
    /// family), none when it names no stack; the generation of `device.generation` when set,
    /// else of the catalog accelerator its compute unit is ([`catalog_id`]).
    pub fn of_scenario(sc: &perfcast_scenario::Scenario, kind: Kind) -> Class {
        let cfg = sc.config();
        let text = |key: &str| cfg.extract_opt::<String>(key).ok().flatten();
        let stack = text("stack").map(|name| {
            sc.stack()
                .ok()
                .map(|s| s.family.clone())
                .filter(|f| !f.is_empty())
                .unwrap_or(name)
        });
        // `hopper` shown as the catalog spells it (`Hopper`); matching ignores case anyway.
        let capitalised = |g: String| {
            let mut c = g.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or(g)
        };
        let generation = text("device.generation").map(capitalised).or_else(|| {
            let compute = text("device.compute")?;
            let name = text(&format!("components.{compute}.name"));
            generation(&catalog_id(&compute, name.as_deref())?)
        });
        Class {
            kind,
            stack,
            generation,
        }
    }
}

/// The device of scenario `sc` when it is no accelerator of the catalog
/// (`configs/validation/accelerators.toml`): an imagined one, or a plugin's. Its name (the
/// compute component's `name`, else its key). Error bars on it come from measured GPUs of its
/// class, which do not describe it. A device is the catalog's when its component key or its
/// display name names a catalog accelerator ([`catalog_id`]).
pub fn unmeasured_device(sc: &perfcast_scenario::Scenario) -> Option<String> {
    let cfg = sc.config();
    let text = |key: &str| cfg.extract_opt::<String>(key).ok().flatten();
    let compute = text("device.compute")?;
    let name = text(&format!("components.{compute}.name"));
    match catalog_id(&compute, name.as_deref()) {
        Some(_) => None,
        None => Some(name.unwrap_or(compute)),
    }
}

/// A residuals file's `[meta]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// [`SCHEMA`].
    pub schema: String,
    /// The cases file the residuals come from.
    #[serde(default)]
    pub cases_file: Option<String>,
    /// Its sha256.
    #[serde(default)]
    pub cases_sha256: Option<String>,
    /// When they were computed (UTC date).
    #[serde(default)]
    pub date: Option<String>,
    /// The cross-validation scheme (`groups` or `cases`).
    #[serde(default)]
    pub cv: Option<String>,
    /// The parameters fitted, `key=lo..hi`.
    #[serde(default)]
    pub params: Vec<String>,
}

/// One out-of-fold prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Residual {
    /// Case id.
    pub case: String,
    /// Its group.
    pub group: String,
    /// Its kind.
    pub kind: Kind,
    /// Its stack family, if known.
    #[serde(default)]
    pub stack: Option<String>,
    /// Its hardware generation, if known.
    #[serde(default)]
    pub generation: Option<String>,
    /// The metric scored (a schema name or `layer_fwd_ms+layer_bwd_ms`).
    pub metric: String,
    /// Predicted out of fold.
    pub predicted: f64,
    /// Measured.
    pub measured: f64,
    /// The cross-validation that held the case out (`groups`, `stacks`, `hardware`,
    /// `cases`); absent: the file's `meta.cv`.
    #[serde(default)]
    pub cv: Option<String>,
}

impl Residual {
    /// `ln(predicted time / measured time)` (a rate's ratio inverted); `None` for a metric
    /// without a direction or a non-positive value.
    pub fn log_time_ratio(&self) -> Option<f64> {
        let d = direction_of_name(&self.metric)?;
        if !(self.predicted > 0.0 && self.measured > 0.0) {
            return None;
        }
        let r = (self.predicted / self.measured).ln();
        Some(match d {
            Direction::Time => r,
            Direction::Rate => -r,
        })
        .filter(|r| r.is_finite())
    }
}

/// A residuals file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Residuals {
    /// Provenance.
    pub meta: Meta,
    /// The residuals.
    #[serde(default, rename = "residual")]
    pub residuals: Vec<Residual>,
}

/// The interval a prediction gets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// The level (e.g. 0.8).
    pub level: f64,
    /// Measured time / predicted time at the low end.
    pub low: f64,
    /// Measured time / predicted time at the high end.
    pub high: f64,
    /// Residuals behind it.
    pub residuals: usize,
    /// The class used, in words.
    pub class: String,
    /// Why a broader class than the prediction's own was used, if one was.
    pub note: Option<String>,
}

impl Interval {
    /// The interval of a predicted `value` of a metric of direction `d`.
    pub fn around(&self, value: f64, d: Direction) -> [f64; 2] {
        match d {
            Direction::Time => [value * self.low, value * self.high],
            Direction::Rate => [value / self.high, value / self.low],
        }
    }
}

/// Residuals needed for an interval of `level`: the upper bound's position p(n+1), p = (1 +
/// level)/2, must not pass the largest residual, so n >= p/(1 - p) (9 for 80%, 19 for 90%).
pub fn min_residuals(level: f64) -> usize {
    let p = (1.0 + level) / 2.0;
    (p / (1.0 - p) - 1e-9).ceil().max(1.0) as usize
}

/// Check an interval level: a fraction strictly between 0 and 1.
pub fn check_level(level: f64) -> Result<f64> {
    if level.is_finite() && level > 0.0 && level < 1.0 {
        Ok(level)
    } else {
        Err(Error::Level { level })
    }
}

/// The type-6 quantile of sorted `x` at probability `p`.
fn quantile(x: &[f64], p: f64) -> f64 {
    let n = x.len();
    let h = p * (n as f64 + 1.0);
    if h <= 1.0 {
        return x[0];
    }
    if h >= n as f64 {
        return x[n - 1];
    }
    let i = h.floor() as usize;
    x[i - 1] + (h - i as f64) * (x[i] - x[i - 1])
}

impl Residuals {
    /// The shipped residuals ([`EMBEDDED`]).
    pub fn embedded() -> Result<Residuals> {
        // Parsed once: every prediction with error bars reads them.
        static PARSED: std::sync::OnceLock<Result<Residuals>> = std::sync::OnceLock::new();
        PARSED.get_or_init(Residuals::built_in).clone()
    }

    /// The shipped residuals from their rows as the build compiled them
    /// (`perfcast_assets::validation::RESIDUAL_ROWS`; a unit test holds them equal to
    /// [`EMBEDDED`] parsed), and `[meta]` parsed from the text before them.
    fn built_in() -> Result<Residuals> {
        const FILE: &str = "configs/validation/residuals.toml (built in)";
        let head = EMBEDDED.split("\n[[residual]]").next().unwrap_or_default();
        let mut r = Residuals::parse(head, FILE)?;
        for &(case, group, kind, stack, generation, metric, predicted, measured, cv) in
            perfcast_assets::validation::RESIDUAL_ROWS
        {
            let kind = match kind {
                "training" => Kind::Training,
                "inference" => Kind::Inference,
                other => {
                    return Err(Error::File {
                        file: FILE.to_string(),
                        message: format!("residual of case `{case}`: unknown kind `{other}`"),
                    })
                }
            };
            r.residuals.push(Residual {
                case: case.to_string(),
                group: group.to_string(),
                kind,
                stack: stack.map(str::to_string),
                generation: generation.map(str::to_string),
                metric: metric.to_string(),
                predicted,
                measured,
                cv: cv.map(str::to_string),
            });
        }
        r.check(FILE)?;
        Ok(r)
    }

    /// Read a residuals file.
    pub fn load(path: &Path) -> Result<Residuals> {
        let file = path.display().to_string();
        let text = crate::error::read(path, &file)?;
        Residuals::parse(&text, &file)
    }

    /// Parse a residuals file; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<Residuals> {
        let refused = |message: String| Error::File {
            file: file.to_string(),
            message,
        };
        let r: Residuals =
            toml::from_str(text).map_err(|e| refused(e.to_string().trim_end().to_string()))?;
        r.check(file)?;
        Ok(r)
    }

    /// The schema is this build's and every residual has a time or rate metric and positive
    /// finite values.
    fn check(&self, file: &str) -> Result<()> {
        let refused = |message: String| Error::File {
            file: file.to_string(),
            message,
        };
        let r = self;
        if r.meta.schema != SCHEMA {
            return Err(refused(format!(
                "meta.schema = \"{}\": expected \"{SCHEMA}\"",
                r.meta.schema
            )));
        }
        for (i, x) in r.residuals.iter().enumerate() {
            if x.log_time_ratio().is_none() {
                return Err(refused(format!(
                    "residual #{} (case `{}`): metric `{}` with predicted {} and measured {}: needs a time or rate metric and positive finite values",
                    i + 1,
                    x.case,
                    x.metric,
                    x.predicted,
                    x.measured
                )));
            }
        }
        Ok(())
    }

    /// The file's text: a header comment, `[meta]`, one `[[residual]]` per case.
    pub fn to_toml(&self, header: &str) -> Result<String> {
        let body = toml::to_string(self)?;
        let mut s = String::new();
        for l in header.lines() {
            let _ = writeln!(s, "# {l}");
        }
        s.push('\n');
        s.push_str(&body);
        Ok(s)
    }

    /// The cross-validation a residual comes from: its own `cv`, else the file's (its first
    /// scheme), else `groups`.
    fn scheme_of<'a>(&'a self, r: &'a Residual) -> &'a str {
        r.cv.as_deref()
            .or_else(|| self.meta.cv.as_deref().and_then(|c| c.split(',').next()))
            .unwrap_or("groups")
    }

    /// The residuals of scheme `scheme` (`None`: every residual), with their log time ratios.
    fn of_scheme(&self, scheme: Option<&str>) -> Vec<(&Residual, f64)> {
        self.residuals
            .iter()
            .filter(|r| scheme.is_none_or(|s| self.scheme_of(r) == s))
            .filter_map(|r| r.log_time_ratio().map(|x| (r, x)))
            .collect()
    }

    /// Whether the file has residuals of `scheme`.
    fn has(&self, scheme: &str) -> bool {
        self.residuals.iter().any(|r| self.scheme_of(r) == scheme)
    }

    /// The residuals that describe predictions of a known stack on known hardware: those of
    /// leave-one-group-out (or leave-one-case-out) folds, or every residual of a file with
    /// neither.
    fn known(&self) -> Vec<(&Residual, f64)> {
        for s in ["groups", "cases"] {
            if self.has(s) {
                return self.of_scheme(Some(s));
            }
        }
        self.of_scheme(None)
    }

    /// The interval of `level` for a prediction of class `class`, leaving out the residuals
    /// of group `exclude_group` and of case `exclude_case` (validate: a case's interval does
    /// not use its own group). `None` when there are too few residuals even overall.
    ///
    /// A prediction whose stack family no residual of its kind has (or that names none) is a
    /// framework no rule knows: its interval comes from the leave-one-stack-family-out
    /// residuals (cases predicted on the fallback stack) when the file has them; one whose
    /// hardware generation none has, from the leave-one-generation-out residuals; otherwise
    /// from the leave-one-group-out residuals of the classes below.
    pub fn interval(
        &self,
        class: &Class,
        level: f64,
        exclude_group: Option<&str>,
        exclude_case: Option<&str>,
    ) -> Option<Interval> {
        fn without<'r>(
            pool: Vec<(&'r Residual, f64)>,
            group: Option<&str>,
            case: Option<&str>,
        ) -> Vec<(&'r Residual, f64)> {
            pool.into_iter()
                .filter(|(r, _)| group != Some(r.group.as_str()))
                .filter(|(r, _)| case != Some(r.case.as_str()))
                .collect()
        }
        let keep = |pool| without(pool, exclude_group, exclude_case);
        let known = keep(self.known());
        let seen =
            |f: &dyn Fn(&Residual) -> bool| known.iter().any(|(r, _)| r.kind == class.kind && f(r));
        let stack_known = class
            .stack
            .as_deref()
            .is_some_and(|s| seen(&|r| same(r.stack.as_deref(), s)));
        let gen_known = class
            .generation
            .as_deref()
            .is_some_and(|g| seen(&|r| same(r.generation.as_deref(), g)));
        if !stack_known && self.has("stacks") {
            let c = Class {
                stack: None,
                ..class.clone()
            };
            let why = match &class.stack {
                Some(s) => format!("stack {s} not in the residuals"),
                None => "no stack given".to_string(),
            };
            return interval_in(
                keep(self.of_scheme(Some("stacks"))),
                &c,
                level,
                "predicted as an unknown stack",
                Some(why),
            );
        }
        if !gen_known && self.has("hardware") {
            let c = Class {
                generation: None,
                ..class.clone()
            };
            let why = match &class.generation {
                Some(g) => format!("hardware generation {g} not in the residuals"),
                None => "hardware generation not known".to_string(),
            };
            return interval_in(
                keep(self.of_scheme(Some("hardware"))),
                &c,
                level,
                "predicted on a held-out generation",
                Some(why),
            );
        }
        interval_in(known, class, level, "", None)
    }

    /// How many measurements the intervals of each cross-validation's residuals hold, each
    /// residual's interval drawn from the others of its scheme without what its fold held
    /// out (its group, its stack family or its generation) and classed as a prediction of
    /// that kind is (a stack no rule knows: no stack; a new generation: no generation).
    /// `(scheme, inside, scored)` per scheme in the file.
    pub fn coverage(&self, level: f64) -> Vec<(String, usize, usize)> {
        let mut schemes: Vec<&str> = Vec::new();
        for r in &self.residuals {
            let s = self.scheme_of(r);
            if !schemes.contains(&s) {
                schemes.push(s);
            }
        }
        schemes
            .into_iter()
            .map(|scheme| {
                let all = self.of_scheme(Some(scheme));
                let (mut inside, mut n) = (0, 0);
                for (r, x) in &all {
                    let held = |o: &Residual| match scheme {
                        "stacks" => o.stack == r.stack,
                        "hardware" => o.generation == r.generation,
                        "cases" => o.case == r.case,
                        _ => o.group == r.group,
                    };
                    let pool: Vec<(&Residual, f64)> =
                        all.iter().filter(|(o, _)| !held(o)).copied().collect();
                    let class = Class {
                        kind: r.kind,
                        stack: r.stack.clone().filter(|_| scheme != "stacks"),
                        generation: r.generation.clone().filter(|_| scheme != "hardware"),
                    };
                    let Some(iv) = interval_in(pool, &class, level, "", None) else {
                        continue;
                    };
                    n += 1;
                    // The measured time over the predicted: inside [low, high].
                    let ratio = (-x).exp();
                    if ratio >= iv.low && ratio <= iv.high {
                        inside += 1;
                    }
                }
                (scheme.to_string(), inside, n)
            })
            .collect()
    }
}

/// The interval of `level` for class `class` from `pool` (residuals with their log time
/// ratios): the first class of the hierarchy with enough residuals. `what` says how the pool
/// was predicted (empty for known stacks and hardware); `why` why that pool was used.
fn interval_in(
    pool: Vec<(&Residual, f64)>,
    class: &Class,
    level: f64,
    what: &str,
    why: Option<String>,
) -> Option<Interval> {
    let kind = class.kind.name();
    let kind_desc = if what.is_empty() {
        format!("{kind} cases")
    } else {
        format!("{kind} cases {what}")
    };
    let same_kind = |r: &Residual| r.kind == class.kind;
    let seen = |f: &dyn Fn(&Residual) -> bool| pool.iter().any(|(r, _)| same_kind(r) && f(r));
    let stack = class.stack.as_deref();
    let gen = class.generation.as_deref();
    let stack_seen = stack.is_some_and(|s| seen(&|r| same(r.stack.as_deref(), s)));
    let gen_seen = gen.is_some_and(|g| seen(&|r| same(r.generation.as_deref(), g)));
    let mut unseen = Vec::new();
    if let (Some(s), false) = (stack, stack_seen) {
        unseen.push(format!("stack {s}"));
    }
    if let (Some(g), false) = (gen, gen_seen) {
        unseen.push(format!("hardware generation {g}"));
    }
    // (description, member test), most specific first.
    type Test<'a> = Box<dyn Fn(&Residual) -> bool + 'a>;
    let mut levels: Vec<(String, Test)> = Vec::new();
    if unseen.is_empty() {
        if let (Some(s), Some(g)) = (stack, gen) {
            levels.push((
                format!("{kind_desc} of stack {s} on {g}"),
                Box::new(move |r: &Residual| {
                    same(r.stack.as_deref(), s) && same(r.generation.as_deref(), g)
                }),
            ));
        }
        if let Some(s) = stack {
            levels.push((
                format!("{kind_desc} of stack {s} (any hardware)"),
                Box::new(move |r: &Residual| same(r.stack.as_deref(), s)),
            ));
        }
        if let Some(g) = gen {
            levels.push((
                if what.is_empty() {
                    format!("{kind_desc} on {g} (any stack)")
                } else {
                    format!("{kind_desc} on {g}")
                },
                Box::new(move |r: &Residual| same(r.generation.as_deref(), g)),
            ));
        }
    }
    levels.push((format!("all {kind_desc}"), Box::new(|_: &Residual| true)));
    let need = min_residuals(level);
    let pick = |test: &dyn Fn(&Residual) -> bool, all_kinds: bool| -> Vec<f64> {
        let mut v: Vec<f64> = pool
            .iter()
            .filter(|(r, _)| (all_kinds || same_kind(r)) && test(r))
            .map(|(_, x)| *x)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let first_level = levels.len();
    let mut chosen = None;
    for (i, (desc, test)) in levels.iter().enumerate() {
        let v = pick(test.as_ref(), false);
        if v.len() >= need {
            chosen = Some((i, desc.clone(), v));
            break;
        }
    }
    let (index, desc, v) = match chosen {
        Some(c) => c,
        None => {
            let v = pick(&|_| true, true);
            if v.len() < need {
                return None;
            }
            (first_level, "every case".to_string(), v)
        }
    };
    let mut notes: Vec<String> = why.into_iter().collect();
    if !unseen.is_empty() {
        notes.push(format!(
            "{} not in the residuals: the broadest class",
            unseen.join(" and ")
        ));
    } else if what.is_empty() {
        if stack.is_none() {
            notes.push("no stack given".to_string());
        }
        if gen.is_none() {
            notes.push("hardware generation not known".to_string());
        }
    }
    if index > 0 && unseen.is_empty() {
        notes.push(format!("fewer than {need} residuals in narrower classes"));
    }
    let p = (1.0 - level) / 2.0;
    let q_lo = quantile(&v, p);
    let q_hi = quantile(&v, 1.0 - p);
    Some(Interval {
        level,
        low: (-q_hi).exp(),
        high: (-q_lo).exp(),
        residuals: v.len(),
        class: desc,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

/// Whether a residual's label is `want` (case-insensitive: `Hopper` and `hopper` are one
/// generation).
fn same(label: Option<&str>, want: &str) -> bool {
    label.is_some_and(|l| l.eq_ignore_ascii_case(want))
}

#[cfg(test)]
mod tests {
    /// Every shipped accelerator is the catalog's; a renamed one, or one with no name whose
    /// component key is no catalog id, is not (issue 44: bars fitted on NVIDIA runs were put
    /// on an imagined accelerator without a word).
    #[test]
    fn shipped_accelerators_are_measured_and_imagined_ones_are_not() {
        let plugins = perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new());
        let device = |files: &[&str], sets: &[&str]| {
            let cfg = perfcast_config::Config::load(
                &perfcast_config::Sources::files(&plugins, files.iter().map(|f| f.to_string()))
                    .without_env()
                    .with_sets(sets.iter().map(|s| s.to_string())),
            )
            .unwrap();
            super::unmeasured_device(&perfcast_scenario::Scenario::training(&cfg))
        };
        for (name, group) in perfcast_config::preset_groups() {
            if group == "hardware" {
                let preset = format!("preset:{name}");
                assert_eq!(device(&[&preset], &[]), None, "{name}");
            }
        }
        // A compute component of its own (its parameters do not matter here: the check reads
        // the configuration only).
        let imagined = device(
            &["preset:h100-sxm5-80gb"],
            &[
                "device.compute=\"x1\"",
                "components.x1.name=\"Imaginary X1\"",
            ],
        );
        assert_eq!(imagined.as_deref(), Some("Imaginary X1"));
        let unnamed = device(&["preset:h100-sxm5-80gb"], &["device.compute=\"npu9\""]);
        assert_eq!(unnamed.as_deref(), Some("npu9"));
    }
    use super::*;

    fn res(case: &str, group: &str, stack: &str, gen: &str, ratio: f64) -> Residual {
        Residual {
            case: case.into(),
            group: group.into(),
            kind: Kind::Training,
            stack: Some(stack.into()),
            generation: Some(gen.into()),
            metric: "iteration_time_s".into(),
            predicted: ratio,
            measured: 1.0,
            cv: None,
        }
    }

    /// With residuals of the three cross-validations, a known stack on known hardware draws
    /// on the leave-one-group-out ones, a stack no residual has (or none named) on the
    /// leave-one-stack-out ones, a generation none has on the leave-one-generation-out ones;
    /// coverage counts each scheme's own measurements, each interval without what its fold
    /// held out.
    #[test]
    fn each_kind_of_prediction_draws_on_its_own_cross_validation() {
        let mut r = Residuals {
            meta: Meta {
                schema: SCHEMA.into(),
                cv: Some("groups,stacks,hardware".into()),
                ..Meta::default()
            },
            residuals: Vec::new(),
        };
        // groups: within 1%; stacks: within 20%; hardware: within 10%.
        for (cv, spread) in [("groups", 0.01), ("stacks", 0.2), ("hardware", 0.1)] {
            for i in -10i32..=10 {
                let mut x = res(
                    &format!("c{i}"),
                    &format!("g{}", i.rem_euclid(3)),
                    if i % 2 == 0 { "megatron" } else { "torchtitan" },
                    "Hopper",
                    1.0 + spread * i as f64 / 10.0,
                );
                x.cv = Some(cv.into());
                r.residuals.push(x);
            }
        }
        let class = |s: Option<&str>, g: Option<&str>| Class {
            kind: Kind::Training,
            stack: s.map(Into::into),
            generation: g.map(Into::into),
        };
        let width = |iv: &Interval| iv.high / iv.low;
        let known = r
            .interval(&class(Some("megatron"), Some("Hopper")), 0.8, None, None)
            .unwrap();
        assert!(width(&known) < 1.03, "{known:?}");
        assert!(
            known.class.contains("megatron on Hopper"),
            "{}",
            known.class
        );
        for s in [None, Some("deepspeed")] {
            let iv = r
                .interval(&class(s, Some("Hopper")), 0.8, None, None)
                .unwrap();
            assert!(width(&iv) > 1.25, "{s:?}: {iv:?}");
            assert!(iv.class.contains("unknown stack"), "{}", iv.class);
        }
        let iv = r
            .interval(&class(Some("megatron"), Some("Blackwell")), 0.8, None, None)
            .unwrap();
        assert!(width(&iv) > 1.1 && width(&iv) < 1.25, "{iv:?}");
        assert!(iv.note.unwrap().contains("Blackwell"));
        let cov = r.coverage(0.8);
        let names: Vec<&str> = cov.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(names, ["groups", "stacks", "hardware"]);
        // Every scheme's residuals are evenly spread: most of its measurements are inside;
        // without its only generation, the hardware scheme has no interval to give.
        for (cv, inside, n) in &cov[..2] {
            assert!(
                *n == 21 && *inside >= 13 && *inside <= 19,
                "{cv}: {inside} of {n}"
            );
        }
        assert_eq!(cov[2].2, 0);
    }

    #[test]
    fn generations_and_catalog_ids() {
        assert_eq!(generation("A100-SXM4-80GB").as_deref(), Some("Ampere"));
        assert_eq!(generation("H800-SXM-80GB").as_deref(), Some("Hopper"));
        assert_eq!(generation("GB300").as_deref(), Some("Blackwell"));
        assert_eq!(generation("TPU-v5e").as_deref(), Some("TPU v5e"));
        assert_eq!(generation("Gaudi3").as_deref(), Some("Gaudi 3"));
        assert_eq!(generation("Z100"), None);
        assert_eq!(
            catalog_id("h100_sxm5_80gb", None).as_deref(),
            Some("H100-SXM5-80GB")
        );
        assert_eq!(
            catalog_id("gpu", Some("NVIDIA H100-SXM5-80GB")).as_deref(),
            Some("H100-SXM5-80GB")
        );
        assert_eq!(catalog_id("npu", Some("Acme NPU")), None);
        assert_eq!(min_residuals(0.8), 9);
        assert_eq!(min_residuals(0.9), 19);
        assert!(check_level(1.0).is_err() && check_level(0.5).is_ok());
    }

    /// Residuals ln(1 + i/100) for i in -10..=10: the 80% interval of the 21 is the type-6
    /// quantiles at 0.1 and 0.9; classes fall back when too small; unseen stacks get the
    /// broadest class; a case's own group is left out.
    #[test]
    fn intervals_from_classes() {
        let mut r = Residuals {
            meta: Meta {
                schema: SCHEMA.into(),
                ..Meta::default()
            },
            residuals: Vec::new(),
        };
        for i in -10i32..=10 {
            let g = if i % 2 == 0 { "Hopper" } else { "Ampere" };
            r.residuals.push(res(
                &format!("c{i}"),
                &format!("g{}", i.rem_euclid(3)),
                "megatron",
                g,
                1.0 + i as f64 / 100.0,
            ));
        }
        let class = |s: Option<&str>, g: Option<&str>| Class {
            kind: Kind::Training,
            stack: s.map(Into::into),
            generation: g.map(Into::into),
        };
        // 11 Hopper residuals (even i): class 1.
        let iv = r
            .interval(&class(Some("megatron"), Some("Hopper")), 0.8, None, None)
            .unwrap();
        assert_eq!(iv.residuals, 11);
        assert_eq!(iv.note, None);
        assert!(iv.class.contains("megatron on Hopper"), "{}", iv.class);
        // Sorted ratios -10, -8, ..., 10 (%); p = 0.1: h = 1.2 -> -10 + 0.2 x 2 = -9.6.
        assert!((iv.high - 1.0 / 0.904).abs() < 1e-3, "{iv:?}");
        let [lo, hi] = iv.around(10.0, Direction::Time);
        assert!(lo < 10.0 && hi > 10.0);
        let [rlo, rhi] = iv.around(10.0, Direction::Rate);
        assert!((rlo - 10.0 / iv.high).abs() < 1e-12 && (rhi - 10.0 / iv.low).abs() < 1e-12);
        // Leaving out group g0 (7 residuals) drops Hopper below 9: stack class (14).
        let iv = r
            .interval(
                &class(Some("megatron"), Some("Hopper")),
                0.8,
                Some("g0"),
                None,
            )
            .unwrap();
        assert_eq!(iv.residuals, 14);
        assert!(iv.note.as_deref().unwrap().contains("narrower"), "{iv:?}");
        // No stack: generation class.
        let iv = r
            .interval(&class(None, Some("Ampere")), 0.8, None, None)
            .unwrap();
        assert_eq!(iv.residuals, 10);
        assert!(iv.note.as_deref().unwrap().contains("no stack"));
        // Unseen generation: the broadest class, said.
        let iv = r
            .interval(&class(Some("megatron"), Some("CDNA3")), 0.8, None, None)
            .unwrap();
        assert_eq!(iv.residuals, 21);
        assert!(iv
            .note
            .as_deref()
            .unwrap()
            .contains("CDNA3 not in the residuals"));
        // Too few overall for 95%: none.
        assert!(r.interval(&class(None, None), 0.95, None, None).is_none());
        // The file round-trips and rejects a bad residual.
        let text = r.to_toml("test").unwrap();
        assert_eq!(Residuals::parse(&text, "x").unwrap(), r);
        let bad = text.replace(
            "metric = \"iteration_time_s\"",
            "metric = \"memory_gib_per_gpu\"",
        );
        assert!(Residuals::parse(&bad, "x")
            .unwrap_err()
            .to_string()
            .contains("time or rate"));
    }

    /// The shipped residuals parse and name cases of the shipped cases file, each once per
    /// cross-validation; they hold the three kinds of prediction.
    #[test]
    fn the_built_in_residual_rows_are_the_file_parsed() {
        let parsed = Residuals::parse(EMBEDDED, "residuals.toml").unwrap();
        assert_eq!(Residuals::built_in().unwrap(), parsed);
    }

    #[test]
    fn embedded_residuals_name_shipped_cases() {
        let r = Residuals::embedded().unwrap();
        let cases = perfcast_assets::validation::CASES;
        let file = crate::cases::CasesFile::parse(cases, "cases.toml").unwrap();
        assert!(r.residuals.len() >= 50, "{}", r.residuals.len());
        let mut seen = std::collections::BTreeSet::new();
        for x in &r.residuals {
            let c = file.cases.iter().find(|c| c.id == x.case);
            let c = c.unwrap_or_else(|| panic!("residual of unknown case `{}`", x.case));
            assert_eq!(
                (c.group.as_str(), c.kind),
                (x.group.as_str(), x.kind),
                "{}",
                x.case
            );
            let cv = r.scheme_of(x).to_string();
            assert!(
                seen.insert((x.case.clone(), cv.clone())),
                "{} twice in {cv}",
                x.case
            );
        }
        for cv in ["groups", "stacks", "hardware"] {
            assert!(r.has(cv), "no {cv} residuals");
        }
    }
}
