//! The kernel classes a table times, and the columns of each: the categorical fields (dtypes,
//! the kernel family), the shape fields (integers) and the latency in milliseconds.

use std::fmt;

/// One kernel class: what a table's rows time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// A dense GEMM `m x n x k` (`m` the tokens).
    Gemm,
    /// Prefill attention (causal) over `seq_len` new tokens per sequence.
    ContextAttention,
    /// One decode step of attention: `isl` new tokens per sequence over `step` cached ones.
    GenerationAttention,
    /// A whole MoE block's expert compute (grouped GEMMs, activation, routing kernels).
    Moe,
    /// An NCCL collective inside one node.
    Nccl,
}

/// The columns of a table of `op`.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    /// Categorical fields (strings), in key order.
    pub categorical: &'static [&'static str],
    /// Shape fields (non-negative integers), in key order.
    pub shape: &'static [&'static str],
}

/// Most categorical and shape fields of any op (the fixed widths of a [`crate::Row`]).
pub const MAX_CATEGORICAL: usize = 3;
pub const MAX_SHAPE: usize = 7;

/// The latency column of every table, milliseconds.
pub const LATENCY: &str = "latency_ms";

impl Op {
    pub const ALL: [Op; 5] = [
        Op::Gemm,
        Op::ContextAttention,
        Op::GenerationAttention,
        Op::Moe,
        Op::Nccl,
    ];

    /// The name a table file and the command line use.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Gemm => "gemm",
            Op::ContextAttention => "context_attention",
            Op::GenerationAttention => "generation_attention",
            Op::Moe => "moe",
            Op::Nccl => "nccl",
        }
    }

    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The columns of a table of this op.
    pub const fn schema(self) -> Schema {
        match self {
            Op::Gemm => Schema {
                categorical: &["dtype", "kernel"],
                shape: &["m", "n", "k"],
            },
            Op::ContextAttention => Schema {
                categorical: &["dtype", "kv_dtype", "kernel"],
                shape: &[
                    "batch", "seq_len", "heads", "kv_heads", "head_dim", "window",
                ],
            },
            Op::GenerationAttention => Schema {
                categorical: &["dtype", "kv_dtype", "kernel"],
                shape: &[
                    "batch", "isl", "step", "heads", "kv_heads", "head_dim", "window",
                ],
            },
            Op::Moe => Schema {
                categorical: &["dtype", "distribution", "kernel"],
                shape: &["tokens", "hidden", "inter", "top_k", "experts", "tp", "ep"],
            },
            Op::Nccl => Schema {
                categorical: &["collective", "dtype"],
                shape: &["gpus", "bytes"],
            },
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_fit_the_row_widths_and_names_round_trip() {
        for op in Op::ALL {
            let s = op.schema();
            assert!(s.categorical.len() <= MAX_CATEGORICAL, "{op}");
            assert!(s.shape.len() <= MAX_SHAPE, "{op}");
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
        assert_eq!(Op::from_name("gemv"), None);
    }
}
