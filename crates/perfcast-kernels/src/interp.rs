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

/// The latency of `shape` among `rows` (one variant's rows, sorted by shape); `None` outside
/// the measured range.
pub fn lookup(rows: &[Row], shape: &[u64]) -> Option<Lookup> {
    if rows.is_empty() || shape.is_empty() {
        return None;
    }
    let mut exact = true;
    let ln_t = along(rows, 0, shape, &mut exact)?;
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

/// `ln` latency at `q[dim..]` over `rows`, whose shapes agree on every coordinate before
/// `dim` and are sorted by the rest.
fn along(rows: &[Row], dim: usize, q: &[u64], exact: &mut bool) -> Option<f64> {
    let x = q[dim];
    let last = dim + 1 == q.len();
    let at = |v: u64| -> &[Row] {
        let lo = rows.partition_point(|r| r.shape[dim] < v);
        let hi = rows.partition_point(|r| r.shape[dim] <= v);
        &rows[lo..hi]
    };
    let reduce = |g: &[Row], exact: &mut bool| -> Option<f64> {
        if last {
            g.first().map(|r| r.latency_ms.ln())
        } else {
            along(g, dim + 1, q, exact)
        }
    };
    let i = rows.partition_point(|r| r.shape[dim] < x);
    if i < rows.len() && rows[i].shape[dim] == x {
        return reduce(at(x), exact);
    }
    if i == 0 || i == rows.len() {
        return None;
    }
    *exact = false;
    let (x0, x1) = (rows[i - 1].shape[dim], rows[i].shape[dim]);
    let y0 = reduce(at(x0), exact)?;
    let y1 = reduce(at(x1), exact)?;
    let t = if x0 == 0 {
        x as f64 / x1 as f64
    } else {
        ((x as f64).ln() - (x0 as f64).ln()) / ((x1 as f64).ln() - (x0 as f64).ln())
    };
    Some(y0 + t * (y1 - y0))
}
