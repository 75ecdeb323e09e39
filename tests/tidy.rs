//! The house's size limits on library code (rust-analyzer's tidy test, in spirit): no source
//! file over [`MAX_FILE_LINES`] lines and no function over [`MAX_FN_LINES`], counting neither
//! `#[cfg(test)]` items nor test, bench, example and fixture targets.

use std::path::{Path, PathBuf};

/// The Markdown's relative links (README.md, ARCHITECTURE.md, the user guide under docs/).
mod links;

/// Lines of a library source file, `#[cfg(test)]` items left out.
const MAX_FILE_LINES: usize = 800;

/// Lines of a library function, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 120;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Library sources: `src/` of the crates, plugins and hosts (not `tests/`, `benches/`,
/// `examples/`, the test fixtures or build scripts), without the files that are test modules.
fn library_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if p.is_dir() {
                if !matches!(
                    name.as_str(),
                    "tests" | "benches" | "examples" | "fixtures" | "target"
                ) {
                    walk(&p, out);
                }
            } else if name.ends_with(".rs") && !is_test_module(&name) && name != "build.rs" {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for top in ["crates", "plugins", "hosts"] {
        walk(&root().join(top), &mut out);
    }
    out.retain(|p| p.components().any(|c| c.as_os_str() == "src"));
    out.sort();
    out
}

/// Files that hold a `#[cfg(test)] mod` (by the house's naming: `tests.rs`, `x_tests.rs`,
/// `tests_x.rs`, `testing.rs` is a test helper too).
fn is_test_module(name: &str) -> bool {
    let stem = name.trim_end_matches(".rs");
    stem == "tests" || stem.ends_with("_tests") || stem.starts_with("tests_") || stem == "testing"
}

/// The source with string, character and comment text blanked (braces inside them do not
/// count), line structure kept.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match b.get(j) {
                    None => break,
                    Some('"') if (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some('\n') => out.push('\n'),
                    _ => {}
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if b.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{7b}') or a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(j) => {
                    out.push_str("' '");
                    i = j + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// The lines of `code` (from [`code_only`]) with every `#[cfg(test)]` item left out.
fn without_test_items(code: &str) -> Vec<&str> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut j = i + 1;
            let (mut depth, mut opened) = (0i64, false);
            while j < lines.len() {
                let l = lines[j];
                depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
                opened |= l.contains('{');
                j += 1;
                if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                    break;
                }
            }
            i = j;
        } else {
            out.push(lines[i]);
            i += 1;
        }
    }
    out
}

/// `(name, lines)` of every function with a body.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = fn_name(l) else { continue };
        let (mut depth, mut opened) = (0i64, false);
        for (j, m) in lines.iter().enumerate().skip(i) {
            if !opened && m.trim_end().ends_with(';') && !m.contains('{') {
                break; // a declaration without a body (a trait method)
            }
            depth += m.matches('{').count() as i64 - m.matches('}').count() as i64;
            opened |= m.contains('{');
            if opened && depth <= 0 {
                out.push((name.clone(), j - i + 1));
                break;
            }
        }
    }
    out
}

/// The name of the function a line starts (`fn name`, after visibility and qualifiers).
fn fn_name(line: &str) -> Option<String> {
    let t = line.trim_start();
    let pos = t.find("fn ")?;
    let before = &t[..pos];
    let allowed = [
        "pub",
        "pub(crate)",
        "pub(super)",
        "const",
        "unsafe",
        "async",
        "extern",
        "\"\"",
    ];
    if !before.split_whitespace().all(|w| allowed.contains(&w)) {
        return None;
    }
    let rest = &t[pos + 3..];
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn library_files_and_functions_stay_short() {
    let mut broken = Vec::new();
    for path in library_sources() {
        let src = std::fs::read_to_string(&path).expect("a source file");
        let code = code_only(&src);
        let lines = without_test_items(&code);
        let file = rel(&path);
        if lines.len() > MAX_FILE_LINES {
            broken.push(format!(
                "{file}: {} lines without its tests (at most {MAX_FILE_LINES}): split it",
                lines.len()
            ));
        }
        for (name, n) in functions(&lines) {
            if n > MAX_FN_LINES {
                broken.push(format!(
                    "{file}: fn {name} is {n} lines (at most {MAX_FN_LINES}): split it"
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_scanner_sees_through_strings_comments_and_test_items() {
    let src = "fn a() {\n    let s = \"}}}\";\n    let c = '{';\n    // }\n    /* { */\n}\n\
               #[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\nfn b<'x>(v: &'x str) -> &'x str {\n    v\n}\n";
    let code = code_only(src);
    let lines = without_test_items(&code);
    assert_eq!(lines.len(), 9, "{lines:?}");
    assert_eq!(
        functions(&lines),
        [("a".to_string(), 6), ("b".to_string(), 3)]
    );
}
