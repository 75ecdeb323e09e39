//! A compute unit that times GEMMs (and, where the GPU has tables of them, whole fused MoE
//! blocks and inference attention cores) from a GPU's measured tables and everything else as
//! the unit it wraps: what a host builds for a device whose configuration names kernel tables
//! (`device.kernels`). The wrapped unit stays the plugin it is; this adapter only answers
//! [`ComputeUnit::op_time`], [`ComputeUnit::routed_experts_time`] and
//! [`ComputeUnit::inference_attention_time`] for the shapes the tables cover.
//!
//! Which table rows stand for a GEMM (TensorRT-LLM's kernels, the ones its tables time):
//!
//! | operands (A / B), scaling      | table `dtype` |
//! |---|---|
//! | bf16 or fp16 / same            | `bfloat16` (fp16 runs the same tensor-core rate) |
//! | fp8 / fp8, per tensor or row   | `fp8` (cuBLAS per-tensor; row-wise scales run within a few percent of it) |
//! | fp8 / fp8, 1x128 / 128x128 blocks | `fp8_block` (DeepGEMM-style) |
//! | fp4 / fp4                      | `nvfp4` (16-element blocks) |
//! | bf16 / int8 or int4 (weight-only) | `int8_wo` / `int4_wo` (where the table has them) |
//!
//! of the kernel measured on the most shapes ([`Timings::main_kernel`]). A batched GEMM
//! (`batch > 1`: grouped expert GEMMs) is not a row of a dense-GEMM table (it reads `batch`
//! weight matrices), so it and every other op, and shapes outside the table, go to the
//! wrapped unit. A measured time is the kernel alone, at the GPU's default clocks and rated
//! power (AIConfigurator collects one kernel at a time): no launch overhead is added on top,
//! and a unit clocked below the measurements' clock (a power limit:
//! [`ComputeUnit::clock_ratio`]) takes the measured time over that ratio.
//!
//! The tables time each shape again and again on the same matrices, so a shape whose operands
//! fit in the on-chip memory runs from a warm L2 there (on H100, 1-row GEMMs with 4-16 MB of
//! weights are measured ~1.5x faster than HBM streams the weights), while in a model each
//! layer reads its own weights from device memory. For those shapes the time is at least the
//! wrapped unit's memory time (the roofline's device-memory traffic).
//!
//! **MoE blocks.** The MoE table times TensorRT-LLM's fused MoE module on one GPU
//! (AIConfigurator's `collect_moe.py`: `moe.forward(hidden_states, router_logits)` for
//! `tokens` tokens, the GPU holding its `1/ep` of the experts and `1/tp` of each expert's
//! width, under CUDA graphs): routing top-k, permute, the grouped GEMMs and activation,
//! finalize. Of its routing distributions the `balanced` one is used (every expert the same
//! load: the kernel alone); the busiest rank's excess load is the engine's
//! ([`RoutedExperts::load_factor`]), applied as the balanced time of `tokens x load_factor`
//! tokens, the load that rank carries. Gated experts take the table's main gated kernel
//! (`moe_torch_flow*`, not the `min_latency` or `nongated` ones), two-matrix experts the
//! `nongated` one.
//!
//! | experts' activations / weights, scaling | table `dtype` |
//! |---|---|
//! | bf16 or fp16 / same | `bfloat16` |
//! | fp8 / fp8, per tensor or row | `fp8` |
//! | fp8 / fp8, blocks | `fp8_block` |
//! | fp4 / fp4 | `nvfp4` |
//! | bf16 / fp4 (MXFP4 weight-only) | `w4a16_mxfp4` |
//! | fp8 / fp4 | `w4a8_mxfp4_mxfp8` |
//!
//! **Attention.** The prefill and decode tables time TensorRT-LLM's attention backend
//! (AIConfigurator's `collect_attn.py`, the TRTLLM backend: context FMHA, XQA decode) per
//! batch, prompt or context length and head layout ([`MeasuredCompute::attention_time`]);
//! training's attention (forward and backward) does not come from them.

use crate::catalog::Catalog;
use crate::interp::Path;
use crate::op::{Op, MAX_SHAPE};
use crate::timings::Timings;
use perfcast_core::hash::MixState;
use perfcast_core::op::{Attention, ComputeOp, Gemm, RoutedExperts};
use perfcast_core::MemoryTier;
use perfcast_core::{
    ComputeUnit, DType, Engine, FlopRate, GemmScaling, KernelPath, MemoryHierarchy, ModelError,
    OpTime, Seconds,
};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};

/// The table `dtype` that times a GEMM's operands and scaling, if any.
pub fn gemm_dtype(g: &Gemm) -> Option<&'static str> {
    Some(match (g.a, g.b, g.scaling) {
        (DType::Bf16 | DType::Fp16, DType::Bf16 | DType::Fp16, _) => "bfloat16",
        (DType::Fp8, DType::Fp8, GemmScaling::Block) => "fp8_block",
        (DType::Fp8, DType::Fp8, _) => "fp8",
        (DType::Fp4, DType::Fp4, _) => "nvfp4",
        (DType::Bf16 | DType::Fp16, DType::Int8, _) => "int8_wo",
        (DType::Bf16 | DType::Fp16, DType::Int4, _) => "int4_wo",
        _ => return None,
    })
}

/// The MoE table `dtype` that times routed experts of these formats, if any (module
/// documentation).
pub fn moe_dtype(e: &RoutedExperts) -> Option<&'static str> {
    Some(match (e.act, e.weight, e.scaling) {
        (DType::Bf16 | DType::Fp16, DType::Bf16 | DType::Fp16, _) => "bfloat16",
        (DType::Fp8, DType::Fp8, GemmScaling::Block) => "fp8_block",
        (DType::Fp8, DType::Fp8, _) => "fp8",
        (DType::Fp4, DType::Fp4, _) => "nvfp4",
        (DType::Bf16 | DType::Fp16, DType::Fp4, _) => "w4a16_mxfp4",
        (DType::Fp8, DType::Fp4, _) => "w4a8_mxfp4_mxfp8",
        _ => return None,
    })
}

/// The MoE table's routing distribution used: every expert the same load.
const BALANCED: &str = "balanced";

/// A compute unit timing GEMMs from measured kernels.
pub struct MeasuredCompute {
    inner: Arc<dyn ComputeUnit>,
    gemm: Arc<Timings>,
    /// Where the GPU's other tables come from: each is read on its first query (a dense
    /// model never reads the MoE table, a training step no attention table).
    source: Option<(Arc<Catalog>, String)>,
    /// The fused MoE blocks, with their kernels resolved once read.
    moe: OnceLock<Result<Option<MoeTable>, String>>,
    /// Prefill and decode attention, with their main kernels.
    context: OnceLock<Result<Option<AttentionTable>, String>>,
    generation: OnceLock<Result<Option<AttentionTable>, String>>,
    /// The main kernel of each table dtype, resolved once.
    kernels: Vec<(&'static str, Option<String>)>,
    /// The inner unit's clock relative to the measurements' ([`ComputeUnit::clock_ratio`]).
    clock: f64,
    /// GEMM and inference attention times already answered.
    memo: Mutex<Memo>,
}

/// Times a unit has answered on one memory hierarchy: a unit is shared by every engine built
/// on its system (a calibration builds one per evaluation, a search one per plan), and they
/// ask the same GEMMs and attention cores again and again. Exact (a time is a pure function
/// of the op and the hierarchy), bounded ([`MEMO_CAPACITY`] per kind, then emptied), emptied
/// when asked on another hierarchy (whose tiers it holds, so they are compared by identity),
/// and never waited on. A unit shared by systems of different hierarchies (a calibration of
/// the unit's own parameters shares each evaluation's unit among the cases of a preset)
/// alternates between them and gains nothing, still exactly.
#[derive(Default)]
struct Memo {
    tiers: Vec<Arc<dyn MemoryTier>>,
    /// [`ComputeUnit::op_time`] of GEMMs.
    gemms: HashMap<GemmKey, OpTime, MixState>,
    /// [`ComputeUnit::inference_attention_time`] by attention core and KV-cache format.
    attention: HashMap<AttentionKey, Option<Seconds>, MixState>,
}

/// A memo's key: an op's fields packed into words, compared and hashed word by word without
/// branching (the derived comparison of a 36-byte `Gemm` compiled to a `memcmp` call, a
/// tenth of a calibration's serving runs). The constructors destructure the op exhaustively,
/// so a field added to it cannot be left out.
#[derive(Clone, Copy)]
struct Packed<const N: usize>([u64; N]);

impl<const N: usize> std::hash::Hash for Packed<N> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.iter().for_each(|w| h.write_u64(*w));
    }
}

impl<const N: usize> PartialEq for Packed<N> {
    fn eq(&self, o: &Self) -> bool {
        self.0.iter().zip(&o.0).fold(0, |d, (a, b)| d | (a ^ b)) == 0
    }
}

impl<const N: usize> Eq for Packed<N> {}

type GemmKey = Packed<5>;
type AttentionKey = Packed<7>;

fn gemm_key(g: &Gemm) -> GemmKey {
    let Gemm {
        m,
        n,
        k,
        batch,
        a,
        b,
        out,
        scaling,
    } = *g;
    let formats = a.code() as u64
        | (b.code() as u64) << 8
        | (out.code() as u64) << 16
        | (scaling as u64) << 24;
    Packed([m, n, k, batch, formats])
}

fn attention_key(a: &Attention, kv: DType) -> AttentionKey {
    let Attention {
        batch,
        heads,
        kv_heads,
        q_len,
        kv_len,
        head_dim,
        causal,
        kind,
        dtype,
        backward,
    } = *a;
    let rest = causal as u64
        | (backward as u64) << 1
        | (kind as u64) << 8
        | (dtype.code() as u64) << 16
        | (kv.code() as u64) << 24;
    Packed([batch, heads, kv_heads, q_len, kv_len, head_dim, rest])
}

/// Answers of one kind kept at most per unit before that memo starts again (~200 bytes
/// each; the bound and its measurement: `timings`' `MEMO_CAPACITY`).
const MEMO_CAPACITY: usize = 1 << 12;

impl Memo {
    fn on(&self, memory: &MemoryHierarchy) -> bool {
        self.tiers.len() == memory.tiers.len()
            && self
                .tiers
                .iter()
                .zip(&memory.tiers)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl MeasuredCompute {
    pub fn new(inner: Arc<dyn ComputeUnit>, gemm: Arc<Timings>) -> Self {
        let kernels = [
            "bfloat16",
            "fp8",
            "fp8_block",
            "nvfp4",
            "int8_wo",
            "int4_wo",
        ]
        .into_iter()
        .map(|d| (d, gemm.main_kernel(&[d]).map(str::to_string)))
        .collect();
        let clock = inner.clock_ratio();
        MeasuredCompute {
            inner,
            gemm,
            source: None,
            moe: OnceLock::new(),
            context: OnceLock::new(),
            generation: OnceLock::new(),
            kernels,
            clock: if clock.is_finite() && clock > 0.0 {
                clock
            } else {
                1.0
            },
            memo: Mutex::default(),
        }
    }

    /// Also time routed experts and inference attention from the MoE and attention tables of
    /// `gpu` in `catalog` that it has (each read on first use).
    pub fn with_tables(mut self, catalog: Arc<Catalog>, gpu: &str) -> Self {
        self.source = Some((catalog, gpu.to_string()));
        self
    }

    /// Also time routed experts from `table`, a table of fused MoE blocks.
    pub fn with_moe_table(self, table: Arc<Timings>) -> Self {
        let _ = self.moe.set(Ok(Some(MoeTable::new(table))));
        self
    }

    /// Also time prefill and decode attention from these tables.
    pub fn with_attention_tables(self, context: Arc<Timings>, generation: Arc<Timings>) -> Self {
        let _ = self.context.set(Ok(Some(AttentionTable::new(context))));
        let _ = self
            .generation
            .set(Ok(Some(AttentionTable::new(generation))));
        self
    }

    /// The table of `op` in `slot`, read on first use; `None` when the GPU has none.
    fn lazy<'a, T>(
        &self,
        slot: &'a OnceLock<Result<Option<T>, String>>,
        op: Op,
        make: impl FnOnce(Arc<Timings>) -> T,
    ) -> Result<Option<&'a T>, ModelError> {
        let read = slot.get_or_init(|| match &self.source {
            Some((catalog, gpu)) if catalog.ops(gpu).contains(&op) => catalog
                .get(gpu, op)
                .map(|t| Some(make(t)))
                .map_err(|e| e.to_string()),
            _ => Ok(None),
        });
        match read {
            Ok(t) => Ok(t.as_ref()),
            Err(e) => Err(ModelError::invalid(
                perfcast_core::Key::other("device.kernels"),
                self.gpu(),
                format!("its {op} table cannot be read: {e}"),
            )),
        }
    }

    /// The table's GPU.
    pub fn gpu(&self) -> &str {
        self.gemm.gpu()
    }

    /// The measured or interpolated time of GEMM `g`, if the table covers it.
    pub fn gemm_time(&self, g: &Gemm) -> Option<(f64, Path)> {
        if g.batch > 1 {
            return None;
        }
        let dtype = gemm_dtype(g)?;
        let kernel = self
            .kernels
            .iter()
            .find(|(d, _)| *d == dtype)
            .and_then(|(_, k)| k.as_deref())?;
        let l = self.gemm.time(&[dtype, kernel], &[g.m, g.n, g.k])?;
        // Measured at the rated power's clock: a unit clocked lower (a power limit) takes
        // proportionally longer (its matrix engine's throughput scales with the clock).
        Some((l.latency_ms * 1e-3 / self.clock, l.path))
    }
}

/// An attention table (prefill or decode) with the main kernel of each `(dtype, kv_dtype)`.
struct AttentionTable {
    timings: Arc<Timings>,
    /// Per `(dtype, kv_dtype)`: the main kernel and the largest value of each shape field.
    kernels: Vec<([&'static str; 2], String, [u64; MAX_SHAPE])>,
}

impl AttentionTable {
    fn new(timings: Arc<Timings>) -> Self {
        let mut kernels = Vec::new();
        for d in ["bfloat16", "fp8"] {
            for kv in ["bfloat16", "fp8"] {
                if let Some(k) = timings.main_kernel(&[d, kv]) {
                    if let Some(most) = timings.max_shape(&[d, kv, k]) {
                        kernels.push(([d, kv], k.to_string(), most));
                    }
                }
            }
        }
        AttentionTable { timings, kernels }
    }

    /// The latency (ms) of `shape` for `(dtype, kv)`, the `scaled` dimensions scaled beyond
    /// the largest measured value by `(x / largest)^power` (the rest answered only within
    /// the table).
    fn time(&self, dk: [&str; 2], shape: &mut [u64], scaled: &[(usize, i32)]) -> Option<f64> {
        let (_, kernel, most) = self.kernels.iter().find(|(k, _, _)| *k == dk)?;
        let mut factor = 1.0;
        for &(dim, power) in scaled {
            if shape[dim] > most[dim] {
                factor *= (shape[dim] as f64 / most[dim] as f64).powi(power);
                shape[dim] = most[dim];
            }
        }
        let l = self.timings.time(&[dk[0], dk[1], kernel], shape)?;
        Some(l.latency_ms * factor)
    }
}

/// The attention tables' `(dtype, kv_dtype)` for an inference attention core: prefill in
/// its own format (fp8 context kernels exist), decode with 16-bit queries (the decode
/// tables hold no fp8 queries; TensorRT-LLM's XQA reads an fp8 cache with bf16 queries).
fn attention_dtypes(a: &Attention, kv: DType) -> Option<[&'static str; 2]> {
    let name = |d: DType| match d {
        DType::Bf16 | DType::Fp16 => Some("bfloat16"),
        DType::Fp8 => Some("fp8"),
        _ => None,
    };
    let kvd = name(kv)?;
    if a.q_len == 1 {
        Some(["bfloat16", kvd])
    } else {
        Some([name(a.dtype)?, kvd])
    }
}

/// The kernels of one MoE table dtype, each with its largest measured pass (tokens).
struct MoeKernels {
    dtype: &'static str,
    gated: Option<(String, u64)>,
    plain: Option<(String, u64)>,
}

/// A table of fused MoE blocks with the kernels of each dtype resolved.
struct MoeTable {
    timings: Arc<Timings>,
    kernels: Vec<MoeKernels>,
}

impl MoeTable {
    fn new(timings: Arc<Timings>) -> Self {
        let kernels = [
            "bfloat16",
            "fp8",
            "fp8_block",
            "nvfp4",
            "w4a16_mxfp4",
            "w4a8_mxfp4_mxfp8",
        ]
        .into_iter()
        .map(|dtype| {
            let of = |gated: bool| {
                let mut best: Option<(&str, usize)> = None;
                for (k, n) in timings.kernels(&[dtype, BALANCED]) {
                    let fits = k.contains("nongated") != gated && !k.contains("min_latency");
                    if fits && best.is_none_or(|(_, bn)| n > bn) {
                        best = Some((k, n));
                    }
                }
                let k = best?.0;
                let most = timings.max_shape(&[dtype, BALANCED, k])?[0];
                Some((k.to_string(), most))
            };
            MoeKernels {
                dtype,
                gated: of(true),
                plain: of(false),
            }
        })
        .collect();
        MoeTable { timings, kernels }
    }
}

impl MeasuredCompute {
    /// The measured or interpolated time (seconds, at the measurements' clock) of inference
    /// attention core `a` with its KV cache in `kv`, if the attention tables cover it:
    /// a decode step from the decode table (`batch`, context, heads); a prefill of
    /// `q_len` tokens after `kv_len - q_len` cached ones as the prefill table's `kv_len`-token
    /// prompts less its `kv_len - q_len`-token ones (the causal rows they add), at least a
    /// fresh `q_len`-token prefill. Beyond the largest measured batch the time scales with the
    /// batch, beyond the longest decode context with the context and the longest prompt with
    /// its square (the work of a causal prefill).
    pub fn attention_time(&self, a: &Attention, kv: DType) -> Result<Option<f64>, ModelError> {
        if a.backward || a.q_len == 0 || a.kv_len < a.q_len || a.batch == 0 {
            return Ok(None);
        }
        let Some(dk) = attention_dtypes(a, kv) else {
            return Ok(None);
        };
        if a.q_len == 1 {
            let Some(t) = self.lazy(
                &self.generation,
                Op::GenerationAttention,
                AttentionTable::new,
            )?
            else {
                return Ok(None);
            };
            let mut shape = [a.batch, 1, a.kv_len, a.heads, a.kv_heads, a.head_dim, 0];
            return Ok(t
                .time(dk, &mut shape, &[(0, 1), (2, 1)])
                .map(|ms| ms * 1e-3));
        }
        let Some(t) = self.lazy(&self.context, Op::ContextAttention, AttentionTable::new)? else {
            return Ok(None);
        };
        let prefill = |s: u64| {
            let mut shape = [a.batch, s, a.heads, a.kv_heads, a.head_dim, 0];
            t.time(dk, &mut shape, &[(0, 1), (1, 2)])
        };
        let whole = prefill(a.kv_len);
        let ms = if a.q_len == a.kv_len {
            whole
        } else {
            match (whole, prefill(a.kv_len - a.q_len), prefill(a.q_len)) {
                (Some(whole), Some(before), Some(fresh)) => Some((whole - before).max(fresh)),
                _ => None,
            }
        };
        Ok(ms.map(|ms| ms * 1e-3))
    }

    /// The measured or interpolated time (seconds, at the measurements' clock) of routed
    /// experts `e`, if the MoE table covers them (module documentation).
    pub fn moe_time(&self, e: &RoutedExperts) -> Result<Option<(f64, Path)>, ModelError> {
        let Some(table) = self.lazy(&self.moe, Op::Moe, MoeTable::new)? else {
            return Ok(None);
        };
        let found = || {
            let dtype = moe_dtype(e)?;
            let k = table.kernels.iter().find(|k| k.dtype == dtype)?;
            let (kernel, most) = if e.gated { &k.gated } else { &k.plain }.as_ref()?;
            let most = *most;
            if !e.load_factor.is_finite() {
                return None;
            }
            let cat = [dtype, BALANCED, kernel.as_str()];
            let tokens = (e.tokens as f64 * e.load_factor.max(1.0)).ceil() as u64;
            // Beyond the largest pass measured the block is compute-bound (its time doubles
            // with the tokens between the tables' last two points): the largest pass's time
            // scaled by the tokens.
            let (at, scale) = if tokens > most {
                (most, tokens as f64 / most as f64)
            } else {
                (tokens, 1.0)
            };
            let shape = [at, e.hidden, e.ffn, e.top_k, e.experts, e.tp, e.ep];
            let l = table.timings.time(&cat, &shape)?;
            let path = if scale > 1.0 { Path::Scaled } else { l.path };
            Some((l.latency_ms * 1e-3 * scale, path))
        };
        Ok(found())
    }
}

impl ComputeUnit for MeasuredCompute {
    fn kind(&self) -> &str {
        self.inner.kind()
    }

    fn peak(&self, engine: Engine, dtype: DType) -> Option<FlopRate> {
        self.inner.peak(engine, dtype)
    }

    fn efficiency(&self, op: &ComputeOp) -> f64 {
        if let ComputeOp::Gemm(g) = op {
            if let (Some((t, _)), Some(peak)) = (
                self.gemm_time(g),
                self.inner.peak(Engine::Matrix, op.dtype()),
            ) {
                let e = op.flops().0 / (t * peak.0);
                if e.is_finite() && e > 0.0 {
                    return e.min(1.0);
                }
            }
        }
        self.inner.efficiency(op)
    }

    fn launch_overhead(&self) -> Seconds {
        self.inner.launch_overhead()
    }

    fn clock_ratio(&self) -> f64 {
        self.inner.clock_ratio()
    }

    fn inference_attention_time(
        &self,
        a: &Attention,
        kv: DType,
        memory: &MemoryHierarchy,
    ) -> Result<Option<Seconds>, ModelError> {
        self.memoised(
            memory,
            |m| &mut m.attention,
            attention_key(a, kv),
            || self.attention_op_time(a, kv, memory),
        )
    }

    fn routed_experts_time(&self, e: &RoutedExperts) -> Result<Option<Seconds>, ModelError> {
        match self.moe_time(e)? {
            // Measured at the rated power's clock, as the GEMMs.
            Some((t, _)) => Ok(Some(Seconds(t / self.clock))),
            None => self.inner.routed_experts_time(e),
        }
    }

    fn gemm_tile(&self) -> u64 {
        self.inner.gemm_tile()
    }

    /// Row-scaled float8 linears on the GPU torchao timed them on ([`crate::rowwise`]).
    fn quantised_linear_ratio(
        &self,
        scaling: GemmScaling,
        gemm: [u64; 3],
        memory: &MemoryHierarchy,
    ) -> Result<Option<f64>, ModelError> {
        if scaling == GemmScaling::Row && self.gpu() == crate::rowwise::GPU {
            return crate::rowwise::measured_ratio(self, gemm, memory).map(Some);
        }
        self.inner.quantised_linear_ratio(scaling, gemm, memory)
    }

    fn derived(&self) -> serde_json::Value {
        let mut d = self.inner.derived();
        if let serde_json::Value::Object(m) = &mut d {
            m.insert(
                "kernel_table".into(),
                serde_json::Value::String(format!(
                    "{} ({})",
                    self.gpu(),
                    self.gemm.provenance().framework
                )),
            );
        }
        d
    }

    /// A GEMM the table covers: measured or interpolated; everything else (attention in
    /// training, vector ops, GEMMs outside the table): the inner unit's model.
    fn kernel_path(&self, op: &ComputeOp) -> KernelPath {
        let table = match op {
            ComputeOp::Gemm(g) => self.gemm_time(g).map(|(_, p)| p),
            _ => None,
        };
        match table {
            Some(Path::Measured) => KernelPath::Measured,
            Some(Path::Interpolated) => KernelPath::Interpolated,
            Some(Path::Scaled) => KernelPath::Scaled,
            None => self.inner.kernel_path(op),
        }
    }

    fn op_time(&self, op: &ComputeOp, memory: &MemoryHierarchy) -> Result<OpTime, ModelError> {
        let ComputeOp::Gemm(g) = op else {
            return self.inner.op_time(op, memory);
        };
        self.memoised(
            memory,
            |m| &mut m.gemms,
            gemm_key(g),
            || self.gemm_op_time(g, memory),
        )
    }
}

impl MeasuredCompute {
    /// `answer()` for `key` in the memo `of` selects, from it when it is there.
    fn memoised<K: std::hash::Hash + Eq, V: Copy>(
        &self,
        memory: &MemoryHierarchy,
        of: fn(&mut Memo) -> &mut HashMap<K, V, MixState>,
        key: K,
        answer: impl FnOnce() -> Result<V, ModelError>,
    ) -> Result<V, ModelError> {
        if let Ok(mut memo) = self.memo.try_lock() {
            if memo.on(memory) {
                if let Some(v) = of(&mut memo).get(&key) {
                    return Ok(*v);
                }
            }
        }
        let v = answer()?;
        if let Ok(mut memo) = self.memo.try_lock() {
            if !memo.on(memory) {
                memo.gemms.clear();
                memo.attention.clear();
                memo.tiers = memory.tiers.clone();
            }
            let map = of(&mut memo);
            if map.len() >= MEMO_CAPACITY {
                map.clear();
            }
            map.insert(key, v);
        }
        Ok(v)
    }

    /// [`ComputeUnit::inference_attention_time`], not memoised.
    fn attention_op_time(
        &self,
        a: &Attention,
        kv: DType,
        memory: &MemoryHierarchy,
    ) -> Result<Option<Seconds>, ModelError> {
        let Some(mut t) = self.attention_time(a, kv)? else {
            return self.inner.inference_attention_time(a, kv, memory);
        };
        // Timed again and again on the same cache: one that fits on chip ran warm there, while
        // in a model each layer reads its own from device memory.
        let op = ComputeOp::Attention(*a);
        if op.min_bytes().0 <= memory.on_chip_capacity().0 {
            t = t.max(self.inner.op_time(&op, memory)?.memory.0 * self.clock);
        }
        Ok(Some(Seconds(t / self.clock)))
    }

    /// [`ComputeUnit::op_time`] of a GEMM, not memoised.
    fn gemm_op_time(&self, g: &Gemm, memory: &MemoryHierarchy) -> Result<OpTime, ModelError> {
        let op = &ComputeOp::Gemm(*g);
        let analytical = self.inner.op_time(op, memory)?;
        let Some((mut t, _)) = self.gemm_time(g) else {
            return Ok(analytical);
        };
        let e = |d: DType| d.bytes();
        let operands = (g.m * g.k) as f64 * e(g.a)
            + (g.k * g.n) as f64 * e(g.b)
            + (g.m * g.n) as f64 * e(g.out);
        if operands <= memory.on_chip_capacity().0 {
            t = t.max(analytical.memory.0);
        }
        // The measured kernel: its time whole, compute-bound where the roofline's memory
        // time is below it.
        Ok(OpTime {
            time: Seconds(t),
            compute: Seconds(t),
            overhead: Seconds::ZERO,
            bound: if analytical.memory.0 >= t {
                analytical.bound
            } else {
                perfcast_core::TimeBound::Compute
            },
            ..analytical
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Op;
    use crate::table::{Provenance, TableBuilder};

    /// Two ops that differ in any one field have different memo keys (and equal ops equal
    /// ones): each field of the table changed alone.
    #[test]
    fn memo_keys_tell_every_field_apart() {
        use perfcast_core::{AttentionKind, GemmScaling};
        let g = Gemm {
            m: 1,
            n: 2,
            k: 3,
            batch: 4,
            a: DType::Bf16,
            b: DType::Bf16,
            out: DType::Bf16,
            scaling: GemmScaling::Tensor,
        };
        let gemms: [fn(&mut Gemm); 8] = [
            |g| g.m += 1,
            |g| g.n += 1,
            |g| g.k += 1,
            |g| g.batch += 1,
            |g| g.a = DType::Fp8,
            |g| g.b = DType::Fp8,
            |g| g.out = DType::Fp32,
            |g| g.scaling = GemmScaling::Row,
        ];
        assert!(gemm_key(&g) == gemm_key(&{ g }));
        for change in gemms {
            let mut h = g;
            change(&mut h);
            assert!(gemm_key(&g) != gemm_key(&h), "{h:?}");
        }
        let a = Attention {
            batch: 1,
            heads: 2,
            kv_heads: 3,
            q_len: 4,
            kv_len: 5,
            head_dim: 6,
            causal: false,
            kind: AttentionKind::Flash,
            dtype: DType::Bf16,
            backward: false,
        };
        let attentions: [fn(&mut Attention); 10] = [
            |a| a.batch += 1,
            |a| a.heads += 1,
            |a| a.kv_heads += 1,
            |a| a.q_len += 1,
            |a| a.kv_len += 1,
            |a| a.head_dim += 1,
            |a| a.causal = true,
            |a| a.kind = AttentionKind::Cudnn,
            |a| a.dtype = DType::Fp8,
            |a| a.backward = true,
        ];
        assert!(attention_key(&a, DType::Bf16) == attention_key(&{ a }, DType::Bf16));
        assert!(attention_key(&a, DType::Bf16) != attention_key(&a, DType::Fp8));
        for change in attentions {
            let mut b = a;
            change(&mut b);
            assert!(
                attention_key(&a, DType::Bf16) != attention_key(&b, DType::Bf16),
                "{b:?}"
            );
        }
    }

    /// A unit at 100 TFLOP/s in every format, no memory traffic modelled.
    struct Flat;
    impl ComputeUnit for Flat {
        fn kind(&self) -> &str {
            "flat"
        }
        fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
            Some(FlopRate(100e12))
        }
    }

    /// [`Flat`] under a power limit that lowers its clock to 80%.
    struct Capped;
    impl ComputeUnit for Capped {
        fn kind(&self) -> &str {
            "capped"
        }
        fn peak(&self, _: Engine, _: DType) -> Option<FlopRate> {
            Some(FlopRate(80e12))
        }
        fn clock_ratio(&self) -> f64 {
            0.8
        }
    }

    #[test]
    fn a_unit_clocked_below_the_measurements_takes_longer_in_proportion() {
        let table = unit().gemm.clone();
        let u = MeasuredCompute::new(Arc::new(Capped), table);
        let mem = MemoryHierarchy::new(Vec::new());
        let t = u
            .op_time(&ComputeOp::Gemm(gemm(64, 1, DType::Bf16)), &mem)
            .unwrap()
            .time
            .0;
        assert!((t - 64e-6 / 0.8).abs() < 1e-12, "{t}");
        assert_eq!(u.clock_ratio(), 0.8);
    }

    fn unit() -> MeasuredCompute {
        let mut b = TableBuilder::new("toy", Op::Gemm, Provenance::default());
        let mut line = 0;
        for m in [64u64, 128] {
            for (kernel, scale) in [("cublas", 1.0), ("rare", 0.5)] {
                line += 1;
                b.push(
                    "t",
                    line,
                    &["bfloat16", kernel],
                    &[m, 1024, 1024],
                    scale * m as f64 * 1e-3,
                )
                .unwrap();
            }
        }
        // Only one shape for "rare": cublas is the main kernel.
        let mut t = b.finish("t").unwrap();
        t.rows.retain(|r| !(r.cat[1] == 1 && r.shape[0] == 128));
        MeasuredCompute::new(Arc::new(Flat), Arc::new(Timings::new(t)))
    }

    fn gemm(m: u64, batch: u64, dtype: DType) -> Gemm {
        Gemm {
            m,
            n: 1024,
            k: 1024,
            batch,
            a: dtype,
            b: dtype,
            out: DType::Bf16,
            scaling: GemmScaling::Tensor,
        }
    }

    #[test]
    fn table_shapes_are_measured_the_rest_is_the_wrapped_units() {
        let u = unit();
        let mem = MemoryHierarchy::new(Vec::new());
        let t = |g: Gemm| u.op_time(&ComputeOp::Gemm(g), &mem).unwrap().time.0;
        let flat = |g: Gemm| Flat.op_time(&ComputeOp::Gemm(g), &mem).unwrap().time.0;
        // The main kernel's rows (cublas): 64 -> 64 µs, 128 -> 128 µs, 96 between them.
        assert!((t(gemm(64, 1, DType::Bf16)) - 64e-6).abs() < 1e-12);
        let mid = t(gemm(96, 1, DType::Bf16));
        assert!(mid > 64e-6 && mid < 128e-6, "{mid}");
        assert_eq!(
            u.gemm_time(&gemm(96, 1, DType::Bf16)).unwrap().1,
            Path::Interpolated
        );
        // fp16 runs as bf16; batched GEMMs, other formats and shapes outside the table do not
        // come from it.
        assert!((t(gemm(64, 1, DType::Fp16)) - 64e-6).abs() < 1e-12);
        for g in [
            gemm(64, 2, DType::Bf16),
            gemm(64, 1, DType::Fp8),
            gemm(256, 1, DType::Bf16),
        ] {
            assert_eq!(t(g), flat(g), "{g:?}");
        }
        // The kernel path each says it took: the table's rows and the shapes between them;
        // the rest, and every op but a GEMM, the wrapped unit's model.
        let path = |g: Gemm| u.kernel_path(&ComputeOp::Gemm(g));
        assert_eq!(path(gemm(64, 1, DType::Bf16)), KernelPath::Measured);
        assert_eq!(path(gemm(96, 1, DType::Bf16)), KernelPath::Interpolated);
        assert_eq!(path(gemm(256, 1, DType::Bf16)), KernelPath::Analytical);
        assert_eq!(path(gemm(64, 2, DType::Bf16)), KernelPath::Analytical);
    }

    #[test]
    fn a_shape_the_table_timed_warm_in_l2_streams_from_memory() {
        use perfcast_core::{Bandwidth, Bytes, MemoryTier, TierLevel};
        struct Tier(TierLevel, f64, f64);
        impl MemoryTier for Tier {
            fn kind(&self) -> &str {
                "t"
            }
            fn level(&self) -> TierLevel {
                self.0
            }
            fn capacity(&self) -> Bytes {
                Bytes(self.1)
            }
            fn bandwidth(&self) -> Bandwidth {
                Bandwidth(self.2)
            }
        }
        let u = unit();
        // 64 x 1024 x 1024 bf16: 2.3 MB of operands. A 1 GB/s memory streams them in ~2 ms,
        // far above the table's 64 µs; with 1 MB of L2 they do not fit and the table stands.
        let slow = |l2: f64| {
            MemoryHierarchy::new(vec![
                Arc::new(Tier(TierLevel::OnChip, l2, 1e15)) as Arc<dyn MemoryTier>,
                Arc::new(Tier(TierLevel::Device, 1e12, 1e9)),
            ])
        };
        let op = ComputeOp::Gemm(gemm(64, 1, DType::Bf16));
        let (big, small) = (slow(50e6), slow(1e6));
        let warm = u.op_time(&op, &big).unwrap().time.0;
        assert!(warm > 1e-3, "{warm}");
        let cold = u.op_time(&op, &small).unwrap().time.0;
        assert!((cold - 64e-6).abs() < 1e-12, "{cold}");
        // The GEMM memo answers per hierarchy: asked again on each, each's own time.
        for _ in 0..2 {
            assert_eq!(u.op_time(&op, &small).unwrap().time.0, cold);
            assert_eq!(u.op_time(&op, &big).unwrap().time.0, warm);
        }
    }

    /// A toy MoE table: hidden 1024, inter 512, top 2 of 8 experts, ep 2; latency linear in
    /// tokens (64 -> 0.064 ms, 128 -> 0.128 ms, 256 -> 0.256 ms) for the gated kernel, twice
    /// that for the `min_latency` kernel (more rows, never the one used), half for the
    /// non-gated one, ten times for the power-law routing (never used).
    fn moe_unit(inner: Arc<dyn ComputeUnit>) -> MeasuredCompute {
        let mut b = TableBuilder::new("toy", Op::Moe, Provenance::default());
        let mut line = 0;
        let mut push = |dist: &str, kernel: &str, tokens: u64, ms: f64| {
            line += 1;
            b.push(
                "t",
                line,
                &["fp8", dist, kernel],
                &[tokens, 1024, 512, 2, 8, 1, 2],
                ms,
            )
            .unwrap();
        };
        for t in [64u64, 128, 256] {
            let ms = t as f64 * 1e-3;
            push("balanced", "moe_torch_flow_cutlass", t, ms);
            push("balanced", "moe_torch_flow_nongated", t, ms / 2.0);
            push("power_law_1.01", "moe_torch_flow_cutlass", t, 10.0 * ms);
        }
        for t in [1u64, 2, 4, 8, 16, 32, 64, 128, 256] {
            push("balanced", "moe_torch_flow_min_latency", t, 2e-3 * t as f64);
        }
        let table = Arc::new(Timings::new(b.finish("t").unwrap()));
        let gemm = unit().gemm.clone();
        MeasuredCompute::new(inner, gemm).with_moe_table(table)
    }

    fn experts(tokens: u64) -> RoutedExperts {
        RoutedExperts {
            tokens,
            hidden: 1024,
            ffn: 512,
            top_k: 2,
            experts: 8,
            tp: 1,
            ep: 2,
            gated: true,
            act: DType::Fp8,
            weight: DType::Fp8,
            scaling: GemmScaling::Tensor,
            load_factor: 1.0,
        }
    }

    #[test]
    fn routed_experts_come_from_the_balanced_rows_of_their_kernel() {
        let u = moe_unit(Arc::new(Flat));
        let t = |e: RoutedExperts| u.routed_experts_time(&e).unwrap().map(|s| s.0);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12 * b.max(1e-9));
        // Gated: the main gated kernel, not the min-latency one with more rows.
        assert!(close(t(experts(128)), 128e-6), "{:?}", t(experts(128)));
        assert_eq!(
            u.moe_time(&experts(128)).unwrap().unwrap().1,
            Path::Measured
        );
        // The busiest rank's load: 64 tokens at twice the mean load is the 128-token block.
        let heavy = RoutedExperts {
            load_factor: 2.0,
            ..experts(64)
        };
        assert!(close(t(heavy), 128e-6));
        // Two-matrix experts: the non-gated kernel.
        let plain = RoutedExperts {
            gated: false,
            ..experts(128)
        };
        assert!(close(t(plain), 64e-6));
        // Beyond the largest pass: scaled by the tokens.
        assert!(close(t(experts(1024)), 1024e-6));
        assert_eq!(u.moe_time(&experts(1024)).unwrap().unwrap().1, Path::Scaled);
        // Under a power limit, at the lower clock.
        let capped = moe_unit(Arc::new(Capped));
        let tc = capped
            .routed_experts_time(&experts(128))
            .unwrap()
            .unwrap()
            .0;
        assert!((tc - 128e-6 / 0.8).abs() < 1e-15, "{tc}");
        // Shapes, formats and loads the table does not hold are the wrapped unit's (none).
        for e in [
            RoutedExperts {
                hidden: 2048,
                ..experts(128)
            },
            experts(32),
            RoutedExperts {
                weight: DType::Bf16,
                act: DType::Bf16,
                ..experts(128)
            },
            RoutedExperts {
                load_factor: f64::NAN,
                ..experts(128)
            },
        ] {
            assert_eq!(t(e), None, "{e:?}");
        }
        // A unit without a MoE table times none.
        assert_eq!(unit().routed_experts_time(&experts(128)).unwrap(), None);
    }

    /// Toy attention tables for 8 query and 2 KV heads of 128: prefill latency `s^2 / 1e6`
    /// ms x batch for prompts of 1024..4096 tokens, batches 1..4 (bf16 and fp8 queries, fp8
    /// cache); decode `ctx / 1e5` ms x batch for contexts of 1024..8192, batches 1..8 (bf16
    /// queries).
    fn attention_unit(inner: Arc<dyn ComputeUnit>) -> MeasuredCompute {
        let mut ctx = TableBuilder::new("toy", Op::ContextAttention, Provenance::default());
        let mut line = 0;
        for dt in ["bfloat16", "fp8"] {
            for b in [1u64, 2, 4] {
                for s in [1024u64, 2048, 4096] {
                    line += 1;
                    let ms = b as f64 * (s * s) as f64 / 1e6;
                    ctx.push(
                        "c",
                        line,
                        &[dt, "fp8", "torch_flow"],
                        &[b, s, 8, 2, 128, 0],
                        ms,
                    )
                    .unwrap();
                }
            }
        }
        let mut gen = TableBuilder::new("toy", Op::GenerationAttention, Provenance::default());
        for b in [1u64, 2, 4, 8] {
            for c in [1024u64, 2048, 4096, 8192] {
                line += 1;
                let ms = b as f64 * c as f64 / 1e5;
                gen.push(
                    "g",
                    line,
                    &["bfloat16", "fp8", "torch_flow"],
                    &[b, 1, c, 8, 2, 128, 0],
                    ms,
                )
                .unwrap();
            }
        }
        let gemm = unit().gemm.clone();
        MeasuredCompute::new(inner, gemm).with_attention_tables(
            Arc::new(Timings::new(ctx.finish("c").unwrap())),
            Arc::new(Timings::new(gen.finish("g").unwrap())),
        )
    }

    fn attention(batch: u64, q_len: u64, kv_len: u64) -> Attention {
        Attention {
            batch,
            heads: 8,
            kv_heads: 2,
            q_len,
            kv_len,
            head_dim: 128,
            causal: true,
            kind: perfcast_core::AttentionKind::Flash,
            dtype: DType::Bf16,
            backward: false,
        }
    }

    #[test]
    fn inference_attention_comes_from_the_prefill_and_decode_tables() {
        let u = attention_unit(Arc::new(Flat));
        let ms = |a: Attention| u.attention_time(&a, DType::Fp8).unwrap().map(|t| t * 1e3);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9 * b);
        // A fresh prompt: the row.
        assert!(close(ms(attention(2, 2048, 2048)), 2.0 * 4.194304));
        // A chunk of 1024 after 1024 cached: the 2048-token prompt less the 1024-token one.
        assert!(close(ms(attention(1, 1024, 2048)), 4.194304 - 1.048576));
        // A short chunk after a long context is at least a fresh prefill of the chunk.
        let c = ms(attention(1, 1024, 4096)).unwrap();
        assert!((c - (16.777216 - 9.437184)).abs() < 1e-9, "{c}");
        // Beyond the longest prompt: its square; beyond the largest batch: linear.
        assert!(close(ms(attention(1, 8192, 8192)), 4.0 * 16.777216));
        assert!(close(ms(attention(8, 1024, 1024)), 8.0 * 1.048576));
        // Decode: the decode table, bf16 queries whatever the prefill format.
        assert!(close(ms(attention(4, 1, 2048)), 4.0 * 0.02048));
        let fp8 = Attention {
            dtype: DType::Fp8,
            ..attention(4, 1, 2048)
        };
        assert!(close(ms(fp8), 4.0 * 0.02048));
        // Beyond the longest decode context: linear in the context.
        assert!(close(ms(attention(1, 1, 16384)), 0.16384));
        // Not in the tables: other head shapes, a 16-bit cache (no such rows here), a
        // backward pass, 4-bit formats, a prompt below the shortest measured.
        for (a, kv) in [
            (
                Attention {
                    head_dim: 64,
                    ..attention(1, 2048, 2048)
                },
                DType::Fp8,
            ),
            (attention(1, 2048, 2048), DType::Bf16),
            (
                Attention {
                    backward: true,
                    ..attention(1, 2048, 2048)
                },
                DType::Fp8,
            ),
            (attention(1, 2048, 2048), DType::Fp4),
            (attention(1, 512, 512), DType::Fp8),
        ] {
            assert_eq!(u.attention_time(&a, kv).unwrap(), None, "{a:?} {kv:?}");
        }
        // Under a power limit: at the lower clock; without tables: none.
        let capped = attention_unit(Arc::new(Capped));
        let mem = MemoryHierarchy::new(Vec::new());
        let t = capped
            .inference_attention_time(&attention(1, 2048, 2048), DType::Fp8, &mem)
            .unwrap()
            .unwrap()
            .0;
        assert!((t - 4.194304e-3 / 0.8).abs() < 1e-12, "{t}");
        // Asked again: the memo's answer, the same.
        let again = capped.inference_attention_time(&attention(1, 2048, 2048), DType::Fp8, &mem);
        assert_eq!(again.unwrap().unwrap().0, t);
        assert_eq!(
            unit()
                .inference_attention_time(&attention(1, 2048, 2048), DType::Fp8, &mem)
                .unwrap(),
            None
        );
    }

    #[test]
    fn expert_formats_map_onto_the_moe_tables_dtypes() {
        use DType::*;
        let table: &[(DType, DType, GemmScaling, Option<&str>)] = &[
            (Bf16, Bf16, GemmScaling::Tensor, Some("bfloat16")),
            (Fp16, Fp16, GemmScaling::Tensor, Some("bfloat16")),
            (Fp8, Fp8, GemmScaling::Tensor, Some("fp8")),
            (Fp8, Fp8, GemmScaling::Row, Some("fp8")),
            (Fp8, Fp8, GemmScaling::Block, Some("fp8_block")),
            (Fp4, Fp4, GemmScaling::Nv, Some("nvfp4")),
            (Bf16, Fp4, GemmScaling::Mx, Some("w4a16_mxfp4")),
            (Fp8, Fp4, GemmScaling::Mx, Some("w4a8_mxfp4_mxfp8")),
            (Fp32, Fp32, GemmScaling::Tensor, None),
            (Bf16, Int8, GemmScaling::Tensor, None),
        ];
        for &(act, weight, scaling, want) in table {
            let e = RoutedExperts {
                act,
                weight,
                scaling,
                ..experts(1)
            };
            assert_eq!(moe_dtype(&e), want, "{act:?} {weight:?} {scaling:?}");
        }
    }

    #[test]
    fn operand_formats_map_onto_the_tables_dtypes() {
        let mut g = gemm(1, 1, DType::Fp8);
        assert_eq!(gemm_dtype(&g), Some("fp8"));
        g.scaling = GemmScaling::Block;
        assert_eq!(gemm_dtype(&g), Some("fp8_block"));
        g.b = DType::Int4;
        g.a = DType::Bf16;
        assert_eq!(gemm_dtype(&g), Some("int4_wo"));
        g.a = DType::Fp32;
        g.b = DType::Fp32;
        assert_eq!(gemm_dtype(&g), None);
    }
}
