//! Bar panels: stacked bars in groups, and the multiplicative waterfall.

use super::{
    finite, line, rect, rotated, text, y_axis, Area, BarGroup, Glyph, Key, Panel, PlotError,
    RefLine,
};
use crate::axis::Scale;
use crate::marks::stack;
use crate::num::fmt_factor;
use crate::palette::{pick, OKABE_ITO};
use crate::svg::Svg;

/// Stacked bars in groups, with an optional reference line; the legend names the series.
pub(super) fn stacked(
    w: &mut Svg,
    p: &Panel,
    area: &Area,
    series: &[String],
    groups: &[BarGroup],
    reference: Option<&RefLine>,
) -> Result<Vec<Key>, PlotError> {
    let mut tops = Vec::new();
    for g in groups {
        for b in &g.bars {
            if b.segments.len() != series.len() {
                return Err(p.error(format!(
                    "bar `{}` has {} segments for {} series",
                    b.label,
                    b.segments.len(),
                    series.len()
                )));
            }
            let mut s = 0.0;
            for v in &b.segments {
                s += finite(p, *v, "a bar segment")?.max(0.0);
            }
            tops.push(s);
        }
    }
    if let Some(r) = reference {
        tops.push(finite(p, r.value, "the reference line")?);
    }
    let (lo, hi) = p.fit(&p.y, &tops)?;
    let ym = area.y_map(p.y.scale, lo, hi);
    y_axis(w, &ym, &p.y.label, area);
    let (x0, x1, bottom) = (area.x0, area.x1, area.bottom);
    let nbars: usize = groups.iter().map(|g| g.bars.len()).sum();
    let slots = nbars as f64 + groups.len().saturating_sub(1) as f64 * 0.8;
    let slot = (x1 - x0 - 20.0) / slots.max(1.0);
    let bw = slot * 0.78;
    let mut x = x0 + 10.0;
    for g in groups {
        let gx0 = x;
        for b in &g.bars {
            let segments = stack(0.0, b.segments.iter().map(|v| v.max(0.0)));
            for (k, (from, to)) in segments.iter().enumerate() {
                let (ya, yb) = (ym.at(from.max(lo)), ym.at(to.max(lo)));
                rect(
                    w,
                    x + (slot - bw) / 2.0,
                    yb,
                    bw,
                    ya - yb,
                    pick(&OKABE_ITO, k),
                    "stroke=\"#fff\" stroke-width=\"0.5\"",
                );
            }
            let acc = segments.last().map_or(0.0, |s| s.1);
            if !b.note.is_empty() {
                text(
                    w,
                    x + slot / 2.0,
                    ym.at(acc.max(lo)) - 4.0,
                    10.0,
                    "middle",
                    "",
                    &b.note,
                );
            }
            rotated(w, x + slot / 2.0, bottom + 12.0, 10.0, -35, &b.label);
            x += slot;
        }
        text(
            w,
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
        line(
            w,
            x0,
            y,
            x1,
            y,
            "stroke=\"#C00\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"",
        );
        text(
            w,
            x1 - 4.0,
            y - 5.0,
            11.0,
            "end",
            "fill=\"#C00\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"",
            &r.label,
        );
    }
    Ok(series
        .iter()
        .enumerate()
        .map(|(i, s)| Key::new(s.clone(), i, Glyph::Swatch))
        .collect())
}

/// The waterfall: each factor's bar from the running product before it to the one after it
/// (blue up, red down), then the total (green), on a log axis.
pub(super) fn waterfall(
    w: &mut Svg,
    p: &Panel,
    area: &Area,
    factors: &[(String, f64)],
    total_label: &str,
) -> Result<Vec<Key>, PlotError> {
    let mut cum = vec![1.0];
    for (name, f) in factors {
        let f = finite(p, *f, name)?;
        if f <= 0.0 {
            return Err(p.error(format!("factor `{name}` = {f} must be > 0")));
        }
        cum.push(cum.last().copied().unwrap_or(1.0) * f);
    }
    let (lo, hi) = p.fit(&p.y, &cum)?;
    let ym = area.y_map(Scale::Log10, lo, hi);
    y_axis(w, &ym, &p.y.label, area);
    let n = factors.len() + 1;
    let slot = (area.x1 - area.x0 - 20.0) / n as f64;
    let bw = slot * 0.7;
    for i in 0..n {
        let x = area.x0 + 10.0 + i as f64 * slot;
        let (a, b, label, color) = if i < factors.len() {
            let up = factors[i].1 >= 1.0;
            (
                cum[i],
                cum[i + 1],
                factors[i].0.as_str(),
                OKABE_ITO[if up { 0 } else { 3 }],
            )
        } else {
            (1.0, cum[n - 1], total_label, OKABE_ITO[2])
        };
        let (ya, yb) = (ym.at(a), ym.at(b));
        rect(
            w,
            x + (slot - bw) / 2.0,
            ya.min(yb),
            bw,
            (ya - yb).abs().max(1.0),
            color,
            "",
        );
        if i + 1 < n {
            line(
                w,
                x + (slot + bw) / 2.0,
                yb,
                x + slot + (slot - bw) / 2.0,
                yb,
                "stroke=\"#666\" stroke-dasharray=\"3,3\"",
            );
        }
        text(
            w,
            x + slot / 2.0,
            ya.min(yb) - 5.0,
            11.0,
            "middle",
            "font-weight=\"bold\"",
            &format!("x{}", fmt_factor(b / a)),
        );
        rotated(w, x + slot / 2.0, area.bottom + 12.0, 10.5, -30, label);
    }
    Ok(vec![
        Key::new("speed-up", 0, Glyph::Swatch),
        Key::new("slow-down", 3, Glyph::Swatch),
        Key::new("total", 2, Glyph::Swatch),
    ])
}
