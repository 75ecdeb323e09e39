//! `--plot FILE.svg` for `perfcast roofline`: the classic log-log roofline chart (Williams,
//! Waterman & Patterson 2009). x: arithmetic intensity at the device tier (FLOP/B); y:
//! throughput (TFLOP/s). Roofs: one horizontal line per engine/dtype peak the ops use, one
//! diagonal per memory tier (its achievable bandwidth); points: each op's achieved throughput.
//! Drawn with perfcast-render's primitives (`predict --plot` is `perfcast_report::charts`).
//!
//! Only finite, positive numbers reach the drawing (the host checked them; points without
//! FLOPs are left out), so the file never contains NaN.

use perfcast_render::axis::{tick_label, AxisMap};
use perfcast_render::marks::Legend;
use perfcast_render::num;
use perfcast_render::palette::{pick, POINTS};
use perfcast_render::svg::{Px, Svg, XMLNS};
use perfcast_scenario::roofline::RooflineReport;

const W: f64 = 840.0;
/// Minimum height; the legend (tiers, then one line per op) can make the chart taller.
const MIN_H: f64 = 500.0;
/// Legend line height.
const LINE: f64 = 16.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 240.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const TFLOPS: f64 = 1e12;

/// What the chart shows, in TFLOP/s and TB/s.
struct Roofs<'a> {
    /// (op name, intensity, achieved TFLOP/s) of the ops with FLOPs.
    points: Vec<(&'a str, f64, f64)>,
    /// (`engine dtype`, peak TFLOP/s), once per pair the ops use.
    peaks: Vec<(String, f64)>,
    /// (tier name, achievable TB/s) of the tiers with bandwidth.
    tiers: Vec<(&'a str, f64)>,
}

impl<'a> Roofs<'a> {
    fn of(r: &'a RooflineReport) -> Self {
        let points = r
            .ops
            .iter()
            .filter(|o| o.flops > 0.0 && o.achieved_flops_per_s > 0.0)
            .map(|o| {
                (
                    o.name.as_str(),
                    o.intensity,
                    o.achieved_flops_per_s / TFLOPS,
                )
            })
            .collect();
        let mut peaks: Vec<(String, f64)> = Vec::new();
        for o in &r.ops {
            let name = format!("{} {}", o.engine, o.dtype);
            if !peaks.iter().any(|(n, _)| *n == name) {
                peaks.push((name, o.peak_flops_per_s / TFLOPS));
            }
        }
        let tiers = r
            .memory
            .iter()
            .map(|t| (t.name.as_str(), t.effective_bandwidth_bytes_per_s / TFLOPS))
            .filter(|t| t.1 > 0.0)
            .collect();
        Roofs {
            points,
            peaks,
            tiers,
        }
    }

    /// The device tier's bandwidth (TB/s), where the peaks' knees are.
    fn device_bw(&self, r: &RooflineReport) -> f64 {
        self.tiers
            .iter()
            .find(|t| t.0 == r.device_tier)
            .map(|t| t.1)
            .unwrap_or(f64::INFINITY)
    }

    /// The boxes (px) of the peaks' lines and labels, which the points' labels avoid.
    fn peak_boxes(&self, r: &RooflineReport, x: &AxisMap, y: &AxisMap) -> Vec<Bbox> {
        let bw = self.device_bw(r);
        let right = x.at(x.hi);
        let mut v = Vec::new();
        for (name, peak) in &self.peaks {
            let py = y.at(*peak);
            let left = x.at((peak / bw).clamp(x.lo, x.hi));
            v.push((left, py - 1.0, right, py + 1.0));
            let w = peak_label(name, *peak).chars().count() as f64 * 0.6 * 11.0;
            v.push((right - 4.0 - w, py - 4.0 - 11.0, right - 4.0, py - 3.0));
        }
        v
    }

    fn top_peak(&self) -> f64 {
        self.peaks.iter().map(|p| p.1).fold(0.0, f64::max)
    }

    /// The (x, y) axes over whole decades: the ops, every ridge point of a roof pair and the
    /// peaks, with room on both sides; `None` when there is nothing to draw.
    fn axes(&self, height: f64) -> Option<(AxisMap, AxisMap)> {
        let top_peak = self.top_peak();
        let min_peak = self.peaks.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let ridges = self
            .tiers
            .iter()
            .flat_map(|t| self.peaks.iter().map(move |p| p.1 / t.1));
        let xs = self.points.iter().map(|p| p.1).chain(ridges);
        let (xmin, xmax) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
        let ys = self.points.iter().map(|p| p.2).chain([min_peak, top_peak]);
        let (ymin, ymax) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
        if !(xmin.is_finite() && xmax > 0.0 && ymin.is_finite() && ymax > 0.0) {
            return None;
        }
        Some((
            AxisMap::decades(xmin / 2.0, xmax * 2.0, LEFT, W - RIGHT),
            AxisMap::decades(ymin / 2.0, ymax * 2.0, height - BOTTOM, TOP),
        ))
    }
}

/// The chart as an SVG document.
pub fn roofline_svg(r: &RooflineReport) -> String {
    let roofs = Roofs::of(r);
    let h = MIN_H.max(TOP + LINE * (roofs.tiers.len() + roofs.points.len() + 2) as f64 + BOTTOM);
    let Some((x, y)) = roofs.axes(h) else {
        let mut s = Svg::new();
        s.el("svg")
            .attr("xmlns", XMLNS)
            .attr("width", 10)
            .attr("height", 10)
            .end()
            .nl();
        return s.as_str().to_string();
    };
    let mut s = Svg::plain(W, h);
    s.el("text")
        .attr("x", LEFT)
        .attr("y", 22)
        .attr("font-size", 14)
        .text(&format!(
            "Roofline: {} ({}), intensity at {}",
            r.device, r.compute_kind, r.device_tier
        ))
        .nl();
    grid(&mut s, &x, &y, h);
    let legend = Legend {
        x: W - RIGHT,
        y: TOP + LINE,
        row: LINE,
    };
    roof_lines(&mut s, r, &roofs, &x, &y, &legend);
    // Ops: numbered points, named in the legend under the tiers; on the chart, one number
    // label per cluster of points (ops of one shape class fall on one spot), placed where it
    // overlaps no other label and no point.
    let at: Vec<(f64, f64)> = roofs
        .points
        .iter()
        .map(|(_, ix, t)| (x.at(*ix), y.at(*t)))
        .collect();
    for (i, (name, _, _)) in roofs.points.iter().enumerate() {
        let c = pick(&POINTS, i);
        let (px, py) = at[i];
        let ly = legend.y(roofs.tiers.len() + 1 + i);
        s.el("circle")
            .attr("cx", Px(px))
            .attr("cy", Px(py))
            .attr("r", 4)
            .attr("fill", c)
            .titled(name);
        s.el("circle")
            .attr("cx", Px(legend.x + 19.0))
            .attr("cy", Px(ly - 4.0))
            .attr("r", 4)
            .attr("fill", c)
            .end();
        s.el("text")
            .attr("x", Px(legend.x + 34.0))
            .attr("y", Px(ly))
            .attr("fill", c)
            .text(&format!("{} {name}", i + 1))
            .nl();
    }
    for l in place_labels(&at, &roofs.peak_boxes(r, &x, &y)) {
        s.el("text")
            .attr("x", Px(l.x))
            .attr("y", Px(l.y))
            .attr("text-anchor", if l.end { "end" } else { "start" })
            .attr("fill", pick(&POINTS, l.first))
            .attr("font-size", LABEL_SIZE)
            .text(&l.text)
            .nl();
    }
    s.finish()
}

/// A peak's label on its line.
fn peak_label(name: &str, peak: f64) -> String {
    format!("{name} peak {} TFLOP/s", num(peak))
}

/// A box in pixels: (left, top, right, bottom).
type Bbox = (f64, f64, f64, f64);

/// The font size of the points' number labels, and the width of one of their characters
/// (a digit or a comma in a sans-serif face is about 0.6 em).
const LABEL_SIZE: f64 = 9.0;
const LABEL_CHAR_W: f64 = 0.6 * LABEL_SIZE;
/// Points closer than this (px) share one label.
const CLUSTER_PX: f64 = 3.0;

/// A number label placed on the chart: its text anchor point, whether the text ends there,
/// and the first point it names (its colour).
#[derive(Debug, Clone, PartialEq)]
struct Placed {
    x: f64,
    y: f64,
    end: bool,
    first: usize,
    text: String,
}

impl Placed {
    /// The label's box.
    fn bbox(&self) -> Bbox {
        let w = self.text.chars().count() as f64 * LABEL_CHAR_W;
        let left = if self.end { self.x - w } else { self.x };
        (left, self.y - LABEL_SIZE, left + w, self.y + 1.0)
    }
}

fn overlaps(a: Bbox, b: Bbox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Number labels for the points at `at` (pixels, in op order): points within
/// [`CLUSTER_PX`] of each other share one label (`1,3,4`); each label takes the first of a
/// few positions around its point where it overlaps no label placed before it, no point's
/// marker (radius 4) and none of `obstacles`, else the first position.
fn place_labels(at: &[(f64, f64)], obstacles: &[Bbox]) -> Vec<Placed> {
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for (i, p) in at.iter().enumerate() {
        let near = |q: &(f64, f64)| (p.0 - q.0).hypot(p.1 - q.1) <= CLUSTER_PX;
        match clusters.iter_mut().find(|c| near(&at[c[0]])) {
            Some(c) => c.push(i),
            None => clusters.push(vec![i]),
        }
    }
    let mut markers: Vec<Bbox> = at
        .iter()
        .map(|(x, y)| (x - 4.0, y - 4.0, x + 4.0, y + 4.0))
        .collect();
    markers.extend_from_slice(obstacles);
    let mut placed: Vec<Placed> = Vec::new();
    for c in clusters {
        let (px, py) = at[c[0]];
        let text = c
            .iter()
            .map(|i| (i + 1).to_string())
            .collect::<Vec<_>>()
            .join(",");
        // (dx, dy, text ends at the anchor): right above, right below, left above, left
        // below, then further out.
        let tries = [
            (6.0, -5.0, false),
            (6.0, 12.0, false),
            (-6.0, -5.0, true),
            (-6.0, 12.0, true),
            (6.0, -16.0, false),
            (-6.0, -16.0, true),
            (6.0, 23.0, false),
            (-6.0, 23.0, true),
        ];
        let mut candidates: Vec<Placed> = tries
            .iter()
            .map(|(dx, dy, end)| Placed {
                x: px + dx,
                y: py + dy,
                end: *end,
                first: c[0],
                text: text.clone(),
            })
            .collect();
        let free = |l: &Placed| {
            let b = l.bbox();
            !placed.iter().any(|o| overlaps(b, o.bbox()))
                && !markers.iter().any(|m| overlaps(b, *m))
        };
        let pick = candidates.iter().position(free).unwrap_or(0);
        placed.push(candidates.swap_remove(pick));
    }
    placed
}

/// The decade grid, its labels and the axis titles.
fn grid(s: &mut Svg, x: &AxisMap, y: &AxisMap, h: f64) {
    for v in x.decade_ticks() {
        let px = Px(x.at(v));
        s.el("line")
            .attr("x1", px)
            .attr("y1", TOP)
            .attr("x2", px)
            .attr("y2", Px(h - BOTTOM))
            .attr("stroke", "#ddd")
            .end();
        s.el("text")
            .attr("x", px)
            .attr("y", Px(h - BOTTOM + 16.0))
            .attr("text-anchor", "middle")
            .text(&tick_label(v))
            .nl();
    }
    for v in y.decade_ticks() {
        let py = Px(y.at(v));
        s.el("line")
            .attr("x1", LEFT)
            .attr("y1", py)
            .attr("x2", Px(W - RIGHT))
            .attr("y2", py)
            .attr("stroke", "#ddd")
            .end();
        s.el("text")
            .attr("x", Px(LEFT - 6.0))
            .attr("y", Px(py.0 + 4.0))
            .attr("text-anchor", "end")
            .text(&tick_label(v))
            .nl();
    }
    s.el("text")
        .attr("x", Px((LEFT + W - RIGHT) / 2.0))
        .attr("y", Px(h - 12.0))
        .attr("text-anchor", "middle")
        .text("arithmetic intensity (FLOP/B)");
    s.el("text")
        .attr(
            "transform",
            format_args!("translate(18 {}) rotate(-90)", Px((TOP + h - BOTTOM) / 2.0)),
        )
        .attr("text-anchor", "middle")
        .text("TFLOP/s")
        .nl();
}

/// Each tier's diagonal up to the highest peak (the device tier solid, the others dashed,
/// each with a legend row), then each peak's horizontal line from the device tier's ridge.
fn roof_lines(
    s: &mut Svg,
    r: &RooflineReport,
    roofs: &Roofs,
    x: &AxisMap,
    y: &AxisMap,
    legend: &Legend,
) {
    let (x0, x1) = (x.lo, x.hi);
    let top_peak = roofs.top_peak();
    for (i, (name, bw)) in roofs.tiers.iter().enumerate() {
        let knee = (top_peak / bw).clamp(x0, x1);
        let start = x0.max(y.lo / bw);
        let dash = (*name != r.device_tier).then_some("5 3");
        let ly = legend.y(i);
        let segments = [
            (x.at(start), y.at(start * bw), x.at(knee), y.at(knee * bw)),
            (legend.x + 8.0, ly - 4.0, legend.x + 30.0, ly - 4.0),
        ];
        for (x1, y1, x2, y2) in segments {
            let el = s
                .el("line")
                .attr("x1", Px(x1))
                .attr("y1", Px(y1))
                .attr("x2", Px(x2))
                .attr("y2", Px(y2))
                .attr("stroke", "#444")
                .attr("stroke-width", 1.5);
            match dash {
                Some(d) => el.attr("stroke-dasharray", d).end(),
                None => el.end(),
            };
        }
        s.el("text")
            .attr("x", Px(legend.x + 34.0))
            .attr("y", Px(ly))
            .attr("fill", "#444")
            .text(&format!("{name} {} TB/s", num(*bw)))
            .nl();
    }
    let device_bw = roofs.device_bw(r);
    for (name, peak) in &roofs.peaks {
        let knee = (peak / device_bw).clamp(x0, x1);
        let py = Px(y.at(*peak));
        s.el("line")
            .attr("x1", Px(x.at(knee)))
            .attr("y1", py)
            .attr("x2", Px(x.at(x1)))
            .attr("y2", py)
            .attr("stroke", "#000")
            .attr("stroke-width", 1.5)
            .end();
        s.el("text")
            .attr("x", Px(x.at(x1) - 4.0))
            .attr("y", Px(py.0 - 4.0))
            .attr("text-anchor", "end")
            .text(&peak_label(name, *peak))
            .nl();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on one spot share a label; no label overlaps another, a point or an obstacle
    /// when there is room; a crowded spot still gets its label.
    #[test]
    fn labels_cluster_and_do_not_collide() {
        let at = [
            (100.0, 100.0),
            (101.0, 100.5),
            (108.0, 100.0),
            (100.0, 112.0),
            (300.0, 300.0),
        ];
        let wall = (300.0, 280.0, 400.0, 296.0);
        let placed = place_labels(&at, &[wall]);
        let texts: Vec<&str> = placed.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["1,2", "3", "4", "5"]);
        for (i, a) in placed.iter().enumerate() {
            for b in &placed[i + 1..] {
                assert!(!overlaps(a.bbox(), b.bbox()), "{a:?} and {b:?}");
            }
            for (x, y) in at {
                assert!(
                    !overlaps(a.bbox(), (x - 4.0, y - 4.0, x + 4.0, y + 4.0)),
                    "{a:?} on the point at ({x}, {y})"
                );
            }
            assert!(!overlaps(a.bbox(), wall), "{a:?}");
        }
        // Label 5 would sit right above its point, where the wall is: it goes elsewhere.
        assert!(placed[3].y > 300.0 || placed[3].end, "{:?}", placed[3]);
        // Nothing free: the first position, still drawn.
        let boxed = [(0.0, 0.0, 1000.0, 1000.0)];
        let p = place_labels(&[(50.0, 50.0)], &boxed);
        assert_eq!((p[0].x, p[0].y, p[0].end), (56.0, 45.0, false));
    }
}
