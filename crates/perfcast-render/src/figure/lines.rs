//! Line panels: series over categories, and series over a value x axis.

use super::{finite, line, text, y_axis, Area, Axis, Glyph, Key, Panel, PlotError, Series};
use crate::axis::{tick_label, AxisMap};
use crate::marks::{marker, polyline, Marker};
use crate::palette::{pick, OKABE_ITO};
use crate::svg::Svg;

/// Series over categories: one line with markers per series, the categories as x labels.
pub(super) fn categories(
    w: &mut Svg,
    p: &Panel,
    area: &Area,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<Vec<Key>, PlotError> {
    let mut all = Vec::new();
    for (name, v) in series {
        if v.len() != categories.len() {
            return Err(p.error(format!(
                "series `{name}` has {} values for {} categories",
                v.len(),
                categories.len()
            )));
        }
        for x in v {
            all.push(finite(p, *x, name)?);
        }
    }
    let (lo, hi) = p.fit(&p.y, &all)?;
    let ym = area.y_map(p.y.scale, lo, hi);
    y_axis(w, &ym, &p.y.label, area);
    let n = categories.len().max(1) as f64;
    let slot = (area.x1 - area.x0) / n;
    let xat = |i: usize| area.x0 + slot * (i as f64 + 0.5);
    for (i, c) in categories.iter().enumerate() {
        text(w, xat(i), area.bottom + 18.0, 11.0, "middle", "", c);
    }
    let markers = [Marker::Circle, Marker::Triangle, Marker::Square];
    let mut keys = Vec::new();
    for (k, (name, v)) in series.iter().enumerate() {
        let color = pick(&OKABE_ITO, k);
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(i, y)| (xat(i), ym.at(*y)))
            .collect();
        polyline(w, &pts, color, None).nl();
        for (x, y) in &pts {
            marker(w, markers[k % 3], *x, *y, color).nl();
        }
        keys.push(Key::new(name.clone(), k, Glyph::Marker(markers[k % 3])));
    }
    Ok(keys)
}

/// Series over a value x axis (linear or log): lines and/or markers; markers outside the
/// axes' ranges are left out.
pub(super) fn xy(
    w: &mut Svg,
    p: &Panel,
    area: &Area,
    x: &Axis,
    series: &[Series],
) -> Result<Vec<Key>, PlotError> {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for s in series {
        for (a, b) in &s.points {
            xs.push(finite(p, *a, &s.name)?);
            ys.push(finite(p, *b, &s.name)?);
        }
    }
    let (xlo, xhi) = p.fit(x, &xs)?;
    let (ylo, yhi) = p.fit(&p.y, &ys)?;
    let xm = AxisMap::new(x.scale, xlo, xhi, area.x0, area.x1);
    let ym = area.y_map(p.y.scale, ylo, yhi);
    y_axis(w, &ym, &p.y.label, area);
    let (top, bottom) = (area.top, area.bottom);
    for t in xm.ticks() {
        let px = xm.at(t);
        line(w, px, top, px, bottom, "stroke=\"#e5e5e5\"");
        line(w, px, bottom, px, bottom + 5.0, "stroke=\"#333\"");
        text(w, px, bottom + 18.0, 11.0, "middle", "", &tick_label(t));
    }
    text(
        w,
        (area.x0 + area.x1) / 2.0,
        bottom + 40.0,
        13.0,
        "middle",
        "",
        &x.label,
    );
    let inside = |(a, b): (f64, f64)| {
        a >= xlo * (1.0 - 1e-9)
            && a <= xhi * (1.0 + 1e-9)
            && b >= ylo * (1.0 - 1e-9)
            && b <= yhi * (1.0 + 1e-9)
    };
    let mut keys = Vec::new();
    for s in series {
        let color = pick(&OKABE_ITO, s.color);
        if s.line && s.points.len() > 1 {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .map(|(a, b)| (xm.at(*a), ym.at(*b)))
                .collect();
            polyline(w, &pts, color, s.dashed.then_some("6,4")).nl();
        }
        if let Some(m) = s.marker {
            for pt in &s.points {
                if inside(*pt) {
                    marker(w, m, xm.at(pt.0), ym.at(pt.1), color).nl();
                }
            }
        }
        if !s.name.is_empty() {
            let glyph = match s.marker {
                Some(m) => Glyph::Marker(m),
                None => Glyph::Line { dashed: s.dashed },
            };
            keys.push(Key::new(s.name.clone(), s.color, glyph));
        }
    }
    Ok(keys)
}
