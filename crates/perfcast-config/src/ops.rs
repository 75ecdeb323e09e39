//! `[[ops]]`: a list of compute ops written by hand (for `perfcast roofline`).
//!
//! ```toml
//! [[ops]]
//! name = "qkv"            # optional, defaults to `op<i>`
//! op = "gemm"
//! m = 2048
//! n = 4608
//! k = 12288
//! batch = 1               # optional
//! dtype = "bf16"          # or a_dtype / b_dtype / out_dtype (b and out default to a)
//!
//! [[ops]]
//! op = "vector"
//! kind = "norm"           # norm, softmax, activation, dropout, elementwise, embedding, loss, cast, rope, optimizer
//! elements = 25165824
//! flops_per_element = 8.0
//! bytes_per_element = 4.0
//! dtype = "bf16"
//! launches = 1            # optional
//!
//! [[ops]]
//! op = "attention"        # the attention core; fields as perfcast_core::op::Attention
//! batch = 1
//! heads = 12
//! q_len = 2048
//! kv_len = 2048
//! head_dim = 128
//! dtype = "bf16"
//! kind = "flash"          # optional: plain (default) or flash
//! causal = true           # optional
//! ```

use crate::config::{lookup, Config};
use crate::error::HostError;
use crate::layers::kind_name;
use perfcast_core::op::{Attention, AttentionKind, ComputeOp, Gemm, VectorOp, VectorOpKind};
use perfcast_core::DType;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The op kinds `[[ops]]` accepts.
pub const OP_KINDS: &[&str] = &["gemm", "vector", "attention"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GemmSpec {
    #[serde(default)]
    name: Option<String>,
    op: String,
    m: u64,
    n: u64,
    k: u64,
    #[serde(default)]
    batch: Option<u64>,
    #[serde(default)]
    dtype: Option<DType>,
    #[serde(default)]
    a_dtype: Option<DType>,
    #[serde(default)]
    b_dtype: Option<DType>,
    #[serde(default)]
    out_dtype: Option<DType>,
    /// Operand scaling of 8/4-bit GEMMs (`tensor`, `row`, `block`, `mx`, `nv`).
    #[serde(default)]
    scaling: Option<perfcast_core::GemmScaling>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct VectorSpec {
    #[serde(default)]
    name: Option<String>,
    op: String,
    kind: VectorOpKind,
    elements: u64,
    flops_per_element: f64,
    bytes_per_element: f64,
    dtype: DType,
    #[serde(default)]
    launches: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AttentionSpec {
    #[serde(default)]
    name: Option<String>,
    op: String,
    batch: u64,
    heads: u64,
    #[serde(default)]
    kv_heads: Option<u64>,
    q_len: u64,
    kv_len: u64,
    head_dim: u64,
    #[serde(default)]
    causal: bool,
    #[serde(default)]
    kind: AttentionKind,
    dtype: DType,
    #[serde(default)]
    backward: bool,
}

/// An op and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedOp {
    pub name: String,
    /// Key path of the entry (`ops[3]`).
    pub key: String,
    pub op: ComputeOp,
}

impl Config {
    /// The `[[ops]]` list (empty when the configuration has none).
    pub fn ops(&self) -> Result<Vec<NamedOp>, HostError> {
        let Some(v) = lookup(self.value(), "ops") else {
            return Ok(Vec::new());
        };
        let figment::value::Value::Array(_, items) = v else {
            return Err(HostError::Invalid {
                key: "ops".into(),
                origin: self.origin_of("ops"),
                message: format!(
                    "expected an array of tables (`[[ops]]`), found {}",
                    kind_name(v)
                ),
            });
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.op(i, item))
            .collect()
    }

    fn op(&self, i: usize, item: &figment::value::Value) -> Result<NamedOp, HostError> {
        let key = format!("ops[{i}]");
        let json = serde_json::to_value(item).map_err(|e| HostError::Invalid {
            key: key.clone(),
            origin: self.origin_of(&key),
            message: e.to_string(),
        })?;
        let op_kind = match json.get("op") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => {
                return Err(HostError::Invalid {
                    origin: self.origin_of(&key),
                    key: format!("{key}.op"),
                    message: format!(
                        "missing or not a string; expected one of {}",
                        OP_KINDS.join(", ")
                    ),
                })
            }
        };
        let entry = Entry { cfg: self, key };
        let (name, op) = match op_kind.as_str() {
            "gemm" => {
                let s: GemmSpec = self.parse_op(&entry.key, &json)?;
                debug_assert_eq!(s.op, "gemm");
                (s.name.clone(), entry.gemm(s)?)
            }
            "vector" => {
                let s: VectorSpec = self.parse_op(&entry.key, &json)?;
                debug_assert_eq!(s.op, "vector");
                (s.name.clone(), entry.vector(s)?)
            }
            "attention" => {
                let s: AttentionSpec = self.parse_op(&entry.key, &json)?;
                debug_assert_eq!(s.op, "attention");
                (s.name.clone(), entry.attention(s)?)
            }
            other => {
                return Err(entry.invalid(
                    "op",
                    format!(
                        "unknown op `{other}`{}; expected one of {}",
                        perfcast_core::suggest::did_you_mean(other, OP_KINDS.iter().copied()),
                        OP_KINDS.join(", ")
                    ),
                ))
            }
        };
        Ok(NamedOp {
            name: name.unwrap_or_else(|| format!("op{i}")),
            key: entry.key,
            op,
        })
    }

    fn parse_op<T: DeserializeOwned>(
        &self,
        key: &str,
        json: &serde_json::Value,
    ) -> Result<T, HostError> {
        serde_path_to_error::deserialize(json).map_err(|e| {
            let path = e.path().to_string();
            let mut k = if path == "." {
                key.to_string()
            } else {
                format!("{key}.{path}")
            };
            let message = perfcast_core::suggest::rewrite_serde(&e.into_inner().to_string());
            if let Some(field) = message
                .strip_prefix("unknown key `")
                .and_then(|m| m.split('`').next())
            {
                if !k.ends_with(&format!(".{field}")) {
                    k = format!("{k}.{field}");
                }
            }
            HostError::Invalid {
                origin: self.origin_of(&k).or_else(|| self.origin_of(key)),
                key: k,
                message,
            }
        })
    }
}

/// One `[[ops]]` entry being read: its key path, for errors that name the field and its origin.
struct Entry<'a> {
    cfg: &'a Config,
    key: String,
}

impl Entry<'_> {
    fn invalid(&self, field: &str, message: String) -> HostError {
        let k = format!("{}.{field}", self.key);
        HostError::Invalid {
            origin: self
                .cfg
                .origin_of(&k)
                .or_else(|| self.cfg.origin_of(&self.key)),
            key: k,
            message,
        }
    }

    fn positive(&self, field: &str, v: u64) -> Result<u64, HostError> {
        if v == 0 {
            Err(self.invalid(field, "must be at least 1".into()))
        } else {
            Ok(v)
        }
    }

    fn gemm(&self, s: GemmSpec) -> Result<ComputeOp, HostError> {
        let a = s
            .a_dtype
            .or(s.dtype)
            .ok_or_else(|| self.invalid("dtype", "missing: give `dtype` (or `a_dtype`)".into()))?;
        Ok(ComputeOp::Gemm(Gemm {
            m: self.positive("m", s.m)?,
            n: self.positive("n", s.n)?,
            k: self.positive("k", s.k)?,
            batch: self.positive("batch", s.batch.unwrap_or(1))?,
            a,
            b: s.b_dtype.unwrap_or(a),
            out: s.out_dtype.unwrap_or(a),
            scaling: s.scaling.unwrap_or_default(),
        }))
    }

    fn vector(&self, s: VectorSpec) -> Result<ComputeOp, HostError> {
        self.positive("elements", s.elements)?;
        if !(s.flops_per_element.is_finite() && s.flops_per_element >= 0.0) {
            return Err(self.invalid(
                "flops_per_element",
                format!("must be a finite number >= 0, got {}", s.flops_per_element),
            ));
        }
        if !(s.bytes_per_element.is_finite() && s.bytes_per_element > 0.0) {
            return Err(self.invalid(
                "bytes_per_element",
                format!("must be a finite number > 0, got {}", s.bytes_per_element),
            ));
        }
        Ok(ComputeOp::Vector(VectorOp {
            kind: s.kind,
            elements: s.elements,
            flops_per_element: s.flops_per_element,
            bytes_per_element: s.bytes_per_element,
            dtype: s.dtype,
            launches: s.launches.unwrap_or(1),
        }))
    }

    fn attention(&self, s: AttentionSpec) -> Result<ComputeOp, HostError> {
        let heads = self.positive("heads", s.heads)?;
        let kv_heads = self.positive("kv_heads", s.kv_heads.unwrap_or(heads))?;
        if heads % kv_heads != 0 {
            return Err(self.invalid(
                "kv_heads",
                format!("must divide heads ({heads}), got {kv_heads}"),
            ));
        }
        Ok(ComputeOp::Attention(Attention {
            batch: self.positive("batch", s.batch)?,
            heads,
            kv_heads,
            q_len: self.positive("q_len", s.q_len)?,
            kv_len: self.positive("kv_len", s.kv_len)?,
            head_dim: self.positive("head_dim", s.head_dim)?,
            causal: s.causal,
            kind: s.kind,
            dtype: s.dtype,
            backward: s.backward,
        }))
    }
}
