//! Timing a shape from a table: the measured row where the shape was measured, else an
//! interpolation between the measured shapes around it, else nothing (the caller's analytical
//! path answers).
//!
//! The scheme is nested one-dimensional interpolation in log-log space, dimension by
//! dimension in the schema's shape order: for the query's first coordinate `x`, the rows at
//! the measured values just below and just above it (`x0 < x < x1`, or `x` itself) are each
//! reduced to a latency over the remaining coordinates the same way, and the two are joined by
//!
//! `ln t(x) = ln t(x0) + (ln x - ln x0) / (ln x1 - ln x0) · (ln t(x1) - ln t(x0))`
//!
//! (linear in `x` where `x0` is 0). Latency is a power law in each dimension over the ranges
//! that matter (linear in `k` for a compute-bound GEMM, flat in `m` while the weights' bytes
//! bind), so a straight line in log-log space follows both regimes and the knee between
//! them to within the spacing of the grid. Each line of the grid is searched on its own, so a
//! missing point (a table that is not a full Cartesian product, or a row held back) is bridged
//! by its neighbours on that line. A shape outside the measured range on any coordinate is
//! not answered: extrapolating a table would hide a change of regime (tile quantisation, a
//! different kernel) it never measured.

use crate::table::Row;

/// How a time was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Path {
    /// The shape is a row of the table.
    Measured,
    /// Between measured shapes.
    Interpolated,
    /// Beyond the largest measured size along a dimension the time is known to scale with
    /// (a fused MoE block's tokens), scaled from the largest.
    Scaled,
}

impl Path {
    pub const fn name(self) -> &'static str {
        match self {
            Path::Measured => "measured",
            Path::Interpolated => "interpolated",
            Path::Scaled => "scaled",
        }
    }
}

/// A time from a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lookup {
    pub latency_ms: f64,
    pub path: Path,
}

/// One variant's rows in shape order, as [`lookup`] reads them: row `i`'s shape coordinate
/// `dim` and its latency.
pub trait Sorted {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn coord(&self, i: usize, dim: usize) -> u64;
    fn latency_ms(&self, i: usize) -> f64;
}

impl Sorted for [Row] {
    fn len(&self) -> usize {
        <[Row]>::len(self)
    }
    fn coord(&self, i: usize, dim: usize) -> u64 {
        self[i].shape[dim]
    }
    fn latency_ms(&self, i: usize) -> f64 {
        self[i].latency_ms
    }
}

/// The latency of `shape` among `rows` (one variant's rows, sorted by shape); `None` outside
/// the measured range.
pub fn lookup<R: Sorted + ?Sized>(rows: &R, shape: &[u64]) -> Option<Lookup> {
    if Sorted::is_empty(rows) || shape.is_empty() {
        return None;
    }
    let mut exact = true;
    let ln_t = along(rows, 0..rows.len(), 0, shape, &mut exact)?;
    let latency_ms = ln_t.exp();
    latency_ms.is_finite().then_some(Lookup {
        latency_ms,
        path: if exact {
            Path::Measured
        } else {
            Path::Interpolated
        },
    })
}

/// The first index in `range` whose coordinate `dim` is not below `v` (`strict`: not at or
/// below), the rows of `range` being sorted by it.
fn first<R: Sorted + ?Sized>(
    rows: &R,
    range: &std::ops::Range<usize>,
    dim: usize,
    v: u64,
    strict: bool,
) -> usize {
    let (mut lo, mut hi) = (range.start, range.end);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let c = rows.coord(mid, dim);
        if c < v || (strict && c == v) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `ln` latency at `q[dim..]` over the rows of `range`, whose shapes agree on every
/// coordinate before `dim` and are sorted by the rest.
fn along<R: Sorted + ?Sized>(
    rows: &R,
    range: std::ops::Range<usize>,
    dim: usize,
    q: &[u64],
    exact: &mut bool,
) -> Option<f64> {
    let x = q[dim];
    let last = dim + 1 == q.len();
    let at = |v: u64| first(rows, &range, dim, v, false)..first(rows, &range, dim, v, true);
    let reduce = |g: std::ops::Range<usize>, exact: &mut bool| -> Option<f64> {
        if last {
            (!g.is_empty()).then(|| rows.latency_ms(g.start).ln())
        } else {
            along(rows, g, dim + 1, q, exact)
        }
    };
    let i = first(rows, &range, dim, x, false);
    if i < range.end && rows.coord(i, dim) == x {
        return reduce(at(x), exact);
    }
    if i == range.start || i == range.end {
        return None;
    }
    *exact = false;
    let (x0, x1) = (rows.coord(i - 1, dim), rows.coord(i, dim));
    let y0 = reduce(at(x0), exact)?;
    let y1 = reduce(at(x1), exact)?;
    let t = if x0 == 0 {
        x as f64 / x1 as f64
    } else {
        ((x as f64).ln() - (x0 as f64).ln()) / ((x1 as f64).ln() - (x0 as f64).ln())
    };
    Some(y0 + t * (y1 - y0))
}
