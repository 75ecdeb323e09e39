//! `perfcast calibrate [CASES.toml] [--param KEY[,KEY...][=LO..HI]]... [--cv SCHEME[,SCHEME...]]
//! [--out overlay.toml] [--residuals FILE] [--format table|json]`: fit named shared
//! parameters to a cases file, with cross-validation (`perfcast_validation::calibrate`).
//!
//! Exit status: 0 when the fit and every fold converged (the overlay and the residuals are
//! written); 1 for a bad cases file, a parameter that applies to no case or moves no
//! prediction, bounds a plugin refuses, a file with no case the engines support, or a
//! calibration that did not converge (the report and the best point are printed, no file is
//! written); 2 for bad usage (`--param` syntax, empty or non-numeric bounds, `--cv`).

use crate::common::{print, to_json_of, Format};
use anyhow::Context as _;
use perfcast_validation::calibrate::{self, Cv, Options, ParamSpec, ServingCases, Settings};
use std::path::PathBuf;

/// The outputs of `perfcast calibrate`, with their help.
const FORMATS: [(Format, &str); 2] = [
    (
        Format::Table,
        "The parameters (bounds, start, fitted), convergence, and MAPE per group before, in-sample and cross-validated",
    ),
    (
        Format::Json,
        "`{\"params\":{KEY:value},\"in_sample\":{\"mape\",\"groups\"},\"cross_validated\":{...},\"before\":{...},\"parameters\":[...],\"folds\":[...]}`",
    ),
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cases file (schema perfcast-validation/1), looked up from the current directory and each
    /// of its parents. Default: the built-in copy of configs/validation/cases.toml, as
    /// `validate` runs it (from any directory).
    #[arg(value_name = "CASES.toml")]
    pub cases: Option<PathBuf>,
    /// A parameter to fit: one value for every KEY named (tied keys), within LO..HI (default:
    /// half to twice the configuration's value). Repeatable. Without any, the default set of
    /// configs/validation/CALIBRATION.md.
    #[arg(long = "param", value_name = "KEY[,KEY...][=LO..HI]", value_parser = parse_param)]
    pub params: Vec<ParamSpec>,
    /// Cross-validation: leave one group out, one case out, one software stack family out
    /// (`stacks`: its cases predicted on the fallback stack, as a framework no rule knows),
    /// one GPU generation out (`hardware`), or none. Several, comma-separated, are each run
    /// and reported (`groups,stacks,hardware`: the residuals of all three, each kind of
    /// prediction's error bars from its own).
    #[arg(long, value_name = "SCHEME[,SCHEME...]", default_value = "groups", value_parser = parse_cv)]
    pub cv: Schemes,
    /// Write the fitted values as a configuration layer (TOML, provenance in comments).
    #[arg(long, value_name = "overlay.toml")]
    pub out: Option<PathBuf>,
    /// Write the out-of-fold residuals (the data of perfcast's error bars; needs a --cv other
    /// than none).
    #[arg(long, value_name = "FILE")]
    pub residuals: Option<PathBuf>,
    /// What the cases simulated as serving runs (modes `server` and
    /// `offline-max-throughput`) are to the fit: `score` predicts them at every fitted value
    /// (in sample and out of fold) without fitting on them; `fit` puts them in the objective
    /// too (each evaluation re-times or re-simulates every run: hours on the public file);
    /// `exclude` leaves them out (configs/validation/CALIBRATION.md, "Serving runs in a
    /// calibration").
    #[arg(long, value_name = "score|fit|exclude", default_value = "score", value_parser = parse_serving)]
    pub serving: ServingCases,
    /// The same as `--serving exclude` (kept for the commands already written with it).
    #[arg(long, conflicts_with = "serving")]
    pub exclude_serving: bool,
    /// Objective evaluations allowed per block of a fit (the full fit and each fold).
    #[arg(long, value_name = "N", default_value_t = Settings::default().max_evals)]
    pub max_evals: usize,
    #[arg(long, value_parser = Format::parser(&FORMATS), default_value_t)]
    pub format: Format,
}

fn parse_serving(s: &str) -> Result<ServingCases, String> {
    s.parse()
}

fn parse_param(s: &str) -> Result<ParamSpec, String> {
    s.parse()
        .map_err(|e: perfcast_validation::Error| e.to_string())
}

/// The cross-validations of `--cv`: the first, then the others.
#[derive(Debug, Clone)]
pub struct Schemes(Cv, Vec<Cv>);

fn parse_cv(s: &str) -> Result<Schemes, String> {
    let mut all: Vec<Cv> = Vec::new();
    for part in s.split(',') {
        let cv: Cv = part
            .trim()
            .parse()
            .map_err(|e: perfcast_validation::Error| e.to_string())?;
        if all.contains(&cv) {
            return Err(format!("--cv `{s}`: `{cv}` is named twice"));
        }
        all.push(cv);
    }
    if all.len() > 1 && all.contains(&Cv::None) {
        return Err(format!(
            "--cv `{s}`: `none` cannot be combined with a cross-validation"
        ));
    }
    let first = all.remove(0);
    Ok(Schemes(first, all))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.residuals.is_some() && a.cv.0 == Cv::None {
        anyhow::bail!(
            "--residuals needs out-of-fold predictions: use --cv groups, cases, stacks or hardware, not --cv none"
        );
    }
    if a.max_evals == 0 {
        anyhow::bail!("--max-evals 0: the optimiser needs at least one evaluation");
    }
    let harness = perfcast_validation::harness::Harness::new(&crate::common::plugins())
        .map_err(anyhow::Error::msg)?;
    let opts = Options {
        params: a.params,
        cv: a.cv.0,
        also: a.cv.1,
        serving: if a.exclude_serving {
            ServingCases::Exclude
        } else {
            a.serving
        },
        settings: Settings {
            max_evals: a.max_evals,
            ..Settings::default()
        },
    };
    let c = calibrate::calibrate_file(a.cases.as_deref(), &harness, &opts)
        .map_err(anyhow::Error::msg)?;
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json_of("calibrate", &c.to_json())?,
        Format::Table | Format::Csv => perfcast_report::validation::calibration_table(&c),
    };
    print(&text)?;
    // The files are written even when the optimiser stopped at its limit: the overlay then
    // says so in its header, and the command exits 1 after writing them.
    if let Some(out) = &a.out {
        perfcast_render::file::write(out, c.overlay_toml())
            .with_context(|| format!("cannot write the overlay to `{}`", out.display()))?;
        eprintln!("wrote the fitted parameters to {}", out.display());
    }
    if let (Some(file), Some(text)) = (&a.residuals, c.residuals_toml()) {
        let text = text.map_err(anyhow::Error::msg)?;
        perfcast_render::file::write(file, text)
            .with_context(|| format!("cannot write the residuals to `{}`", file.display()))?;
        eprintln!(
            "wrote {} out-of-fold residuals to {}",
            c.residuals().map(|r| r.residuals.len()).unwrap_or(0),
            file.display()
        );
    }
    if !c.converged() {
        let best: Vec<String> = c
            .params
            .iter()
            .map(|p| format!("{}={}", p.keys.join(","), p.fitted))
            .collect();
        anyhow::bail!(
            "the calibration did not converge within --max-evals {} (best point: {}); raise --max-evals or narrow the bounds{}",
            a.max_evals,
            best.join(" "),
            if a.out.is_some() {
                "; the overlay written holds that best point, flagged DID NOT CONVERGE"
            } else {
                ""
            }
        );
    }
    Ok(())
}
