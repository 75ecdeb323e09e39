//! Reading and writing tables: Parquet columns by name (any writer's file: the codecs
//! AIConfigurator's files use, zstd and Snappy, and nullable or required columns), perfcast's
//! own table files, and a plain CSV a vendor can bring.
//!
//! A perfcast table file is Parquet with one column per field of the op's [`Schema`]
//! (categorical fields as UTF-8, shape fields as INT64, `latency_ms` as DOUBLE), rows sorted by
//! key, zstd level 19, and its identity in the file's key-value metadata: `perfcast.op`,
//! `perfcast.gpu`, `perfcast.source`, `perfcast.path`, `perfcast.device`,
//! `perfcast.framework`.
//!
//! [`Schema`]: crate::op::Schema

use crate::error::KernelError;
use crate::op::{Op, LATENCY};
use crate::table::{Categorical, KernelTable, Provenance, TableBuilder};
use bytes::Bytes;
use parquet::basic::{Compression, ZstdLevel};
use parquet::column::reader::ColumnReader;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::path::Path;
use std::sync::Arc;

/// One column of a Parquet file, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Text, as its distinct values and each row's index into them.
    Text(Categorical),
    Int(Vec<i64>),
    Float(Vec<f64>),
}

/// A Parquet file opened for reading columns by name.
pub struct ParquetFile {
    name: String,
    reader: SerializedFileReader<Bytes>,
}

impl ParquetFile {
    /// Open the Parquet bytes of the file called `name` (for errors).
    pub fn open(name: &str, bytes: Bytes) -> Result<Self, KernelError> {
        let reader = SerializedFileReader::new(bytes)
            .map_err(|e| KernelError::file(name, format!("not a readable Parquet file: {e}")))?;
        Ok(ParquetFile {
            name: name.to_string(),
            reader,
        })
    }

    pub fn read(path: &Path) -> Result<Self, KernelError> {
        let bytes = crate::input::read_bytes(path, crate::input::MAX_BINARY_BYTES)
            .map_err(|e| KernelError::io(path, e))?;
        Self::open(&path.display().to_string(), Bytes::from(bytes))
    }

    pub fn rows(&self) -> usize {
        self.reader.metadata().file_metadata().num_rows().max(0) as usize
    }

    /// The names of the file's (leaf) columns.
    pub fn columns(&self) -> Vec<String> {
        let s = self.reader.metadata().file_metadata().schema_descr();
        (0..s.num_columns())
            .map(|i| s.column(i).name().to_string())
            .collect()
    }

    /// The file's key-value metadata entry `key`.
    pub fn metadata(&self, key: &str) -> Option<String> {
        self.reader
            .metadata()
            .file_metadata()
            .key_value_metadata()?
            .iter()
            .find(|kv| kv.key == key)?
            .value
            .clone()
    }

    /// Every value of column `name`; `None` if the file has no such column. A null value is
    /// an error naming the column.
    pub fn column(&self, name: &str) -> Result<Option<Column>, KernelError> {
        let md = self.reader.metadata();
        let schema = md.file_metadata().schema_descr();
        let Some(idx) = (0..schema.num_columns()).find(|&i| schema.column(i).name() == name) else {
            return Ok(None);
        };
        let nullable = schema.column(idx).max_def_level() > 0;
        let err = |e: parquet::errors::ParquetError| {
            KernelError::file(&self.name, format!("column `{name}`: {e}"))
        };
        let mut out: Option<Column> = None;
        for g in 0..md.num_row_groups() {
            let n = md.row_group(g).num_rows().max(0) as usize;
            let rg = self.reader.get_row_group(g).map_err(err)?;
            let reader = rg.get_column_reader(idx).map_err(err)?;
            let part = read_column(reader, n, nullable).map_err(err)?;
            let got = match &part {
                Column::Text(v) => v.ids.len(),
                Column::Int(v) => v.len(),
                Column::Float(v) => v.len(),
            };
            if got != n {
                return Err(KernelError::file(
                    &self.name,
                    format!("column `{name}` has {} null value(s)", n - got.min(n)),
                ));
            }
            out = Some(match (out, part) {
                (None, p) => p,
                (Some(Column::Text(mut a)), Column::Text(b)) => {
                    for i in 0..b.ids.len() {
                        a.push(b.get(i).as_bytes())
                            .ok_or_else(|| too_many(&self.name, name))?;
                    }
                    Column::Text(a)
                }
                (Some(Column::Int(mut a)), Column::Int(b)) => {
                    a.extend(b);
                    Column::Int(a)
                }
                (Some(Column::Float(mut a)), Column::Float(b)) => {
                    a.extend(b);
                    Column::Float(a)
                }
                _ => {
                    return Err(KernelError::file(
                        &self.name,
                        format!("column `{name}` changes type between row groups"),
                    ))
                }
            });
        }
        Ok(Some(out.unwrap_or(Column::Int(Vec::new()))))
    }
}

/// Read `n` records of one column chunk.
fn read_column(
    reader: ColumnReader,
    n: usize,
    nullable: bool,
) -> Result<Column, parquet::errors::ParquetError> {
    let mut defs: Vec<i16> = Vec::new();
    macro_rules! read_all {
        ($r:expr, $vals:expr) => {{
            let mut r = $r;
            let mut read = 0;
            while read < n {
                let d = if nullable { Some(&mut defs) } else { None };
                let (records, _, _) = r.read_records(n - read, d, None, &mut $vals)?;
                if records == 0 {
                    break;
                }
                read += records;
            }
        }};
    }
    Ok(match reader {
        ColumnReader::ByteArrayColumnReader(r) => {
            let mut v: Vec<ByteArray> = Vec::new();
            read_all!(r, v);
            let mut c = Categorical::default();
            for b in &v {
                c.push(b.data()).ok_or_else(|| {
                    parquet::errors::ParquetError::General(format!(
                        "more than {} distinct values",
                        u16::MAX
                    ))
                })?;
            }
            Column::Text(c)
        }
        ColumnReader::Int64ColumnReader(r) => {
            let mut v: Vec<i64> = Vec::new();
            read_all!(r, v);
            Column::Int(v)
        }
        ColumnReader::Int32ColumnReader(r) => {
            let mut v: Vec<i32> = Vec::new();
            read_all!(r, v);
            Column::Int(v.into_iter().map(i64::from).collect())
        }
        ColumnReader::DoubleColumnReader(r) => {
            let mut v: Vec<f64> = Vec::new();
            read_all!(r, v);
            Column::Float(v)
        }
        ColumnReader::FloatColumnReader(r) => {
            let mut v: Vec<f32> = Vec::new();
            read_all!(r, v);
            Column::Float(v.into_iter().map(f64::from).collect())
        }
        _ => {
            return Err(parquet::errors::ParquetError::General(
                "a column of a type kernel tables do not use (text, integer or float)".into(),
            ))
        }
    })
}

fn too_many(file: &str, column: &str) -> KernelError {
    KernelError::file(
        file,
        format!(
            "column `{column}` has more than {} distinct values",
            u16::MAX
        ),
    )
}

/// Column `name` of `f` as text.
pub(crate) fn text(f: &ParquetFile, name: &str) -> Result<Option<Categorical>, KernelError> {
    match f.column(name)? {
        None => Ok(None),
        Some(Column::Text(v)) => Ok(Some(v)),
        Some(_) => Err(KernelError::file(
            &f.name,
            format!("column `{name}` must hold text"),
        )),
    }
}

/// Column `name` of `f` as non-negative integers.
pub(crate) fn ints(f: &ParquetFile, name: &str) -> Result<Option<Vec<u64>>, KernelError> {
    match f.column(name)? {
        None => Ok(None),
        Some(Column::Int(v)) => v
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                u64::try_from(x).map_err(|_| KernelError::Row {
                    file: f.name.clone(),
                    row: i + 1,
                    field: name.to_string(),
                    message: format!("{x} is negative"),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(KernelError::file(
            &f.name,
            format!("column `{name}` must hold integers"),
        )),
    }
}

/// Column `name` of `f` as numbers.
pub(crate) fn floats(f: &ParquetFile, name: &str) -> Result<Option<Vec<f64>>, KernelError> {
    match f.column(name)? {
        None => Ok(None),
        Some(Column::Float(v)) => Ok(Some(v)),
        Some(Column::Int(v)) => Ok(Some(v.into_iter().map(|x| x as f64).collect())),
        Some(Column::Text(_)) => Err(KernelError::file(
            &f.name,
            format!("column `{name}` must hold numbers"),
        )),
    }
}

impl ParquetFile {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

/// The error for a column of `op` that `file` lacks.
pub(crate) fn missing(file: &str, op: Op, column: &str) -> KernelError {
    let s = op.schema();
    let mut expected: Vec<&str> = s.categorical.to_vec();
    expected.extend(s.shape);
    expected.push(LATENCY);
    KernelError::MissingColumn {
        file: file.to_string(),
        op: op.name().to_string(),
        column: column.to_string(),
        expected: expected.join(", "),
    }
}

/// A perfcast table file's bytes.
pub fn write_table(t: &KernelTable) -> Result<Vec<u8>, KernelError> {
    let s = t.op.schema();
    let mut fields = String::new();
    for c in s.categorical {
        fields.push_str(&format!("REQUIRED BYTE_ARRAY {c} (UTF8); "));
    }
    for c in s.shape {
        fields.push_str(&format!("REQUIRED INT64 {c}; "));
    }
    fields.push_str(&format!("REQUIRED DOUBLE {LATENCY};"));
    let err = |e: parquet::errors::ParquetError| {
        KernelError::file(&format!("{}/{}", t.gpu, t.op), e.to_string())
    };
    let schema =
        Arc::new(parse_message_type(&format!("message kernels {{ {fields} }}")).map_err(err)?);
    let p = &t.provenance;
    let meta = [
        ("perfcast.op", t.op.name()),
        ("perfcast.gpu", t.gpu.as_str()),
        ("perfcast.source", p.source.as_str()),
        ("perfcast.path", p.path.as_str()),
        ("perfcast.device", p.device.as_str()),
        ("perfcast.framework", p.framework.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| KeyValue::new(k.to_string(), v.to_string()))
    .collect();
    let level = ZstdLevel::try_new(19).map_err(err)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_key_value_metadata(Some(meta))
        .set_created_by("perfcast kernels import".to_string())
        .build();
    let mut buf = Vec::new();
    let mut w = SerializedFileWriter::new(&mut buf, schema, Arc::new(props)).map_err(err)?;
    let mut rg = w.next_row_group().map_err(err)?;
    let mut col = 0;
    while let Some(mut cw) = rg.next_column().map_err(err)? {
        let nc = s.categorical.len();
        let ns = s.shape.len();
        if col < nc {
            let vals: Vec<ByteArray> = t
                .rows
                .iter()
                .map(|r| ByteArray::from(t.value(r, col)))
                .collect();
            cw.typed::<ByteArrayType>()
                .write_batch(&vals, None, None)
                .map_err(err)?;
        } else if col < nc + ns {
            let vals: Vec<i64> = t.rows.iter().map(|r| r.shape[col - nc] as i64).collect();
            cw.typed::<Int64Type>()
                .write_batch(&vals, None, None)
                .map_err(err)?;
        } else {
            let vals: Vec<f64> = t.rows.iter().map(|r| r.latency_ms).collect();
            cw.typed::<DoubleType>()
                .write_batch(&vals, None, None)
                .map_err(err)?;
        }
        cw.close().map_err(err)?;
        col += 1;
    }
    rg.close().map_err(err)?;
    w.close().map_err(err)?;
    Ok(buf)
}

/// Read a perfcast table file (or any Parquet file with the op's columns; `op` and `gpu`
/// default to the file's metadata).
pub fn read_table(
    f: &ParquetFile,
    op: Option<Op>,
    gpu: Option<&str>,
) -> Result<KernelTable, KernelError> {
    let op = match op {
        Some(o) => o,
        None => {
            let name = f.metadata("perfcast.op").ok_or_else(|| {
                KernelError::file(
                    f.name(),
                    "no `perfcast.op` in the file's metadata: name the op",
                )
            })?;
            Op::from_name(&name).ok_or_else(|| {
                KernelError::file(
                    f.name(),
                    format!("unknown op `{name}` in the file's metadata"),
                )
            })?
        }
    };
    let gpu = match gpu {
        Some(g) => g.to_string(),
        None => f.metadata("perfcast.gpu").ok_or_else(|| {
            KernelError::file(
                f.name(),
                "no `perfcast.gpu` in the file's metadata: name the GPU",
            )
        })?,
    };
    let meta = |k: &str| f.metadata(k).unwrap_or_default();
    let provenance = Provenance {
        source: meta("perfcast.source"),
        path: meta("perfcast.path"),
        device: meta("perfcast.device"),
        framework: meta("perfcast.framework"),
    };
    let s = op.schema();
    let mut cats = Vec::new();
    for c in s.categorical {
        cats.push(text(f, c)?.ok_or_else(|| missing(f.name(), op, c))?);
    }
    let mut shapes = Vec::new();
    for c in s.shape {
        shapes.push(ints(f, c)?.ok_or_else(|| missing(f.name(), op, c))?);
    }
    let lat = floats(f, LATENCY)?.ok_or_else(|| missing(f.name(), op, LATENCY))?;
    TableBuilder::from_columns(&gpu, op, provenance, f.name(), &cats, &shapes, &lat)
}

/// Read a plain CSV of kernels (a header line naming `op`, the op's fields and
/// `latency_ms`; one row per kernel, of one or more ops) for GPU `gpu`: one table per op.
pub fn read_csv(
    file: &str,
    text: &str,
    gpu: &str,
    source: &str,
) -> Result<Vec<KernelTable>, KernelError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(KernelError::file(file, "empty: expected a header line"));
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let Some(op_col) = cols.iter().position(|c| *c == "op") else {
        return Err(KernelError::file(
            file,
            "the header has no `op` column (op, the op's fields, latency_ms)",
        ));
    };
    let mut builders: Vec<TableBuilder> = Vec::new();
    let provenance = Provenance {
        source: source.to_string(),
        path: file.to_string(),
        ..Provenance::default()
    };
    for (n, line) in lines {
        let row = n + 1;
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != cols.len() {
            return Err(KernelError::Row {
                file: file.to_string(),
                row,
                field: "-".into(),
                message: format!("{} fields, the header has {}", fields.len(), cols.len()),
            });
        }
        let op_name = fields[op_col];
        let op = Op::from_name(op_name).ok_or_else(|| KernelError::Row {
            file: file.to_string(),
            row,
            field: "op".into(),
            message: format!(
                "unknown op `{op_name}` (one of {})",
                Op::ALL.map(Op::name).join(", ")
            ),
        })?;
        let s = op.schema();
        let field = |c: &str| -> Result<&str, KernelError> {
            cols.iter()
                .position(|h| *h == c)
                .map(|i| fields[i])
                .ok_or_else(|| missing(file, op, c))
        };
        let mut cat = Vec::new();
        for c in s.categorical {
            cat.push(field(c)?);
        }
        let mut shape = Vec::new();
        for c in s.shape {
            let v = field(c)?;
            shape.push(v.parse::<u64>().map_err(|_| KernelError::Row {
                file: file.to_string(),
                row,
                field: (*c).to_string(),
                message: format!("`{v}` is not a non-negative integer"),
            })?);
        }
        let l = field(LATENCY)?;
        let latency = l.parse::<f64>().map_err(|_| KernelError::Row {
            file: file.to_string(),
            row,
            field: LATENCY.to_string(),
            message: format!("`{l}` is not a number"),
        })?;
        let b = match builders.iter().position(|b| b.op() == op) {
            Some(i) => &mut builders[i],
            None => {
                builders.push(TableBuilder::new(gpu, op, provenance.clone()));
                builders
                    .last_mut()
                    .ok_or_else(|| KernelError::file(file, "no table"))?
            }
        };
        b.push(file, row, &cat, &shape, latency)?;
    }
    builders.into_iter().map(|b| b.finish(file)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm_table() -> KernelTable {
        let mut b = TableBuilder::new(
            "test_gpu",
            Op::Gemm,
            Provenance {
                source: "unit test".into(),
                ..Provenance::default()
            },
        );
        b.push("t", 1, &["bfloat16", "cublas"], &[128, 256, 512], 0.01)
            .unwrap();
        b.push("t", 2, &["fp8", "cublas"], &[128, 256, 512], 0.006)
            .unwrap();
        b.finish("t").unwrap()
    }

    #[test]
    fn a_table_round_trips_through_parquet() {
        let t = gemm_table();
        let bytes = write_table(&t).unwrap();
        let f = ParquetFile::open("mem.parquet", Bytes::from(bytes)).unwrap();
        assert_eq!(f.metadata("perfcast.source").as_deref(), Some("unit test"));
        assert_eq!(read_table(&f, None, None).unwrap(), t);
    }

    #[test]
    fn csv_rows_become_one_table_per_op_and_bad_rows_are_named() {
        let csv = "op,dtype,kernel,m,n,k,latency_ms\n\
                   gemm,bfloat16,cublas,128,256,512,0.01\n\
                   gemm,fp8,cublas,128,256,512,0.006\n";
        let t = read_csv("v.csv", csv, "test_gpu", "unit test").unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].rows, gemm_table().rows);
        let table: &[(&str, &[&str])] = &[
            (
                "op,dtype,m,n,k,latency_ms\ngemm,bf16,1,1,1,1\n",
                &["v.csv", "missing column `kernel`"],
            ),
            (
                "op,dtype,kernel,m,n,k,latency_ms\ngemm,bf16,x,1,-1,1,1\n",
                &["row 2", "`n`"],
            ),
            (
                "op,dtype,kernel,m,n,k,latency_ms\ngemm,bf16,x,1,1,1,nan\n",
                &["row 2", "latency_ms"],
            ),
            (
                "op,dtype,kernel,m,n,k,latency_ms\ngemv,bf16,x,1,1,1,1\n",
                &["row 2", "unknown op `gemv`"],
            ),
            (
                "op,dtype,kernel,m,n,k,latency_ms\ngemm,bf16,x,1,1\n",
                &["row 2", "5 fields"],
            ),
            ("dtype,kernel\n", &["no `op` column"]),
            ("", &["empty"]),
        ];
        for (text, want) in table {
            let e = read_csv("v.csv", text, "g", "s").unwrap_err().to_string();
            for w in *want {
                assert!(e.contains(w), "{text:?}: {e}");
            }
        }
    }

    #[test]
    fn a_file_that_is_not_parquet_is_an_error_naming_it() {
        let e = ParquetFile::open("x.parquet", Bytes::from_static(b"PAR1 not really"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("x.parquet"), "{e}");
    }
}
