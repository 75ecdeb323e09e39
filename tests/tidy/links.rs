//! The Markdown's relative links resolve: every `[text](path)` and `[text](path#anchor)` of
//! README.md, ARCHITECTURE.md and `docs/**/*.md` (the user guide) names a file or folder that
//! exists, an anchor names a heading of the page it points to (as GitHub and mdBook spell a
//! heading's id), and every entry of `docs/SUMMARY.md` is a page. External links (`http:`,
//! `https:`, `mailto:`) are not followed; code spans and fenced code blocks are not links.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{rel, root};

/// The Markdown files whose links are checked.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    walk(&root().join("docs"), &mut out);
    out.retain(|p| p.is_file());
    out.sort();
    out
}

/// Each line of `text` without its fenced code blocks and code spans (blanked, so the line
/// numbers hold).
fn prose_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
        if let Some(f) = &fence {
            if marker.len() >= f.len() && marker.starts_with(&f[..1]) && t.trim() == marker {
                fence = None;
            }
            out.push(String::new());
            continue;
        }
        if marker.len() >= 3
            && (marker.chars().all(|c| c == '`') || marker.chars().all(|c| c == '~'))
        {
            fence = Some(marker);
            out.push(String::new());
            continue;
        }
        out.push(without_code_spans(line));
    }
    out
}

/// `line` with every code span (a run of N backticks up to the next run of exactly N) blanked.
fn without_code_spans(line: &str) -> String {
    let b: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != '`' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|c| **c == '`').count();
        // The closing run: exactly n backticks.
        let mut j = i + n;
        let mut close = None;
        while j < b.len() {
            if b[j] == '`' {
                let m = b[j..].iter().take_while(|c| **c == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                out.push_str(&" ".repeat(j + n - i));
                i = j + n;
            }
            None => {
                // An unmatched run is literal text.
                out.push_str(&"`".repeat(n));
                i += n;
            }
        }
    }
    out
}

/// The targets of the inline links (and images) of one line of prose: what stands between
/// `](` and its closing `)`, without a title.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0;
        let mut end = None;
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(k);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inner = after[..end].trim();
        let target = inner
            .strip_prefix('<')
            .and_then(|t| t.split('>').next())
            .unwrap_or_else(|| inner.split_whitespace().next().unwrap_or(""));
        if !target.is_empty() {
            out.push(target.to_string());
        }
        rest = &after[end..];
    }
    out
}

/// The ids of a page's headings, as GitHub and mdBook make them: the heading's text without
/// its Markdown, lower-cased, spaces to `-`, every character but letters, digits, `-` and `_`
/// dropped; a repeated id gets `-1`, `-2`, ...
fn heading_ids(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    for line in prose_lines_keeping_code(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !t[hashes..].starts_with(' ') {
            continue;
        }
        let title = t[hashes..].trim().trim_end_matches('#').trim();
        // Link text only: `[text](target)` -> `text`.
        let mut plain = String::new();
        let mut rest = title;
        while let Some(open) = rest.find('[') {
            plain.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match (after.find("]("), after.find(')')) {
                (Some(close), Some(paren)) if paren > close => {
                    plain.push_str(&after[..close]);
                    rest = &after[paren + 1..];
                }
                _ => {
                    plain.push('[');
                    rest = after;
                }
            }
        }
        plain.push_str(rest);
        let id: String = plain
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 0;
        while ids.contains(&unique) {
            n += 1;
            unique = format!("{id}-{n}");
        }
        ids.insert(unique);
    }
    ids
}

/// The lines of `text` outside fenced code blocks (a `#` in a shell block is no heading), code
/// spans kept (a heading's code is part of its id).
fn prose_lines_keeping_code(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
        match &fence {
            Some(f) if marker.len() >= f.len() && t.trim() == marker => fence = None,
            Some(_) => {}
            None if marker.len() >= 3 => fence = Some(marker),
            None => out.push(line),
        }
    }
    out
}

/// Every broken relative link of the checked files, as `file:line: why`.
fn broken_links() -> Vec<String> {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).expect("a Markdown file");
        let dir = file.parent().expect("a file's folder");
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for target in link_targets(line) {
                let lower = target.to_ascii_lowercase();
                if lower.contains("://") || lower.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    dir.join(path)
                };
                let at = format!("{}:{}", rel(&file), n + 1);
                if !resolved.exists() {
                    broken.push(format!("{at}: `{target}`: no such file or folder"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if resolved.extension().is_some_and(|x| x == "md") {
                    let page = std::fs::read_to_string(&resolved).unwrap_or_default();
                    if !heading_ids(&page).contains(anchor) {
                        broken.push(format!(
                            "{at}: `{target}`: {} has no heading `#{anchor}`",
                            rel(&resolved)
                        ));
                    }
                }
            }
        }
    }
    broken
}

#[test]
fn markdown_links_resolve() {
    let broken = broken_links();
    assert!(
        broken.is_empty(),
        "broken relative links ({}):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_summary_entry_is_a_page() {
    let summary_path = root().join("docs/SUMMARY.md");
    let summary = std::fs::read_to_string(&summary_path).expect("docs/SUMMARY.md");
    let mut entries = 0;
    let mut broken = Vec::new();
    for (n, line) in prose_lines(&summary).iter().enumerate() {
        for target in link_targets(line) {
            entries += 1;
            let page = root().join("docs").join(&target);
            if target.contains('#') || !target.ends_with(".md") || !page.is_file() {
                broken.push(format!(
                    "docs/SUMMARY.md:{}: `{target}` is not a page of docs/",
                    n + 1
                ));
            }
        }
    }
    assert!(entries > 0, "docs/SUMMARY.md lists no page");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_link_scanner_skips_code_and_spells_ids_as_mdbook_does() {
    let text = "See [a](x.md) and `[b](y.md)` and ![c](img/z.svg \"title\").\n\
                ```sh\n[d](not-a-link.md)\n```\n\
                [e](<with space.md>) [f](https://example.com) [g](#local)\n";
    let lines = prose_lines(text);
    let targets: Vec<String> = lines.iter().flat_map(|l| link_targets(l)).collect();
    assert_eq!(
        targets,
        [
            "x.md",
            "img/z.svg",
            "with space.md",
            "https://example.com",
            "#local"
        ]
    );
    let ids = heading_ids(
        "# Serving deployments: a `[serving_search]` section\n## Set up\n## Set up\n\
         ```sh\n# not a heading\n```\n## [Python](python.md), \"Sweeps on Ray\"\n",
    );
    for id in [
        "serving-deployments-a-serving_search-section",
        "set-up",
        "set-up-1",
        "python-sweeps-on-ray",
    ] {
        assert!(ids.contains(id), "{id} not in {ids:?}");
    }
    assert!(!ids.contains("not-a-heading"), "{ids:?}");
}
