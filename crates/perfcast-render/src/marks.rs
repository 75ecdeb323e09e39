//! What charts draw data with: stacked segments, point markers, lines through points, and
//! legend rows.

use crate::svg::{Px, Svg};

/// The extents of stacked segments: each starts where the previous one ended, the first at
/// `start` (`(from, to)` per value, `to = from + value`). In data units for a bar on any
/// axis, or in pixels (negative values going up the page).
pub fn stack(start: f64, values: impl IntoIterator<Item = f64>) -> Vec<(f64, f64)> {
    let mut at = start;
    values
        .into_iter()
        .map(|v| {
            let from = at;
            at += v;
            (from, at)
        })
        .collect()
}

/// Point markers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Marker {
    /// A dot (prefill, the first series).
    Circle,
    /// A triangle pointing up (decode, the second series).
    Triangle,
    /// A square (the third series).
    Square,
}

/// The fill and outline every marker shares (translucent, so overlapping points show).
const MARKER_STYLE: &str = "fill-opacity=\"0.75\" stroke=\"#333\" stroke-width=\"0.5\"";

/// Marker `m` centred on (x, y) in `color`.
pub fn marker<'a>(svg: &'a mut Svg, m: Marker, x: f64, y: f64, color: &str) -> &'a mut Svg {
    match m {
        Marker::Circle => svg
            .el("circle")
            .attr("cx", Px(x))
            .attr("cy", Px(y))
            .attr("r", 4)
            .attr("fill", color)
            .raw(MARKER_STYLE)
            .end(),
        Marker::Triangle => svg
            .el("path")
            .attr(
                "d",
                format_args!(
                    "M{},{} L{},{} L{},{} Z",
                    Px(x),
                    Px(y - 5.0),
                    Px(x - 4.5),
                    Px(y + 3.5),
                    Px(x + 4.5),
                    Px(y + 3.5)
                ),
            )
            .attr("fill", color)
            .raw(MARKER_STYLE)
            .end(),
        Marker::Square => svg
            .el("rect")
            .attr("x", Px(x - 3.5))
            .attr("y", Px(y - 3.5))
            .attr("width", Px(7.0))
            .attr("height", Px(7.0))
            .attr("fill", color)
            .raw(MARKER_STYLE)
            .end(),
    }
}

/// A line through pixel `points` in `color`, 2 px wide, dashed with `dash` (e.g. `6,4`).
pub fn polyline<'a>(
    svg: &'a mut Svg,
    points: &[(f64, f64)],
    color: &str,
    dash: Option<&str>,
) -> &'a mut Svg {
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{},{}", Px(*x), Px(*y)))
        .collect();
    let el = svg
        .el("polyline")
        .attr("points", pts.join(" "))
        .attr("fill", "none")
        .attr("stroke", color)
        .attr("stroke-width", 2);
    match dash {
        Some(d) => el.attr("stroke-dasharray", d).end(),
        None => el.end(),
    }
}

/// Where a legend's rows go: entry `i` at `y + row * i`, its key from `x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Legend {
    /// Where the keys start.
    pub x: f64,
    /// The baseline of the first row.
    pub y: f64,
    /// Row height.
    pub row: f64,
}

impl Legend {
    /// The baseline of row `i`.
    pub fn y(&self, i: usize) -> f64 {
        self.y + self.row * i as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_stack_and_marks_are_well_formed() {
        assert_eq!(stack(1.0, [2.0, 3.0]), vec![(1.0, 3.0), (3.0, 6.0)]);
        let mut s = Svg::new();
        for m in [Marker::Circle, Marker::Triangle, Marker::Square] {
            marker(&mut s, m, 10.0, 20.0, "#000").nl();
        }
        polyline(&mut s, &[(0.0, 1.0), (2.0, 3.0)], "#111", Some("6,4"));
        let out = s.as_str();
        assert!(out.contains("<path d=\"M10.0,15.0 L5.5,23.5 L14.5,23.5 Z\" fill=\"#000\""));
        assert!(out.ends_with(
            "<polyline points=\"0.0,1.0 2.0,3.0\" fill=\"none\" stroke=\"#111\" stroke-width=\"2\" stroke-dasharray=\"6,4\"/>"
        ));
        let l = Legend {
            x: 0.0,
            y: 10.0,
            row: 16.0,
        };
        assert_eq!(l.y(2), 42.0);
    }
}
