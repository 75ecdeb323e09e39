//! The importer of NVIDIA AIConfigurator's kernel tables (`aiconfigurator_core/systems/data/
//! <gpu>/<op>/<framework>/<version>/<table>_perf.parquet`, Apache-2.0; layout, columns and
//! caveats in the README of `crates/perfcast-kernel-data`).
//!
//! Per GPU and op it takes the TensorRT-LLM tables (`trtllm`; NCCL's own folder for the
//! collectives) of the **most complete** version: the one with the most distinct shapes, the
//! newest of those with as many (on H100 the newest MoE table, 1.3.0rc23, has 10,692 rows
//! against 126,360 in 1.3.0rc20; the NCCL folders the GPU files name hold two to five repeated
//! sweeps of the same 504 shapes, the newest one sweep). Its columns map onto perfcast's
//! schema ([`crate::op::Op::schema`]); an NCCL `message_size` counts elements of `nccl_dtype`
//! (not bytes: the half and int8 sweeps cover the same 512 B to 512 MiB, and all-gather
//! latency at a half size `S` equals int8 at `2S`; 8 H100s all-reduce 134,217,728 half
//! elements in 1.092 ms, 430 GB/s bus bandwidth, where nccl-tests reach 423 GB/s at 256 MiB),
//! so it is stored as bytes.

use crate::error::KernelError;
use crate::io::{self, ParquetFile};
use crate::op::Op;
use crate::table::{Categorical, KernelTable, Provenance, TableBuilder};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Where one op's table sits and how its columns map onto perfcast's.
struct Source {
    op: Op,
    /// `<op folder>/<framework folder>`.
    folder: &'static str,
    file: &'static str,
    framework: &'static str,
    /// perfcast's categorical fields, from these columns.
    categorical: &'static [&'static str],
    /// perfcast's shape fields, from these columns.
    shape: &'static [&'static str],
}

const SOURCES: &[Source] = &[
    Source {
        op: Op::Gemm,
        folder: "gemm/trtllm",
        file: "gemm_perf.parquet",
        framework: "TensorRT-LLM",
        categorical: &["gemm_dtype", "kernel_source"],
        shape: &["m", "n", "k"],
    },
    Source {
        op: Op::ContextAttention,
        folder: "attention/trtllm",
        file: "context_attention_perf.parquet",
        framework: "TensorRT-LLM",
        categorical: &["attn_dtype", "kv_cache_dtype", "kernel_source"],
        shape: &[
            "batch_size",
            "isl",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "window_size",
        ],
    },
    Source {
        op: Op::GenerationAttention,
        folder: "attention/trtllm",
        file: "generation_attention_perf.parquet",
        framework: "TensorRT-LLM",
        categorical: &["attn_dtype", "kv_cache_dtype", "kernel_source"],
        shape: &[
            "batch_size",
            "isl",
            "step",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "window_size",
        ],
    },
    Source {
        op: Op::Moe,
        folder: "moe/trtllm",
        file: "moe_perf.parquet",
        framework: "TensorRT-LLM",
        categorical: &["moe_dtype", "distribution", "kernel_source"],
        shape: &[
            "num_tokens",
            "hidden_size",
            "inter_size",
            "topk",
            "num_experts",
            "moe_tp_size",
            "moe_ep_size",
        ],
    },
    Source {
        op: Op::Nccl,
        folder: "comm/nccl",
        file: "nccl_perf.parquet",
        framework: "NCCL",
        categorical: &["op_name", "nccl_dtype"],
        shape: &["num_gpus", "message_size"],
    },
];

/// Bytes of one element of an NCCL sweep's dtype.
fn nccl_bytes(dtype: &str) -> Option<u64> {
    match dtype {
        "int8" | "uint8" | "fp8" => Some(1),
        "half" | "float16" | "bfloat16" | "bf16" => Some(2),
        "float" | "float32" | "int32" => Some(4),
        _ => None,
    }
}

/// The folder holding one folder per GPU: `dir` itself, or its `systems/data` or
/// `aiconfigurator_core/systems/data`.
pub fn data_root(dir: &Path) -> Result<PathBuf, KernelError> {
    for sub in ["", "systems/data", "aiconfigurator_core/systems/data"] {
        let d = dir.join(sub);
        let has_gpu = std::fs::read_dir(&d)
            .map(|rd| {
                rd.filter_map(Result::ok).any(|e| {
                    let p = e.path();
                    p.join("gemm").is_dir() || p.join("comm").is_dir()
                })
            })
            .unwrap_or(false);
        if has_gpu {
            return Ok(d);
        }
    }
    Err(KernelError::file(
        &dir.display().to_string(),
        "no AIConfigurator data here: expected <gpu>/gemm/... folders in it, in systems/data or in aiconfigurator_core/systems/data",
    ))
}

/// The GPUs of a data root (folder names, sorted).
pub fn gpus(root: &Path) -> Result<Vec<String>, KernelError> {
    let rd = std::fs::read_dir(root).map_err(|e| KernelError::io(root, e))?;
    let mut out: Vec<String> = rd
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

/// A version folder's name as a sortable key: the numeric parts, then a release above its
/// release candidates (`1.3.0rc20` < `1.3.0rc23` < `1.3.0`).
fn version_key(v: &str) -> (Vec<u64>, u64) {
    let (main, rc) = match v.split_once("rc") {
        Some((m, r)) => (m, r.parse().unwrap_or(0)),
        None => (v, u64::MAX),
    };
    let nums = main.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    (nums, rc)
}

/// Import every table of `gpu` under `root` (the ops it has), with `source` naming the
/// package they came from.
pub fn import_gpu(root: &Path, gpu: &str, source: &str) -> Result<Vec<KernelTable>, KernelError> {
    let mut out = Vec::new();
    for s in SOURCES {
        let dir = root.join(gpu).join(s.folder);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut versions: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.path().join(s.file).is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        versions.sort_by_key(|v| version_key(v));
        // The most distinct shapes, the newest among equals (the sort is ascending).
        let mut best: Option<(usize, String, ParquetFile)> = None;
        for v in versions {
            let f = ParquetFile::read(&dir.join(&v).join(s.file))?;
            let n = distinct_keys(&f, s)?;
            if best.as_ref().is_none_or(|(bn, _, _)| n >= *bn) {
                best = Some((n, v, f));
            }
        }
        let Some((_, version, f)) = best else {
            continue;
        };
        let rel = format!("systems/data/{gpu}/{}/{version}/{}", s.folder, s.file);
        out.push(convert(&f, s, gpu, &version, &rel, source)?);
    }
    Ok(out)
}

/// A table's categorical and shape columns, in the schema's order.
type KeyColumns = (Vec<Categorical>, Vec<Vec<u64>>);

/// The key columns of a source table, row by row.
fn key_columns(f: &ParquetFile, s: &Source) -> Result<KeyColumns, KernelError> {
    let mut cats = Vec::new();
    for c in s.categorical {
        cats.push(io::text(f, c)?.ok_or_else(|| io::missing(f.name(), s.op, c))?);
    }
    let mut shapes = Vec::new();
    for c in s.shape {
        shapes.push(io::ints(f, c)?.ok_or_else(|| io::missing(f.name(), s.op, c))?);
    }
    Ok((cats, shapes))
}

fn distinct_keys(f: &ParquetFile, s: &Source) -> Result<usize, KernelError> {
    let (cats, shapes) = key_columns(f, s)?;
    let n = shapes.first().map_or(0, Vec::len);
    let keys: HashSet<(Vec<&str>, Vec<u64>)> = (0..n)
        .map(|i| {
            (
                cats.iter().map(|c| c.get(i)).collect(),
                shapes.iter().map(|c| c[i]).collect(),
            )
        })
        .collect();
    Ok(keys.len())
}

fn convert(
    f: &ParquetFile,
    s: &Source,
    gpu: &str,
    version: &str,
    rel: &str,
    source: &str,
) -> Result<KernelTable, KernelError> {
    let (cats, mut shapes) = key_columns(f, s)?;
    let lat = io::floats(f, "latency")?.ok_or_else(|| io::missing(f.name(), s.op, "latency"))?;
    if s.op == Op::Nccl {
        // message_size counts elements of nccl_dtype: store bytes.
        for (i, size) in shapes[1].iter_mut().enumerate() {
            let dtype = cats[1].get(i);
            let b = nccl_bytes(dtype).ok_or_else(|| KernelError::Row {
                file: f.name().to_string(),
                row: i + 1,
                field: "nccl_dtype".into(),
                message: format!("unknown dtype `{dtype}` (int8, half, bfloat16, float)"),
            })?;
            *size *= b;
        }
    }
    let device = io::text(f, "device")?
        .filter(|d| !d.ids.is_empty())
        .map(|d| d.get(0).to_string())
        .unwrap_or_default();
    let provenance = Provenance {
        source: source.to_string(),
        path: rel.to_string(),
        device,
        framework: format!("{} {version}", s.framework),
    };
    TableBuilder::from_columns(gpu, s.op, provenance, f.name(), &cats, &shapes, &lat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_release_candidates_below_their_release() {
        let mut v = vec![
            "1.3.0rc23",
            "1.3.0",
            "1.0.0",
            "1.3.0rc20",
            "2.29.2",
            "2.27.3",
        ];
        v.sort_by_key(|x| version_key(x));
        assert_eq!(
            v,
            vec![
                "1.0.0",
                "1.3.0rc20",
                "1.3.0rc23",
                "1.3.0",
                "2.27.3",
                "2.29.2"
            ]
        );
    }

    #[test]
    fn nccl_sizes_are_elements_of_their_dtype() {
        assert_eq!(nccl_bytes("half"), Some(2));
        assert_eq!(nccl_bytes("int8"), Some(1));
        assert_eq!(nccl_bytes("fp64"), None);
    }
}
