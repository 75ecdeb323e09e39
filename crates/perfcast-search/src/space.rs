//! What a search walks: the values allowed per plan dimension ([`SearchSpace`]) and the
//! constraints every plan must meet ([`Constraints`]), as the `[search]` config section gives
//! them (one flat table, [`SearchConfig`]).

use perfcast_core::DType;
use serde::{Deserialize, Serialize};

/// Declares [`SearchSpace`] and [`SearchConfig`] from one list of the space's fields, with
/// [`SearchConfig::space`]: the `[search]` section is one flat table whose first keys are the
/// space's, and the two cannot drift apart. (Not `#[serde(flatten)]`: through it, a bad value
/// is reported at `search` instead of its key, e.g. `search.tp.0`, and an unknown key no
/// longer lists the allowed ones.)
macro_rules! space_and_config {
    (
        $(#[$space_meta:meta])*
        pub struct SearchSpace {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
        }
        $(#[$config_meta:meta])*
        pub struct SearchConfig {
            $($(#[$extra_meta:meta])* pub $extra:ident: $extra_ty:ty,)*
        }
    ) => {
        $(#[$space_meta])*
        pub struct SearchSpace {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        $(#[$config_meta])*
        pub struct SearchConfig {
            $($(#[$field_meta])* pub $field: $ty,)*
            $($(#[$extra_meta])* pub $extra: $extra_ty,)*
        }

        impl SearchConfig {
            /// The space part.
            pub fn space(&self) -> SearchSpace {
                SearchSpace {
                    $($field: self.$field.clone(),)*
                }
            }
        }
    };
}

space_and_config! {
    /// Values allowed per plan dimension. `None` means "every value that can work" (the
    /// default rule is given per field).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SearchSpace {
        /// Tensor-parallel degrees. Default: every divisor of the device count up to
        /// [`Constraints::max_tp`].
        pub tp: Option<Vec<u32>>,
        /// Pipeline-parallel degrees. Default: every divisor of the device count.
        pub pp: Option<Vec<u32>>,
        /// Data-parallel degrees. Default: whatever `devices / (tp x pp x cp)` is.
        pub dp: Option<Vec<u32>>,
        /// Context-parallel degrees. Default: `[1]` (context parallelism only pays off for long
        /// sequences; list e.g. `[1, 2, 4]` to search it).
        pub cp: Option<Vec<u32>>,
        /// Expert-parallel degrees (a mixture-of-experts model's experts split over `ep`
        /// ranks of a stage's TP x CP x DP). Default: the powers of two dividing
        /// `model.moe.experts` (a dense model: the plan's, 1).
        pub ep: Option<Vec<u32>>,
        /// Expert tensor-parallel degrees (each expert's weights split `etp` ways). Default:
        /// 1 and the tuple's TP degree (Megatron-Core's two usual choices).
        pub etp: Option<Vec<u32>>,
        /// Virtual pipeline stages. Default: `perfcast_core::parallel::interleaving_degrees`
        /// (every `v` dividing `layers / pp`, Megatron-LM's requirement; with uneven stages, the
        /// splits that take at most one chunk from the first and the last stage, as Llama 3 ran).
        pub vpp: Option<Vec<u32>>,
        /// Micro-batch sizes. Default: every divisor of `global_batch / dp` up to
        /// [`Constraints::max_micro_batch`].
        pub micro_batch: Option<Vec<u32>>,
        /// Sequence parallelism (only with `tp > 1`). Default `[false, true]`.
        pub sp: Option<Vec<bool>>,
        /// Recompute policies (registry names). Default: every registered policy.
        pub recompute: Option<Vec<String>>,
        /// Also try `full` recompute of only N layers per stage, N = 1 .. layers per stage - 1
        /// (Megatron `--recompute-method block`). Default true.
        pub partial_recompute: Option<bool>,
        /// ZeRO stages (only with `dp x cp > 1`). Default `[0, 1, 2, 3]`.
        pub zero_stage: Option<Vec<u8>>,
        /// Pipeline schedules (registry names), with `pp > 1`. Default `["1f1b",
        /// "interleaved-1f1b"]`; non-interleaved schedules are tried with `vpp = 1`, interleaved
        /// ones with `vpp > 1`.
        pub schedule: Option<Vec<String>>,
        /// GEMM precisions. Default: the plan's own (`plan.precision`).
        pub precision: Option<Vec<DType>>,
        /// Overlap TP collectives with GEMMs (only with `tp > 1`). Default `[false, true]`.
        pub tp_comm_overlap: Option<Vec<bool>>,
        /// Overlap the gradient reduction with the last backward (only with `dp x cp > 1`).
        /// Default `[true]` (overlapping never costs time in the engine; list `[false, true]` to
        /// walk it).
        pub overlap_grad_reduce: Option<Vec<bool>>,
        /// Overlap ZeRO parameter gathers with the forward (only with ZeRO 1-2 and `dp x cp >
        /// 1`). Default `[true]`.
        pub overlap_param_gather: Option<Vec<bool>>,
        /// Orders of the mesh axes on the devices, innermost first (`tp-cp-pp-dp` is
        /// Megatron-LM's; `dp-tp-pp-cp` puts DP inside the node). Default: all six with PP third
        /// (orders that place a mesh the same are tried once).
        pub placement: Option<Vec<String>>,
        /// Degrees of the axes the strategies in use declare, by name (`axes.shard = [1, 2,
        /// 4, 8]`). Default: the plan's own degree of each (`plan.axes.NAME`, else 1).
        pub axes: Option<std::collections::BTreeMap<String, Vec<u32>>>,
    }

    /// The `[search]` config section: the space and the constraints in one flat table.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SearchConfig {
        /// Device counts: `1024`, `[512, 1024, 2048]` or `{ min = 512, max = 2048, step = 256 }`.
        /// Default: `system.devices`.
        pub devices: Option<Devices>,
        /// Default: `plan.global_batch`.
        pub global_batch: Option<u32>,
        pub memory_headroom: Option<f64>,
        pub max_tp: Option<u32>,
        pub max_micro_batch: Option<u32>,
        /// Plans to report. Default 10.
        pub top: Option<usize>,
        /// Default `time`.
        pub objective: Option<Objective>,
        /// Seconds the search may walk before it reports the best found so far. Default
        /// [`DEFAULT_MAX_SECONDS`].
        pub max_seconds: Option<f64>,
        /// USD per GPU-hour for the cost objective's price column. Default
        /// [`DEFAULT_PRICE_PER_GPU_HOUR`].
        pub price_per_gpu_hour: Option<f64>,
    }
}

/// How long a search may walk: once `max_seconds` have passed, workers stop and the
/// search reports the best plans found so far and what it did not visit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Seconds of walking before the search stops (`None`: no limit).
    pub max_seconds: Option<f64>,
}

/// The default of `--max-seconds` / `search.max_seconds`: the same 300 s as a sweep's
/// `max_seconds` (a search of the shipped experiments takes about a second).
pub const DEFAULT_MAX_SECONDS: f64 = 300.0;

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_seconds: Some(DEFAULT_MAX_SECONDS),
        }
    }
}

impl Budget {
    /// No limit.
    pub const UNLIMITED: Budget = Budget { max_seconds: None };
}

/// Default `search.price_per_gpu_hour`, USD: an on-demand A100 in a public cloud, AWS EC2
/// p4d.24xlarge (8x A100-SXM4-40GB) at 32.77 USD per hour in us-east-1 = 4.10 per GPU-hour
/// ([`PRICE_SOURCE`]). Set your own: prices differ by provider, GPU and commitment.
pub const DEFAULT_PRICE_PER_GPU_HOUR: f64 = 4.10;

/// Where [`DEFAULT_PRICE_PER_GPU_HOUR`] comes from, for outputs.
pub const PRICE_SOURCE: &str =
    "4.10, AWS EC2 p4d.24xlarge on-demand, 32.77 USD/h for 8 A100, us-east-1";

/// What every plan must meet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constraints {
    /// Sequences per optimizer step.
    pub global_batch: u32,
    /// Fraction of device memory kept free (0 to < 1): a plan fits when its peak is at most
    /// `capacity x (1 - memory_headroom)`. Default [`DEFAULT_MEMORY_HEADROOM`].
    pub memory_headroom: f64,
    /// Largest tensor-parallel degree. Default: the innermost network level's domain (the
    /// NVLink domain), so TP never crosses it.
    pub max_tp: Option<u32>,
    /// Largest micro-batch tried by default. Default 16.
    pub max_micro_batch: u32,
}

/// The memory a search keeps free by default: what the framework's caching allocator loses
/// to fragmentation, which the memory model (tensors plus a runtime reserve) does not hold.
/// GMLake (Guo et al., ASPLOS 2024, arXiv:2401.08156) measured PyTorch's caching allocator
/// losing 9.2 GB on average (up to 25 GB) of an 80 GB A100 across eight LLM training setups:
/// 0.115 of capacity, here rounded to 0.10. A plan above `capacity x 0.9` is one its users
/// would expect to run out of memory; set `search.memory_headroom = 0` to fill the device.
pub const DEFAULT_MEMORY_HEADROOM: f64 = 0.10;

impl Constraints {
    /// The memory a plan may use per device, in bytes, on a device of `capacity` bytes:
    /// `capacity x (1 - memory_headroom)`.
    pub fn memory_limit(&self, capacity: f64) -> f64 {
        capacity * (1.0 - self.memory_headroom)
    }
}

impl Default for Constraints {
    fn default() -> Self {
        Constraints {
            global_batch: 1,
            memory_headroom: DEFAULT_MEMORY_HEADROOM,
            max_tp: None,
            max_micro_batch: 16,
        }
    }
}

/// Device counts to search: one, a list, or a range `{ min, max, step }` (the GPU count is
/// then a free dimension).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Devices {
    One(u32),
    List(Vec<u32>),
    Range(DeviceRange),
}

/// `min, min + step, ... <= max`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRange {
    pub min: u32,
    pub max: u32,
    /// Default 8 (a DGX/HGX node).
    #[serde(default = "d_step")]
    pub step: u32,
}

fn d_step() -> u32 {
    8
}

/// Most device counts one search may take.
pub const MAX_DEVICE_COUNTS: usize = 256;

impl Devices {
    /// The counts, or what is wrong with the range.
    pub fn counts(&self) -> Result<Vec<u32>, String> {
        match self {
            Devices::One(n) => Ok(vec![*n]),
            Devices::List(v) => Ok(v.clone()),
            Devices::Range(r) => {
                if r.step == 0 || r.min == 0 || r.min > r.max {
                    return Err(format!(
                        "{{ min = {}, max = {}, step = {} }}: needs 0 < min <= max and step > 0",
                        r.min, r.max, r.step
                    ));
                }
                let n = (r.max - r.min) / r.step + 1;
                if n as usize > MAX_DEVICE_COUNTS {
                    return Err(format!(
                        "{{ min = {}, max = {}, step = {} }} gives {n} device counts; at most \
                         {MAX_DEVICE_COUNTS}",
                        r.min, r.max, r.step
                    ));
                }
                Ok((0..n).map(|i| r.min + i * r.step).collect())
            }
        }
    }
}

/// What to minimise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Step time.
    #[default]
    Time,
    /// Peak memory per device.
    Memory,
    /// GPU-seconds per step (step time x devices): differs from `time` when the GPU count
    /// is free.
    Cost,
}

impl Objective {
    pub fn parse(s: &str) -> Option<Objective> {
        match s {
            "time" => Some(Objective::Time),
            "memory" => Some(Objective::Memory),
            "cost" => Some(Objective::Cost),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Objective::Time => "time",
            Objective::Memory => "memory",
            Objective::Cost => "cost",
        }
    }
}
