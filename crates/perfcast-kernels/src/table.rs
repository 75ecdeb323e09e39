//! One GPU's table of one kernel class: rows of (categorical fields, shape, latency), with the
//! provenance every table carries.

use crate::error::KernelError;
use crate::op::{Op, MAX_CATEGORICAL, MAX_SHAPE};
use std::collections::HashMap;

/// One measured kernel: its categorical fields (indices into the table's
/// [`KernelTable::values`]), its shape and its latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub cat: [u16; MAX_CATEGORICAL],
    pub shape: [u64; MAX_SHAPE],
    pub latency_ms: f64,
}

/// Where a table's rows come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Provenance {
    /// The package or collection and its version, and its licence (e.g. `aiconfigurator-core
    /// 0.12.0 (PyPI), Apache-2.0`).
    pub source: String,
    /// The file the rows were read from, relative to the source.
    pub path: String,
    /// The device the kernels ran on, as the collection names it.
    pub device: String,
    /// The framework and version whose kernels were timed (e.g. `TensorRT-LLM 1.3.0rc20`).
    pub framework: String,
}

/// One GPU's measured kernels of one class.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTable {
    /// The table's GPU name (`h100_sxm`, ...).
    pub gpu: String,
    pub op: Op,
    pub provenance: Provenance,
    /// The distinct values of each categorical field.
    pub values: Vec<Vec<String>>,
    /// Sorted by (categorical fields, shape); one row per key.
    pub rows: Vec<Row>,
}

/// A table being filled row by row (by a reader): interns the categorical values.
pub struct TableBuilder {
    gpu: String,
    op: Op,
    provenance: Provenance,
    values: Vec<Vec<String>>,
    index: Vec<HashMap<String, u16>>,
    rows: Vec<Row>,
    /// The source row of each row, for errors (1-based, as a reader counts them).
    lines: Vec<usize>,
}

impl TableBuilder {
    pub fn new(gpu: &str, op: Op, provenance: Provenance) -> Self {
        let n = op.schema().categorical.len();
        TableBuilder {
            gpu: gpu.to_string(),
            op,
            provenance,
            values: vec![Vec::new(); n],
            index: vec![HashMap::new(); n],
            rows: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The table of `file`'s columns: `cats` and `shapes` in the op's schema order, row `i`
    /// of each with latency `lat[i]`. Rows already sorted by key with no key repeated (what
    /// `perfcast kernels import` writes) are taken as they are: no per-row text, no sort.
    pub fn from_columns(
        gpu: &str,
        op: Op,
        provenance: Provenance,
        file: &str,
        cats: &[Categorical],
        shapes: &[Vec<u64>],
        lat: &[f64],
    ) -> Result<KernelTable, KernelError> {
        let n = lat.len();
        if cats.iter().any(|c| c.ids.len() != n) || shapes.iter().any(|c| c.len() != n) {
            return Err(KernelError::file(file, "columns of different lengths"));
        }
        let mut rows = Vec::with_capacity(n);
        for (i, &latency_ms) in lat.iter().enumerate() {
            check_latency(file, i + 1, latency_ms)?;
            let mut r = Row {
                cat: [0; MAX_CATEGORICAL],
                shape: [0; MAX_SHAPE],
                latency_ms,
            };
            for (k, c) in cats.iter().enumerate() {
                r.cat[k] = c.ids[i];
            }
            for (k, c) in shapes.iter().enumerate() {
                r.shape[k] = c[i];
            }
            rows.push(r);
        }
        let values = cats.iter().map(|c| c.values.clone()).collect();
        assemble(
            gpu.to_string(),
            op,
            provenance,
            values,
            rows,
            |i| i + 1,
            file,
        )
    }

    pub fn op(&self) -> Op {
        self.op
    }

    /// Add the row read at `line` of `file`: its categorical values, its shape and latency.
    pub fn push(
        &mut self,
        file: &str,
        line: usize,
        cat: &[&str],
        shape: &[u64],
        latency_ms: f64,
    ) -> Result<(), KernelError> {
        check_latency(file, line, latency_ms)?;
        let mut r = Row {
            cat: [0; MAX_CATEGORICAL],
            shape: [0; MAX_SHAPE],
            latency_ms,
        };
        for (i, v) in cat.iter().enumerate() {
            let next = self.values[i].len();
            if next > usize::from(u16::MAX) && !self.index[i].contains_key(*v) {
                return Err(too_many_values(file, line, i, self.op));
            }
            let id = *self.index[i].entry((*v).to_string()).or_insert_with(|| {
                self.values[i].push((*v).to_string());
                next as u16
            });
            r.cat[i] = id;
        }
        r.shape[..shape.len()].copy_from_slice(shape);
        self.rows.push(r);
        self.lines.push(line);
        Ok(())
    }

    /// The table, its rows sorted by key: a key measured twice with the same latency is
    /// kept once; with different latencies it is an error naming both rows.
    pub fn finish(self, file: &str) -> Result<KernelTable, KernelError> {
        let TableBuilder {
            gpu,
            op,
            provenance,
            values,
            rows,
            lines,
            ..
        } = self;
        assemble(gpu, op, provenance, values, rows, |i| lines[i], file)
    }
}

/// The index of `value` among `values[i]` (a table's categorical field `i`).
pub(crate) fn value_id(values: &[Vec<String>], i: usize, value: &str) -> Option<u16> {
    values
        .get(i)?
        .iter()
        .position(|v| v == value)
        .map(|p| p as u16)
}

/// A latency a table can hold: positive and finite, else an error naming the row.
fn check_latency(file: &str, row: usize, latency_ms: f64) -> Result<(), KernelError> {
    if latency_ms.is_finite() && latency_ms > 0.0 {
        return Ok(());
    }
    Err(KernelError::Row {
        file: file.to_string(),
        row,
        field: crate::op::LATENCY.to_string(),
        message: format!("{latency_ms} is not a positive finite latency"),
    })
}

fn too_many_values(file: &str, row: usize, field: usize, op: Op) -> KernelError {
    KernelError::Row {
        file: file.to_string(),
        row,
        field: op
            .schema()
            .categorical
            .get(field)
            .copied()
            .unwrap_or("-")
            .to_string(),
        message: format!("more than {} distinct values", u16::MAX),
    }
}

/// One categorical column: its distinct values and each row's index into them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Categorical {
    pub values: Vec<String>,
    pub ids: Vec<u16>,
    /// Each value's index, for a row that changes value.
    index: HashMap<String, u16>,
}

impl Categorical {
    /// Add a row of value `v` (compared with the previous row's first: a sorted column is
    /// runs of one value, looked up only where a run starts); `None` past `u16::MAX`
    /// distinct values.
    pub fn push(&mut self, v: &[u8]) -> Option<()> {
        if let Some(&last) = self.ids.last() {
            if self.values[usize::from(last)].as_bytes() == v {
                self.ids.push(last);
                return Some(());
            }
        }
        let text = String::from_utf8_lossy(v);
        let id = match self.index.get(text.as_ref()) {
            Some(&id) => id,
            None => {
                let id = u16::try_from(self.values.len()).ok()?;
                self.values.push(text.clone().into_owned());
                self.index.insert(text.into_owned(), id);
                id
            }
        };
        self.ids.push(id);
        Some(())
    }

    /// The column of `texts`, row by row.
    pub fn of(texts: &[String]) -> Option<Categorical> {
        let mut c = Categorical::default();
        for t in texts {
            c.push(t.as_bytes())?;
        }
        Some(c)
    }

    /// The value of row `i`.
    pub fn get(&self, i: usize) -> &str {
        &self.values[usize::from(self.ids[i])]
    }
}

/// The table of `rows` (categorical fields as indices into `values`, in any order): each
/// field's values put in text order, so that the rows' order (and a table's bytes) does not
/// depend on the order values were first met; the rows sorted by key unless they already are
/// (`line(i)`: the source row of row `i`, for errors).
fn assemble(
    gpu: String,
    op: Op,
    provenance: Provenance,
    mut values: Vec<Vec<String>>,
    mut rows: Vec<Row>,
    line: impl Fn(usize) -> usize,
    file: &str,
) -> Result<KernelTable, KernelError> {
    for (i, vals) in values.iter_mut().enumerate() {
        let mut sorted: Vec<(String, u16)> = vals
            .drain(..)
            .enumerate()
            .map(|(id, v)| (v, id as u16))
            .collect();
        sorted.sort();
        let mut remap = vec![0u16; sorted.len()];
        for (new, (_, old)) in sorted.iter().enumerate() {
            remap[*old as usize] = new as u16;
        }
        let identity = remap.iter().enumerate().all(|(a, &b)| a == usize::from(b));
        *vals = sorted.into_iter().map(|(v, _)| v).collect();
        if !identity {
            for r in &mut rows {
                r.cat[i] = remap[r.cat[i] as usize];
            }
        }
    }
    let key = |r: &Row| (r.cat, r.shape);
    if rows.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
        return Ok(KernelTable {
            gpu,
            op,
            provenance,
            values,
            rows,
        });
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| key(&rows[a]).cmp(&key(&rows[b])));
    let mut out: Vec<Row> = Vec::with_capacity(rows.len());
    let mut out_line: Vec<usize> = Vec::with_capacity(rows.len());
    for i in order {
        let r = rows[i];
        if let Some(last) = out.last() {
            if last.cat == r.cat && last.shape == r.shape {
                if last.latency_ms == r.latency_ms {
                    continue;
                }
                return Err(KernelError::Row {
                    file: file.to_string(),
                    row: line(i),
                    field: crate::op::LATENCY.to_string(),
                    message: format!(
                        "the shape of row {} measured again with another latency ({} ms, then {} ms)",
                        out_line.last().copied().unwrap_or_default(),
                        last.latency_ms,
                        r.latency_ms
                    ),
                });
            }
        }
        out.push(r);
        out_line.push(line(i));
    }
    Ok(KernelTable {
        gpu,
        op,
        provenance,
        values,
        rows: out,
    })
}

impl KernelTable {
    /// The value of categorical field `i` of `row`.
    pub fn value(&self, row: &Row, i: usize) -> &str {
        &self.values[i][row.cat[i] as usize]
    }

    /// The index of `value` among categorical field `i`'s values.
    pub fn value_id(&self, i: usize, value: &str) -> Option<u16> {
        value_id(&self.values, i, value)
    }

    /// The distinct combinations of categorical values, each with its row count.
    pub fn variants(&self) -> Vec<(Vec<&str>, usize)> {
        self.variant_ids()
            .into_iter()
            .map(|(cat, n)| {
                let key = (0..self.values.len())
                    .map(|i| self.values[i][cat[i] as usize].as_str())
                    .collect();
                (key, n)
            })
            .collect()
    }

    /// [`KernelTable::variants`] as value indices: one pass over the rows (sorted by their
    /// categorical fields), comparing indices, not text.
    pub fn variant_ids(&self) -> Vec<([u16; MAX_CATEGORICAL], usize)> {
        let mut out: Vec<([u16; MAX_CATEGORICAL], usize)> = Vec::new();
        for r in &self.rows {
            match out.last_mut() {
                Some((k, n)) if *k == r.cat => *n += 1,
                _ => out.push((r.cat, 1)),
            }
        }
        out
    }

    /// The rows whose first categorical fields are `cat` (as indices), in shape order.
    pub fn rows_of(&self, cat: &[u16]) -> &[Row] {
        let n = cat.len();
        let lo = self.rows.partition_point(|r| r.cat[..n] < *cat);
        let hi = self.rows.partition_point(|r| r.cat[..n] <= *cat);
        &self.rows[lo..hi]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> TableBuilder {
        TableBuilder::new("test_gpu", Op::Gemm, Provenance::default())
    }

    #[test]
    fn rows_are_sorted_and_exact_repeats_dropped() {
        let mut b = builder();
        b.push("t", 1, &["fp8", "k"], &[2, 1, 1], 2.0).unwrap();
        b.push("t", 2, &["bfloat16", "k"], &[1, 1, 1], 1.0).unwrap();
        b.push("t", 3, &["bfloat16", "k"], &[1, 1, 1], 1.0).unwrap();
        let t = b.finish("t").unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.value(&t.rows[0], 0), "bfloat16");
        assert_eq!(
            t.variants(),
            vec![(vec!["bfloat16", "k"], 1), (vec!["fp8", "k"], 1)]
        );
    }

    #[test]
    fn a_categorical_column_interns_its_values_and_stops_at_u16() {
        let texts: Vec<String> = ["b", "b", "a", "b", "c", "a"].map(String::from).to_vec();
        let c = Categorical::of(&texts).unwrap();
        assert_eq!(c.values, ["b", "a", "c"]);
        assert_eq!(c.ids, [0, 0, 1, 0, 2, 1]);
        assert_eq!(
            (0..texts.len()).map(|i| c.get(i)).collect::<Vec<_>>(),
            texts
        );
        // A column of a value per row: interned in one pass, refused past u16::MAX values.
        let mut c = Categorical::default();
        for i in 0..=u32::from(u16::MAX) {
            assert!(c.push(i.to_string().as_bytes()).is_some());
        }
        assert!(c.push(b"one more").is_none());
    }

    #[test]
    fn bad_rows_name_file_row_and_field() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = builder().push("f.csv", 7, &["bf16", "k"], &[1, 1, 1], bad);
            let msg = e.unwrap_err().to_string();
            assert!(
                msg.contains("f.csv") && msg.contains("row 7") && msg.contains("latency_ms"),
                "{msg}"
            );
        }
        let mut b = builder();
        b.push("f.csv", 2, &["bf16", "k"], &[1, 1, 1], 1.0).unwrap();
        b.push("f.csv", 9, &["bf16", "k"], &[1, 1, 1], 1.5).unwrap();
        let msg = b.finish("f.csv").unwrap_err().to_string();
        assert!(msg.contains("row 9") && msg.contains("row 2"), "{msg}");
    }
}
