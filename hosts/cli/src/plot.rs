//! `--plot FILE.svg` for `perfcast roofline`: the classic log-log roofline chart (Williams,
//! Waterman & Patterson 2009). x: arithmetic intensity at the device tier (FLOP/B); y:
//! throughput (TFLOP/s). Roofs: one horizontal line per engine/dtype peak the ops use, one
//! diagonal per memory tier (its achievable bandwidth); points: each op's achieved throughput.
//!
//! Only finite, positive numbers reach the drawing (the host checked them; points without
//! FLOPs are left out), so the file never contains NaN.

use perfcast_host::roofline::RooflineReport;
use std::fmt::Write as _;

const W: f64 = 840.0;
/// Minimum height; the legend (tiers, then one line per op) can make the chart taller.
const MIN_H: f64 = 500.0;
/// Legend line height.
const LINE: f64 = 16.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 240.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// Log-scale axis over whole decades.
struct Axis {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Axis {
    fn new(min: f64, max: f64, from: f64, to: f64) -> Axis {
        let lo = min.log10().floor();
        let hi = max.log10().ceil().max(lo + 1.0);
        Axis { lo, hi, from, to }
    }
    fn at(&self, v: f64) -> f64 {
        let t = (v.log10() - self.lo) / (self.hi - self.lo);
        self.from + t * (self.to - self.from)
    }
    fn decades(&self) -> impl Iterator<Item = f64> {
        (self.lo as i32..=self.hi as i32).map(|e| 10f64.powi(e))
    }
}

fn label(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// The chart as an SVG document.
pub fn roofline_svg(r: &RooflineReport) -> String {
    let tflops = 1e12;
    let points: Vec<(&str, f64, f64)> = r
        .ops
        .iter()
        .filter(|o| o.flops > 0.0 && o.achieved_flops_per_s > 0.0)
        .map(|o| {
            (
                o.name.as_str(),
                o.intensity,
                o.achieved_flops_per_s / tflops,
            )
        })
        .collect();
    let mut peaks: Vec<(String, f64)> = Vec::new();
    for o in &r.ops {
        let name = format!("{} {}", o.engine, o.dtype);
        if !peaks.iter().any(|(n, _)| *n == name) {
            peaks.push((name, o.peak_flops_per_s / tflops));
        }
    }
    let top_peak = peaks.iter().map(|p| p.1).fold(0.0, f64::max);
    let min_peak = peaks.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let tiers: Vec<(&str, f64)> = r
        .memory
        .iter()
        .map(|t| (t.name.as_str(), t.effective_bandwidth_bytes_per_s / tflops))
        .filter(|t| t.1 > 0.0)
        .collect();
    // Ridge points of every roof pair bound the x range along with the ops.
    let ridges: Vec<f64> = tiers
        .iter()
        .flat_map(|t| peaks.iter().map(move |p| p.1 / t.1))
        .collect();
    let xs = points.iter().map(|p| p.1).chain(ridges.iter().copied());
    let (xmin, xmax) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let ys = points.iter().map(|p| p.2).chain([min_peak, top_peak]);
    let (ymin, ymax) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    if !(xmin.is_finite() && xmax > 0.0 && ymin.is_finite() && ymax > 0.0) {
        return String::from(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n",
        );
    }
    #[allow(non_snake_case)]
    let H = MIN_H.max(TOP + LINE * (tiers.len() + points.len() + 2) as f64 + BOTTOM);
    let x = Axis::new(xmin / 2.0, xmax * 2.0, LEFT, W - RIGHT);
    let y = Axis::new(ymin / 2.0, ymax * 2.0, H - BOTTOM, TOP);

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(s, "<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"22\" font-size=\"14\">Roofline: {} ({}), intensity at {}</text>",
        esc(&r.device),
        esc(&r.compute_kind),
        esc(&r.device_tier)
    );
    // Grid and tick labels.
    for v in x.decades() {
        let px = x.at(v);
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM,
            H - BOTTOM + 16.0,
            label(v)
        );
    }
    for v in y.decades() {
        let py = y.at(v);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            label(v)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">arithmetic intensity (FLOP/B)</text>\
         <text transform=\"translate(18 {:.1}) rotate(-90)\" text-anchor=\"middle\">TFLOP/s</text>",
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0,
        (TOP + H - BOTTOM) / 2.0
    );
    // Roofs: each tier's diagonal up to the highest peak, each peak's horizontal line.
    let (x0, x1) = (10f64.powf(x.lo), 10f64.powf(x.hi));
    for (i, (name, bw)) in tiers.iter().enumerate() {
        let knee = (top_peak / bw).clamp(x0, x1);
        let start = x0.max(10f64.powf(y.lo) / bw);
        // The device tier solid, the others dashed; a legend entry for each.
        let dash = if *name == r.device_tier {
            ""
        } else {
            " stroke-dasharray=\"5 3\""
        };
        let ly = TOP + LINE * (i as f64 + 1.0);
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#444\" stroke-width=\"1.5\"{dash}/>\
             <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#444\" stroke-width=\"1.5\"{dash}/>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#444\">{} {} TB/s</text>",
            x.at(start),
            y.at(start * bw),
            x.at(knee),
            y.at(knee * bw),
            W - RIGHT + 8.0,
            ly - 4.0,
            W - RIGHT + 30.0,
            ly - 4.0,
            W - RIGHT + 34.0,
            ly,
            esc(name),
            crate::common::num(*bw)
        );
    }
    let device_bw = tiers
        .iter()
        .find(|t| t.0 == r.device_tier)
        .map(|t| t.1)
        .unwrap_or(f64::INFINITY);
    for (name, peak) in &peaks {
        let knee = (peak / device_bw).clamp(x0, x1);
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\" stroke-width=\"1.5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} peak {} TFLOP/s</text>",
            x.at(knee),
            y.at(*peak),
            x.at(x1),
            y.at(*peak),
            x.at(x1) - 4.0,
            y.at(*peak) - 4.0,
            esc(name),
            crate::common::num(*peak)
        );
    }
    // Ops: numbered points, named in the legend under the tiers (labels on the chart would
    // overlap where ops share a shape class).
    for (i, (name, ix, t)) in points.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let (px, py) = (x.at(*ix), y.at(*t));
        let ly = TOP + LINE * ((tiers.len() + i) as f64 + 2.0);
        let _ = writeln!(
            s,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"4\" fill=\"{c}\"><title>{}</title></circle>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"{c}\" font-size=\"9\">{}</text>\
             <circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{c}\"/>\
             <text x=\"{:.1}\" y=\"{ly:.1}\" fill=\"{c}\">{} {}</text>",
            esc(name),
            px + 5.0,
            py - 4.0,
            i + 1,
            W - RIGHT + 19.0,
            ly - 4.0,
            W - RIGHT + 34.0,
            i + 1,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}
