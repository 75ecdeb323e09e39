//! The packed form of a table: what the binary embeds, so that a command reads only the rows
//! it looks up. A Parquet table is decoded whole (every column of every row, the text columns
//! row by row) before its first lookup: 30-60 ms of CPU for one GPU's GEMM and attention
//! tables, most of a command's time. Packed, a table is a small head (provenance, each
//! categorical field's values, each variant's key and row count) read when the table is
//! first asked for, and one zstd-compressed chunk of raw columns per variant, decompressed
//! when that variant is first looked up (a dense model on one GPU reads one GEMM dtype of
//! three, one attention kernel of two or three).
//!
//! Layout, little-endian: `PCKT`, format version (u8, [`VERSION`]); gpu, op, source, path,
//! device, framework (strings: u32 length, UTF-8); the categorical and shape field counts
//! (u8 each); per categorical field its value count (u32) and values (strings); the variant
//! count (u32); per variant its value indices (u16 per categorical field), row count (u32),
//! the largest value of each shape field (u64 each: what a table's users ask before any
//! lookup, answered without decoding) and chunk length (u32); then the chunks in variant
//! order. A chunk holds, decompressed, each
//! shape column (u64 per row), then the latencies (f64 bits per row), rows in key order.
//!
//! Written by [`pack`] (`cargo run -p perfcast-kernel-data --example pack` packs the
//! project's Parquet tables); `perfcast-kernel-data`'s tests unpack every embedded table and
//! compare it row by row with its Parquet source.

use crate::error::KernelError;
use crate::interp::Sorted;
use crate::op::{Op, MAX_CATEGORICAL, MAX_SHAPE};
use crate::table::{KernelTable, Provenance, Row};
use bytes::Bytes;

const MAGIC: &[u8; 4] = b"PCKT";
/// The packed format's version: a reader refuses any other.
pub const VERSION: u8 = 1;
/// zstd level of the chunks (decompression speed does not depend on it).
const LEVEL: i32 = 19;

/// A packed table's head: everything but the rows.
#[derive(Debug, Clone)]
pub struct Head {
    pub gpu: String,
    pub op: Op,
    pub provenance: Provenance,
    pub values: Vec<Vec<String>>,
    pub shape_fields: usize,
    /// Per variant: its value indices, row count, largest shape and chunk (compressed).
    pub variants: Vec<Packed>,
}

/// One variant of a packed table, its rows still compressed.
#[derive(Debug, Clone)]
pub struct Packed {
    pub cat: [u16; MAX_CATEGORICAL],
    pub rows: usize,
    /// The largest value of each shape field among its rows.
    pub most: [u64; MAX_SHAPE],
    pub chunk: Bytes,
}

/// The packed bytes of `t`.
pub fn pack(t: &KernelTable) -> Result<Vec<u8>, KernelError> {
    let schema = t.op.schema();
    let (nc, ns) = (schema.categorical.len(), schema.shape.len());
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let p = &t.provenance;
    for s in [
        t.gpu.as_str(),
        t.op.name(),
        &p.source,
        &p.path,
        &p.device,
        &p.framework,
    ] {
        put_str(&mut out, s);
    }
    out.push(nc as u8);
    out.push(ns as u8);
    for vals in &t.values {
        out.extend_from_slice(&(vals.len() as u32).to_le_bytes());
        for v in vals {
            put_str(&mut out, v);
        }
    }
    let variants = t.variant_ids();
    out.extend_from_slice(&(variants.len() as u32).to_le_bytes());
    let mut chunks = Vec::with_capacity(variants.len());
    for (cat, _) in &variants {
        let rows = t.rows_of(&cat[..nc]);
        let mut raw = Vec::with_capacity(rows.len() * 8 * (ns + 1));
        for j in 0..ns {
            for r in rows {
                raw.extend_from_slice(&r.shape[j].to_le_bytes());
            }
        }
        for r in rows {
            raw.extend_from_slice(&r.latency_ms.to_bits().to_le_bytes());
        }
        let chunk = zstd::bulk::compress(&raw, LEVEL)
            .map_err(|e| KernelError::file(&format!("{}/{}", t.gpu, t.op), e.to_string()))?;
        for id in &cat[..nc] {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        for m in &largest(rows)[..ns] {
            out.extend_from_slice(&m.to_le_bytes());
        }
        out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        chunks.push(chunk);
    }
    for c in chunks {
        out.extend_from_slice(&c);
    }
    Ok(out)
}

/// The largest value of each shape field among `rows`.
pub fn largest(rows: &[Row]) -> [u64; MAX_SHAPE] {
    let mut most = [0u64; MAX_SHAPE];
    for r in rows {
        for (m, &x) in most.iter_mut().zip(&r.shape) {
            *m = (*m).max(x);
        }
    }
    most
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over packed bytes; every read says what it was reading when the bytes end.
struct Cursor<'a> {
    name: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], KernelError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(KernelError::file(
                self.name,
                format!("packed table ends inside {what}"),
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, KernelError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, KernelError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64, KernelError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(b))
    }
    fn u32(&mut self, what: &str) -> Result<usize, KernelError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn str(&mut self, what: &str) -> Result<String, KernelError> {
        let n = self.u32(what)?;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| KernelError::file(self.name, format!("{what} is not UTF-8")))
    }
}

/// The head of the packed table `bytes` (called `name` in errors); the chunks stay compressed.
pub fn head(name: &str, bytes: Bytes) -> Result<Head, KernelError> {
    let mut c = Cursor {
        name,
        bytes: &bytes,
        at: 0,
    };
    if c.take(4, "the magic number")? != MAGIC {
        return Err(KernelError::file(name, "not a packed kernel table"));
    }
    let version = c.u8("the version")?;
    if version != VERSION {
        return Err(KernelError::file(
            name,
            format!("packed table format {version}, this build reads {VERSION}"),
        ));
    }
    let gpu = c.str("the GPU")?;
    let op_name = c.str("the op")?;
    let op = Op::from_name(&op_name)
        .ok_or_else(|| KernelError::file(name, format!("unknown op `{op_name}`")))?;
    let provenance = Provenance {
        source: c.str("the source")?,
        path: c.str("the path")?,
        device: c.str("the device")?,
        framework: c.str("the framework")?,
    };
    let schema = op.schema();
    let (nc, ns) = (
        usize::from(c.u8("the field counts")?),
        usize::from(c.u8("the field counts")?),
    );
    if nc != schema.categorical.len() || ns != schema.shape.len() {
        return Err(KernelError::file(
            name,
            format!("{nc} categorical and {ns} shape fields, {op} has other counts"),
        ));
    }
    let mut values = Vec::with_capacity(nc);
    for _ in 0..nc {
        let n = c.u32("a field's values")?;
        let mut vals = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            vals.push(c.str("a value")?);
        }
        values.push(vals);
    }
    let nv = c.u32("the variant count")?;
    let mut keys = Vec::with_capacity(nv.min(1 << 16));
    for _ in 0..nv {
        let mut cat = [0u16; MAX_CATEGORICAL];
        for (i, id) in cat.iter_mut().enumerate().take(nc) {
            *id = c.u16("a variant's key")?;
            if usize::from(*id) >= values[i].len() {
                return Err(KernelError::file(name, "a variant names no value"));
            }
        }
        let rows = c.u32("a row count")?;
        let mut most = [0u64; MAX_SHAPE];
        for m in most.iter_mut().take(ns) {
            *m = c.u64("a variant's largest shape")?;
        }
        keys.push((cat, rows, most, c.u32("a chunk length")?));
    }
    let mut variants = Vec::with_capacity(nv);
    for (cat, rows, most, len) in keys {
        let start = c.at;
        c.take(len, "a chunk")?;
        variants.push(Packed {
            cat,
            rows,
            most,
            chunk: bytes.slice(start..start + len),
        });
    }
    Ok(Head {
        gpu,
        op,
        provenance,
        values,
        shape_fields: ns,
        variants,
    })
}

/// One variant's rows decoded as columns, what a lookup reads ([`Sorted`]): shape field `j`
/// of row `i` at `words[j * n + i]`, the latencies' bits after the last field. Eight bytes a
/// field and row, where a [`Row`] takes 72: a GEMM's row 32 bytes (the decoded rows were
/// a third of a deployment search's memory).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    n: usize,
    fields: usize,
    words: Vec<u64>,
}

impl Columns {
    /// The first `fields` shape coordinates and the latency of `rows`.
    pub fn of_rows(rows: &[Row], fields: usize) -> Columns {
        let n = rows.len();
        let mut words = Vec::with_capacity(n * (fields + 1));
        for j in 0..fields {
            words.extend(rows.iter().map(|r| r.shape[j]));
        }
        words.extend(rows.iter().map(|r| r.latency_ms.to_bits()));
        Columns { n, fields, words }
    }

    /// The rows, each with the categorical value indices `cat`.
    pub fn rows(&self, cat: [u16; MAX_CATEGORICAL]) -> Vec<Row> {
        (0..self.n)
            .map(|i| {
                let mut shape = [0; MAX_SHAPE];
                for (j, x) in shape.iter_mut().enumerate().take(self.fields) {
                    *x = self.words[j * self.n + i];
                }
                Row {
                    cat,
                    shape,
                    latency_ms: Sorted::latency_ms(self, i),
                }
            })
            .collect()
    }
}

impl Sorted for Columns {
    fn len(&self) -> usize {
        self.n
    }
    /// 0 past the table's fields, as a [`Row`] pads them.
    fn coord(&self, i: usize, dim: usize) -> u64 {
        if dim < self.fields {
            self.words[dim * self.n + i]
        } else {
            0
        }
    }
    fn latency_ms(&self, i: usize) -> f64 {
        f64::from_bits(self.words[self.fields * self.n + i])
    }
}

/// The rows of one variant (`n` rows of `shape_fields` coordinates) from its compressed
/// `chunk`.
pub fn columns(
    name: &str,
    n: usize,
    shape_fields: usize,
    chunk: &[u8],
) -> Result<Columns, KernelError> {
    let width = 8 * (shape_fields + 1);
    let raw = zstd::bulk::decompress(chunk, n * width)
        .map_err(|e| KernelError::file(name, format!("a chunk does not decompress: {e}")))?;
    if raw.len() != n * width {
        return Err(KernelError::file(name, "a chunk has the wrong length"));
    }
    let words: Vec<u64> = raw
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect();
    let c = Columns {
        n,
        fields: shape_fields,
        words,
    };
    if let Some(t) = (0..n)
        .map(|i| Sorted::latency_ms(&c, i))
        .find(|t| !(t.is_finite() && *t > 0.0))
    {
        return Err(KernelError::file(
            name,
            format!("a packed row's latency {t} is not positive and finite"),
        ));
    }
    let cr = &c;
    let shape = |i: usize| (0..shape_fields).map(move |j| cr.coord(i, j));
    if (1..n).any(|i| shape(i - 1).cmp(shape(i)) != std::cmp::Ordering::Less) {
        return Err(KernelError::file(
            name,
            "a packed variant's rows are not in shape order",
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::TableBuilder;

    fn table() -> KernelTable {
        let mut b = TableBuilder::new(
            "g",
            Op::Gemm,
            Provenance {
                source: "s".into(),
                path: "p".into(),
                device: "d".into(),
                framework: "f".into(),
            },
        );
        b.push("t", 1, &["fp8", "k"], &[2, 1, 1], 2.0).unwrap();
        b.push("t", 2, &["bfloat16", "k"], &[1, 1, 1], 1.0).unwrap();
        b.push("t", 3, &["bfloat16", "k"], &[1, 2, 1], 1.5).unwrap();
        b.push("t", 4, &["bfloat16", "j"], &[8, 2, 1], 0.25)
            .unwrap();
        b.finish("t").unwrap()
    }

    #[test]
    fn a_table_round_trips_through_its_packed_form() {
        let t = table();
        let bytes = Bytes::from(pack(&t).unwrap());
        let h = head("x", bytes).unwrap();
        assert_eq!((h.gpu.as_str(), h.op), ("g", Op::Gemm));
        assert_eq!(h.provenance, t.provenance);
        assert_eq!(h.values, t.values);
        let mut rows = Vec::new();
        for v in &h.variants {
            let part = rows_of(&h, v.cat, v.rows, &v.chunk);
            assert_eq!(v.most, largest(&part));
            rows.extend(part);
        }
        assert_eq!(rows, t.rows);
    }

    fn rows_of(h: &Head, cat: [u16; MAX_CATEGORICAL], n: usize, chunk: &[u8]) -> Vec<Row> {
        columns("x", n, h.shape_fields, chunk).unwrap().rows(cat)
    }

    #[test]
    fn damaged_packed_bytes_are_errors_naming_the_file() {
        let good = pack(&table()).unwrap();
        let mut wrong_version = good.clone();
        wrong_version[4] = VERSION + 1;
        for (bytes, want) in [
            (b"PAR1xxxx".to_vec(), "not a packed kernel table"),
            (wrong_version, "this build reads"),
            (good[..good.len() - 3].to_vec(), "ends inside a chunk"),
            (good[..20].to_vec(), "ends inside"),
        ] {
            let e = head("tables/g/gemm.pkt", Bytes::from(bytes)).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("tables/g/gemm.pkt") && msg.contains(want),
                "{msg}"
            );
        }
        let h = head("x", Bytes::from(good)).unwrap();
        let v = &h.variants[0];
        let e = columns("x", v.rows + 1, h.shape_fields, &v.chunk).unwrap_err();
        assert!(e.to_string().contains("chunk"), "{e}");
        let e = columns("x", v.rows, h.shape_fields, &v.chunk[..v.chunk.len() / 2]).unwrap_err();
        assert!(e.to_string().contains("decompress"), "{e}");
    }
}
