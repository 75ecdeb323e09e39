//! An SVG document written element by element, with text escaping.
//!
//! Plain SVG 1.1 strings, no dependency: an element is opened with [`Svg::el`], given its
//! attributes in order ([`El::attr`], [`El::raw`]) and closed empty ([`El::end`]), with escaped
//! text ([`El::text`]) or with a tooltip ([`El::titled`]). Coordinates are written with one
//! decimal through [`Px`]. Charts choose their own line breaks ([`Svg::nl`]).

use std::fmt::{self, Display, Write as _};

/// The SVG namespace.
pub const XMLNS: &str = "http://www.w3.org/2000/svg";

/// `s` with `&`, `<`, `>` and `"` escaped, for text content and attribute values.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A coordinate written with one decimal (a tenth of a pixel is below what a screen shows).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Px(pub f64);

impl Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}", self.0)
    }
}

/// An SVG document being written.
#[derive(Debug, Clone, Default)]
pub struct Svg {
    out: String,
}

/// The font every chart names: DejaVu Sans first (the font whose widths the label placement
/// assumes; on most Linux systems the default sans-serif), then the fonts other systems have,
/// so a chart renders alike in browsers, `rsvg-convert` and GitHub.
pub const FONT_FAMILY: &str = "DejaVu Sans, Arial, Helvetica, sans-serif";

impl Svg {
    /// An empty document (open the root with `el("svg")...open()`).
    pub fn new() -> Self {
        Svg::default()
    }

    /// A chart whose texts inherit the root's font ([`FONT_FAMILY`], 11 px), `width` x
    /// `height` on a white background (the CLI's charts).
    pub fn plain(width: f64, height: f64) -> Self {
        let mut s = Svg::new();
        s.el("svg")
            .attr("xmlns", XMLNS)
            .attr("width", width)
            .attr("height", height)
            .attr("font-family", FONT_FAMILY)
            .attr("font-size", 11)
            .open()
            .nl();
        s.el("rect")
            .attr("width", width)
            .attr("height", height)
            .attr("fill", "white")
            .end()
            .nl();
        s
    }

    /// Open element `tag`; give it attributes, then close it.
    pub fn el(&mut self, tag: &'static str) -> El<'_> {
        self.out.push('<');
        self.out.push_str(tag);
        El { svg: self, tag }
    }

    /// A line break between elements.
    pub fn nl(&mut self) -> &mut Self {
        self.out.push('\n');
        self
    }

    /// Close an element opened with [`El::open`].
    pub fn close(&mut self, tag: &str) -> &mut Self {
        let _ = write!(self.out, "</{tag}>");
        self
    }

    /// What has been written so far.
    pub fn as_str(&self) -> &str {
        &self.out
    }

    /// Close the root element and return the document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }

    /// Whether a non-finite number (`NaN`, `inf`) reached an attribute or a point list.
    pub fn has_non_finite(&self) -> bool {
        ["NaN", "=\"inf", "=\"-inf", ",inf", ",-inf", "inf,"]
            .iter()
            .any(|bad| self.out.contains(bad))
    }
}

/// An element being written: its attributes, then how it closes.
#[must_use = "an element must be closed"]
pub struct El<'a> {
    svg: &'a mut Svg,
    tag: &'static str,
}

impl<'a> El<'a> {
    /// ` name="value"`; the value is written as is (numbers, colours, the caller's own
    /// attribute syntax), not escaped.
    pub fn attr(self, name: &str, value: impl Display) -> Self {
        let _ = write!(self.svg.out, " {name}=\"{value}\"");
        self
    }

    /// A space and `attrs` as written (a set of attributes shared by many elements; may be
    /// empty).
    pub fn raw(self, attrs: &str) -> Self {
        self.svg.out.push(' ');
        self.svg.out.push_str(attrs);
        self
    }

    /// Close the element empty: `/>`.
    pub fn end(self) -> &'a mut Svg {
        self.svg.out.push_str("/>");
        self.svg
    }

    /// End the start tag (children follow; close with [`Svg::close`]).
    pub fn open(self) -> &'a mut Svg {
        self.svg.out.push('>');
        self.svg
    }

    /// Escaped text content, then the end tag.
    pub fn text(self, s: &str) -> &'a mut Svg {
        let _ = write!(self.svg.out, ">{}</{}>", escape(s), self.tag);
        self.svg
    }

    /// A tooltip (`<title>`, escaped) as the only child.
    pub fn titled(self, s: &str) -> &'a mut Svg {
        let _ = write!(self.svg.out, "><title>{}</title></{}>", escape(s), self.tag);
        self.svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_written_in_order_and_text_is_escaped() {
        let mut s = Svg::plain(840.0, 500.5);
        s.el("line")
            .attr("x1", Px(1.26))
            .attr("y1", 40.0)
            .raw("stroke=\"#ddd\"")
            .end();
        s.el("text").attr("x", 3).raw("").text("a < b & \"c\"").nl();
        s.el("circle").attr("r", 4).titled("op <1>").nl();
        let out = s.finish();
        assert_eq!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"840\" height=\"500.5\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"11\">\n\
             <rect width=\"840\" height=\"500.5\" fill=\"white\"/>\n\
             <line x1=\"1.3\" y1=\"40\" stroke=\"#ddd\"/><text x=\"3\" >a &lt; b &amp; &quot;c&quot;</text>\n\
             <circle r=\"4\"><title>op &lt;1&gt;</title></circle>\n</svg>\n"
        );
    }

    #[test]
    fn non_finite_numbers_are_found() {
        let mut s = Svg::new();
        s.el("rect").attr("x", 1.0).end();
        assert!(!s.has_non_finite());
        s.el("rect").attr("x", Px(f64::NAN)).end();
        assert!(s.has_non_finite());
    }
}
