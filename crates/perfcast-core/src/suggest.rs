//! "Did you mean": the known names nearest to a misspelt one, and serde's wording of unknown
//! fields and variants rewritten around them. Every host error about an unknown key, preset,
//! kind, component or study goes through [`nearest`] so that all of them suggest alike.

/// Levenshtein distance between `a` and `b`, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// How far a candidate may be from `word` and still be suggested: a third of the word's
/// length, at least 2 (one transposition), so that short names do not suggest everything.
fn limit(word: &str) -> usize {
    (word.chars().count() / 3).max(2)
}

/// The candidates nearest to `word` (at most three, nearest first, ties in the candidates'
/// order, none more than one edit behind the nearest): those within [`edit_distance`] of a third of its length (at least 2), ignoring
/// ASCII case, `-`/`_`/`.` differences count as one edit. A candidate that contains `word`
/// or is contained in it (at least 3 characters) also counts, as a distance of its length
/// difference (`llama-3-8b` -> `llama3-8b`); one that starts with it (`a100` ->
/// `a100-sxm4-80gb`) ranks before every other.
pub fn nearest<'a, I>(word: &str, candidates: I) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let w = word.to_ascii_lowercase();
    // (not a prefix, score, order, name): a candidate that starts with the word is what the
    // word abbreviates, ranked before every other (`h100-sxm` -> `h100-sxm5-80gb`, not
    // `b300-sxm` two edits away), by its length difference.
    let mut scored: Vec<(bool, usize, usize, &'a str)> = Vec::new();
    for (i, c) in candidates.into_iter().enumerate() {
        if c == word {
            continue;
        }
        let lc = c.to_ascii_lowercase();
        let d = edit_distance(&w, &lc);
        let prefix = w.len() >= 3 && lc.starts_with(&w);
        let contained = w.len() >= 3 && (lc.contains(&w) || w.contains(&lc)) && lc.len() >= 3;
        let score = if prefix || (contained && d > limit(word)) {
            Some(lc.len().abs_diff(w.len()).max(1))
        } else if d <= limit(word) {
            Some(d)
        } else {
            None
        };
        if let Some(s) = score {
            scored.push((!prefix, s, i, c));
        }
    }
    scored.sort();
    scored.dedup_by(|a, b| a.3 == b.3);
    // Only the best and those one edit behind it, of its kind: a clear winner stands alone.
    let best = scored.first().map(|s| (s.0, s.1));
    scored
        .into_iter()
        .take_while(|s| best.is_some_and(|(p, b)| s.0 == p && s.1 <= b + 1))
        .take(3)
        .map(|(_, _, _, c)| c)
        .collect()
}

/// Up to `n` of `candidates` nearest to `word` by [`edit_distance`], nearest first (ties by
/// name), none further than `max_distance` when one is given: the "nearest keys" list of a
/// key that exists nowhere (where [`nearest`] suggests a correction, this lists the
/// neighbourhood).
pub fn closest<'a, I>(
    word: &str,
    candidates: I,
    n: usize,
    max_distance: Option<usize>,
) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut scored: Vec<(usize, &'a str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| max_distance.is_none_or(|m| *d <= m))
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

/// `"; did you mean `a`?"` (or `` `a` or `b` ``) for the nearest candidates, or `""` when none
/// is near: to append to an "unknown ..." message before the list of what is allowed.
pub fn did_you_mean<'a, I>(word: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    let near = nearest(word, candidates);
    if near.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = near.iter().map(|c| format!("`{c}`")).collect();
    format!("; did you mean {}?", quoted.join(" or "))
}

/// What serde said about an unknown field or variant, if that is what `message` is: the
/// unknown word, and the expected names (serde's `` expected one of `a`, `b` ``, `` expected
/// `a` or `b` ``, `` expected `a` `` or "there are no fields"/"there are no variants").
pub fn parse_unknown(message: &str) -> Option<(&'static str, String, Vec<String>)> {
    let (what, rest) = if let Some(r) = message.strip_prefix("unknown field `") {
        ("key", r)
    } else if let Some(r) = message.strip_prefix("unknown variant `") {
        ("value", r)
    } else {
        return None;
    };
    let (word, tail) = rest.split_once('`')?;
    let tail = tail.trim_start_matches(',').trim();
    let mut expected = Vec::new();
    if let Some(list) = tail.strip_prefix("expected ") {
        let list = list.strip_prefix("one of ").unwrap_or(list);
        // `a`, `b` | `a` or `b` | `a`
        for part in list.split('`').skip(1).step_by(2) {
            expected.push(part.to_string());
        }
    }
    Some((what, word.to_string(), expected))
}

/// serde's "unknown field/variant" wording rewritten as perfcast's: `` unknown key `bandwith`;
/// did you mean `bandwidth`? (allowed: `a`, `b`) ``. Other messages come back unchanged.
pub fn rewrite_unknown(message: &str) -> String {
    let Some((what, word, expected)) = parse_unknown(message) else {
        return message.to_string();
    };
    let hint = did_you_mean(&word, expected.iter().map(String::as_str));
    let allowed = if expected.is_empty() {
        "none".to_string()
    } else {
        expected
            .iter()
            .map(|e| format!("`{e}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("unknown {what} `{word}`{hint} (allowed: {allowed})")
}

/// serde's name of an expected type said as a rule a user can act on (`u32` -> "a
/// non-negative integer"); names it does not know come back as they are.
pub fn expected_rule(expected: &str) -> String {
    let e = expected.trim();
    let rule = match e {
        // Integer types with their range: a value out of it reads as the wrong type.
        "u8" => "a non-negative integer (at most 255)",
        "u16" => "a non-negative integer (at most 65535)",
        "u32" => "a non-negative integer (at most 4294967295)",
        "u64" | "usize" => "a non-negative integer (at most 18446744073709551615)",
        "u128" => "a non-negative integer",
        "i8" => "an integer (from -128 to 127)",
        "i16" => "an integer (from -32768 to 32767)",
        "i32" => "an integer (from -2147483648 to 2147483647)",
        "i64" | "isize" => "an integer (from -9223372036854775808 to 9223372036854775807)",
        "i128" => "an integer",
        "f32" | "f64" => "a number",
        "a boolean" | "bool" => "true or false",
        "a string" | "a borrowed string" | "string" => "a string (in quotes)",
        "a sequence" | "sequence" => "a list `[...]`",
        "a map" | "map" => "a table `{ key = value }`",
        "a character" | "char" => "a single character",
        _ if e.starts_with("struct ") => "a table `{ key = value }`",
        _ if e.starts_with("a tuple") || e.starts_with("tuple") => "a list `[...]`",
        _ => return e.to_string(),
    };
    rule.to_string()
}

/// The value in serde's description of what it found (`` integer `-4` `` -> `-4`, `string
/// "x"` -> `"x"`, `map` -> `a table`).
fn found_value(actual: &str) -> String {
    let a = actual.trim();
    if let Some(s) = a.strip_prefix("string ") {
        return s.to_string();
    }
    if let (Some(i), Some(j)) = (a.find('`'), a.rfind('`')) {
        if j > i {
            return a[i + 1..j].to_string();
        }
    }
    match a {
        "map" | "dict" => "a table".into(),
        "sequence" | "seq" | "array" => "a list".into(),
        "unit value" | "unit" | "null" | "none" | "option" => "nothing".into(),
        _ => a.to_string(),
    }
}

/// serde's "invalid type/value: found X, expected Y" (serde_json's or figment's wording)
/// rewritten as "expected RULE, got VALUE"; other messages come back as they are, with the
/// unknown-field/variant wording rewritten by [`rewrite_unknown`].
pub fn rewrite_serde(message: &str) -> String {
    let body = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "));
    let Some(body) = body else {
        return rewrite_unknown(message);
    };
    let body = body.strip_prefix("found ").unwrap_or(body);
    let Some((actual, expected)) = body.rsplit_once(", expected ") else {
        return message.to_string();
    };
    let expected = expected.trim_matches('`');
    let rule = expected_rule(expected);
    // A whole number written as a float (`1e9`, `4.0`) reads back as digits alone: say why
    // it is not the integer it looks like.
    let float = actual.trim().starts_with("float") || actual.trim().starts_with("floating");
    let note = if float && rule.contains("integer") {
        " (a float: write an integer without a decimal point or exponent)"
    } else {
        ""
    };
    format!("expected {rule}, got {}{note}", found_value(actual))
}

/// Digits of a number no count or physical quantity has written out (u64's largest has 20).
const LONG_DIGITS: usize = 21;

/// `text` with every number of more than 20 digits before its point, or more than 24 in all
/// (`1e300` or `1e-320` as serde writes a float out whole, a product of huge inputs), given in
/// scientific notation with four significant digits: an error names a value, it does not
/// print 300 digits of it.
pub fn shorten_long_numbers(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let whole = i - start;
        // A fraction belongs to the number (1e-320 is written out as 320 zeros and a 1).
        let mut fraction = 0;
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
                fraction += 1;
            }
        }
        // (a float's shortest form has at most 17 significant digits: more are zeros)
        if whole >= LONG_DIGITS || whole + fraction > LONG_DIGITS + 3 {
            if let Ok(v) = text[start..i].parse::<f64>() {
                out.push_str(&text[copied..start]);
                out.push_str(&format!("{v:.3e}"));
                copied = i;
            }
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_numbers_are_shortened() {
        let thousand_digits = format!("1{}", "0".repeat(300));
        let cases: &[(&str, &str)] = &[
            ("got 4096 tokens", "got 4096 tokens"),
            // u64's largest and 2^64 stay as written.
            (
                "18446744073709551616 is 2^64",
                "18446744073709551616 is 2^64",
            ),
            (
                "count (~1624796308659875361308278784) is beyond",
                "count (~1.625e27) is beyond",
            ),
            ("x = 123456789012345678901.5;", "x = 1.235e20;"),
            ("v1.2.3 and 0.000001", "v1.2.3 and 0.000001"),
            // A float's shortest form stays; a tiny one written out whole does not.
            ("0.30000000000000004", "0.30000000000000004"),
            (
                "got 0.000000000000000000000000000000001, expected",
                "got 1.000e-33, expected",
            ),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(shorten_long_numbers(text), *want, "{text}");
        }
        assert_eq!(
            shorten_long_numbers(&format!(
                "floating point `{thousand_digits}.0`, expected u64"
            )),
            "floating point `1.000e300`, expected u64"
        );
    }

    /// The neighbourhood of a key: nearest first, ties by name, within the bound if any.
    #[test]
    fn closest_keys() {
        let keys = [
            "plan.tp",
            "plan.pp",
            "plan.dp",
            "plan.vpp",
            "options.engine.x",
        ];
        assert_eq!(
            closest("plan.tq", keys, 3, None),
            ["plan.tp", "plan.dp", "plan.pp"]
        );
        assert_eq!(closest("plan.tq", keys, 2, Some(1)), ["plan.tp"]);
        assert!(closest("zzzzzzzzzzzz", keys, 3, Some(2)).is_empty());
        assert_eq!(closest("x", ["b", "a", "a"], 5, None), ["a", "b"]);
    }

    #[test]
    fn nearest_names_for_the_issue_s_typos() {
        let plan = ["tp", "pp", "dp", "global_batch", "micro_batch", "recompute"];
        assert_eq!(nearest("global_bacth", plan), ["global_batch"]);
        let presets = [
            "llama2-7b",
            "llama3-8b",
            "llama3-70b",
            "llama3.1-8b",
            "gpt3-175b",
        ];
        assert_eq!(nearest("llama-3-8b", presets), ["llama3-8b"]);
        assert_eq!(nearest("GPU", ["gpu", "hbm"]), ["gpu"]);
        assert!(nearest("zzzzzz", plan).is_empty());
        // A short word does not match every short name.
        assert_eq!(nearest("tq", ["tp", "global_batch"]), ["tp"]);
        assert_eq!(
            did_you_mean("ful", ["full", "none", "selective"]),
            "; did you mean `full`?"
        );
        assert_eq!(did_you_mean("xyzzy", ["full"]), "");
        // A name the word abbreviates comes first (issue 44: `h100-sxm` suggested `b300-sxm`).
        let hardware = [
            "b300-sxm",
            "h100-hbm2e-96gb",
            "h100-sxm5-80gb",
            "h200-sxm-141gb",
        ];
        assert_eq!(nearest("h100-sxm", hardware)[0], "h100-sxm5-80gb");
        assert_eq!(nearest("h200", hardware), ["h200-sxm-141gb"]);
    }

    #[test]
    fn serde_unknown_wording_is_rewritten() {
        let m = "unknown field `sm_cont`, expected one of `name`, `sm_count`, `clock_ghz`";
        assert_eq!(
            rewrite_unknown(m),
            "unknown key `sm_cont`; did you mean `sm_count`? (allowed: `name`, `sm_count`, \
             `clock_ghz`)"
        );
        let m = "unknown variant `ful`, expected `none` or `full`";
        assert_eq!(
            rewrite_unknown(m),
            "unknown value `ful`; did you mean `full`? (allowed: `none`, `full`)"
        );
        let m = "unknown field `x`, there are no fields";
        assert_eq!(rewrite_unknown(m), "unknown key `x` (allowed: none)");
        assert_eq!(rewrite_unknown("missing field `m`"), "missing field `m`");
    }

    #[test]
    fn serde_type_wording_becomes_the_rule() {
        let table = [
            (
                "invalid value: signed int `-4`, expected u32",
                "expected a non-negative integer (at most 4294967295), got -4",
            ),
            (
                "invalid type: integer `-3`, expected u32",
                "expected a non-negative integer (at most 4294967295), got -3",
            ),
            (
                "invalid type: found float `1.5`, expected u32",
                "expected a non-negative integer (at most 4294967295), got 1.5 (a float: write an \
                 integer without a decimal point or exponent)",
            ),
            (
                "invalid type: found float `1000000000`, expected u32",
                "expected a non-negative integer (at most 4294967295), got 1000000000 (a float: \
                 write an integer without a decimal point or exponent)",
            ),
            (
                "invalid type: floating point `2.5`, expected a boolean",
                "expected true or false, got 2.5",
            ),
            (
                "invalid value: integer `99999999999`, expected u32",
                "expected a non-negative integer (at most 4294967295), got 99999999999",
            ),
            (
                "invalid value: integer `300`, expected u8",
                "expected a non-negative integer (at most 255), got 300",
            ),
            (
                "invalid type: string \"many\", expected u32",
                "expected a non-negative integer (at most 4294967295), got \"many\"",
            ),
            (
                "invalid type: found signed int `3`, expected a boolean",
                "expected true or false, got 3",
            ),
            (
                "invalid type: map, expected f64",
                "expected a number, got a table",
            ),
            (
                "invalid type: found string \"x\", expected `a sequence`",
                "expected a list `[...]`, got \"x\"",
            ),
        ];
        for (serde, want) in table {
            assert_eq!(rewrite_serde(serde), want, "{serde}");
        }
        assert_eq!(rewrite_serde("missing field `m`"), "missing field `m`");
    }
}
