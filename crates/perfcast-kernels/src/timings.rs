//! A table ready to answer shapes: its head (GPU, op, provenance, categorical values) and its
//! rows by variant, each variant's rows decoded when first looked up (a packed table,
//! [`crate::packed`]) or at once (a table read from Parquet or CSV), and the answers memoised.

use crate::error::KernelError;
use crate::interp::{lookup, Lookup};
use crate::op::{Op, MAX_CATEGORICAL, MAX_SHAPE};
use crate::packed::{self, Columns};
use crate::table::{KernelTable, Provenance, Row};
use bytes::Bytes;
use perfcast_core::hash::MixState;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// A query already answered: the variant's categorical value indices and the shape, each
/// padded, with the number of shape coordinates given.
type Query = ([u16; MAX_CATEGORICAL], [u64; MAX_SHAPE], usize);

/// Answers kept at most per table before the memo starts again (~100 bytes each, with the
/// table's spare capacity ~0.8 MB). At 2^20 (with 2^18 in `measured`), the Llama 3.1 70B
/// deployment search held 121 MB (RSS), 38 MB at 2^14; at 2^12 (and rows decoded as
/// columns) 27.2 MiB in the same CPU time (4.41 against 4.45 s), and `validate` on the whole
/// file 30.0 against 30.8 CPU-s, 131 against 158 MiB (2026-12-07, farm-bench, paired).
const MEMO_CAPACITY: usize = 1 << 12;

/// One variant (one combination of categorical values): its rows in shape order, decoded
/// from `chunk` on first use when the table is packed.
#[derive(Debug, Clone)]
struct Variant {
    cat: [u16; MAX_CATEGORICAL],
    n: usize,
    /// The largest value of each shape field among its rows.
    most: [u64; MAX_SHAPE],
    rows: OnceLock<Result<Columns, KernelError>>,
    chunk: Option<Bytes>,
}

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
    gpu: String,
    op: Op,
    provenance: Provenance,
    values: Vec<Vec<String>>,
    shape_fields: usize,
    variants: Vec<Variant>,
    memo: Mutex<HashMap<Query, Option<Lookup>, MixState>>,
}

impl Clone for Timings {
    fn clone(&self) -> Self {
        Timings {
            gpu: self.gpu.clone(),
            op: self.op,
            provenance: self.provenance.clone(),
            values: self.values.clone(),
            shape_fields: self.shape_fields,
            variants: self.variants.clone(),
            memo: Mutex::default(),
        }
    }
}

impl Timings {
    /// The timings of a table read whole.
    pub fn new(table: KernelTable) -> Self {
        let mut variants = Vec::new();
        let mut rest = table.rows.as_slice();
        for (cat, n) in table.variant_ids() {
            let (rows, tail) = rest.split_at(n);
            rest = tail;
            variants.push(Variant {
                cat,
                n,
                most: packed::largest(rows),
                rows: OnceLock::from(Ok(Columns::of_rows(rows, table.op.schema().shape.len()))),
                chunk: None,
            });
        }
        Timings {
            shape_fields: table.op.schema().shape.len(),
            gpu: table.gpu,
            op: table.op,
            provenance: table.provenance,
            values: table.values,
            variants,
            memo: Mutex::default(),
        }
    }

    /// The timings of the packed table `bytes` (called `name` in errors): its head read now,
    /// each variant's rows when first looked up.
    pub fn packed(name: &str, bytes: Bytes) -> Result<Self, KernelError> {
        let h = packed::head(name, bytes)?;
        Ok(Timings {
            gpu: h.gpu,
            op: h.op,
            provenance: h.provenance,
            values: h.values,
            shape_fields: h.shape_fields,
            variants: h
                .variants
                .into_iter()
                .map(|v| Variant {
                    cat: v.cat,
                    n: v.rows,
                    most: v.most,
                    rows: OnceLock::new(),
                    chunk: Some(v.chunk),
                })
                .collect(),
            memo: Mutex::default(),
        })
    }

    /// The table's GPU name (`h100_sxm`, ...).
    pub fn gpu(&self) -> &str {
        &self.gpu
    }

    pub fn op(&self) -> Op {
        self.op
    }

    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The number of rows (all variants).
    pub fn rows(&self) -> usize {
        self.variants.iter().map(|v| v.n).sum()
    }

    /// The number of variants (combinations of categorical values).
    pub fn variant_count(&self) -> usize {
        self.variants.len()
    }

    /// The index of `value` among categorical field `i`'s values.
    pub fn value_id(&self, i: usize, value: &str) -> Option<u16> {
        crate::table::value_id(&self.values, i, value)
    }

    /// The variant whose value indices are `ids` (every categorical field).
    fn variant(&self, ids: &[u16]) -> Option<&Variant> {
        if ids.len() != self.values.len() {
            return None;
        }
        self.variants.iter().find(|v| v.cat[..ids.len()] == *ids)
    }

    /// The rows of the variant whose value indices are `ids` (every categorical field), in
    /// shape order; empty for a variant the table lacks.
    pub fn variant_rows(&self, ids: &[u16]) -> Result<Vec<Row>, KernelError> {
        match self.variant(ids) {
            Some(v) => Ok(self.columns(v)?.rows(v.cat)),
            None => Ok(Vec::new()),
        }
    }

    /// The rows of variant `v` as a lookup reads them, decoded on first use.
    fn columns<'a>(&self, v: &'a Variant) -> Result<&'a Columns, KernelError> {
        let columns = v.rows.get_or_init(|| match &v.chunk {
            Some(chunk) => {
                let name = format!("{}/{}", self.gpu, self.op);
                packed::columns(&name, v.n, self.shape_fields, chunk)
            }
            None => Ok(Columns::default()),
        });
        columns.as_ref().map_err(Clone::clone)
    }

    /// The whole table, every variant decoded.
    pub fn table(&self) -> Result<KernelTable, KernelError> {
        let mut rows = Vec::with_capacity(self.rows());
        for v in &self.variants {
            rows.extend(self.columns(v)?.rows(v.cat));
        }
        Ok(KernelTable {
            gpu: self.gpu.clone(),
            op: self.op,
            provenance: self.provenance.clone(),
            values: self.values.clone(),
            rows,
        })
    }

    /// The value indices of `cat`, or `None` for a value the table lacks.
    fn ids(&self, cat: &[&str]) -> Option<Vec<u16>> {
        cat.iter()
            .enumerate()
            .map(|(i, v)| self.value_id(i, v))
            .collect()
    }

    /// The latency of `shape` for the variant whose categorical values are `cat` (all of the
    /// op's fields, in schema order); `None` for a variant the table lacks, a shape outside
    /// its range, or a packed variant that does not decode (which the embedded tables' test
    /// rules out).
    pub fn time(&self, cat: &[&str], shape: &[u64]) -> Option<Lookup> {
        if cat.len() > MAX_CATEGORICAL || shape.len() > MAX_SHAPE {
            return None;
        }
        let mut q: Query = ([0; MAX_CATEGORICAL], [0; MAX_SHAPE], shape.len());
        for (i, v) in cat.iter().enumerate() {
            q.0[i] = self.value_id(i, v)?;
        }
        q.1[..shape.len()].copy_from_slice(shape);
        if let Ok(memo) = self.memo.try_lock() {
            if let Some(hit) = memo.get(&q) {
                return *hit;
            }
        }
        let answer = match self.variant(&q.0[..cat.len()]) {
            Some(v) => lookup(self.columns(v).ok()?, shape),
            None => None,
        };
        if let Ok(mut memo) = self.memo.try_lock() {
            if memo.len() >= MEMO_CAPACITY {
                memo.clear();
            }
            memo.insert(q, answer);
        }
        answer
    }

    /// The largest value of each shape field among the rows of the variant `cat` (`None` for
    /// a variant the table lacks); a packed table knows it without decoding the rows.
    pub fn max_shape(&self, cat: &[&str]) -> Option<[u64; MAX_SHAPE]> {
        let v = self.variant(&self.ids(cat)?)?;
        (v.n > 0).then_some(v.most)
    }

    /// The values of the last categorical field (the kernel) the table has for the leading
    /// values `lead`, each with its row count.
    pub fn kernels(&self, lead: &[&str]) -> Vec<(&str, usize)> {
        let fields = self.values.len();
        if lead.len() >= fields {
            return Vec::new();
        }
        let Some(ids) = self.ids(lead) else {
            return Vec::new();
        };
        self.variants
            .iter()
            .filter(|v| v.cat[..ids.len()] == ids[..])
            .map(|v| {
                (
                    self.values[fields - 1][v.cat[fields - 1] as usize].as_str(),
                    v.n,
                )
            })
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
    use crate::interp::Path;
    use crate::table::TableBuilder;

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
            let rows = t.variant_rows(&[0, 0]).unwrap();
            let want = lookup(rows.as_slice(), q);
            assert_eq!(t.time(&["bf16", "x"], q), want, "{q:?}");
            assert_eq!(t.time(&["bf16", "x"], q), want, "{q:?}: memoised");
            assert_eq!(t.clone().time(&["bf16", "x"], q), want, "{q:?}: cloned");
        }
        // A shorter query is another query than the one padded with zeros.
        let rows = t.variant_rows(&[0, 0]).unwrap();
        assert_eq!(t.time(&["bf16", "x"], &[16, 1024, 0]), None);
        let short = t.time(&["bf16", "x"], &[16, 1024]);
        assert!(short.is_some());
        assert_eq!(short, lookup(rows.as_slice(), &[16, 1024]));
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
