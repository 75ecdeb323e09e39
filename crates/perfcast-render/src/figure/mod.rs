//! Figures of one or more panels stacked vertically, each a stacked-bar chart, a waterfall,
//! category lines or an x-y scatter (with lines) on linear or log axes, with a title, axis
//! labels (units included by the caller) and a legend: the studies' plots.
//!
//! Every text names its font (generic families), so a figure renders the same in browsers,
//! `rsvg-convert` and GitHub without system fonts. Every number written is finite: a
//! non-finite value is an error, not a broken file.

mod bars;
mod lines;
#[cfg(test)]
mod tests;

use crate::axis::AxisMap;
use crate::marks::{marker, Legend};
use crate::palette::{pick, OKABE_ITO};
use crate::svg::{Px, Svg, XMLNS};

pub use crate::axis::{Axis, Scale};
pub use crate::marks::Marker;

/// An error drawing a figure: the plot (panel or figure title) and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("plot `{plot}`: {message}")]
pub struct PlotError {
    /// The panel's or the figure's title.
    pub plot: String,
    /// What is wrong with its data.
    pub message: String,
}

/// A bar made of stacked segments (one value per series, in series order).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Written under the bar.
    pub label: String,
    /// One value per series, stacked from the axis up.
    pub segments: Vec<f64>,
    /// Text written above the bar (e.g. "fits", "x1.3").
    pub note: String,
}

/// Bars under a group label.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    /// Written in bold under the group's bars.
    pub label: String,
    /// The bars, side by side.
    pub bars: Vec<Bar>,
}

/// A horizontal reference line.
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    /// Where the line is drawn, in y-axis units.
    pub value: f64,
    /// Written above the line's right end.
    pub label: String,
}

/// A series of an x-y plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry (none when empty).
    pub name: String,
    /// (x, y) in axis units.
    pub points: Vec<(f64, f64)>,
    /// Join the points with a line.
    pub line: bool,
    /// Draw a marker at each point.
    pub marker: Option<Marker>,
    /// Palette index.
    pub color: usize,
    /// Draw the line dashed.
    pub dashed: bool,
}

/// What a panel shows.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelKind {
    /// Stacked bars in groups; `series` names the segments.
    StackedBars {
        /// The segments' names (the legend), in stacking order.
        series: Vec<String>,
        /// Groups of bars, left to right.
        groups: Vec<BarGroup>,
        /// A horizontal line across the panel (e.g. the device capacity).
        reference: Option<RefLine>,
    },
    /// Multiplicative waterfall from 1: one bar per factor, spanning from the running product
    /// before it to the running product after it, then a total bar. Log y axis.
    Waterfall {
        /// (name, factor > 0), in order.
        factors: Vec<(String, f64)>,
        /// The name under the total bar.
        total_label: String,
    },
    /// Series over categories (x positions 0..n), e.g. generations.
    CategoryLines {
        /// The x labels, left to right.
        categories: Vec<String>,
        /// (name, one value per category).
        series: Vec<(String, Vec<f64>)>,
    },
    /// Series over a value x axis.
    XY {
        /// The x axis.
        x: Axis,
        /// Lines and/or markers.
        series: Vec<Series>,
    },
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The first line bold, a second line (after `\n`) as a smaller subtitle.
    pub title: String,
    /// The value axis.
    pub y: Axis,
    /// What the panel draws.
    pub kind: PanelKind,
}

/// A figure: a title and panels stacked vertically.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Written at the top, and the document's `<title>`.
    pub title: String,
    /// Width in pixels.
    pub width: f64,
    /// Height of each panel in pixels.
    pub panel_height: f64,
    /// The panels, top to bottom.
    pub panels: Vec<Panel>,
    /// A line of small print under the figure (e.g. the command that made it).
    pub caption: String,
}

const LEFT: f64 = 90.0;
const TOP: f64 = 56.0;
const PANEL_TOP: f64 = 50.0;
const PANEL_BOTTOM: f64 = 96.0;

/// A legend entry: name, palette index, how its key is drawn.
struct Key {
    name: String,
    color: usize,
    glyph: Glyph,
}

impl Key {
    fn new(name: impl Into<String>, color: usize, glyph: Glyph) -> Self {
        Key {
            name: name.into(),
            color,
            glyph,
        }
    }
}

/// How a legend key is drawn.
enum Glyph {
    Swatch,
    Line { dashed: bool },
    Marker(Marker),
}

/// Where a panel draws: the plot area in pixels.
#[derive(Debug, Clone, Copy)]
struct Area {
    x0: f64,
    x1: f64,
    top: f64,
    bottom: f64,
}

impl Area {
    /// The y axis of this area for `lo..hi` on `scale`.
    fn y_map(&self, scale: Scale, lo: f64, hi: f64) -> AxisMap {
        AxisMap::new(scale, lo, hi, self.bottom, self.top)
    }
}

/// `<text>` at (x, y) with its size, anchor, the font and `extra` attributes (nothing when
/// `s` is empty).
fn text(w: &mut Svg, x: f64, y: f64, size: f64, anchor: &str, extra: &str, s: &str) {
    if s.is_empty() {
        return;
    }
    w.el("text")
        .attr("x", Px(x))
        .attr("y", Px(y))
        .attr("font-size", size)
        .attr("text-anchor", anchor)
        .attr("font-family", crate::svg::FONT_FAMILY)
        .raw(extra)
        .text(s)
        .nl();
}

/// A label rotated by `degrees` about its anchor (x, y), anchored at its end.
fn rotated(w: &mut Svg, x: f64, y: f64, size: f64, degrees: i32, s: &str) {
    w.el("text")
        .attr("x", Px(x))
        .attr("y", Px(y))
        .attr("font-size", size)
        .attr("text-anchor", "end")
        .attr("font-family", crate::svg::FONT_FAMILY)
        .attr(
            "transform",
            format_args!("rotate({degrees} {} {})", Px(x), Px(y)),
        )
        .text(s)
        .nl();
}

fn line(w: &mut Svg, x1: f64, y1: f64, x2: f64, y2: f64, style: &str) {
    w.el("line")
        .attr("x1", Px(x1))
        .attr("y1", Px(y1))
        .attr("x2", Px(x2))
        .attr("y2", Px(y2))
        .raw(style)
        .end()
        .nl();
}

fn rect(w: &mut Svg, x: f64, y: f64, width: f64, height: f64, fill: &str, extra: &str) {
    w.el("rect")
        .attr("x", Px(x))
        .attr("y", Px(y))
        .attr("width", Px(width.max(0.0)))
        .attr("height", Px(height.max(0.0)))
        .attr("fill", fill)
        .raw(extra)
        .end()
        .nl();
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
        let mut w = Svg::new();
        w.el("svg")
            .attr("xmlns", XMLNS)
            .attr("width", format_args!("{:.0}", self.width))
            .attr("height", format_args!("{h:.0}"))
            .attr("viewBox", format_args!("0 0 {:.0} {h:.0}", self.width))
            .open()
            .nl();
        w.el("title").text(&self.title).nl();
        rect(&mut w, 0.0, 0.0, self.width, h, "#ffffff", "");
        text(
            &mut w,
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
            text(
                &mut w,
                10.0,
                h - 10.0,
                11.0,
                "start",
                "fill=\"#555\"",
                &self.caption,
            );
        }
        if w.has_non_finite() {
            return Err(PlotError {
                plot: self.title.clone(),
                message: "a non-finite number reached the plot".into(),
            });
        }
        Ok(w.finish())
    }

    fn panel(&self, w: &mut Svg, p: &Panel, y0: f64, legend: f64) -> Result<(), PlotError> {
        let area = Area {
            x0: LEFT,
            x1: self.width - legend,
            top: y0 + PANEL_TOP,
            bottom: y0 + self.panel_height - PANEL_BOTTOM,
        };
        panel_title(w, &p.title, (area.x0 + area.x1) / 2.0, y0);
        let keys = match &p.kind {
            PanelKind::StackedBars {
                series,
                groups,
                reference,
            } => bars::stacked(w, p, &area, series, groups, reference.as_ref())?,
            PanelKind::Waterfall {
                factors,
                total_label,
            } => bars::waterfall(w, p, &area, factors, total_label)?,
            PanelKind::CategoryLines { categories, series } => {
                lines::categories(w, p, &area, categories, series)?
            }
            PanelKind::XY { x, series } => lines::xy(w, p, &area, x, series)?,
        };
        // Plot frame.
        rect(
            w,
            area.x0,
            area.top,
            area.x1 - area.x0,
            area.bottom - area.top,
            "none",
            "stroke=\"#333\" stroke-width=\"1\"",
        );
        draw_legend(w, area.x1 + 16.0, area.top + 6.0, keys);
        Ok(())
    }
}

/// The panel title: the first line bold, a second line smaller.
fn panel_title(w: &mut Svg, title: &str, x: f64, y0: f64) {
    for (i, line) in title.lines().take(2).enumerate() {
        if i == 0 {
            text(
                w,
                x,
                y0 + 20.0,
                15.0,
                "middle",
                "font-weight=\"bold\"",
                line,
            );
        } else {
            text(w, x, y0 + 38.0, 11.5, "middle", "fill=\"#333\"", line);
        }
    }
}

/// The legend right of the plot area, one key per row.
fn draw_legend(w: &mut Svg, x: f64, y: f64, keys: Vec<Key>) {
    let rows = Legend { x, y, row: 17.0 };
    for (i, key) in keys.into_iter().enumerate() {
        let (lx, ly) = (rows.x, rows.y(i));
        let c = pick(&OKABE_ITO, key.color);
        match key.glyph {
            Glyph::Swatch => rect(w, lx, ly - 9.0, 14.0, 11.0, c, ""),
            Glyph::Line { dashed } => line(
                w,
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
            Glyph::Marker(m) => {
                marker(w, m, lx + 7.0, ly - 4.0, c).nl();
            }
        }
        text(w, lx + 22.0, ly, 11.0, "start", "", &key.name);
    }
}

/// The y axis: grid lines, ticks and their labels within the plot area, and the rotated
/// axis label.
fn y_axis(w: &mut Svg, ym: &AxisMap, label: &str, area: &Area) {
    for t in ym.ticks() {
        let y = ym.at(t);
        if y < area.top - 0.5 || y > area.bottom + 0.5 {
            continue;
        }
        line(w, area.x0, y, area.x1, y, "stroke=\"#e5e5e5\"");
        line(w, area.x0 - 5.0, y, area.x0, y, "stroke=\"#333\"");
        text(
            w,
            area.x0 - 8.0,
            y + 4.0,
            11.0,
            "end",
            "",
            &crate::axis::tick_label(t),
        );
    }
    let cy = (area.top + area.bottom) / 2.0;
    w.el("text")
        .attr("x", 22)
        .attr("y", Px(cy))
        .attr("font-size", 13)
        .attr("text-anchor", "middle")
        .attr("font-family", crate::svg::FONT_FAMILY)
        .attr("transform", format_args!("rotate(-90 22 {})", Px(cy)))
        .text(label)
        .nl();
}

/// `v` if it is finite, else an error naming the panel and `what`.
fn finite(p: &Panel, v: f64, what: &str) -> Result<f64, PlotError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(p.error(format!("{what} is {v}")))
    }
}

impl Panel {
    fn error(&self, message: String) -> PlotError {
        PlotError {
            plot: self.title.clone(),
            message,
        }
    }

    /// The range of `axis` for `values`, or an error naming this panel.
    fn fit(&self, axis: &Axis, values: &[f64]) -> Result<(f64, f64), PlotError> {
        crate::axis::fit_range(axis, values).map_err(|m| self.error(m))
    }
}

/// The legend entries a panel will draw (for the legend's width).
fn legend_names(p: &Panel) -> Vec<String> {
    match &p.kind {
        PanelKind::StackedBars { series, .. } => series.clone(),
        PanelKind::Waterfall { .. } => vec!["speed-up".into(), "slow-down".into()],
        PanelKind::CategoryLines { series, .. } => series.iter().map(|s| s.0.clone()).collect(),
        PanelKind::XY { series, .. } => series.iter().map(|s| s.name.clone()).collect(),
    }
}
