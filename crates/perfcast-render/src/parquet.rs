//! A results table as a Parquet file: the CSV's columns, each typed from its cells (every
//! cell an integer: INT64; every cell a number: DOUBLE; else UTF-8 text), an empty cell a
//! null. What `--format parquet` writes, so that a data frame reads the same columns as the
//! CSV without guessing their types.

use crate::Table;
use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::sync::Arc;

/// The type of a column, from its non-empty cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// INT64: every cell an integer.
    Int,
    /// DOUBLE: every cell a finite number.
    Double,
    /// UTF-8 text (BYTE_ARRAY, logical type String).
    Text,
}

/// The type every non-empty cell of column `c` fits (a column of empty cells is text).
pub fn column_type(t: &Table, c: usize) -> ColumnType {
    let cells = || {
        t.rows
            .iter()
            .filter_map(move |r| r.get(c).map(String::as_str))
            .filter(|s| !s.is_empty())
    };
    if cells().next().is_none() {
        ColumnType::Text
    } else if cells().all(|s| s.parse::<i64>().is_ok()) {
        ColumnType::Int
    } else if cells().all(|s| s.parse::<f64>().is_ok_and(f64::is_finite)) {
        ColumnType::Double
    } else {
        ColumnType::Text
    }
}

/// The Parquet file of `t` (one row group, Snappy-compressed), with `created_by` naming the
/// command that wrote it. Every column is optional: an empty cell is a null.
pub fn to_parquet(t: &Table, created_by: &str) -> Result<Vec<u8>, String> {
    let err = |e: parquet::errors::ParquetError| format!("cannot write Parquet: {e}");
    let types: Vec<ColumnType> = (0..t.headers.len()).map(|c| column_type(t, c)).collect();
    let mut fields = Vec::with_capacity(types.len());
    for (name, ty) in t.headers.iter().zip(&types) {
        let b = match ty {
            ColumnType::Int => Type::primitive_type_builder(name, Physical::INT64),
            ColumnType::Double => Type::primitive_type_builder(name, Physical::DOUBLE),
            ColumnType::Text => Type::primitive_type_builder(name, Physical::BYTE_ARRAY)
                .with_logical_type(Some(LogicalType::String)),
        };
        fields.push(Arc::new(
            b.with_repetition(Repetition::OPTIONAL)
                .build()
                .map_err(err)?,
        ));
    }
    let schema = Type::group_type_builder("perfcast")
        .with_fields(fields)
        .build()
        .map_err(err)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(created_by.to_string())
        .build();
    let mut buf = Vec::new();
    let mut w =
        SerializedFileWriter::new(&mut buf, Arc::new(schema), Arc::new(props)).map_err(err)?;
    let mut rg = w.next_row_group().map_err(err)?;
    let mut c = 0;
    while let Some(mut cw) = rg.next_column().map_err(err)? {
        let cells: Vec<&str> = t
            .rows
            .iter()
            .map(|r| r.get(c).map_or("", String::as_str))
            .collect();
        let defs: Vec<i16> = cells.iter().map(|s| i16::from(!s.is_empty())).collect();
        let present = cells.iter().filter(|s| !s.is_empty());
        // The cells were typed by `column_type`: they parse.
        match types[c] {
            ColumnType::Int => {
                let v: Vec<i64> = present.map(|s| s.parse().unwrap_or(0)).collect();
                cw.typed::<Int64Type>().write_batch(&v, Some(&defs), None)
            }
            ColumnType::Double => {
                let v: Vec<f64> = present.map(|s| s.parse().unwrap_or(0.0)).collect();
                cw.typed::<DoubleType>().write_batch(&v, Some(&defs), None)
            }
            ColumnType::Text => {
                let v: Vec<ByteArray> = present.map(|s| ByteArray::from(*s)).collect();
                cw.typed::<ByteArrayType>()
                    .write_batch(&v, Some(&defs), None)
            }
        }
        .map_err(err)?;
        cw.close().map_err(err)?;
        c += 1;
    }
    rg.close().map_err(err)?;
    w.close().map_err(err)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    fn table() -> Table {
        let mut t = Table::new(&[
            ("rank", true),
            ("time s", true),
            ("plan", false),
            ("note", false),
        ]);
        t.push(vec![
            "1".into(),
            "15.87".into(),
            "tp1 pp1".into(),
            "".into(),
        ]);
        t.push(vec![
            "2".into(),
            "1e-3".into(),
            "tp2, \"x\"".into(),
            "".into(),
        ]);
        t.push(vec!["".into(), "16".into(), "".into(), "".into()]);
        t
    }

    /// (column, its type): integers, numbers, text; an empty column is text.
    #[test]
    fn columns_are_typed_from_their_cells() {
        let t = table();
        let want = [
            ColumnType::Int,
            ColumnType::Double,
            ColumnType::Text,
            ColumnType::Text,
        ];
        for (c, w) in want.iter().enumerate() {
            assert_eq!(column_type(&t, c), *w, "{}", t.headers[c]);
        }
    }

    #[test]
    fn a_table_round_trips_with_nulls_and_any_header() {
        let bytes = to_parquet(&table(), "perfcast test").unwrap();
        let r = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
        assert_eq!(r.metadata().file_metadata().num_rows(), 3);
        let rows: Vec<Vec<(String, Field)>> = r
            .get_row_iter(None)
            .unwrap()
            .map(|row| row.unwrap().into_columns())
            .collect();
        let names: Vec<&str> = rows[0].iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["rank", "time s", "plan", "note"]);
        assert_eq!(rows[0][0].1, Field::Long(1));
        assert_eq!(rows[1][1].1, Field::Double(1e-3));
        assert_eq!(rows[1][2].1, Field::Str("tp2, \"x\"".into()));
        assert_eq!(rows[2][0].1, Field::Null);
        assert_eq!(rows[2][1].1, Field::Double(16.0));
        assert_eq!(rows[0][3].1, Field::Null);
    }

    /// A non-finite number stays text (a Parquet reader would take it as a value).
    #[test]
    fn non_finite_cells_keep_their_column_text() {
        let mut t = Table::new(&[("x", true)]);
        t.push(vec!["1.5".into()]);
        t.push(vec!["inf".into()]);
        assert_eq!(column_type(&t, 0), ColumnType::Text);
    }
}
