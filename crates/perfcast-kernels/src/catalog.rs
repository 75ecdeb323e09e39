//! A set of tables by GPU and op: the embedded project tables (`perfcast-kernel-data`, packed),
//! or the `<gpu>/<op>.parquet` files of a folder, read when first asked for.

use crate::error::KernelError;
use crate::io::{read_table, ParquetFile};
use crate::op::Op;
use crate::timings::Timings;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Where one table's bytes are.
#[derive(Debug, Clone)]
enum Origin {
    Embedded(&'static [u8]),
    File(PathBuf),
}

#[derive(Debug)]
struct Entry {
    origin: Origin,
    timings: OnceLock<Arc<Timings>>,
}

/// Tables by `(gpu, op)`.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: BTreeMap<(String, Op), Entry>,
}

impl Catalog {
    /// The catalog of embedded tables `(gpu, op name, packed bytes)` ([`crate::packed`]).
    pub fn embedded(tables: &[(&str, &str, &'static [u8])]) -> Result<Self, KernelError> {
        let mut c = Catalog::default();
        for (gpu, op, bytes) in tables {
            let op = Op::from_name(op).ok_or_else(|| {
                KernelError::file(&format!("{gpu}/{op}.parquet"), format!("unknown op `{op}`"))
            })?;
            c.insert(gpu, op, Origin::Embedded(bytes));
        }
        Ok(c)
    }

    /// The catalog of a folder of `<gpu>/<op>.parquet` files (what `perfcast kernels
    /// import` writes).
    pub fn dir(dir: &Path) -> Result<Self, KernelError> {
        let mut c = Catalog::default();
        let rd = std::fs::read_dir(dir).map_err(|e| KernelError::io(dir, e))?;
        for gpu_dir in rd.filter_map(Result::ok).map(|e| e.path()) {
            if !gpu_dir.is_dir() {
                continue;
            }
            let Some(gpu) = gpu_dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let files = std::fs::read_dir(&gpu_dir).map_err(|e| KernelError::io(&gpu_dir, e))?;
            for p in files.filter_map(Result::ok).map(|e| e.path()) {
                if p.extension().and_then(|x| x.to_str()) != Some("parquet") {
                    continue;
                }
                let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
                let op = Op::from_name(stem).ok_or_else(|| {
                    KernelError::file(
                        &p.display().to_string(),
                        format!(
                            "`{stem}` is not an op (a table file is named after its op: {})",
                            Op::ALL.map(Op::name).join(", ")
                        ),
                    )
                })?;
                c.insert(gpu, op, Origin::File(p));
            }
        }
        Ok(c)
    }

    fn insert(&mut self, gpu: &str, op: Op, origin: Origin) {
        self.entries.insert(
            (gpu.to_string(), op),
            Entry {
                origin,
                timings: OnceLock::new(),
            },
        );
    }

    /// The GPUs with at least one table, sorted.
    pub fn gpus(&self) -> Vec<&str> {
        let mut g: Vec<&str> = self.entries.keys().map(|(g, _)| g.as_str()).collect();
        g.dedup();
        g
    }

    /// The ops `gpu` has tables of.
    pub fn ops(&self, gpu: &str) -> Vec<Op> {
        self.entries
            .keys()
            .filter(|(g, _)| g == gpu)
            .map(|(_, o)| *o)
            .collect()
    }

    /// The table of `op` on `gpu`, read (and checked) on first use.
    pub fn get(&self, gpu: &str, op: Op) -> Result<Arc<Timings>, KernelError> {
        let Some(e) = self.entries.get(&(gpu.to_string(), op)) else {
            return Err(self.missing(gpu, op));
        };
        if let Some(t) = e.timings.get() {
            return Ok(t.clone());
        }
        let t = Arc::new(match &e.origin {
            Origin::Embedded(b) => {
                Timings::packed(&format!("{gpu}/{op}.pkt"), Bytes::from_static(b))?
            }
            Origin::File(p) => {
                Timings::new(read_table(&ParquetFile::read(p)?, Some(op), Some(gpu))?)
            }
        });
        Ok(e.timings.get_or_init(|| t).clone())
    }

    /// The error for a table this catalog lacks: the nearest GPU names for an unknown GPU,
    /// the ops it has for a known one.
    fn missing(&self, gpu: &str, op: Op) -> KernelError {
        let gpus = self.gpus();
        if !gpus.contains(&gpu) {
            // Names that contain the one asked for (`h100` -> `h100_sxm`) first, then the
            // nearest by edit distance.
            let lower = gpu.to_ascii_lowercase();
            let mut near: Vec<String> = gpus
                .iter()
                .filter(|g| g.contains(lower.as_str()))
                .map(|g| g.to_string())
                .collect();
            for g in perfcast_core::suggest::closest(gpu, gpus.iter().copied(), 3, None) {
                if near.len() < 3 && !near.iter().any(|n| n == g) {
                    near.push(g.to_string());
                }
            }
            return KernelError::UnknownGpu {
                gpu: gpu.to_string(),
                near,
            };
        }
        KernelError::NoTable {
            gpu: gpu.to_string(),
            op: op.name().to_string(),
            have: self
                .ops(gpu)
                .iter()
                .map(|o| o.name())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}
