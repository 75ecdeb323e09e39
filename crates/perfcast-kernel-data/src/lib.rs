//! The project's kernel tables, embedded: `tables/<gpu>/<op>.parquet`, converted by `perfcast
//! kernels import` from NVIDIA AIConfigurator's kernel database (`aiconfigurator-core` 0.12.0
//! on PyPI, Apache-2.0; NOTICE says which files and how), each embedded in its packed form
//! `<op>.pkt` (`perfcast_kernels::packed`, written by `examples/pack.rs`), whose variants a
//! command decodes only when it looks them up. Only the hosts and the tests that time from
//! tables link this crate.

include!(concat!(env!("OUT_DIR"), "/tables.rs"));

/// The catalog of the embedded tables.
pub fn catalog() -> Result<perfcast_kernels::Catalog, perfcast_kernels::KernelError> {
    perfcast_kernels::Catalog::embedded(TABLES)
}

/// The catalog of the embedded tables, decoded once per process and shared: what a host hands
/// to `perfcast_config::Plugins::with_kernels`. `None` only if a table file were named after
/// no op, which the build script cannot produce.
pub fn shared() -> Option<std::sync::Arc<perfcast_kernels::Catalog>> {
    static CATALOG: std::sync::OnceLock<Option<std::sync::Arc<perfcast_kernels::Catalog>>> =
        std::sync::OnceLock::new();
    CATALOG
        .get_or_init(|| catalog().ok().map(std::sync::Arc::new))
        .clone()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use perfcast_kernels::io::{read_table, ParquetFile};
    use perfcast_kernels::Op;
    use std::path::Path;

    /// Every embedded (packed) table holds exactly the rows and provenance of its Parquet
    /// source, and every Parquet table is embedded: a table imported and not packed
    /// (`cargo run --release -p perfcast-kernel-data --example pack`) fails here.
    #[test]
    fn every_packed_table_is_its_parquet_source_row_for_row() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tables");
        let mut sources = Vec::new();
        for gpu in std::fs::read_dir(&dir).unwrap() {
            let gpu = gpu.unwrap().path();
            for f in std::fs::read_dir(&gpu).unwrap() {
                let p = f.unwrap().path();
                if p.extension().and_then(|x| x.to_str()) == Some("parquet") {
                    let g = gpu.file_name().unwrap().to_string_lossy().into_owned();
                    let op = p.file_stem().unwrap().to_string_lossy().into_owned();
                    sources.push((g, op, p));
                }
            }
        }
        sources.sort();
        let embedded: Vec<(String, String)> = super::TABLES
            .iter()
            .map(|(g, o, _)| (g.to_string(), o.to_string()))
            .collect();
        let named: Vec<(String, String)> = sources
            .iter()
            .map(|(g, o, _)| (g.clone(), o.clone()))
            .collect();
        assert_eq!(
            embedded, named,
            "the packed tables are not the Parquet tables: pack them"
        );
        let catalog = super::catalog().unwrap();
        for (gpu, op, path) in &sources {
            let want = read_table(&ParquetFile::read(path).unwrap(), None, None).unwrap();
            let got = catalog
                .get(gpu, Op::from_name(op).unwrap())
                .unwrap()
                .table()
                .unwrap();
            assert_eq!(
                got, want,
                "{gpu}/{op}: the packed table differs from its Parquet source"
            );
        }
    }
}
