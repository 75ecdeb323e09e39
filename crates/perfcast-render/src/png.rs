//! The SVG charts as PNG (`--plot FILE.png`): rasterised by resvg at twice the SVG's size,
//! on white, with the font the charts name ([`crate::svg::FONT_FAMILY`]: DejaVu Sans,
//! embedded, so the image does not depend on the machine's fonts; its licence is
//! `fonts/DejaVuSans.LICENSE` beside it).

use resvg::{tiny_skia, usvg};

/// DejaVu Sans (Bitstream Vera licence, `fonts/DejaVuSans.LICENSE`).
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Pixels per SVG unit: twice, for a legible image on a high-density screen.
const SCALE: f32 = 2.0;

/// `svg` (a chart perfcast drew) as a PNG file's bytes, or why it cannot be.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, String> {
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_font_data(FONT.to_vec());
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("the chart's SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let (w, h) = (size.width() as f32 * SCALE, size.height() as f32 * SCALE);
    let mut pixmap = tiny_skia::Pixmap::new(w.ceil() as u32, h.ceil() as u32)
        .ok_or_else(|| format!("a chart of {w} x {h} pixels cannot be drawn"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| format!("PNG encoding: {e}"))
}

#[cfg(test)]
mod tests {
    /// A chart with text becomes a PNG of twice its size, with ink on it.
    #[test]
    fn a_chart_becomes_a_png() {
        let svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"120\" height=\"40\" \
             font-family=\"{}\" font-size=\"11\"><text x=\"4\" y=\"20\">step time</text></svg>",
            crate::svg::FONT_FAMILY
        );
        let png = super::svg_to_png(&svg).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // The IHDR chunk: width and height, big-endian, after the 8-byte signature and the
        // chunk's length and type.
        let dim = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        assert_eq!((dim(16), dim(20)), (240, 80));
        assert!(super::svg_to_png("<svg").is_err());
    }
}
