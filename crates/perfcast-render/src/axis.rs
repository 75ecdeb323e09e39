//! Value axes: linear and log scales, the range an axis shows for its data, "nice" ticks and
//! their labels, and the mapping from data to pixels.

/// Axis scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Equal steps for equal differences.
    Linear,
    /// Equal steps for equal ratios (decades).
    Log10,
}

/// One value axis of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The label, units included by the caller.
    pub label: String,
    /// Linear or log.
    pub scale: Scale,
    /// Range; `None` fits the data (linear axes start at zero when the data are >= 0).
    pub range: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis fitted to its data.
    pub fn linear(label: &str) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            range: None,
        }
    }

    /// A log axis fitted to its data.
    pub fn log(label: &str) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Log10,
            range: None,
        }
    }
}

/// A tick value as compact text: `0`, `12.5`, `0.25`, `2e9`.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        let e = a.log10().floor() as i32;
        let m = v / 10f64.powi(e);
        if (m - m.round()).abs() < 1e-9 {
            format!("{}e{}", m.round(), e)
        } else {
            format!("{m:.1}e{e}")
        }
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round())
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        trim_zeros(format!("{v:.2}"))
    } else {
        trim_zeros(format!("{v:.3}"))
    }
}

fn trim_zeros(s: String) -> String {
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// "Nice" linear ticks covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten, at
/// most about six of them.
pub fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-300);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.5)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).ceil() * step;
    let mut v = Vec::new();
    let mut t = start;
    while t <= hi + step * 1e-9 {
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    v
}

/// Ticks for a log axis: the decades in [lo, hi], plus 2 and 5 multiples when there are few.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let few = hi.log10().ceil() as i32 - lo.log10().floor() as i32 <= 2;
    log_ticks_at(lo, hi, if few { &[1.0, 2.0, 5.0] } else { &[1.0] })
}

/// The decades (powers of ten) in [lo, hi].
pub fn decades(lo: f64, hi: f64) -> Vec<f64> {
    log_ticks_at(lo, hi, &[1.0])
}

/// `m x 10^e` for every multiple `m` and decade `e` that falls in [lo, hi].
fn log_ticks_at(lo: f64, hi: f64, multiples: &[f64]) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mut v = Vec::new();
    for e in a..=b {
        let d = 10f64.powi(e);
        for m in multiples {
            let t = d * m;
            if t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9) {
                v.push(t);
            }
        }
    }
    v
}

/// The range `axis` shows for `values`: its own range if it has one, else the data's (a
/// linear axis from zero for non-negative data up to a tick above the maximum; a log axis
/// from a 1-2-5 step below the minimum to one above the maximum). An error message for an
/// empty or invalid range.
pub fn fit_range(axis: &Axis, values: &[f64]) -> Result<(f64, f64), String> {
    if let Some((lo, hi)) = axis.range {
        if !(lo.is_finite() && hi.is_finite() && hi > lo) {
            return Err(format!("axis `{}` range {lo}..{hi}", axis.label));
        }
        if axis.scale == Scale::Log10 && lo <= 0.0 {
            return Err(format!("log axis `{}` needs a range > 0", axis.label));
        }
        return Ok((lo, hi));
    }
    let vals: Vec<f64> = match axis.scale {
        Scale::Linear => values.to_vec(),
        Scale::Log10 => values.iter().copied().filter(|v| *v > 0.0).collect(),
    };
    if vals.is_empty() {
        return Err(format!("no data for axis `{}`", axis.label));
    }
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(match axis.scale {
        Scale::Linear => {
            let lo = if lo >= 0.0 { 0.0 } else { lo };
            let hi = if hi <= lo { lo + 1.0 } else { hi };
            let t = linear_ticks(lo, hi * 1.08);
            let top = t.last().copied().unwrap_or(hi).max(hi * 1.02);
            (lo, top)
        }
        Scale::Log10 => {
            // Down to a 1-2-5 step below the minimum, up to one above the maximum.
            let steps = [1.0, 2.0, 5.0, 10.0];
            let dl = 10f64.powf(lo.log10().floor());
            let lo = steps
                .iter()
                .rev()
                .map(|m| m * dl)
                .find(|v| *v <= lo * (1.0 + 1e-12))
                .unwrap_or(dl);
            let dh = 10f64.powf(hi.log10().floor());
            let hi = steps
                .iter()
                .map(|m| m * dh)
                .find(|v| *v >= hi * 1.15)
                .unwrap_or(10.0 * dh);
            if hi > lo {
                (lo, hi)
            } else {
                (lo / 10.0, hi * 10.0)
            }
        }
    })
}

/// A mapping from data to pixels along one axis: `lo` maps to `p0`, `hi` to `p1` (a y axis
/// has `p0` at the bottom).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AxisMap {
    /// Linear or log.
    pub scale: Scale,
    /// The lowest value shown.
    pub lo: f64,
    /// The highest value shown.
    pub hi: f64,
    /// The pixel of `lo`.
    pub p0: f64,
    /// The pixel of `hi`.
    pub p1: f64,
    /// `lo` and `hi` on the scale (their log10 on a log axis).
    a: f64,
    b: f64,
}

impl AxisMap {
    /// `lo..hi` on `scale` drawn from pixel `p0` to `p1`.
    pub fn new(scale: Scale, lo: f64, hi: f64, p0: f64, p1: f64) -> Self {
        let (a, b) = match scale {
            Scale::Linear => (lo, hi),
            Scale::Log10 => (lo.log10(), hi.log10()),
        };
        AxisMap {
            scale,
            lo,
            hi,
            p0,
            p1,
            a,
            b,
        }
    }

    /// A log axis over whole decades covering `min..max` (at least one decade), drawn from
    /// `p0` to `p1`.
    pub fn decades(min: f64, max: f64, p0: f64, p1: f64) -> Self {
        let a = min.log10().floor();
        let b = max.log10().ceil().max(a + 1.0);
        AxisMap {
            scale: Scale::Log10,
            lo: 10f64.powf(a),
            hi: 10f64.powf(b),
            p0,
            p1,
            a,
            b,
        }
    }

    /// The pixel of `v` (on a log axis, values <= 0 go to the far low end).
    pub fn at(&self, v: f64) -> f64 {
        let x = match self.scale {
            Scale::Linear => v,
            Scale::Log10 => v.max(1e-300).log10(),
        };
        let t = if self.b > self.a {
            (x - self.a) / (self.b - self.a)
        } else {
            0.5
        };
        self.p0 + t * (self.p1 - self.p0)
    }

    /// The ticks of the range: [`linear_ticks`] or [`log_ticks`].
    pub fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => linear_ticks(self.lo, self.hi),
            Scale::Log10 => log_ticks(self.lo, self.hi),
        }
    }

    /// The powers of ten in the range (the grid of a log-log chart).
    pub fn decade_ticks(&self) -> Vec<f64> {
        decades(self.lo, self.hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_labels() {
        assert_eq!(
            linear_ticks(0.0, 100.0),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(log_ticks(1.0, 1000.0), vec![1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(1.0, 10.0), vec![1.0, 2.0, 5.0, 10.0]);
        assert_eq!(decades(1.0, 10.0), vec![1.0, 10.0]);
        let table = [
            (0.0, "0"),
            (1.5, "1.5"),
            (2e9, "2e9"),
            (0.25, "0.25"),
            (12.5, "12.5"),
            (0.01, "0.01"),
            (1e4, "10000"),
        ];
        for (v, s) in table {
            assert_eq!(tick_label(v), s);
        }
    }

    #[test]
    fn maps_and_ranges() {
        let m = AxisMap::decades(0.03, 420.0, 0.0, 400.0);
        assert!((m.lo / 0.01 - 1.0).abs() < 1e-12 && (m.hi / 1000.0 - 1.0).abs() < 1e-12);
        assert!(m.at(m.lo).abs() < 1e-9);
        assert!((m.at(1.0) - 160.0).abs() < 1e-9);
        assert_eq!(m.decade_ticks().len(), 6);
        let l = AxisMap::new(Scale::Linear, 0.0, 10.0, 100.0, 0.0);
        assert_eq!((l.at(0.0), l.at(5.0)), (100.0, 50.0));
        assert_eq!(
            fit_range(&Axis::linear("y"), &[3.0, 7.0]),
            Ok((0.0, 7.0 * 1.02))
        );
        assert_eq!(fit_range(&Axis::log("y"), &[3.0, 70.0]), Ok((2.0, 100.0)));
        assert!(fit_range(&Axis::log("y"), &[0.0])
            .unwrap_err()
            .contains("`y`"));
    }
}
