//! What `perfcast kernels list|show` writes of the kernel tables timed on silicon
//! (`perfcast-kernels`): one row per GPU and op, or one table's provenance, variants, shape
//! ranges and first rows.

use perfcast_kernels::{KernelTable, Op};
use perfcast_render::Table;
use serde::Serialize;

/// One table of the catalog, as `kernels list` shows it.
#[derive(Debug, Serialize)]
pub struct ListRow {
    /// The GPU.
    pub gpu: String,
    /// The op.
    pub op: String,
    /// Timed rows.
    pub rows: usize,
    /// Distinct values of the categorical columns.
    pub variants: usize,
    /// The framework (and version) the kernels were timed under.
    pub framework: String,
    /// The device the kernels were timed on.
    pub device: String,
    /// The source package.
    pub source: String,
    /// The file inside it.
    pub path: String,
}

/// `kernels list` as a table: one row per GPU and op.
pub fn list_table(rows: &[ListRow]) -> Table {
    let mut t = Table::new(&[
        ("gpu", false),
        ("op", false),
        ("rows", true),
        ("variants", true),
        ("framework", false),
        ("device", false),
    ]);
    for r in rows {
        t.push(vec![
            r.gpu.clone(),
            r.op.clone(),
            r.rows.to_string(),
            r.variants.to_string(),
            r.framework.clone(),
            r.device.clone(),
        ]);
    }
    t
}

/// `kernels show --format json`: the table's provenance, its variants and its first `rows`
/// rows.
pub fn show_json(t: &KernelTable, op: Op, rows: usize) -> serde_json::Value {
    let s = op.schema();
    let variants: Vec<serde_json::Value> = t
        .variants()
        .into_iter()
        .map(|(k, n)| serde_json::json!({ "values": k, "rows": n }))
        .collect();
    let first: Vec<serde_json::Value> = t
        .rows
        .iter()
        .take(rows)
        .map(|r| {
            let mut m = serde_json::Map::new();
            for (i, c) in s.categorical.iter().enumerate() {
                m.insert((*c).into(), t.value(r, i).into());
            }
            for (i, c) in s.shape.iter().enumerate() {
                m.insert((*c).into(), r.shape[i].into());
            }
            m.insert("latency_ms".into(), r.latency_ms.into());
            serde_json::Value::Object(m)
        })
        .collect();
    let p = &t.provenance;
    serde_json::json!({
        "gpu": t.gpu, "op": op.name(), "rows": t.rows.len(),
        "source": p.source, "path": p.path, "device": p.device, "framework": p.framework,
        "variants": variants, "first_rows": first,
    })
}

/// `kernels show` as text: the provenance, the variants, each shape field's range, and the
/// first `rows` rows (as CSV when `csv`).
pub fn show_text(t: &KernelTable, op: Op, rows: usize, csv: bool) -> String {
    let s = op.schema();
    let p = &t.provenance;
    let mut out = format!(
        "{} {}: {} rows\n  source: {}\n  file: {}\n  device: {}\n  framework: {}\n",
        t.gpu,
        op,
        t.rows.len(),
        p.source,
        p.path,
        p.device,
        p.framework
    );
    let mut v = Table::new(&[(&s.categorical.join(" / "), false), ("rows", true)]);
    for (k, n) in t.variants() {
        v.push(vec![k.join(" / "), n.to_string()]);
    }
    out.push_str(&v.render());
    let mut ranges = Table::new(&[
        ("field", false),
        ("min", true),
        ("max", true),
        ("values", true),
    ]);
    for (i, c) in s.shape.iter().enumerate() {
        let mut vals: Vec<u64> = t.rows.iter().map(|r| r.shape[i]).collect();
        vals.sort_unstable();
        vals.dedup();
        ranges.push(vec![
            (*c).to_string(),
            vals.first().copied().unwrap_or_default().to_string(),
            vals.last().copied().unwrap_or_default().to_string(),
            vals.len().to_string(),
        ]);
    }
    out.push_str(&ranges.render());
    if rows > 0 {
        let mut head: Vec<(&str, bool)> = s.categorical.iter().map(|c| (*c, false)).collect();
        head.extend(s.shape.iter().map(|c| (*c, true)));
        head.push(("latency_ms", true));
        let mut rt = Table::new(&head);
        for r in t.rows.iter().take(rows) {
            let mut cells: Vec<String> = (0..s.categorical.len())
                .map(|i| t.value(r, i).to_string())
                .collect();
            cells.extend(r.shape[..s.shape.len()].iter().map(u64::to_string));
            cells.push(format!("{:.6}", r.latency_ms));
            rt.push(cells);
        }
        out.push_str(&if csv { rt.csv() } else { rt.render() });
    }
    out
}
