//! Colours of the charts.

/// Colour-blind-friendly palette (Okabe & Ito 2008), then a few extra distinct colours: the
/// studies' figures.
pub const OKABE_ITO: [&str; 10] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
    "#999999", "#8C564B",
];

/// Sixteen distinct colours (matplotlib's tab10, then darker tab20b hues): the parts of
/// `predict --plot`'s time bar, up to sixteen.
pub const TAB16: [&str; 16] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
];

/// Six tab10 colours ordered so that neighbours differ most (blue, red, green, purple,
/// orange, brown): the numbered ops of `roofline --plot`.
pub const POINTS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Colour `i` of `palette`, cycling.
pub fn pick(palette: &[&'static str], i: usize) -> &'static str {
    palette
        .get(i % palette.len().max(1))
        .copied()
        .unwrap_or("#000000")
}
