//! Numbers as text: the significant digits a reader needs, without exponent noise for
//! everyday magnitudes.

/// Four significant digits, no exponent for everyday magnitudes (`1235`, `12.35`,
/// `0.001235`): what tables print. Callers pass finite numbers (hosts check them).
pub fn num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-4..=9).contains(&mag) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - mag).clamp(0, 9) as usize;
    format!("{v:.decimals$}")
}

/// Six significant digits with trailing zeros trimmed (`123457`, `1.5`, `0.000123456`), an
/// exponent outside 1e-4 .. 1e13: what data files (the studies' CSV) hold.
pub fn num6(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let e = v.abs().log10().floor() as i32;
    if !(-4..=12).contains(&e) {
        return format!("{v:.5e}");
    }
    let decimals = (5 - e).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A factor as text: one decimal from 10, two from 0.995, three below (`x12.5`, `x1.30`,
/// `x0.950`).
pub fn fmt_factor(f: f64) -> String {
    if f >= 10.0 {
        format!("{f:.1}")
    } else if f >= 0.995 {
        format!("{f:.2}")
    } else {
        format!("{f:.3}")
    }
}

/// A fraction as a percentage with one decimal (`0.1234` -> `12.3%`).
pub fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        let four = [
            (0.0, "0"),
            (1234.6, "1235"),
            (12.345, "12.35"),
            (0.0012346, "0.001235"),
            (312e12, "3.120e14"),
            (-2.5, "-2.500"),
        ];
        for (v, want) in four {
            assert_eq!(num(v), want, "{v}");
        }
        let six = [
            (0.0, "0"),
            (1.5, "1.5"),
            (123456.789, "123457"),
            (0.000123456, "0.000123456"),
            (2e-7, "2.00000e-7"),
            (35.0, "35"),
        ];
        for (v, want) in six {
            assert_eq!(num6(v), want, "{v}");
        }
        assert_eq!(
            [fmt_factor(12.54), fmt_factor(1.3), fmt_factor(0.95)],
            ["12.5", "1.30", "0.950"]
        );
        assert_eq!(pct(0.1234), "12.3%");
    }
}
