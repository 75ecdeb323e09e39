//! Golden (snapshot) files: a test renders an output, normalises only what legitimately varies
//! between runs, and compares it byte for byte with a committed file. A difference fails with
//! the first differing lines and the command that accepts the new output; setting
//! [`UPDATE_VAR`]`=1` writes the files instead of comparing, so that the change shows up in
//! review as a diff of the golden files.

use crate::process::workspace_root;
use std::path::Path;

/// The environment variable that turns comparisons into updates. Deliberately not `PERFCAST_*`:
/// the configuration loader reads every `PERFCAST_*` variable as a config key.
pub const UPDATE_VAR: &str = "UPDATE_GOLDEN";

/// Lines of context shown before the first difference, and the most lines shown per side.
const CONTEXT: usize = 3;
const SHOWN: usize = 12;

/// Whether [`UPDATE_VAR`] asks for the golden files to be (re)written.
pub fn updating() -> bool {
    std::env::var_os(UPDATE_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Compare `actual` with the golden file at `path`, byte for byte. When [`updating`], write
/// `actual` there instead (creating directories) and succeed. The error is a readable report:
/// the file, where it differs and the differing lines.
pub fn compare(path: &Path, actual: &str) -> Result<(), String> {
    let shown = path
        .strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string();
    if updating() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{shown}: cannot create: {e}"))?;
        }
        let old = std::fs::read_to_string(path).ok();
        if old.as_deref() != Some(actual) {
            std::fs::write(path, actual).map_err(|e| format!("{shown}: cannot write: {e}"))?;
            eprintln!("updated {shown}");
        }
        return Ok(());
    }
    match std::fs::read_to_string(path) {
        Err(e) => Err(format!("{shown}: no golden file ({e})")),
        Ok(expected) if expected == actual => Ok(()),
        Ok(expected) => Err(format!("{shown}: {}", diff(&expected, actual))),
    }
}

/// The first differing lines of `expected` (the golden file, `-`) and `actual` (`+`), with
/// their line numbers and a few lines of context; the common beginning and end are left out.
pub fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.split('\n').collect();
    let a: Vec<&str> = actual.split('\n').collect();
    let prefix = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let max_suffix = e.len().min(a.len()) - prefix;
    let suffix = e
        .iter()
        .rev()
        .zip(a.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let (e_mid, a_mid) = (&e[prefix..e.len() - suffix], &a[prefix..a.len() - suffix]);
    let mut out = format!(
        "differs from line {} (golden file {} lines, actual {} lines)\n",
        prefix + 1,
        expected.lines().count(),
        actual.lines().count()
    );
    if e_mid.iter().chain(a_mid).all(|l| l.is_empty()) {
        out.push_str("  (only the final newline differs)\n");
        return out;
    }
    for (i, line) in e
        .iter()
        .enumerate()
        .take(prefix)
        .skip(prefix.saturating_sub(CONTEXT))
    {
        out.push_str(&format!("  {:>5} | {line}\n", i + 1));
    }
    for (sign, lines) in [('-', e_mid), ('+', a_mid)] {
        for (i, line) in lines.iter().enumerate().take(SHOWN) {
            out.push_str(&format!("{sign} {:>5} | {line}\n", prefix + i + 1));
        }
        if lines.len() > SHOWN {
            out.push_str(&format!(
                "{sign}   ... {} more lines\n",
                lines.len() - SHOWN
            ));
        }
    }
    out
}

/// Panic if any comparison failed: every report, then how to accept the new output
/// (`update_command`, which should set [`UPDATE_VAR`]`=1`).
pub fn assert_none_failed(failures: &[String], update_command: &str) {
    assert!(
        failures.is_empty(),
        "{} golden file(s) differ from the output (legend: - golden file, + actual output):\n\n\
         {}\n\
         If the change is intended, update the files with\n    {update_command}\n\
         and commit them with the change, so that the difference is reviewed.",
        failures.len(),
        failures.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn diff_shows_the_first_differing_lines_with_context() {
        let d = diff("a\nb\nc\nd\ne\n", "a\nb\nC\nd\ne\n");
        assert!(d.starts_with("differs from line 3"), "{d}");
        assert!(d.contains("      2 | b\n- "), "{d}");
        assert!(d.contains("-     3 | c\n+     3 | C\n"), "{d}");
        assert!(!d.contains("| d"), "{d}");
        let d = diff("a\nb\n", "a\nb\nx\n");
        assert!(d.contains("+     3 | x"), "{d}");
        let d = diff("a\n", "a");
        assert!(d.contains("only the final newline"), "{d}");
    }
}
