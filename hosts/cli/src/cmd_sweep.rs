//! `perfcast sweep STUDY.toml [--out DIR] [--force]`: a grid or list over config keys, each
//! point evaluated or searched for its best plan; CSV rows streamed to stdout or to
//! `DIR/STUDY.csv` (written whole or not at all, one writer per DIR), with a progress bar (indicatif) on a terminal (stderr) once it runs past a
//! second.

use crate::common;
use anyhow::Context as _;
use perfcast_report::file;
use perfcast_search::sweep::Sweep;
use std::io::IsTerminal as _;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The sweep file (see configs/sweeps/).
    #[arg(value_name = "STUDY.toml")]
    pub study: PathBuf,
    /// Write DIR/STUDY.csv instead of printing the CSV.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run even when the sweep is estimated to take longer than its max_seconds.
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let sweep = Sweep::load(&a.study, &crate::common::plugins())?;
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
    match &a.out {
        Some(dir) => {
            // The directory is held for the whole run, and the CSV replaces an earlier one
            // only once complete: a failing or interrupted sweep leaves it as it was.
            let _lock = file::DirLock::take(dir)
                .with_context(|| format!("cannot write into {}", dir.display()))?;
            let path = dir.join(format!("{}.csv", sweep.name));
            let cannot = || format!("cannot write {}", path.display());
            let mut w = file::OutFile::create(&path).with_context(cannot)?;
            let n = sweep.run(&mut w, a.force, &mut progress)?;
            w.commit().with_context(cannot)?;
            common::print(&format!("wrote {} ({n} points)\n", path.display()))
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = stdout.lock();
            match sweep.run(&mut w, a.force, &mut progress) {
                Ok(_) => Ok(()),
                Err(perfcast_search::SearchError::File { message, .. })
                    if message.contains("Broken pipe") =>
                {
                    Ok(())
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}
