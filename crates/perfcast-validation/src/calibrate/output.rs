//! What a calibration writes: JSON, the overlay (a configuration layer with its provenance in
//! comments) and the out-of-fold residuals (`perfcast_report::validation` writes its table).

use super::{Calibration, Cv, ServingCases};
use crate::cases::Kind;
use crate::intervals::{Residual, Residuals, SCHEMA};
use crate::overlay::{Entry, Overlay};
use crate::report::FirstMetric;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// MAPE (fraction) and count of the scored entries of `xs`.
fn mape<'a>(xs: impl Iterator<Item = &'a Option<FirstMetric>>) -> (Option<f64>, usize) {
    let errs: Vec<f64> = xs.flatten().map(|f| f.rel_error.abs()).collect();
    let n = errs.len();
    let m = (n > 0).then(|| errs.iter().sum::<f64>() / n as f64);
    (m, n)
}

/// `12.3%` or `-`.
fn pct(m: Option<f64>) -> String {
    m.map(|m| format!("{:.1}%", 100.0 * m))
        .unwrap_or_else(|| "-".into())
}

impl Calibration {
    /// Group names in file order.
    pub fn groups(&self) -> Vec<&str> {
        let mut g: Vec<&str> = Vec::new();
        for c in &self.cases {
            if !g.contains(&c.group.as_str()) {
                g.push(&c.group);
            }
        }
        g
    }

    /// MAPE (fraction) and count of the scored cases of `set` (one entry per case, in case
    /// order) that `keep` selects.
    pub fn mape_of(
        &self,
        set: &[Option<FirstMetric>],
        keep: impl Fn(usize) -> bool,
    ) -> (Option<f64>, usize) {
        mape(
            set.iter()
                .enumerate()
                .filter(|(i, _)| keep(*i))
                .map(|(_, x)| x),
        )
    }

    /// `{"mape":..,"groups":{..}}` of one set of predictions.
    fn summary_json(&self, set: &[Option<FirstMetric>]) -> Value {
        let mut groups = Map::new();
        for g in self.groups() {
            let (m, _) = self.mape_of(set, |i| self.cases[i].group == g);
            groups.insert(g.to_string(), json!(m));
        }
        let (all, n) = self.mape_of(set, |_| true);
        let kind = |k: Kind| self.mape_of(set, |i| self.cases[i].kind == k).0;
        json!({
            "mape": all,
            "scored": n,
            "training": kind(Kind::Training),
            "inference": kind(Kind::Inference),
            "groups": groups,
        })
    }

    /// The JSON report: `{"params":{...},"in_sample":{"mape":..,"groups":{..}},
    /// "cross_validated":{...},...}` (MAPE as fractions, as `perfcast validate`'s JSON).
    pub fn to_json(&self) -> Value {
        let mut params = Map::new();
        for p in &self.params {
            for k in &p.keys {
                params.insert(k.clone(), json!(p.fitted));
            }
        }
        let folds: Vec<Value> = self
            .folds
            .iter()
            .map(|f| {
                let mut values = Map::new();
                for (p, v) in self.params.iter().zip(&f.fitted) {
                    values.insert(p.keys.join(","), json!(v));
                }
                json!({
                    "held_out": f.held_out,
                    "cases": f.members.len(),
                    "converged": f.converged,
                    "evaluations": f.evals,
                    "params": values,
                })
            })
            .collect();
        json!({
            "params": params,
            "in_sample": self.summary_json(&self.in_sample),
            "cross_validated": if self.cv == Cv::None { Value::Null } else { self.summary_json(&self.out_of_fold) },
            "cross_validated_also": self.also.iter().map(|r| (r.cv.name().to_string(), self.summary_json(&r.out_of_fold))).collect::<Map<String, Value>>(),
            "before": self.summary_json(&self.before),
            "baseline": {
                "in_sample": self.summary_json(&self.baseline[0]),
                "cross_validated": self.summary_json(&self.baseline[1]),
            },
            "converged": self.converged(),
            "cv": self.cv.name(),
            "objective": {"start": self.start_objective, "fitted": self.fit.f, "evaluations": self.fit.evals},
            "parameters": self.params,
            "folds": folds,
            "cases_file": self.cases_file,
            "cases_sha256": self.sha256,
            "serving": self.serving.name(),
            "cases": {
                "scored": self.cases.len(),
                "unsupported": self.skipped.0,
                "error": self.skipped.1,
                "unscored": self.skipped.2,
            },
            "notes": self.notes,
        })
    }

    /// The fitted values as an overlay.
    pub fn overlay(&self) -> Overlay {
        let mut entries = Vec::new();
        for p in &self.params {
            for k in &p.keys {
                entries.push(Entry::number(k, p.fitted));
            }
        }
        Overlay {
            source: "calibration".into(),
            entries,
        }
    }

    /// The cases file as the fit saw it: its path, and what its serving runs were to the fit
    /// (said unless they were scored only, the default).
    pub fn cases_described(&self) -> String {
        match self.serving {
            ServingCases::Score => self.cases_file.clone(),
            ServingCases::Exclude => format!(
                "{} without its serving runs (--serving exclude)",
                self.cases_file
            ),
            ServingCases::Fit => format!(
                "{} with its serving runs fitted on (--serving fit)",
                self.cases_file
            ),
        }
    }

    /// The overlay as a TOML configuration layer, its provenance in comments.
    pub fn overlay_toml(&self) -> String {
        let mut h = String::new();
        let _ = writeln!(
            h,
            "# perfcast calibration layer, written by `perfcast calibrate` on {} (UTC).",
            self.date
        );
        let _ = writeln!(
            h,
            "# Check it: perfcast validate {} --overlay THIS_FILE",
            self.cases_file
        );
        if !self.converged() {
            let _ = writeln!(
                h,
                "# DID NOT CONVERGE: the optimiser stopped at its evaluation limit (--max-evals); \
                 these are the best values it found, not a minimum."
            );
        }
        let _ = writeln!(h, "# cases file: {}", self.cases_described());
        let _ = writeln!(h, "# cases sha256: {}", self.sha256);
        let _ = writeln!(
            h,
            "# objective: mean |ln(predicted/measured)| of each case's first published metric over {} cases: {:.4} -> {:.4}",
            self.cases.len(),
            self.start_objective,
            self.fit.f
        );
        let (b, _) = self.mape_of(&self.before, |_| true);
        let (i, _) = self.mape_of(&self.in_sample, |_| true);
        let _ = write!(h, "# MAPE: before {}, in-sample {}", pct(b), pct(i));
        if self.cv != Cv::None {
            let (c, _) = self.mape_of(&self.out_of_fold, |_| true);
            let _ = write!(h, ", cross-validated ({}) {}", self.cv.name(), pct(c));
        }
        let _ = writeln!(h);
        let _ = writeln!(h, "# parameters (bounds; start -> fitted; scored cases):");
        for p in &self.params {
            let _ = writeln!(
                h,
                "#   {} [{}, {}]; {} -> {}; {}",
                p.keys.join(", "),
                p.lo,
                p.hi,
                super::round_sig(p.start, 6),
                p.fitted,
                p.cases
            );
        }
        h.push('\n');
        h + &self.overlay().to_toml()
    }

    /// The out-of-fold residuals of every cross-validation, each tagged with its scheme
    /// (`None` without cross-validation).
    pub fn residuals(&self) -> Option<Residuals> {
        if self.cv == Cv::None && self.also.is_empty() {
            return None;
        }
        let sets = std::iter::once((self.cv, &self.out_of_fold))
            .filter(|(cv, _)| *cv != Cv::None)
            .chain(self.also.iter().map(|r| (r.cv, &r.out_of_fold)));
        let mut residuals = Vec::new();
        let mut names = Vec::new();
        for (cv, set) in sets {
            names.push(cv.name());
            residuals.extend(
                self.cases
                    .iter()
                    .zip(set)
                    .filter_map(|(c, f)| {
                        let f = f.as_ref()?;
                        Some(Residual {
                            case: c.id.clone(),
                            group: c.group.clone(),
                            kind: c.kind,
                            stack: c.class.stack.clone(),
                            generation: c.class.generation.clone(),
                            metric: f.metric.clone(),
                            predicted: f.predicted,
                            measured: f.measured,
                            cv: Some(cv.name().to_string()),
                        })
                    })
                    .filter(|r| r.log_time_ratio().is_some()),
            );
        }
        Some(Residuals {
            meta: crate::intervals::Meta {
                schema: SCHEMA.into(),
                cases_file: Some(self.cases_described()),
                cases_sha256: Some(self.sha256.clone()),
                date: Some(self.date.clone()),
                cv: Some(names.join(",")),
                params: self
                    .params
                    .iter()
                    .map(|p| format!("{}={}..{}", p.keys.join(","), p.lo, p.hi))
                    .collect(),
            },
            residuals,
        })
    }

    /// The residuals file's text.
    pub fn residuals_toml(&self) -> Option<crate::Result<String>> {
        let r = self.residuals()?;
        let schemes: Vec<Cv> = std::iter::once(self.cv)
            .filter(|cv| *cv != Cv::None)
            .chain(self.also.iter().map(|r| r.cv))
            .collect();
        let names: Vec<&str> = schemes.iter().map(|c| c.name()).collect();
        let units: Vec<String> = schemes
            .iter()
            .map(|c| format!("{} (cv = \"{}\")", c.unit(), c.name()))
            .collect();
        let header = format!(
            "Out-of-fold residuals of perfcast's predictions (schema {SCHEMA}), written by\n`perfcast calibrate {}{} --cv {} --residuals FILE` on {} (UTC): for each scored case\nand each cross-validation, its first published metric predicted by the parameters\nfitted without its {} (configs/validation/CALIBRATION.md). perfcast's error\nbars are drawn from these.",
            self.cases_file,
            match self.serving {
                ServingCases::Score => "",
                ServingCases::Fit => " --serving fit",
                ServingCases::Exclude => " --serving exclude",
            },
            names.join(","),
            self.date,
            units.join(", or its ")
        );
        Some(r.to_toml(&header))
    }

    /// Per group: the MAPEs (before, in-sample, cross-validated), for tests and tools.
    pub fn group_mapes(&self) -> BTreeMap<String, [Option<f64>; 3]> {
        self.groups()
            .into_iter()
            .map(|g| {
                let keep = |i: usize| self.cases[i].group == g;
                (
                    g.to_string(),
                    [
                        self.mape_of(&self.before, keep).0,
                        self.mape_of(&self.in_sample, keep).0,
                        self.mape_of(&self.out_of_fold, keep).0,
                    ],
                )
            })
            .collect()
    }
}
