//! `perfcast`: the command-line host, as a library: [`main`] is the binary's whole body, and
//! [`run_captured`] runs a command in process, returning what it prints (the Python package's
//! way to the same results as the command line, byte for byte).
//!
//! Adding a command is two lines here: a variant of `Command` (its `Args` type lives in the
//! command's module) and an arm in `run`. Shared things (output formats, config arguments,
//! printing, exit codes) are in `common`.

// Modules are private: the library's interface is `main` and `run_captured`.
mod cmd_calibrate;
mod cmd_config;
mod cmd_infer;
mod cmd_kernels;
mod cmd_plugins;
mod cmd_predict;
mod cmd_roofline;
mod cmd_search;
mod cmd_search_serving;
mod cmd_serve;
mod cmd_study;
mod cmd_sweep;
mod cmd_validate;
mod common;
mod error_bars;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;

/// perfcast: an analytical performance model for distributed LLM training and inference.
#[derive(Debug, Parser)]
#[command(name = "perfcast", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List every registered plugin: category, name, origin, version, ABI.
    Plugins(cmd_plugins::Args),
    /// Per-op roofline: the config's `[[ops]]` on its device, or a model's GEMMs (`--phase`).
    Roofline(cmd_roofline::Args),
    /// Inspect configurations.
    #[command(subcommand)]
    Config(cmd_config::Command),
    /// Predicted vs published measurements of a validation cases file, MAPE per group.
    Validate(cmd_validate::Args),
    /// Fit named shared parameters to a cases file, with cross-validation; write the layer.
    Calibrate(cmd_calibrate::Args),
    /// Run one of the seed paper's studies (CSV, SVG, summary); `--list` lists them.
    Study(cmd_study::Args),
    /// Predict one training step: time, throughput, MFU/HFU, breakdown, memory per stage.
    Predict(cmd_predict::Args),
    /// Predict serving: TTFT, time per output token, throughput, memory; `--max-batch`.
    Infer(cmd_infer::Args),
    /// The best training plans for the config's model and system, and their Pareto front.
    Search(cmd_search::Args),
    /// A grid over config keys (hardware included), each point evaluated or searched.
    Sweep(cmd_sweep::Args),
    /// Serving under load (continuous batching, paged KV cache): latency, throughput, goodput.
    Serve(cmd_serve::Args),
    /// Kernel tables timed on silicon: import (AIConfigurator's layout, a vendor's CSV or
    /// Parquet), list, show.
    #[command(subcommand)]
    Kernels(cmd_kernels::Command),
    /// Shell completion script (bash, zsh, fish, elvish, powershell) on standard output, e.g.
    /// `perfcast completions bash > ~/.local/share/bash-completion/completions/perfcast`.
    Completions(CompletionsArgs),
    /// The manual page perfcast(1) in roff on standard output (`| man -l -`); with `--out DIR`,
    /// one page per command into DIR (perfcast.1, perfcast-predict.1, ...).
    Man(ManArgs),
    /// Serve a plugin library on stdin/stdout for an isolated load (`--isolate`); started by
    /// perfcast itself, not by hand.
    PluginHost(PluginHostArgs),
}

#[derive(Debug, clap::Args)]
struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
struct ManArgs {
    /// Write a page per command into this directory (created if needed).
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
}

/// `perfcast completions SHELL`.
fn completions(a: CompletionsArgs) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "perfcast", &mut buf);
    common::print(&String::from_utf8_lossy(&buf))
}

/// `perfcast man [--out DIR]`.
fn man(a: ManArgs) -> anyhow::Result<()> {
    let cmd = Cli::command();
    match a.out {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| anyhow::anyhow!("cannot create `{}`: {e}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir).map_err(|e| {
                anyhow::anyhow!("cannot write the pages into `{}`: {e}", dir.display())
            })?;
            common::print(&format!("wrote the manual pages into {}\n", dir.display()))
        }
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut buf)
                .map_err(|e| anyhow::anyhow!("cannot render the manual page: {e}"))?;
            common::print(&String::from_utf8_lossy(&buf))
        }
    }
}

#[derive(Debug, clap::Args)]
struct PluginHostArgs {
    /// The plugin library to serve.
    path: std::path::PathBuf,
    /// Its sha256 pin, checked on the file opened (and loaded) here.
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Plugins(a) => cmd_plugins::run(a),
        Command::Roofline(a) => cmd_roofline::run(a),
        Command::Config(c) => cmd_config::run(c),
        Command::Validate(a) => cmd_validate::run(a),
        Command::Calibrate(a) => cmd_calibrate::run(a),
        Command::Study(a) => cmd_study::run(a),
        Command::Search(a) => cmd_search::run(a),
        Command::Sweep(a) => cmd_sweep::run(a),
        Command::Predict(a) => cmd_predict::run(a),
        Command::Infer(a) => cmd_infer::run(a),
        Command::Serve(a) => cmd_serve::run(a),
        Command::Kernels(c) => cmd_kernels::run(c),
        Command::Completions(a) => completions(a),
        Command::Man(a) => man(a),
        Command::PluginHost(a) => perfcast_config::isolate::serve(&a.path, a.sha256.as_deref())
            .map_err(anyhow::Error::msg),
    }
}

/// The `perfcast` binary: parse the command line, run the command, map the outcome to the
/// exit code.
pub fn main() -> ExitCode {
    ExitCode::from(main_with(std::env::args_os()))
}

/// The `perfcast` command line `ARGS` (the program name first), run as the binary runs it
/// (output to this process's standard output and error, a panic reported as a bug); the
/// exit code. For hosts embedding the command line (`python -m perfcast`).
pub fn main_with<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    common::install_panic_hook();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return common::usage_error(e),
    };
    // A plugin host is ended by its parent, with nothing of its own to clean up.
    if !matches!(cli.command, Command::PluginHost(_)) {
        common::remove_files_on_signals();
    }
    // Tables fit the terminal standard output is (a record per row when too wide); piped or
    // redirected output keeps its columns.
    if std::io::stdout().is_terminal() {
        perfcast_render::set_terminal_width(
            terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)),
        );
    }
    common::finish(std::panic::catch_unwind(|| run(cli)))
}

pub use common::{set_plugin_host, Failure, FailureKind};

/// A configuration loaded once (its files read, its libraries loaded and checked), on which
/// many commands run ([`Loaded::run_captured`]) without reading or loading again: the Python
/// package's `Scenario`.
pub struct Loaded {
    cfg: std::sync::Arc<perfcast_config::Config>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded").finish_non_exhaustive()
    }
}

/// Load `CONFIG... [--set KEY=VALUE]... [--load PATH [--sha256 HEX]]...` as `predict` does
/// (every section of the experiment files, the model and plans checked before any library
/// loads).
pub fn load<S: AsRef<str>>(args: &[S]) -> Result<Loaded, Failure> {
    let usage = |message: String| Failure {
        kind: FailureKind::Usage,
        message,
        output: String::new(),
    };
    let argv = ["perfcast", "config", "explain"]
        .into_iter()
        .chain(args.iter().map(AsRef::as_ref));
    let Command::Config(cmd_config::Command::Explain(a)) = Cli::try_parse_from(argv)
        .map_err(|e| usage(e.to_string().trim_end().to_string()))?
        .command
    else {
        return Err(usage("not a configuration".into()));
    };
    let loaded = std::panic::catch_unwind(|| {
        cmd_predict::sources(&a.config).and_then(|s| common::load_config(&s))
    });
    match loaded {
        Ok(Ok(cfg)) => Ok(Loaded {
            cfg: std::sync::Arc::new(cfg),
        }),
        Ok(Err(e)) => Err(Failure {
            kind: FailureKind::of(&e),
            message: common::error_text(&e),
            output: String::new(),
        }),
        Err(_) => Err(Failure {
            kind: FailureKind::Internal,
            message: "internal error (a bug in perfcast, please report it) while loading".into(),
            output: String::new(),
        }),
    }
}

impl Loaded {
    /// [`run_captured`] on this configuration: the command's own configuration argument is
    /// not read (give any placeholder, e.g. `-`), its `--set`s go on top of this one, and it
    /// may not `--load` libraries (they were loaded with the configuration).
    pub fn run_captured<S: AsRef<str>>(&self, args: &[S]) -> Result<String, Failure> {
        if args.iter().any(|a| a.as_ref() == "--load") {
            return Err(Failure {
                kind: FailureKind::Usage,
                message: "a loaded configuration has its libraries: `--load` belongs to the load"
                    .into(),
                output: String::new(),
            });
        }
        common::with_preloaded(&self.cfg, || run_captured(args))
    }
}

/// Run `perfcast ARGS...` (without the program name) in this process and return what it
/// printed on standard output; a failure carries its kind, the message the command line
/// prints after `error: ` (with its causes) and what was printed before it failed (e.g. the
/// report of a plan that does not fit). Warnings still go to standard error. Commands run on
/// the calling thread; several threads may run commands at once.
pub fn run_captured<S: AsRef<str>>(args: &[S]) -> Result<String, Failure> {
    let argv = std::iter::once("perfcast").chain(args.iter().map(AsRef::as_ref));
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            return Err(Failure {
                kind: FailureKind::Usage,
                message: e.to_string().trim_end().to_string(),
                output: String::new(),
            })
        }
    };
    if let Command::PluginHost(_) = cli.command {
        return Err(Failure {
            kind: FailureKind::Usage,
            message: "`plugin-host` serves a library on this process's stdin/stdout: it is started by perfcast, not run in process".into(),
            output: String::new(),
        });
    }
    // A validation command's input errors are about its cases file.
    let validation = matches!(cli.command, Command::Validate(_) | Command::Calibrate(_));
    common::capture(|| std::panic::catch_unwind(|| run(cli))).map_err(|mut f| {
        if validation && matches!(f.kind, FailureKind::Config | FailureKind::Other) {
            f.kind = FailureKind::Validation;
        }
        f
    })
}
