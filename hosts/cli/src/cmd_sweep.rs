//! `perfcast sweep STUDY.toml [--out DIR] [--format csv|parquet] [--force] [--points A..B]
//! [--merge CHUNK.csv...] [--load PATH]`: a grid or list over config keys, each point
//! evaluated or searched for its best plan (the points in parallel, a chunk of them with
//! `--points`, or chunks run elsewhere joined with `--merge`); CSV rows streamed to
//! stdout or to `DIR/STUDY.csv` (or the same columns typed in `DIR/STUDY.parquet`; written
//! whole or not at all, one writer per DIR), with a progress bar (indicatif) on a terminal (stderr) once it runs past a
//! second.

use crate::common::{self, Format, Table};
use anyhow::Context as _;
use perfcast_render::file;
use perfcast_search::sweep::Sweep;
use std::io::{IsTerminal as _, Write};
use std::path::PathBuf;

/// The outputs of `perfcast sweep`.
const FORMATS: [(Format, &str); 2] = [
    (Format::Csv, "One row per point: the swept values, then the results"),
    (
        Format::Parquet,
        "The CSV's columns, typed (INT64, DOUBLE, UTF-8; an empty cell is a null), written to DIR/STUDY.parquet (needs --out)",
    ),
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The sweep file (see configs/sweeps/).
    #[arg(value_name = "STUDY.toml")]
    pub study: PathBuf,
    /// Write DIR/STUDY.csv (DIR/STUDY.parquet with `--format parquet`) instead of printing
    /// the CSV.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, value_parser = Format::parser(&FORMATS), default_value_t = Format::Csv)]
    pub format: Format,
    /// Run even when the sweep is estimated to take longer than its max_seconds.
    #[arg(long)]
    pub force: bool,
    /// Only the points START..END (0-based, END excluded; a distributed sweep's chunk).
    #[arg(long, value_name = "START..END", value_parser = parse_points)]
    pub points: Option<std::ops::Range<usize>>,
    /// Print the number of points and exit.
    #[arg(long, conflicts_with_all = ["out", "points", "merge"])]
    pub count: bool,
    #[command(flatten)]
    pub libraries: common::LoadArgs,
    #[command(flatten)]
    pub isolation: common::IsolationArgs,
    /// Load the `[[plugins]]` libraries of files the sweep's configuration includes too (by
    /// default only those of the files the sweep names, and `--load`).
    #[arg(long)]
    pub allow_included_plugins: bool,
    /// Instead of running the points, join the CSV files of chunks run elsewhere (`--points`,
    /// in order) into the sweep's output: each must have the sweep's header, and together
    /// one row per point.
    #[arg(long, value_name = "CHUNK.csv", num_args = 1.., conflicts_with_all = ["points", "force"])]
    pub merge: Vec<PathBuf>,
}

fn parse_points(s: &str) -> Result<std::ops::Range<usize>, String> {
    let bad = || format!("`{s}`: expected START..END, two integers >= 0 with START <= END");
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let (a, b): (usize, usize) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a > b {
        return Err(bad());
    }
    Ok(a..b)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut sweep = Sweep::load(&a.study, &crate::common::plugins())?;
    // Every point loads the `--load` libraries too.
    sweep.libraries = a.libraries.specs()?;
    sweep.plugin_host = Some(a.isolation.options()?);
    sweep.isolate_all = a.isolation.isolate;
    sweep.policy = common::library_policy(a.allow_included_plugins);
    if a.count {
        return common::print(&format!("{}\n", sweep.points.len()));
    }
    let range = a.points.clone().unwrap_or(0..sweep.points.len());
    // A progress bar on a terminal (stderr), once the sweep has run for a second.
    let tty = std::io::stderr().is_terminal();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut progress = |done: usize, total: usize, elapsed: f64| {
        if !tty {
            return;
        }
        if bar.is_none() && elapsed > 1.0 && done < total {
            let b = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "[{bar:30}] {pos}/{len} points, {elapsed} elapsed, eta {eta}",
            ) {
                b.set_style(style.progress_chars("#>-"));
            }
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_position(done as u64);
            if done == total {
                b.finish_and_clear();
            }
        }
    };
    // The rows: the points run here, or the chunks of a distributed run joined.
    let mut produce = |w: &mut dyn Write| -> anyhow::Result<usize> {
        if a.merge.is_empty() {
            Ok(sweep.run_range(w, range.clone(), a.force, &mut progress)?)
        } else {
            merge(&sweep, &a.merge, w)
        }
    };
    match &a.out {
        Some(dir) => {
            // The directory is held for the whole run, and the CSV replaces an earlier one
            // only once complete: a failing or interrupted sweep leaves it as it was.
            let _lock = file::DirLock::take(dir)
                .with_context(|| format!("cannot write into {}", dir.display()))?;
            let path = dir.join(format!("{}.{}", sweep.name, a.format));
            let cannot = || format!("cannot write {}", path.display());
            if a.format == Format::Parquet {
                // The CSV rows, read back as a table and written typed.
                let mut csv = Vec::new();
                let n = produce(&mut csv)?;
                let table = Table::from_csv(&String::from_utf8_lossy(&csv))
                    .map_err(|e| anyhow::anyhow!("the sweep's CSV: {e}"))?;
                common::write_parquet_file(&table, &path, "sweep")?;
                return common::print(&format!("wrote {} ({n} points)\n", path.display()));
            }
            let mut w = file::OutFile::create(&path).with_context(cannot)?;
            let n = produce(&mut w)?;
            w.commit().with_context(cannot)?;
            common::print(&format!("wrote {} ({n} points)\n", path.display()))
        }
        None if a.format == Format::Parquet => Err(anyhow::anyhow!(
            "`--format parquet` writes DIR/{}.parquet: add `--out DIR` (Parquet is binary; it \
             never goes to standard output)",
            sweep.name
        )),
        None => match produce(&mut common::stdout_writer()) {
            Ok(_) => Ok(()),
            Err(e) if broken_pipe(&e) => Ok(()),
            Err(e) => Err(e),
        },
    }
}

/// Whether writing failed because the reader of standard output went away (`| head`).
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.to_string().contains("Broken pipe"))
}

/// Write the sweep's header, then the rows of `chunks` in order: each chunk a CSV of the
/// sweep's header and rows, all of them together one row per point.
fn merge(sweep: &Sweep, chunks: &[PathBuf], out: &mut dyn Write) -> anyhow::Result<usize> {
    let header = perfcast_search::sweep::csv_header(&sweep.keys);
    out.write_all(header.as_bytes())?;
    let mut rows = 0;
    for chunk in chunks {
        let text = perfcast_config::input::read_text(chunk, perfcast_config::input::MAX_TEXT_BYTES)
            .with_context(|| format!("cannot read the chunk {}", chunk.display()))?;
        let Some(body) = text.strip_prefix(header.as_str()) else {
            anyhow::bail!(
                "{}: not a chunk of {}: its first line is not the sweep's header `{}`",
                chunk.display(),
                sweep.path.display(),
                header.trim_end()
            );
        };
        for line in body.lines().filter(|l| !l.trim().is_empty()) {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            rows += 1;
        }
    }
    out.flush()?;
    if rows != sweep.points.len() {
        anyhow::bail!(
            "the chunks hold {rows} rows, {} has {} points: a chunk is missing or repeated",
            sweep.path.display(),
            sweep.points.len()
        );
    }
    Ok(rows)
}
