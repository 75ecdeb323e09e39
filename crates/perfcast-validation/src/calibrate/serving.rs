//! What a calibration does with the cases simulated as serving runs (modes `server` and
//! `offline-max-throughput`).
//!
//! By default they are **scored, not fitted on**: every fitted value (the fit on all cases and
//! each fold's) predicts them, so their in-sample and out-of-fold errors are reported beside
//! the others, but the objective the optimiser minimises leaves them out. Two reasons, measured
//! on the public file (configs/validation/CALIBRATION.md, "Serving runs in a calibration"):
//!
//! * The parameters that reach them (the four inference options of `DEFAULT_PARAMS`: host
//!   launch, collective and step overheads, compute/memory overlap) are mechanisms of a forward
//!   pass, which the static inference cases measure directly; a serving run adds the engine's
//!   scheduler, queueing and admission, which no parameter stands for. Fitted on 1,343 serving
//!   points, the four knobs would soak up whatever the scheduler model misses (a TTFT off by
//!   queueing, say) and carry it into every static prediction: the "fits what it sees"
//!   failure. Scored only, each serving group's error is a held-out figure in every fold.
//! * Cost: a serving run is hundreds to thousands of steps per evaluation (its schedule
//!   re-timed where it does not depend on step times, simulated again where it does), 4.0 s
//!   per evaluation of the public file's 1,604 inference cases on two cores; a fit takes
//!   hundreds of evaluations and `--cv groups` refits that block once per group holding
//!   inference cases, i.e. hours. Scored only, each serving run is simulated a few times (at
//!   the start, at the fitted values, held out): the default run takes 60 s.
//!
//! `fit` puts them in the objective (their schedules recorded once at the start: ~9 GB for the
//! public file); `exclude` leaves them out before anything is prepared.

use std::fmt;
use std::str::FromStr;

/// What a calibration does with the serving runs of its cases file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ServingCases {
    /// Predicted at every fitted value and scored, not in the objective (the default).
    #[default]
    Score,
    /// In the objective too (slow: see the module documentation).
    Fit,
    /// Left out before anything is prepared.
    Exclude,
}

impl ServingCases {
    /// The name `--serving` takes.
    pub const fn name(self) -> &'static str {
        match self {
            ServingCases::Score => "score",
            ServingCases::Fit => "fit",
            ServingCases::Exclude => "exclude",
        }
    }

    /// Whether a serving case enters the objective.
    pub const fn fitted(self) -> bool {
        matches!(self, ServingCases::Fit)
    }
}

impl fmt::Display for ServingCases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ServingCases {
    type Err = String;

    /// `score`, `fit` or `exclude`; anything else is refused with the three named.
    fn from_str(s: &str) -> Result<ServingCases, String> {
        [ServingCases::Score, ServingCases::Fit, ServingCases::Exclude]
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                format!(
                    "`{s}`: expected `score` (predicted and scored, not fitted on: the default), `fit` (in the objective too) or `exclude` (left out)"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_a_bad_one_is_named() {
        for v in [
            ServingCases::Score,
            ServingCases::Fit,
            ServingCases::Exclude,
        ] {
            assert_eq!(v.name().parse::<ServingCases>().unwrap(), v);
        }
        assert_eq!(ServingCases::default(), ServingCases::Score);
        let e = "all".parse::<ServingCases>().unwrap_err();
        assert!(e.contains("`all`") && e.contains("`score`"), "{e}");
    }
}
