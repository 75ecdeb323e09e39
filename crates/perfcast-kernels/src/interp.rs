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

use crate::op::{MAX_CATEGORICAL, MAX_SHAPE};
use crate::table::{KernelTable, Row};
use perfcast_core::hash::MixState;
use std::collections::HashMap;
use std::sync::Mutex;

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

/// A query already answered: the variant's categorical value indices and the shape, each
/// padded, with the number of shape coordinates given.
type Query = ([u16; MAX_CATEGORICAL], [u64; MAX_SHAPE], usize);

/// Answers kept at most per table before the memo starts again (~100 bytes each).
const MEMO_CAPACITY: usize = 1 << 20;

/// A table ready to answer shapes of each of its variants.
///
/// Answers are memoised: a table is shared by every device built on it (the catalog hands
/// out one copy per GPU and op), and a search, a calibration or a serving replay asks the
/// same shapes again and again (a calibration re-times one schedule's steps, each one
/// attention lookup, at hundreds of parameter values that do not move a kernel). The memo
/// is exact (a lookup is a pure function of the table and the query), bounded
/// ([`MEMO_CAPACITY`], then emptied), and never waited on: a thread that finds it locked
/// interpolates itself.
#[derive(Debug)]
pub struct Timings {
    pub table: KernelTable,
    /// The table's variants (categorical value indices) and their row counts, found once.
    variants: Vec<([u16; MAX_CATEGORICAL], usize)>,
    memo: Mutex<HashMap<Query, Option<Lookup>, MixState>>,
}

impl Clone for Timings {
    fn clone(&self) -> Self {
        Timings {
            table: self.table.clone(),
            variants: self.variants.clone(),
            memo: Mutex::default(),
        }
    }
}

impl Timings {
    pub fn new(table: KernelTable) -> Self {
        let variants = table.variant_ids();
        Timings {
            table,
            variants,
            memo: Mutex::default(),
        }
    }

    /// The latency of `shape` for the variant whose categorical values are `cat` (all of the
    /// op's fields, in schema order); `None` for a variant the table lacks or a shape outside
    /// its range.
    pub fn time(&self, cat: &[&str], shape: &[u64]) -> Option<Lookup> {
        let t = &self.table;
        if cat.len() > MAX_CATEGORICAL || shape.len() > MAX_SHAPE {
            return None;
        }
        let mut q: Query = ([0; MAX_CATEGORICAL], [0; MAX_SHAPE], shape.len());
        for (i, v) in cat.iter().enumerate() {
            q.0[i] = t.value_id(i, v)?;
        }
        q.1[..shape.len()].copy_from_slice(shape);
        if let Ok(memo) = self.memo.try_lock() {
            if let Some(hit) = memo.get(&q) {
                return *hit;
            }
        }
        let answer = lookup(t.rows_of(&q.0[..cat.len()]), shape);
        if let Ok(mut memo) = self.memo.try_lock() {
            if memo.len() >= MEMO_CAPACITY {
                memo.clear();
            }
            memo.insert(q, answer);
        }
        answer
    }

    /// The largest value of each shape field among the rows of the variant `cat` (`None` for
    /// a variant the table lacks).
    pub fn max_shape(&self, cat: &[&str]) -> Option<[u64; MAX_SHAPE]> {
        let t = &self.table;
        let mut ids = Vec::with_capacity(cat.len());
        for (i, v) in cat.iter().enumerate() {
            ids.push(t.value_id(i, v)?);
        }
        let rows = t.rows_of(&ids);
        let mut most = [0u64; MAX_SHAPE];
        for r in rows {
            for (m, &x) in most.iter_mut().zip(&r.shape) {
                *m = (*m).max(x);
            }
        }
        (!rows.is_empty()).then_some(most)
    }

    /// The values of the last categorical field (the kernel) the table has for the leading
    /// values `lead`, each with its row count.
    pub fn kernels(&self, lead: &[&str]) -> Vec<(&str, usize)> {
        let t = &self.table;
        let fields = t.values.len();
        if lead.len() >= fields {
            return Vec::new();
        }
        let mut ids = Vec::with_capacity(lead.len());
        for (i, v) in lead.iter().enumerate() {
            match t.value_id(i, v) {
                Some(id) => ids.push(id),
                None => return Vec::new(),
            }
        }
        self.variants
            .iter()
            .filter(|(cat, _)| cat[..ids.len()] == ids[..])
            .map(|(cat, n)| (t.values[fields - 1][cat[fields - 1] as usize].as_str(), *n))
            .collect()
    }

    /// The kernel a variant of the leading categorical values `lead` (e.g. a GEMM's dtype)
    /// is timed with: of the kernels the table has for it, the one measured on the most
    /// shapes (the framework's general path; e.g. TensorRT-LLM's `torch_flow` over the
    /// special `min_latency` MoE kernels).
    pub fn main_kernel(&self, lead: &[&str]) -> Option<&str> {
        let mut best: Option<(&str, usize)> = None;
        for (k, n) in self.kernels(lead) {
            if best.is_none_or(|(_, bn)| n > bn) {
                best = Some((k, n));
            }
        }
        best.map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Op;
    use crate::table::{Provenance, TableBuilder};

    /// A GEMM grid whose latency is `a · m^0.5 · n · k` (a power law in every dimension).
    fn power_law() -> Timings {
        let mut b = TableBuilder::new("g", Op::Gemm, Provenance::default());
        let mut line = 0;
        for m in [1u64, 16, 256, 4096] {
            for n in [128u64, 1024, 8192] {
                for k in [128u64, 1024, 8192] {
                    line += 1;
                    let t = 1e-9 * (m as f64).sqrt() * n as f64 * k as f64;
                    b.push("t", line, &["bf16", "x"], &[m, n, k], t).unwrap();
                }
            }
        }
        Timings::new(b.finish("t").unwrap())
    }

    #[test]
    fn log_log_interpolation_is_exact_on_power_laws() {
        let t = power_law();
        let table: &[([u64; 3], Path)] = &[
            ([16, 1024, 1024], Path::Measured),
            ([64, 1024, 1024], Path::Interpolated),
            ([100, 3000, 500], Path::Interpolated),
            ([4096, 8192, 8192], Path::Measured),
        ];
        for (q, path) in table {
            let want = 1e-9 * (q[0] as f64).sqrt() * q[1] as f64 * q[2] as f64;
            let got = t.time(&["bf16", "x"], q).unwrap();
            assert_eq!(got.path, *path, "{q:?}");
            assert!(
                (got.latency_ms / want - 1.0).abs() < 1e-9,
                "{q:?}: {got:?} vs {want}"
            );
        }
    }

    #[test]
    fn a_memoised_answer_is_the_interpolation() {
        let t = power_law();
        let queries = [[16u64, 1024, 1024], [100, 3000, 500], [8192, 1024, 1024]];
        for q in &queries {
            // Asked first (interpolated), again (from the memo), on a clone (memo empty).
            let rows = t.table.rows_of(&[0, 0]);
            let want = lookup(rows, q);
            assert_eq!(t.time(&["bf16", "x"], q), want, "{q:?}");
            assert_eq!(t.time(&["bf16", "x"], q), want, "{q:?}: memoised");
            assert_eq!(t.clone().time(&["bf16", "x"], q), want, "{q:?}: cloned");
        }
        // A shorter query is another query than the one padded with zeros.
        let rows = t.table.rows_of(&[0, 0]);
        assert_eq!(t.time(&["bf16", "x"], &[16, 1024, 0]), None);
        let short = t.time(&["bf16", "x"], &[16, 1024]);
        assert!(short.is_some());
        assert_eq!(short, lookup(rows, &[16, 1024]));
        assert_eq!(t.memo.lock().unwrap().len(), queries.len() + 2);
    }

    #[test]
    fn outside_the_range_or_an_unknown_variant_is_not_answered() {
        let t = power_law();
        for q in [
            [8192u64, 1024, 1024],
            [16, 64, 1024],
            [16, 1024, 16384],
            [0, 1024, 1024],
        ] {
            assert_eq!(t.time(&["bf16", "x"], &q), None, "{q:?}");
        }
        assert_eq!(t.time(&["fp8", "x"], &[16, 1024, 1024]), None);
        assert_eq!(t.main_kernel(&["bf16"]), Some("x"));
        assert_eq!(t.main_kernel(&["fp8"]), None);
    }

    #[test]
    fn a_missing_point_is_bridged_by_its_line() {
        let mut b = TableBuilder::new("g", Op::Gemm, Provenance::default());
        // (1, 2, 2) is missing: the k line of (1, 2) bridges it from k = 1 and k = 4.
        let rows = [
            ([1u64, 2, 1], 1.0),
            ([1, 2, 4], 4.0),
            ([2, 2, 1], 2.0),
            ([2, 2, 2], 4.0),
        ];
        for (i, (s, l)) in rows.iter().enumerate() {
            b.push("t", i + 1, &["bf16", "x"], s, *l).unwrap();
        }
        let t = Timings::new(b.finish("t").unwrap());
        let got = t.time(&["bf16", "x"], &[1, 2, 2]).unwrap();
        assert!((got.latency_ms - 2.0).abs() < 1e-12, "{got:?}");
        assert_eq!(got.path, Path::Interpolated);
        // (2, 2, 3): the line of m = 2 ends at k = 2.
        assert_eq!(t.time(&["bf16", "x"], &[2, 2, 3]), None);
    }
}
