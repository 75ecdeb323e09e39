//! What every command shares: the output format and rendering (perfcast-report), the config
//! arguments, error printing and exit codes.

use anyhow::Context as _;
use perfcast_config::{Config, Plugins, Sources};
use serde::Serialize;
use std::io::Write as _;
use std::path::PathBuf;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: a model or configuration error (bad input).
pub const EXIT_ERROR: u8 = 1;
/// Exit code: bad command-line usage (clap's convention).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a bug in perfcast (a panic, reported by the hook).
pub const EXIT_INTERNAL: u8 = 101;

// The output format, tables and numbers are perfcast-render's (shared with the studies).
pub use perfcast_render::{Format, Table};

/// Config files and overrides, for every command that reads a configuration.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Config files (.toml, .yaml, .yml, .json) or built-in presets (`preset:NAME`), merged
    /// in order (later wins).
    #[arg(value_name = "CONFIG", required = true)]
    pub configs: Vec<PathBuf>,
    /// Override a value: `--set plan.tp=4` (TOML/JSON value, else a string; a key segment may
    /// be quoted, `options.strategy_params."acme/2d".x=1`). Beats files and PERFCAST_*
    /// environment variables.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set_arg)]
    pub sets: Vec<String>,
    #[command(flatten)]
    pub libraries: LoadArgs,
    #[command(flatten)]
    pub isolation: IsolationArgs,
    /// Load the `[[plugins]]` libraries of included files too (by default only the
    /// libraries of the files given here and `--load` run: loading a library runs its code).
    #[arg(long)]
    pub allow_included_plugins: bool,
}

/// Plugin libraries named on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Load a plugin shared library (in addition to the config's `[[plugins]]`; repeatable).
    #[arg(long = "load", value_name = "PATH")]
    pub load: Vec<PathBuf>,
    /// Pin the `--load` libraries by their sha256 (hex), one per `--load` in the same order:
    /// checked on the opened file, which is the one loaded.
    #[arg(long = "sha256", value_name = "HEX")]
    pub sha256: Vec<String>,
}

impl LoadArgs {
    /// Each `--load` with its pin.
    pub fn specs(&self) -> anyhow::Result<Vec<perfcast_config::PluginSpec>> {
        if !self.sha256.is_empty() && self.sha256.len() != self.load.len() {
            anyhow::bail!(
                "{} --sha256 for {} --load: give one --sha256 per --load, in the same order",
                self.sha256.len(),
                self.load.len()
            );
        }
        Ok(self
            .load
            .iter()
            .enumerate()
            .map(|(i, p)| perfcast_config::PluginSpec {
                sha256: self.sha256.get(i).cloned(),
                ..p.clone().into()
            })
            .collect())
    }
}

/// How plugin libraries run: in perfcast's process (the default) or each in a child
/// `perfcast plugin-host` process.
#[derive(Debug, Clone, clap::Args)]
pub struct IsolationArgs {
    /// Run every plugin library in a child process (`perfcast plugin-host`): a library that
    /// crashes, hangs or exits becomes an error naming it and the call (per library:
    /// `isolate = true` in its `[[plugins]]` entry).
    #[arg(long)]
    pub isolate: bool,
    /// Time limit of one call of an isolated library, seconds (default 10; per library:
    /// `timeout_s`).
    #[arg(long, value_name = "SECONDS")]
    pub plugin_timeout: Option<f64>,
}

/// The command that runs an isolated library, when the program embedding perfcast is not
/// the `perfcast` executable ([`set_plugin_host`]).
static PLUGIN_HOST: std::sync::OnceLock<(PathBuf, Vec<String>)> = std::sync::OnceLock::new();

/// Run isolated libraries as `program args... PATH [--sha256 HEX]` instead of this
/// executable's `plugin-host` subcommand: for a host whose executable is not perfcast (the
/// Python package's is the interpreter, `python -m perfcast._plugin_host`), a command that
/// ends in [`crate::main_with`]`(["perfcast", "plugin-host", PATH, ...])`. The first setting stays;
/// returns whether this one took.
pub fn set_plugin_host(program: PathBuf, args: Vec<String>) -> bool {
    PLUGIN_HOST.set((program, args)).is_ok()
}

impl IsolationArgs {
    /// The plugin host: this executable's `plugin-host` subcommand, or the embedding's
    /// ([`set_plugin_host`]).
    pub fn options(&self) -> anyhow::Result<perfcast_config::isolate::IsolateOptions> {
        let (program, args) = match PLUGIN_HOST.get() {
            Some((program, args)) => (program.clone(), args.clone()),
            None => (
                std::env::current_exe().context("cannot find the perfcast executable")?,
                vec!["plugin-host".into()],
            ),
        };
        let timeout = match self.plugin_timeout {
            None => perfcast_config::isolate::DEFAULT_TIMEOUT,
            Some(t) if t.is_finite() && t > 0.0 => std::time::Duration::from_secs_f64(t.min(1e6)),
            Some(t) => {
                anyhow::bail!("invalid `--plugin-timeout {t}`: a positive number of seconds")
            }
        };
        Ok(perfcast_config::isolate::IsolateOptions {
            program,
            args,
            timeout,
        })
    }
}

fn parse_set_arg(s: &str) -> Result<String, String> {
    perfcast_config::layers::parse_set(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// The plugins this host composes every configuration from: all the built-ins (bevy's
/// `DefaultPlugins`), with the project's kernel tables (`perfcast-kernel-data`); libraries
/// come on top from `[[plugins]]` and `--load`.
pub fn plugins() -> Plugins {
    let p = Plugins::new(perfcast_builtins::DefaultPlugins::new());
    // The embedded catalog only fails on a table file named after no op, which its build
    // script cannot produce; a configuration naming a table then says the host has none.
    match perfcast_kernel_data::shared() {
        Some(k) => p.with_kernels(k),
        None => p,
    }
}

/// The loading policy `--allow-included-plugins` asks for.
pub fn library_policy(allow_included: bool) -> perfcast_config::LibraryPolicy {
    if allow_included {
        perfcast_config::LibraryPolicy::IncludedToo
    } else {
        perfcast_config::LibraryPolicy::Named
    }
}

impl ConfigArgs {
    pub fn sources(&self) -> anyhow::Result<Sources> {
        let mut s = Sources::files(&plugins(), self.configs.iter().cloned())
            .with_sets(self.sets.iter().cloned())
            .with_libraries(self.libraries.specs()?)
            .checked_by(perfcast_scenario::check_before_libraries)
            .with_policy(library_policy(self.allow_included_plugins));
        s.plugin_host = Some(self.isolation.options()?);
        s.isolate_all = self.isolation.isolate;
        Ok(s)
    }

    /// Load the configuration (files < environment < --set) with its plugin libraries.
    pub fn load(&self) -> anyhow::Result<Config> {
        load_config(&self.sources()?)
    }
}

/// Load a configuration, warning (on stderr, once per process) about the `PERFCAST_*`
/// variables it left out because they set no allowed top-level key.
pub fn load_config(sources: &Sources) -> anyhow::Result<Config> {
    if let Some(cfg) = PRELOADED.with(|p| p.borrow().as_ref().map(|c| c.with_sets(&sources.sets))) {
        return Ok(cfg?);
    }
    let cfg = Config::load(sources)?;
    warn_ignored_env(cfg.ignored_env(), &sources.sections);
    Ok(cfg)
}

/// One `warning:` line per ignored `PERFCAST_*` variable, the first time only.
pub fn warn_ignored_env(vars: &[String], sections: &[&str]) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if vars.is_empty() {
        return;
    }
    WARNED.call_once(|| {
        for v in vars {
            eprint_line(&format!(
                "warning: ignoring environment variable {v}: it sets no configuration key \
                 (PERFCAST_<SECTION>__<KEY>; sections: {})",
                sections.join(", ")
            ));
        }
    });
}

/// Write one line to stderr. A closed or broken stderr (`perfcast ... 2>&1 | true`) loses the
/// message and nothing else: the exit code still says what happened (`eprintln!` would panic
/// there, and the panic hook's own message would abort the process).
pub fn eprint_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}").and_then(|_| err.flush());
}

/// One `warning:` line on stderr per suspicious property of a device (no on-chip tier, a
/// peak or bandwidth outside the range of known devices: `perfcast_scenario::plausible`), for
/// commands whose output has no notes to carry them.
pub fn warn_hardware(
    compute: &dyn perfcast_core::ComputeUnit,
    memory: &perfcast_core::MemoryHierarchy,
) {
    for w in perfcast_scenario::plausible::hardware_warnings(compute, memory) {
        eprint_line(&format!("warning: {w}"));
    }
}

/// A `--plot` path: `.svg` or `.png` (any case), which decides the format ([`write_plot`]).
/// Checked when the arguments are read, before any work.
pub fn plot_path(s: &str) -> Result<std::path::PathBuf, String> {
    let p = std::path::PathBuf::from(s);
    match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") || e.eq_ignore_ascii_case("png") => Ok(p),
        _ => Err(format!(
            "plots are written as SVG or PNG, by the file's extension: name the file `{}` or `{}`",
            p.with_extension("svg").display(),
            p.with_extension("png").display()
        )),
    }
}

/// Write a plot drawn as `svg` to `path` (SVG, or PNG when the name ends in `.png`) and say
/// where on stderr.
pub fn write_plot(path: &std::path::Path, svg: String) -> anyhow::Result<()> {
    let png = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    let bytes = if png {
        perfcast_render::png::svg_to_png(&svg)
            .map_err(|e| anyhow::anyhow!("cannot draw the plot `{}`: {e}", path.display()))?
    } else {
        svg.into_bytes()
    };
    perfcast_render::file::write(path, bytes)
        .with_context(|| format!("cannot write the plot to `{}`", path.display()))?;
    eprint_line(&format!("wrote the plot to {}", path.display()));
    Ok(())
}

/// Write `text` to stdout; a closed pipe (`perfcast ... | head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    if captured(text.as_bytes()) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    let r = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to standard output"),
    }
}

/// Print `text`, or write it to `out` (whole or not at all) and say where on stderr.
pub fn emit(text: &str, out: Option<&std::path::Path>) -> anyhow::Result<()> {
    match out {
        None => print(text),
        Some(path) => {
            perfcast_render::file::write(path, text)
                .with_context(|| format!("cannot write `{}`", path.display()))?;
            eprint_line(&format!("wrote {}", path.display()));
            Ok(())
        }
    }
}

/// The formats of a command that writes a table of rows (`search`, `serve`): the table, JSON,
/// CSV, and the CSV's columns as typed Parquet to `--out FILE`.
pub const ROW_FORMATS: [(Format, &str); 4] = [
    (Format::Table, "Aligned columns for a terminal"),
    (Format::Json, "Pretty-printed JSON, full precision"),
    (Format::Csv, "Comma-separated values with a header line, full precision"),
    (
        Format::Parquet,
        "The CSV's columns, typed (INT64, DOUBLE, UTF-8; an empty cell is a null), written to --out FILE",
    ),
];

/// Write a result that has rows (`search`, `serve`, `validate`) in `format` to `out`, or to
/// standard output without it: JSON is `json()` serialised, the table `text()`, CSV and
/// Parquet `rows()` (Parquet only to a file, `command` naming its writer). Each form is made
/// only when it is the one asked for.
pub fn write_rows<J: Serialize>(
    format: Format,
    json: impl FnOnce() -> anyhow::Result<J>,
    text: impl FnOnce() -> String,
    rows: impl FnOnce() -> Table,
    out: Option<&std::path::Path>,
    command: &str,
    schema: &str,
) -> anyhow::Result<()> {
    match format {
        Format::Json => emit(&to_json_of(schema, &json()?)?, out),
        Format::Csv => emit(&rows().csv(), out),
        Format::Parquet => write_parquet(&rows(), out, command),
        Format::Table => emit(&text(), out),
    }
}

/// The error for `--format parquet` from a command that writes no table of rows (its
/// `--format` does not offer it, so clap refuses it first).
pub fn no_parquet() -> anyhow::Error {
    anyhow::anyhow!(
        "`--format parquet` is written by `search`, `sweep`, `validate` and `serve` (with --out)"
    )
}

/// Write `table` to `out` as Parquet ([`perfcast_render::parquet`]), whole or not at all,
/// and say where on stderr; without `out`, refuse: Parquet is binary and never goes to
/// standard output.
pub fn write_parquet(
    table: &Table,
    out: Option<&std::path::Path>,
    command: &str,
) -> anyhow::Result<()> {
    let Some(path) = out else {
        anyhow::bail!(
            "`--format parquet` writes a file: add `--out FILE` (Parquet is binary; it never goes \
             to standard output)"
        );
    };
    write_parquet_file(table, path, command)?;
    eprint_line(&format!(
        "wrote {} ({} rows, {} columns)",
        path.display(),
        table.rows.len(),
        table.headers.len()
    ));
    Ok(())
}

/// Write `table` to `path` as Parquet, whole or not at all, `created_by` naming the command.
pub fn write_parquet_file(
    table: &Table,
    path: &std::path::Path,
    command: &str,
) -> anyhow::Result<()> {
    let bytes = perfcast_render::parquet::to_parquet(
        table,
        &format!("perfcast {} {command}", env!("CARGO_PKG_VERSION")),
    )
    .map_err(anyhow::Error::msg)?;
    perfcast_render::file::write(path, bytes)
        .with_context(|| format!("cannot write `{}`", path.display()))
}

/// Pretty JSON with a trailing newline.
pub fn to_json<T: Serialize>(v: &T) -> anyhow::Result<String> {
    let mut s = serde_json::to_string_pretty(v).context("cannot serialise the report")?;
    s.push('\n');
    Ok(s)
}

/// The version of a JSON result's layout, given as its first key, `"schema":
/// "perfcast/KIND/N"`: N goes up when a field is removed or renamed or changes its unit or
/// meaning; a field added keeps it (docs/commands.md, "Output").
pub const SCHEMA_VERSION: u32 = 1;

/// `v` (a result of kind `kind`: `predict`, `infer`, `search`, ...) as pretty JSON whose
/// first key is its schema, `perfcast/KIND/SCHEMA_VERSION`.
pub fn to_json_of<T: Serialize>(kind: &str, v: &T) -> anyhow::Result<String> {
    let s = to_json(v)?;
    Ok(match s.strip_prefix("{\n") {
        Some(rest) => format!("{{\n  \"schema\": \"perfcast/{kind}/{SCHEMA_VERSION}\",\n{rest}"),
        None => s,
    })
}

/// Print `error: ...` with the cause chain (causes already in the message are not repeated).
pub fn print_error(e: &anyhow::Error) {
    eprint_line(&format!("error: {}", error_text(e)));
}

/// An error and the causes its message does not already hold, one `caused by:` line each.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    let mut last = msg.clone();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !last.contains(&c) {
            msg.push_str(&format!("\n  caused by: {c}"));
        }
        last = c;
    }
    // A value of 300 digits (`1e300` as a parser writes it out) is named, not printed.
    perfcast_core::suggest::shorten_long_numbers(&msg)
}

/// A result that cannot be had under the configuration's limits: a plan that does not fit
/// in memory (its report printed first), no deployment meeting an SLO. The command line
/// prints its message like any error; in process it is [`FailureKind::Infeasible`].
#[derive(Debug)]
pub struct Infeasible(pub String);

impl std::fmt::Display for Infeasible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Infeasible {}

/// What kind of failure a command in process ended with ([`crate::run_captured`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The command line itself: an unknown command, option or value (exit code 2).
    Usage,
    /// A configuration key, value or file: the message names it and where it came from.
    Config,
    /// A plugin library that does not load, or a plugin that fails or answers badly.
    Plugin,
    /// A validation cases file (or overlay, residuals) that cannot be used.
    Validation,
    /// A plan that does not fit, no plan in the space, no deployment meeting an SLO.
    Infeasible,
    /// Anything else (a model error naming no key, a file that cannot be written).
    Other,
    /// A bug in perfcast (a panic).
    Internal,
}

/// A command that failed in process: its kind, the message the command line prints after
/// `error: `, and what it printed before failing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    pub output: String,
}

impl FailureKind {
    /// The kind of `e`, from the first error of its chain that tells.
    pub fn of(e: &anyhow::Error) -> FailureKind {
        use perfcast_config::HostError;
        use perfcast_scenario::ScenarioError;
        let model = |m: &perfcast_core::ModelError| match m {
            perfcast_core::ModelError::Invalid { .. } => FailureKind::Config,
            perfcast_core::ModelError::Plugin(_) => FailureKind::Plugin,
            _ => FailureKind::Other,
        };
        let host = |h: &HostError| match h {
            HostError::Library { .. } => FailureKind::Plugin,
            // A plugin that fails while a component answers (a crash of an isolated one).
            HostError::Model {
                source: source @ perfcast_core::ModelError::Plugin(_),
                ..
            } => model(source),
            _ => FailureKind::Config,
        };
        let scenario = |s: &ScenarioError| match s {
            ScenarioError::Host(h) => host(h),
            ScenarioError::Model(m) => model(m),
            ScenarioError::Missing { .. } => FailureKind::Config,
        };
        for cause in e.chain() {
            if cause.downcast_ref::<Infeasible>().is_some() {
                return FailureKind::Infeasible;
            }
            if let Some(h) = cause.downcast_ref::<HostError>() {
                return host(h);
            }
            if let Some(s) = cause.downcast_ref::<ScenarioError>() {
                return scenario(s);
            }
            if let Some(s) = cause.downcast_ref::<perfcast_search::SearchError>() {
                use perfcast_search::SearchError as S;
                return match s {
                    S::Empty { .. } => FailureKind::Infeasible,
                    S::Host(h) => host(h),
                    S::Scenario(s) => scenario(s),
                    S::Model { source, .. } => model(source),
                    S::Invalid { .. } => FailureKind::Config,
                    _ => FailureKind::Other,
                };
            }
            if let Some(m) = cause.downcast_ref::<perfcast_core::ModelError>() {
                return model(m);
            }
        }
        FailureKind::Other
    }
}

thread_local! {
    /// A configuration loaded once ([`crate::Loaded`]): while a command runs on it,
    /// `load_config` hands it out with the command's `--set`s on top instead of reading the
    /// command's files.
    static PRELOADED: std::cell::RefCell<Option<std::sync::Arc<Config>>> =
        const { std::cell::RefCell::new(None) };
    /// What `print` wrote while a command runs in process ([`capture`]); `None`: standard
    /// output.
    static CAPTURED: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Append `bytes` to the capture of this thread, if one runs; whether it did.
fn captured(bytes: &[u8]) -> bool {
    CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(buf) => {
            buf.extend_from_slice(bytes);
            true
        }
        None => false,
    })
}

/// Standard output, or this thread's capture while a command runs in process (for commands
/// that stream their rows).
pub fn stdout_writer() -> Box<dyn std::io::Write> {
    struct Capture;
    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            captured(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    if CAPTURED.with(|c| c.borrow().is_some()) {
        Box::new(Capture)
    } else {
        Box::new(std::io::stdout().lock())
    }
}

/// Run `run` with `cfg` as the configuration every command loads (its `--set`s on top).
pub fn with_preloaded<T>(cfg: &std::sync::Arc<Config>, run: impl FnOnce() -> T) -> T {
    let previous = PRELOADED.with(|p| p.borrow_mut().replace(cfg.clone()));
    let out = run();
    PRELOADED.with(|p| *p.borrow_mut() = previous);
    out
}

/// Run a command with what it prints captured: its output, or its [`Failure`].
pub fn capture(
    run: impl FnOnce() -> std::thread::Result<anyhow::Result<()>>,
) -> Result<String, Failure> {
    let previous = CAPTURED.with(|c| c.borrow_mut().replace(Vec::new()));
    let outcome = run();
    let bytes = CAPTURED.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous));
    let output = String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned();
    match outcome {
        Ok(Ok(())) => Ok(output),
        Ok(Err(e)) => Err(Failure {
            kind: FailureKind::of(&e),
            message: error_text(&e),
            output,
        }),
        Err(panic) => Err(Failure {
            kind: FailureKind::Internal,
            message: format!(
                "internal error (a bug in perfcast, please report it): {}",
                panic_text(panic.as_ref())
            ),
            output,
        }),
    }
}

/// A panic is a bug: say so clearly (the process then exits with [`EXIT_INTERNAL`]).
/// What a panic said (its `&str` or `String` payload).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// When SIGINT, SIGTERM or SIGHUP ends perfcast (Ctrl-C, `kill`, a closed terminal), remove
/// its temporary and lock files first, then end as the signal does by default (exit status
/// 128 + N to the shell): a thread waits for the signal, so nothing runs in signal context.
pub fn remove_files_on_signals() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            else {
                return;
            };
            let _ = std::thread::Builder::new()
                .name("perfcast-signals".into())
                .spawn(move || {
                    if let Some(sig) = signals.forever().next() {
                        perfcast_render::file::remove_live_files();
                        let _ = signal_hook::low_level::emulate_default_handler(sig);
                        std::process::exit(128 + sig);
                    }
                });
        });
    }
}

pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = panic_text(info.payload());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprint_line(&format!(
            "error: internal error (a bug in perfcast, please report it): {msg}{at}"
        ));
    }));
}

/// Exit for a command-line usage error (help and version go to stdout with exit 0).
pub fn usage_error(e: clap::Error) -> u8 {
    let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
    let _ = e.print();
    code
}

/// Exit code of a command's outcome.
pub fn finish(outcome: std::thread::Result<anyhow::Result<()>>) -> u8 {
    match outcome {
        Ok(Ok(())) => EXIT_OK,
        Ok(Err(e)) => {
            print_error(&e);
            EXIT_ERROR
        }
        Err(_) => EXIT_INTERNAL,
    }
}

/// A spinner on standard error, shown once its command has run for a second and only when
/// standard error is a terminal (what a long command shows while it works); it goes when
/// this guard drops.
pub struct Working {
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Show `what` (e.g. "validating the cases") with a spinner and the elapsed time after a
/// second of work, on a terminal; nothing otherwise.
pub fn working(what: &str) -> Working {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return Working {
            done: None,
            thread: None,
        };
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let what = what.to_string();
    let thread = std::thread::spawn(move || {
        let wait = std::time::Duration::from_secs(1);
        if !matches!(
            rx.recv_timeout(wait),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        ) {
            return; // done within the second
        }
        let bar = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(what);
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        let _ = rx.recv();
        bar.finish_and_clear();
    });
    Working {
        done: Some(tx),
        thread: Some(thread),
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_map_to_exit_codes() {
        assert_eq!(finish(Ok(Ok(()))), EXIT_OK);
        assert_eq!(finish(Ok(Err(anyhow::anyhow!("bad input")))), EXIT_ERROR);
        // A panic (caught at the top of main) is an internal error, not a crash.
        let caught = std::panic::catch_unwind(|| -> anyhow::Result<()> { panic!("a bug") });
        assert_eq!(finish(caught), EXIT_INTERNAL);
    }
}
