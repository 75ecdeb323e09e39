//! Error bars on the CLI's predictions (`--interval`, `--residuals`): the interval of each
//! predicted time and rate from the out-of-fold residuals of comparable validation cases
//! (`perfcast_validation::intervals`); `perfcast_report::error_bars` writes them.

use perfcast_validation::cases::Kind;
use perfcast_validation::intervals::{Class, Interval, Residuals};
use std::path::PathBuf;

/// `--interval` and `--residuals`, for every command that predicts.
#[derive(Debug, Clone, clap::Args)]
pub struct IntervalArgs {
    /// Error bars: the level of each prediction's interval, in percent (e.g. 80, 90), or
    /// `none`.
    #[arg(long = "interval", value_name = "PERCENT", default_value = "80", value_parser = parse_level)]
    pub interval: Level,
    /// The residuals the error bars come from (`perfcast calibrate --residuals`); default: the
    /// shipped configs/validation/residuals.toml.
    #[arg(long = "residuals", value_name = "FILE")]
    pub residuals: Option<PathBuf>,
}

/// An interval level (a fraction), or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level(pub Option<f64>);

fn parse_level(s: &str) -> Result<Level, String> {
    if s == "none" {
        return Ok(Level(None));
    }
    let p: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (e.g. 80) or `none`"))?;
    if !(p.is_finite() && p > 0.0 && p < 100.0) {
        return Err(format!(
            "{s}: the interval level is a percentage strictly between 0 and 100"
        ));
    }
    Ok(Level(Some(p / 100.0)))
}

impl IntervalArgs {
    /// The residuals and the level, `None` for `--interval none`.
    pub fn load(&self) -> anyhow::Result<Option<(Residuals, f64)>> {
        let Some(level) = self.interval.0 else {
            return Ok(None);
        };
        let r = match &self.residuals {
            Some(p) => Residuals::load(p),
            None => Residuals::embedded(),
        }
        .map_err(anyhow::Error::msg)?;
        Ok(Some((r, level)))
    }

    /// The interval of a `kind` prediction from the resolved scenario `sc` (`None` without
    /// error bars or without enough residuals).
    pub fn for_scenario(
        &self,
        sc: &perfcast_scenario::Scenario,
        kind: Kind,
    ) -> anyhow::Result<Option<Interval>> {
        let iv = self
            .load()?
            .and_then(|(r, level)| r.interval(&Class::of_scenario(sc, kind), level, None, None));
        // An accelerator no case measured gets the bars of the GPUs of its class: say so.
        Ok(iv.map(|mut iv| {
            if let Some(device) = perfcast_validation::intervals::unmeasured_device(sc) {
                let note = format!(
                    "`{device}` is no accelerator of the validation cases: these are the \
                     errors on measured GPUs, not a measurement of it"
                );
                iv.note = Some(match iv.note.take() {
                    Some(n) => format!("{n}; {note}"),
                    None => note,
                });
            }
            iv
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(parse_level("80").unwrap(), Level(Some(0.8)));
        assert_eq!(parse_level("92.5%").unwrap(), Level(Some(0.925)));
        assert_eq!(parse_level("none").unwrap(), Level(None));
        for bad in ["0", "100", "x", "-5", "nan"] {
            assert!(parse_level(bad).is_err(), "{bad}");
        }
    }
}
