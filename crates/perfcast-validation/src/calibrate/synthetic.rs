//! Cases whose measurements are the model's own predictions: a cases file with each scored
//! case's first published metric replaced by what the harness (with its overlay) predicts.
//! Calibrating such a file must recover the overlay's values; that checks that a set of
//! parameters is identifiable from a set of cases, and it is how the tests check the fitting.

use super::Harness;
use crate::cases::CasesFile;
use crate::report::first_metric;
use crate::{Error, Result};

/// The cases file `text` (named `file` in messages) with every case's first published metric
/// set to the prediction of `harness`. Cases that are not scored keep their values. The
/// result is TOML without the input's comments.
pub fn remeasured(text: &str, file: &str, harness: &Harness) -> Result<String> {
    let parsed = CasesFile::parse(text, file)?;
    let refused = |message: String| Error::File {
        file: file.to_string(),
        message,
    };
    let mut root: toml::Table =
        toml::from_str(text).map_err(|e| refused(format!("not valid TOML: {e}")))?;
    let Some(toml::Value::Array(cases)) = root.get_mut("case") else {
        return Err(refused("no [[case]] array".into()));
    };
    for (case, raw) in parsed.cases.iter().zip(cases.iter_mut()) {
        let mut r = harness.run_case(case);
        if r.status != crate::report::Status::Ok {
            continue;
        }
        r.first = first_metric(&r);
        let Some(f) = r.first else { continue };
        let Some(measured) = raw.get_mut("measured").and_then(|m| m.as_table_mut()) else {
            continue;
        };
        if let Some((fwd, bwd)) = f.metric.split_once('+') {
            // Split the layer sum in the published proportion.
            let (Some(a), Some(b)) = (
                measured.get(fwd).and_then(toml::Value::as_float),
                measured.get(bwd).and_then(toml::Value::as_float),
            ) else {
                continue;
            };
            let k = f.predicted / (a + b);
            measured.insert(fwd.into(), (a * k).into());
            measured.insert(bwd.into(), (b * k).into());
        } else {
            measured.insert(f.metric.clone(), f.predicted.into());
        }
    }
    Ok(toml::to_string(&root)?)
}
