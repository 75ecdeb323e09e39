//! What every command shares: output formats and rendering, the config arguments, error
//! printing and exit codes.

use anyhow::Context as _;
use clap::ValueEnum;
use perfcast_host::{Config, Sources};
use serde::Serialize;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: a model or configuration error (bad input).
pub const EXIT_ERROR: u8 = 1;
/// Exit code: bad command-line usage (clap's convention).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a bug in perfcast (a panic, reported by the hook).
pub const EXIT_INTERNAL: u8 = 101;

/// Output format of a command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    #[default]
    Table,
    /// Pretty-printed JSON, full precision.
    Json,
    /// Comma-separated values with a header line, full precision.
    Csv,
}

/// Config files and overrides, for every command that reads a configuration.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Config files (.toml, .yaml, .yml, .json) or built-in presets (`preset:NAME`), merged
    /// in order (later wins).
    #[arg(value_name = "CONFIG", required = true)]
    pub configs: Vec<PathBuf>,
    /// Override a value: `--set plan.tp=4` (TOML/JSON value, else a string). Beats files and
    /// PERFCAST_* environment variables.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set_arg)]
    pub sets: Vec<String>,
    /// Load a plugin shared library (in addition to the config's `[[plugins]]`).
    #[arg(long = "load", value_name = "PATH")]
    pub load: Vec<PathBuf>,
}

fn parse_set_arg(s: &str) -> Result<String, String> {
    perfcast_host::layers::parse_set(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

impl ConfigArgs {
    pub fn sources(&self) -> Sources {
        Sources::files(self.configs.iter().cloned())
            .with_sets(self.sets.iter().cloned())
            .with_libraries(self.load.iter().cloned())
    }

    /// Load the configuration (files < environment < --set) with its plugin libraries.
    pub fn load(&self) -> anyhow::Result<Config> {
        load_config(&self.sources())
    }
}

/// Load a configuration, warning (on stderr, once per process) about the `PERFCAST_*`
/// variables it left out because they set no allowed top-level key.
pub fn load_config(sources: &Sources) -> anyhow::Result<Config> {
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
            eprintln!(
                "warning: ignoring environment variable {v}: it sets no configuration key \
                 (PERFCAST_<SECTION>__<KEY>; sections: {})",
                sections.join(", ")
            );
        }
    });
}

/// Write `text` to stdout; a closed pipe (`perfcast ... | head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let r = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to standard output"),
    }
}

/// Pretty JSON with a trailing newline.
pub fn to_json<T: Serialize>(v: &T) -> anyhow::Result<String> {
    let mut s = serde_json::to_string_pretty(v).context("cannot serialise the report")?;
    s.push('\n');
    Ok(s)
}

/// A table rendered as aligned text or CSV.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub headers: Vec<String>,
    /// Columns aligned to the right (numbers).
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[(&str, bool)]) -> Self {
        Table {
            headers: headers.iter().map(|(h, _)| h.to_string()).collect(),
            numeric: headers.iter().map(|(_, n)| *n).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Aligned columns separated by two spaces, a dashed rule under the header.
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(n) {
                let pad = width[i].saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if self.numeric[i] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < n {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        let mut out = String::new();
        line(&self.headers, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }

    /// RFC 4180 CSV.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let cells: Vec<String> = r.iter().map(|c| csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }
}

fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

/// Four significant digits, no exponent for everyday magnitudes (`1235`, `12.35`, `0.001235`).
/// Callers only pass finite numbers (the host checks them).
pub fn num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-4..=9).contains(&mag) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - mag).clamp(0, 9) as usize;
    format!("{v:.decimals$}")
}

/// Print `error: ...` with the cause chain (causes already in the message are not repeated).
pub fn print_error(e: &anyhow::Error) {
    let mut msg = format!("error: {e}");
    let mut last = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !last.contains(&c) {
            msg.push_str(&format!("\n  caused by: {c}"));
        }
        last = c;
    }
    eprintln!("{msg}");
}

/// A panic is a bug: say so clearly (the process then exits with [`EXIT_INTERNAL`]).
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("error: internal error (a bug in perfcast, please report it): {msg}{at}");
    }));
}

/// Exit for a command-line usage error (help and version go to stdout with exit 0).
pub fn usage_error(e: clap::Error) -> ExitCode {
    let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
    let _ = e.print();
    ExitCode::from(code)
}

/// Exit code of a command's outcome.
pub fn finish(outcome: std::thread::Result<anyhow::Result<()>>) -> ExitCode {
    match outcome {
        Ok(Ok(())) => ExitCode::from(EXIT_OK),
        Ok(Err(e)) => {
            print_error(&e);
            ExitCode::from(EXIT_ERROR)
        }
        Err(_) => ExitCode::from(EXIT_INTERNAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_four_significant_digits() {
        let table = [
            (0.0, "0"),
            (1234.6, "1235"),
            (12.345, "12.35"),
            (0.0012346, "0.001235"),
            (312e12, "3.120e14"),
            (-2.5, "-2.500"),
        ];
        for (v, want) in table {
            assert_eq!(num(v), want, "{v}");
        }
    }

    #[test]
    fn outcomes_map_to_exit_codes() {
        assert_eq!(finish(Ok(Ok(()))), ExitCode::from(EXIT_OK));
        assert_eq!(
            finish(Ok(Err(anyhow::anyhow!("bad input")))),
            ExitCode::from(EXIT_ERROR)
        );
        // A panic (caught at the top of main) is an internal error, not a crash.
        let caught = std::panic::catch_unwind(|| -> anyhow::Result<()> { panic!("a bug") });
        assert_eq!(finish(caught), ExitCode::from(EXIT_INTERNAL));
    }

    #[test]
    fn table_aligns_and_csv_quotes() {
        let mut t = Table::new(&[("name", false), ("value", true)]);
        t.push(vec!["a".into(), "1".into()]);
        t.push(vec!["long,name".into(), "100".into()]);
        let r = t.render();
        assert_eq!(
            r,
            "name       value\n---------  -----\na              1\nlong,name    100\n"
        );
        assert_eq!(t.csv(), "name,value\na,1\n\"long,name\",100\n");
    }
}
