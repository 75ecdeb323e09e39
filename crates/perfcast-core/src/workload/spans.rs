//! What each attention layer attends over: every earlier position, a sliding window of the
//! latest ones, or the positions of its own chunk; how many layers of each kind a run of
//! layers holds; and how many positions their KV caches keep.
//!
//! A model names its layers' kinds by `layer_pattern`, repeated from the first layer
//! (GPT-OSS: `["sliding", "full"]`, OpenAI 2025 model card §2; Llama 4: three `chunked`
//! then one `full`, the Hugging Face config's `layer_types` / `no_rope_layers`; Gemma 3:
//! five `sliding` then one `full`, Gemma Team 2025 §2). Without a pattern,
//! `sliding_window_layers = n` (the older key) spreads `n` sliding layers evenly: layer `i`
//! slides when `⌊(i + 1)·n / L⌋ > ⌊i·n / L⌋` (every other layer for n = L/2).
//!
//! GPT-OSS's attention sinks (one learned logit per head in each softmax's denominator,
//! OpenAI 2025 §2.1) cache nothing and add no matrix work: they are not costed apart.

use serde::{Deserialize, Serialize};

/// What one attention layer attends over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionSpan {
    /// Every earlier position (causal): its KV cache keeps the whole sequence.
    Full,
    /// The latest `sliding_window` positions (Mistral, GPT-OSS, Gemma): its cache keeps at
    /// most that many.
    Sliding,
    /// The earlier positions of its own `attention_chunk`-sized chunk (Llama 4's chunked
    /// local attention): its cache keeps at most one chunk.
    Chunked,
}

impl AttentionSpan {
    /// The name in configurations.
    pub const fn name(self) -> &'static str {
        match self {
            AttentionSpan::Full => "full",
            AttentionSpan::Sliding => "sliding",
            AttentionSpan::Chunked => "chunked",
        }
    }
}

/// How many layers of a run of layers attend in each way, with the window and the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct LayerSpans {
    /// Layers attending over every earlier position.
    pub full: u64,
    /// Layers attending over a sliding window.
    pub sliding: u64,
    /// Positions a sliding layer attends over (0 without sliding layers).
    pub window: u64,
    /// Layers attending within their chunk.
    pub chunked: u64,
    /// Positions of one chunk (0 without chunked layers).
    pub chunk: u64,
}

impl LayerSpans {
    /// `layers` layers that all attend over every earlier position.
    pub const fn full(layers: u64) -> LayerSpans {
        LayerSpans {
            full: layers,
            sliding: 0,
            window: 0,
            chunked: 0,
            chunk: 0,
        }
    }

    /// Layers in the run.
    pub const fn layers(&self) -> u64 {
        self.full + self.sliding + self.chunked
    }

    /// Whether every layer attends over every earlier position.
    pub const fn all_full(&self) -> bool {
        self.sliding == 0 && self.chunked == 0
    }

    /// The run's layers of each kind, with the positions they keep at most (`None`: all).
    pub fn kinds(&self) -> [(AttentionSpan, u64, Option<u64>); 3] {
        [
            (AttentionSpan::Full, self.full, None),
            (AttentionSpan::Sliding, self.sliding, Some(self.window)),
            (AttentionSpan::Chunked, self.chunked, Some(self.chunk)),
        ]
    }

    /// Positions (summed over the run's layers) the KV caches of one sequence of `len`
    /// tokens keep: `full·len + sliding·min(len, window) + chunked·min(len, chunk)`. A
    /// chunked layer needs only its current chunk's positions; a runtime reserves the whole
    /// chunk (vLLM's chunked local attention frees a chunk's blocks once it is past), so
    /// this is the most it holds.
    pub fn kv_positions(&self, len: u64) -> u64 {
        self.full * len + self.sliding * len.min(self.window) + self.chunked * len.min(self.chunk)
    }

    /// Positions the query at 0-based position `pos` of a layer of kind `span` attends over
    /// (itself included).
    pub fn attended(&self, span: AttentionSpan, pos: u64) -> u64 {
        match span {
            AttentionSpan::Full => pos + 1,
            AttentionSpan::Sliding => (pos + 1).min(self.window),
            AttentionSpan::Chunked => pos % self.chunk.max(1) + 1,
        }
    }
}

/// The kind of layer `i` of `layers` for a model with `pattern` (repeated) or, without one,
/// `sliding` sliding layers spread evenly; `Full` when the model has neither.
pub(super) fn kind_of(
    pattern: Option<&[AttentionSpan]>,
    sliding: Option<u64>,
    layers: u64,
    i: u64,
) -> AttentionSpan {
    match (pattern, sliding) {
        (Some(p), _) if !p.is_empty() => p[(i % p.len() as u64) as usize],
        (_, Some(n)) if layers > 0 => {
            if (i + 1) * n / layers > i * n / layers {
                AttentionSpan::Sliding
            } else {
                AttentionSpan::Full
            }
        }
        _ => AttentionSpan::Full,
    }
}
