//! A small SVG plot writer: figures of one or more panels, each a stacked-bar chart, a
//! waterfall, category lines or an x-y scatter (with lines) on linear or log axes, with a
//! title, axis labels (units included by the caller) and a legend.
//!
//! Plain SVG 1.1 with generic font families, so it renders the same in browsers,
//! `rsvg-convert` and GitHub without system fonts. Every number written is finite: a
//! non-finite value is an error, not a broken file.

use std::fmt::Write as _;

/// Colour-blind-friendly palette (Okabe & Ito 2008), then a few extra distinct colours.
pub const PALETTE: [&str; 10] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
    "#999999", "#8C564B",
];

/// An error building a plot.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("plot `{plot}`: {message}")]
pub struct PlotError {
    pub plot: String,
    pub message: String,
}

/// Axis scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    Linear,
    Log10,
}

/// One value axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    /// Range; `None` fits the data (linear axes start at zero when the data are >= 0).
    pub range: Option<(f64, f64)>,
}

impl Axis {
    pub fn linear(label: &str) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            range: None,
        }
    }
    pub fn log(label: &str) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Log10,
            range: None,
        }
    }
}

/// A bar made of stacked segments (one value per series, in series order).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub segments: Vec<f64>,
    /// Text written above the bar (e.g. "fits", "x1.3").
    pub note: String,
}

/// Bars under a group label.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// A horizontal reference line.
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    pub value: f64,
    pub label: String,
}

/// A series of an x-y plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Join the points with a line.
    pub line: bool,
    /// Draw a marker at each point.
    pub marker: Option<Marker>,
    /// Palette index.
    pub color: usize,
    pub dashed: bool,
}

/// Point markers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Marker {
    Circle,
    Triangle,
    Square,
}

/// What a panel shows.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelKind {
    /// Stacked bars in groups; `series` names the segments.
    StackedBars {
        series: Vec<String>,
        groups: Vec<BarGroup>,
        reference: Option<RefLine>,
    },
    /// Multiplicative waterfall from 1: one bar per factor, spanning from the running product
    /// before it to the running product after it, then a total bar. Log y axis.
    Waterfall {
        factors: Vec<(String, f64)>,
        total_label: String,
    },
    /// Series over categories (x positions 0..n), e.g. generations.
    CategoryLines {
        categories: Vec<String>,
        series: Vec<(String, Vec<f64>)>,
    },
    /// Series over a value x axis.
    XY { x: Axis, series: Vec<Series> },
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub y: Axis,
    pub kind: PanelKind,
}

/// A figure: a title and panels stacked vertically.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub title: String,
    pub width: f64,
    pub panel_height: f64,
    pub panels: Vec<Panel>,
    /// A line of small print under the figure (e.g. the command that made it).
    pub caption: String,
}

const FONT: &str = "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\"";
const LEFT: f64 = 90.0;
const TOP: f64 = 56.0;
const PANEL_TOP: f64 = 50.0;
const PANEL_BOTTOM: f64 = 96.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Format a tick value compactly.
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
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// "Nice" linear ticks covering [lo, hi].
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
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mut v = Vec::new();
    let few = b - a <= 2;
    for e in a..=b {
        let d = 10f64.powi(e);
        let mults: &[f64] = if few { &[1.0, 2.0, 5.0] } else { &[1.0] };
        for m in mults {
            let t = d * m;
            if t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9) {
                v.push(t);
            }
        }
    }
    v
}

/// A mapping from data to pixels along one axis.
#[derive(Debug, Clone, Copy)]
struct Map {
    scale: Scale,
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
}

impl Map {
    fn at(&self, v: f64) -> f64 {
        let (a, b, x) = match self.scale {
            Scale::Linear => (self.lo, self.hi, v),
            Scale::Log10 => (self.lo.log10(), self.hi.log10(), v.max(1e-300).log10()),
        };
        let t = if b > a { (x - a) / (b - a) } else { 0.5 };
        self.p0 + t * (self.p1 - self.p0)
    }
    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => linear_ticks(self.lo, self.hi),
            Scale::Log10 => log_ticks(self.lo, self.hi),
        }
    }
}

/// The range an axis shows for `values`.
fn fit_range(axis: &Axis, values: &[f64], plot: &str) -> Result<(f64, f64), PlotError> {
    let err = |m: String| PlotError {
        plot: plot.to_string(),
        message: m,
    };
    if let Some((lo, hi)) = axis.range {
        if !(lo.is_finite() && hi.is_finite() && hi > lo) {
            return Err(err(format!("axis `{}` range {lo}..{hi}", axis.label)));
        }
        if axis.scale == Scale::Log10 && lo <= 0.0 {
            return Err(err(format!("log axis `{}` needs a range > 0", axis.label)));
        }
        return Ok((lo, hi));
    }
    let vals: Vec<f64> = match axis.scale {
        Scale::Linear => values.to_vec(),
        Scale::Log10 => values.iter().copied().filter(|v| *v > 0.0).collect(),
    };
    if vals.is_empty() {
        return Err(err(format!("no data for axis `{}`", axis.label)));
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

struct Writer {
    out: String,
}

impl Writer {
    fn text(&mut self, x: f64, y: f64, size: f64, anchor: &str, extra: &str, s: &str) {
        let _ = writeln!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" {FONT} {extra}>{}</text>",
            esc(s)
        );
    }
    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, style: &str) {
        let _ = writeln!(
            self.out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" {style}/>"
        );
    }
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, extra: &str) {
        let _ = writeln!(
            self.out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\" {extra}/>",
            w.max(0.0),
            h.max(0.0)
        );
    }
    fn marker(&mut self, m: Marker, x: f64, y: f64, color: &str) {
        match m {
            Marker::Circle => {
                let _ = writeln!(
                    self.out,
                    "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{color}\" fill-opacity=\"0.75\" stroke=\"#333\" stroke-width=\"0.5\"/>"
                );
            }
            Marker::Triangle => {
                let _ = writeln!(
                    self.out,
                    "<path d=\"M{:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z\" fill=\"{color}\" fill-opacity=\"0.75\" stroke=\"#333\" stroke-width=\"0.5\"/>",
                    x,
                    y - 5.0,
                    x - 4.5,
                    y + 3.5,
                    x + 4.5,
                    y + 3.5
                );
            }
            Marker::Square => self.rect(
                x - 3.5,
                y - 3.5,
                7.0,
                7.0,
                color,
                "fill-opacity=\"0.75\" stroke=\"#333\" stroke-width=\"0.5\"",
            ),
        }
    }
}

/// Legend entry: name, palette colour, how it is drawn.
enum Key {
    Swatch,
    Line(bool),
    Marker(Marker),
}

impl Figure {
    /// Render the figure as an SVG document.
    pub fn render(&self) -> Result<String, PlotError> {
        if self.panels.is_empty() {
            return Err(PlotError {
                plot: self.title.clone(),
                message: "no panels".into(),
            });
        }
        let h = TOP + self.panels.len() as f64 * self.panel_height + 28.0;
        let longest = self
            .panels
            .iter()
            .flat_map(legend_names)
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(10) as f64;
        let legend = (40.0 + 6.6 * longest).clamp(130.0, self.width * 0.4);
        let mut w = Writer { out: String::new() };
        let _ = writeln!(
            w.out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{:.0}\" viewBox=\"0 0 {:.0} {:.0}\">",
            self.width, h, self.width, h
        );
        let _ = writeln!(w.out, "<title>{}</title>", esc(&self.title));
        w.rect(0.0, 0.0, self.width, h, "#ffffff", "");
        w.text(
            self.width / 2.0,
            30.0,
            19.0,
            "middle",
            "font-weight=\"bold\"",
            &self.title,
        );
        for (i, p) in self.panels.iter().enumerate() {
            let y0 = TOP + i as f64 * self.panel_height;
            self.panel(&mut w, p, y0, legend)?;
        }
        if !self.caption.is_empty() {
            w.text(
                10.0,
                h - 10.0,
                11.0,
                "start",
                "fill=\"#555\"",
                &self.caption,
            );
        }
        w.out.push_str("</svg>\n");
        if ["NaN", "=\"inf", "=\"-inf", ",inf", ",-inf", "inf,"]
            .iter()
            .any(|bad| w.out.contains(bad))
        {
            return Err(PlotError {
                plot: self.title.clone(),
                message: "a non-finite number reached the plot".into(),
            });
        }
        Ok(w.out)
    }

    fn panel(&self, w: &mut Writer, p: &Panel, y0: f64, legend: f64) -> Result<(), PlotError> {
        let x0 = LEFT;
        let x1 = self.width - legend;
        let top = y0 + PANEL_TOP;
        let bottom = y0 + self.panel_height - PANEL_BOTTOM;
        // Title: the first line bold, further lines (`\n`) smaller.
        for (i, line) in p.title.lines().take(2).enumerate() {
            if i == 0 {
                w.text(
                    (x0 + x1) / 2.0,
                    y0 + 20.0,
                    15.0,
                    "middle",
                    "font-weight=\"bold\"",
                    line,
                );
            } else {
                w.text(
                    (x0 + x1) / 2.0,
                    y0 + 38.0,
                    11.5,
                    "middle",
                    "fill=\"#333\"",
                    line,
                );
            }
        }
        let check = |v: f64, what: &str| -> Result<f64, PlotError> {
            if v.is_finite() {
                Ok(v)
            } else {
                Err(PlotError {
                    plot: p.title.clone(),
                    message: format!("{what} is {v}"),
                })
            }
        };
        let mut keys: Vec<(String, usize, Key)> = Vec::new();
        match &p.kind {
            PanelKind::StackedBars {
                series,
                groups,
                reference,
            } => {
                let mut tops = Vec::new();
                for g in groups {
                    for b in &g.bars {
                        if b.segments.len() != series.len() {
                            return Err(PlotError {
                                plot: p.title.clone(),
                                message: format!(
                                    "bar `{}` has {} segments for {} series",
                                    b.label,
                                    b.segments.len(),
                                    series.len()
                                ),
                            });
                        }
                        let mut s = 0.0;
                        for v in &b.segments {
                            s += check(*v, "a bar segment")?.max(0.0);
                        }
                        tops.push(s);
                    }
                }
                if let Some(r) = reference {
                    tops.push(check(r.value, "the reference line")?);
                }
                let (lo, hi) = fit_range(&p.y, &tops, &p.title)?;
                let ym = Map {
                    scale: p.y.scale,
                    lo,
                    hi,
                    p0: bottom,
                    p1: top,
                };
                self.y_axis(w, &ym, &p.y.label, x0, x1, top, bottom);
                let nbars: usize = groups.iter().map(|g| g.bars.len()).sum();
                let slots = nbars as f64 + groups.len().saturating_sub(1) as f64 * 0.8;
                let slot = (x1 - x0 - 20.0) / slots.max(1.0);
                let bw = slot * 0.78;
                let mut x = x0 + 10.0;
                for g in groups {
                    let gx0 = x;
                    for b in &g.bars {
                        let mut acc: f64 = 0.0;
                        for (k, v) in b.segments.iter().enumerate() {
                            let v = v.max(0.0);
                            let (ya, yb) = (ym.at(acc.max(lo)), ym.at((acc + v).max(lo)));
                            w.rect(
                                x + (slot - bw) / 2.0,
                                yb,
                                bw,
                                ya - yb,
                                PALETTE[k % PALETTE.len()],
                                "stroke=\"#fff\" stroke-width=\"0.5\"",
                            );
                            acc += v;
                        }
                        if !b.note.is_empty() {
                            w.text(
                                x + slot / 2.0,
                                ym.at(acc.max(lo)) - 4.0,
                                10.0,
                                "middle",
                                "",
                                &b.note,
                            );
                        }
                        let lx = x + slot / 2.0;
                        let ly = bottom + 12.0;
                        let _ = writeln!(
                            w.out,
                            "<text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"10\" text-anchor=\"end\" {FONT} transform=\"rotate(-35 {lx:.1} {ly:.1})\">{}</text>",
                            esc(&b.label)
                        );
                        x += slot;
                    }
                    w.text(
                        (gx0 + x) / 2.0,
                        bottom + 84.0,
                        12.0,
                        "middle",
                        "font-weight=\"bold\"",
                        &g.label,
                    );
                    x += slot * 0.8;
                }
                if let Some(r) = reference {
                    let y = ym.at(r.value);
                    w.line(
                        x0,
                        y,
                        x1,
                        y,
                        "stroke=\"#C00\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"",
                    );
                    w.text(
                        x1 - 4.0,
                        y - 5.0,
                        11.0,
                        "end",
                        "fill=\"#C00\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"",
                        &r.label,
                    );
                }
                for (i, s) in series.iter().enumerate() {
                    keys.push((s.clone(), i, Key::Swatch));
                }
            }
            PanelKind::Waterfall {
                factors,
                total_label,
            } => {
                let mut cum = vec![1.0];
                for (name, f) in factors {
                    let f = check(*f, name)?;
                    if f <= 0.0 {
                        return Err(PlotError {
                            plot: p.title.clone(),
                            message: format!("factor `{name}` = {f} must be > 0"),
                        });
                    }
                    cum.push(cum.last().copied().unwrap_or(1.0) * f);
                }
                let (lo, hi) = fit_range(&p.y, &cum, &p.title)?;
                let ym = Map {
                    scale: Scale::Log10,
                    lo,
                    hi,
                    p0: bottom,
                    p1: top,
                };
                self.y_axis(w, &ym, &p.y.label, x0, x1, top, bottom);
                let n = factors.len() + 1;
                let slot = (x1 - x0 - 20.0) / n as f64;
                let bw = slot * 0.7;
                for i in 0..n {
                    let x = x0 + 10.0 + i as f64 * slot;
                    let (a, b, label, color) = if i < factors.len() {
                        let up = factors[i].1 >= 1.0;
                        (
                            cum[i],
                            cum[i + 1],
                            factors[i].0.as_str(),
                            if up { PALETTE[0] } else { PALETTE[3] },
                        )
                    } else {
                        (1.0, cum[n - 1], total_label.as_str(), PALETTE[2])
                    };
                    let (ya, yb) = (ym.at(a), ym.at(b));
                    w.rect(
                        x + (slot - bw) / 2.0,
                        ya.min(yb),
                        bw,
                        (ya - yb).abs().max(1.0),
                        color,
                        "",
                    );
                    if i + 1 < n {
                        w.line(
                            x + (slot + bw) / 2.0,
                            yb,
                            x + slot + (slot - bw) / 2.0,
                            yb,
                            "stroke=\"#666\" stroke-dasharray=\"3,3\"",
                        );
                    }
                    let ratio = b / a;
                    w.text(
                        x + slot / 2.0,
                        ya.min(yb) - 5.0,
                        11.0,
                        "middle",
                        "font-weight=\"bold\"",
                        &format!("x{}", fmt_factor(ratio)),
                    );
                    let lx = x + slot / 2.0;
                    let ly = bottom + 12.0;
                    let _ = writeln!(
                        w.out,
                        "<text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"10.5\" text-anchor=\"end\" {FONT} transform=\"rotate(-30 {lx:.1} {ly:.1})\">{}</text>",
                        esc(label)
                    );
                }
                keys.push(("speed-up".into(), 0, Key::Swatch));
                keys.push(("slow-down".into(), 3, Key::Swatch));
                keys.push(("total".into(), 2, Key::Swatch));
            }
            PanelKind::CategoryLines { categories, series } => {
                let mut all = Vec::new();
                for (name, v) in series {
                    if v.len() != categories.len() {
                        return Err(PlotError {
                            plot: p.title.clone(),
                            message: format!(
                                "series `{name}` has {} values for {} categories",
                                v.len(),
                                categories.len()
                            ),
                        });
                    }
                    for x in v {
                        all.push(check(*x, name)?);
                    }
                }
                let (lo, hi) = fit_range(&p.y, &all, &p.title)?;
                let ym = Map {
                    scale: p.y.scale,
                    lo,
                    hi,
                    p0: bottom,
                    p1: top,
                };
                self.y_axis(w, &ym, &p.y.label, x0, x1, top, bottom);
                let n = categories.len().max(1) as f64;
                let slot = (x1 - x0) / n;
                let xat = |i: usize| x0 + slot * (i as f64 + 0.5);
                for (i, c) in categories.iter().enumerate() {
                    w.text(xat(i), bottom + 18.0, 11.0, "middle", "", c);
                }
                let markers = [Marker::Circle, Marker::Triangle, Marker::Square];
                for (k, (name, v)) in series.iter().enumerate() {
                    let color = PALETTE[k % PALETTE.len()];
                    let pts: Vec<String> = v
                        .iter()
                        .enumerate()
                        .map(|(i, y)| format!("{:.1},{:.1}", xat(i), ym.at(*y)))
                        .collect();
                    let _ = writeln!(
                        w.out,
                        "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
                        pts.join(" ")
                    );
                    for (i, y) in v.iter().enumerate() {
                        w.marker(markers[k % 3], xat(i), ym.at(*y), color);
                    }
                    keys.push((name.clone(), k, Key::Marker(markers[k % 3])));
                }
            }
            PanelKind::XY { x, series } => {
                let mut xs = Vec::new();
                let mut ys = Vec::new();
                for s in series {
                    for (a, b) in &s.points {
                        xs.push(check(*a, &s.name)?);
                        ys.push(check(*b, &s.name)?);
                    }
                }
                let (xlo, xhi) = fit_range(x, &xs, &p.title)?;
                let (ylo, yhi) = fit_range(&p.y, &ys, &p.title)?;
                let xm = Map {
                    scale: x.scale,
                    lo: xlo,
                    hi: xhi,
                    p0: x0,
                    p1: x1,
                };
                let ym = Map {
                    scale: p.y.scale,
                    lo: ylo,
                    hi: yhi,
                    p0: bottom,
                    p1: top,
                };
                self.y_axis(w, &ym, &p.y.label, x0, x1, top, bottom);
                for t in xm.ticks() {
                    let px = xm.at(t);
                    w.line(px, top, px, bottom, "stroke=\"#e5e5e5\"");
                    w.line(px, bottom, px, bottom + 5.0, "stroke=\"#333\"");
                    w.text(px, bottom + 18.0, 11.0, "middle", "", &tick_label(t));
                }
                w.text((x0 + x1) / 2.0, bottom + 40.0, 13.0, "middle", "", &x.label);
                let inside = |(a, b): (f64, f64)| {
                    a >= xlo * (1.0 - 1e-9)
                        && a <= xhi * (1.0 + 1e-9)
                        && b >= ylo * (1.0 - 1e-9)
                        && b <= yhi * (1.0 + 1e-9)
                };
                for s in series {
                    let color = PALETTE[s.color % PALETTE.len()];
                    if s.line && s.points.len() > 1 {
                        let pts: Vec<String> = s
                            .points
                            .iter()
                            .map(|(a, b)| format!("{:.1},{:.1}", xm.at(*a), ym.at(*b)))
                            .collect();
                        let dash = if s.dashed {
                            " stroke-dasharray=\"6,4\""
                        } else {
                            ""
                        };
                        let _ = writeln!(
                            w.out,
                            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>",
                            pts.join(" ")
                        );
                    }
                    if let Some(m) = s.marker {
                        for pt in &s.points {
                            if inside(*pt) {
                                w.marker(m, xm.at(pt.0), ym.at(pt.1), color);
                            }
                        }
                    }
                    if !s.name.is_empty() {
                        let key = match s.marker {
                            Some(m) => Key::Marker(m),
                            None => Key::Line(s.dashed),
                        };
                        keys.push((s.name.clone(), s.color, key));
                    }
                }
            }
        }
        // Plot frame.
        w.rect(
            x0,
            top,
            x1 - x0,
            bottom - top,
            "none",
            "stroke=\"#333\" stroke-width=\"1\"",
        );
        // Legend.
        let lx = x1 + 16.0;
        let mut ly = top + 6.0;
        for (name, color, key) in keys {
            let c = PALETTE[color % PALETTE.len()];
            match key {
                Key::Swatch => w.rect(lx, ly - 9.0, 14.0, 11.0, c, ""),
                Key::Line(dashed) => w.line(
                    lx,
                    ly - 4.0,
                    lx + 16.0,
                    ly - 4.0,
                    &format!(
                        "stroke=\"{c}\" stroke-width=\"2\"{}",
                        if dashed {
                            " stroke-dasharray=\"5,3\""
                        } else {
                            ""
                        }
                    ),
                ),
                Key::Marker(m) => w.marker(m, lx + 7.0, ly - 4.0, c),
            }
            w.text(lx + 22.0, ly, 11.0, "start", "", &name);
            ly += 17.0;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn y_axis(
        &self,
        w: &mut Writer,
        ym: &Map,
        label: &str,
        x0: f64,
        x1: f64,
        top: f64,
        bottom: f64,
    ) {
        for t in ym.ticks() {
            let y = ym.at(t);
            if y < top - 0.5 || y > bottom + 0.5 {
                continue;
            }
            w.line(x0, y, x1, y, "stroke=\"#e5e5e5\"");
            w.line(x0 - 5.0, y, x0, y, "stroke=\"#333\"");
            w.text(x0 - 8.0, y + 4.0, 11.0, "end", "", &tick_label(t));
        }
        let cy = (top + bottom) / 2.0;
        let _ = writeln!(
            w.out,
            "<text x=\"22\" y=\"{cy:.1}\" font-size=\"13\" text-anchor=\"middle\" {FONT} transform=\"rotate(-90 22 {cy:.1})\">{}</text>",
            esc(label)
        );
    }
}

/// The legend entries a panel will draw.
fn legend_names(p: &Panel) -> Vec<String> {
    match &p.kind {
        PanelKind::StackedBars { series, .. } => series.clone(),
        PanelKind::Waterfall { .. } => vec!["speed-up".into(), "slow-down".into()],
        PanelKind::CategoryLines { series, .. } => series.iter().map(|s| s.0.clone()).collect(),
        PanelKind::XY { series, .. } => series.iter().map(|s| s.name.clone()).collect(),
    }
}

/// A factor as text: 2 significant digits below 10, integers above.
pub fn fmt_factor(f: f64) -> String {
    if f >= 10.0 {
        format!("{f:.1}")
    } else if f >= 0.995 {
        format!("{f:.2}")
    } else {
        format!("{f:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced(svg: &str) -> bool {
        // Every element opened is closed: count `<x ...>` vs `</x>` for container tags and
        // check every other tag self-closes.
        for tag in ["svg", "text", "title"] {
            let open = svg.matches(&format!("<{tag}")).count();
            let close = svg.matches(&format!("</{tag}>")).count();
            if open != close {
                return false;
            }
        }
        for tag in ["rect", "line", "circle", "polyline", "path"] {
            for part in svg.split(&format!("<{tag} ")).skip(1) {
                let end = part.find('>').unwrap();
                if !part[..end].ends_with('/') {
                    return false;
                }
            }
        }
        true
    }

    #[test]
    fn ticks() {
        assert_eq!(
            linear_ticks(0.0, 100.0),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(log_ticks(1.0, 1000.0), vec![1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(1.0, 10.0), vec![1.0, 2.0, 5.0, 10.0]);
        let table = [
            (0.0, "0"),
            (1.5, "1.5"),
            (2e9, "2e9"),
            (0.25, "0.25"),
            (12.5, "12.5"),
        ];
        for (v, s) in table {
            assert_eq!(tick_label(v), s);
        }
    }

    fn fig(kind: PanelKind, y: Axis) -> Figure {
        Figure {
            title: "T & <t>".into(),
            width: 900.0,
            panel_height: 420.0,
            panels: vec![Panel {
                title: "panel".into(),
                y,
                kind,
            }],
            caption: "cmd".into(),
        }
    }

    #[test]
    fn every_chart_kind_renders_well_formed_with_labels_and_legend() {
        let kinds = vec![
            (
                PanelKind::StackedBars {
                    series: vec!["weights".into(), "activations".into()],
                    groups: vec![BarGroup {
                        label: "22B".into(),
                        bars: vec![Bar {
                            label: "none".into(),
                            segments: vec![10.0, 20.0],
                            note: "fits".into(),
                        }],
                    }],
                    reference: Some(RefLine {
                        value: 80.0,
                        label: "80 GB".into(),
                    }),
                },
                Axis::linear("memory per GPU (GB)"),
            ),
            (
                PanelKind::Waterfall {
                    factors: vec![("compute".into(), 4.0), ("network".into(), 0.9)],
                    total_label: "total".into(),
                },
                Axis::log("speed-up (x)"),
            ),
            (
                PanelKind::CategoryLines {
                    categories: vec!["HBM2e".into(), "HBM3".into()],
                    series: vec![("TPOT".into(), vec![1.0, 0.6])],
                },
                Axis::log("relative latency (x)"),
            ),
            (
                PanelKind::XY {
                    x: Axis::log("intensity (FLOP/B)"),
                    series: vec![Series {
                        name: "A100".into(),
                        points: vec![(1.0, 2.0), (100.0, 300.0)],
                        line: true,
                        marker: Some(Marker::Triangle),
                        color: 1,
                        dashed: true,
                    }],
                },
                Axis::log("TFLOP/s"),
            ),
        ];
        for (k, y) in kinds {
            let label = y.label.clone();
            let svg = fig(k, y).render().unwrap();
            assert!(balanced(&svg), "{svg}");
            assert!(svg.contains("T &amp; &lt;t&gt;"));
            assert!(svg.contains(&label), "{label}");
            assert!(!svg.contains("NaN"));
        }
    }

    #[test]
    fn bad_data_is_an_error_not_a_broken_file() {
        let f = fig(
            PanelKind::CategoryLines {
                categories: vec!["a".into()],
                series: vec![("s".into(), vec![f64::NAN])],
            },
            Axis::linear("y"),
        );
        assert!(f.render().unwrap_err().message.contains("NaN"));
        let f = fig(
            PanelKind::Waterfall {
                factors: vec![("x".into(), 0.0)],
                total_label: "t".into(),
            },
            Axis::log("y"),
        );
        assert!(f.render().is_err());
        let f = fig(
            PanelKind::StackedBars {
                series: vec!["a".into()],
                groups: vec![BarGroup {
                    label: "g".into(),
                    bars: vec![Bar {
                        label: "b".into(),
                        segments: vec![1.0, 2.0],
                        note: String::new(),
                    }],
                }],
                reference: None,
            },
            Axis::linear("y"),
        );
        assert!(f.render().unwrap_err().message.contains("segments"));
    }
}
