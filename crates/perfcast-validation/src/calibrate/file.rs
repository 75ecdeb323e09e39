//! A calibration's cases file read from disk or the built-in copy, and the provenance it
//! records (sha256, UTC date).

use super::{calibrate, Calibration, Options};
use crate::cases::CasesFile;
use crate::harness::Harness;
use crate::{Error, Result};

/// The sha256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Calibrate against the cases file at `path` (as [`crate::locate_cases`] finds it), or the
/// built-in cases (as `validate` runs them, from any directory) when `path` is `None`.
pub fn calibrate_file(
    path: Option<&std::path::Path>,
    harness: &Harness,
    opts: &Options,
) -> Result<Calibration> {
    let (name, bytes) = match path {
        Some(p) => {
            let p = crate::locate_cases(Some(p))?;
            let name = p.display().to_string();
            let bytes =
                perfcast_config::input::read_bytes(&p, perfcast_config::input::MAX_TEXT_BYTES)
                    .map_err(|e| Error::Io {
                        path: name.clone(),
                        source: std::sync::Arc::new(e),
                    })?;
            (name, bytes)
        }
        None => (
            crate::BUILTIN_CASES_LABEL.to_string(),
            crate::BUILTIN_CASES.as_bytes().to_vec(),
        ),
    };
    let text = String::from_utf8(bytes.clone()).map_err(|e| Error::File {
        file: name.clone(),
        message: format!("not UTF-8: {e}"),
    })?;
    let file = CasesFile::parse(&text, &name)?;
    calibrate(harness, &file, &sha256_hex(&bytes), opts)
}

/// Today's date (UTC), `YYYY-MM-DD` (civil-from-days, H. Hinnant's algorithm).
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
