//! The hardware and model presets of the validation harness, read through perfcast-config.
//!
//! perfcast-config embeds `configs/{hardware,systems,models}/*.toml` as `preset:NAME`, resolves
//! their `include`s, merges layers and composes a [`System`] from the component tables through
//! the plugin registry; the harness loads its hardware the way every host does
//! ([`Config::load`] of `preset:NAME` with `key=value` overrides, then [`Config::system`]).
//! What is the harness's own:
//!
//! * the accelerator catalog (`configs/validation/accelerators.toml`, [`ACCELERATORS`]): a case
//!   names an accelerator by its catalog id; its hardware is the preset named as the id in
//!   lower case ([`hardware_preset`]) or, for an id without a preset, a table built from the
//!   catalog entry ([`hardware_from_catalog`]);
//! * the case's settings on top of that hardware ([`Hardware::set`],
//!   [`Hardware::set_scaleout_nic`]): the device count and the scale-out NIC rate.

use crate::{Error, Result};
use perfcast_config::{Config, HostError, Plugins, Sources, PRESET_SCHEME};
use perfcast_core::workload::ModelSpec;
use perfcast_core::System;
use std::path::{Path, PathBuf};

/// The accelerator catalog (`configs/validation/accelerators.toml`).
pub const ACCELERATORS: &str = perfcast_assets::validation::ACCELERATORS;

/// Interconnect kinds that are a scale-out level: their `bandwidth_gbps` is the NIC rate per
/// device.
pub const SCALEOUT_KINDS: &[&str] = &["infiniband", "roce"];

/// Component name of the scale-out level added for a case's NIC when the hardware has none.
pub const CASE_NIC: &str = "case_scaleout_nic";

/// Names of perfcast-config's built-in presets of `group` (`hardware`, `systems` or `models`),
/// sorted.
pub fn preset_names(group: &str) -> Vec<&'static str> {
    perfcast_config::preset_groups()
        .into_iter()
        .filter(|(_, g)| *g == group)
        .map(|(n, _)| n)
        .collect()
}

/// The hardware preset of a catalog accelerator id, if the project has one: the preset named
/// as the id in lower case (`A100-SXM4-80GB` -> `preset:a100-sxm4-80gb`).
pub fn hardware_preset(accelerator: &str) -> Option<&'static str> {
    let name = accelerator.to_ascii_lowercase();
    preset_names("hardware").into_iter().find(|n| *n == name)
}

/// The configuration of built-in preset `name` alone (no `PERFCAST_*` environment: a
/// validation run does not depend on the shell).
pub fn preset_config(name: &str, plugins: &Plugins) -> Result<Config, HostError> {
    Config::load(&Sources::files(plugins, [format!("{PRESET_SCHEME}{name}")]).without_env())
}

/// A model preset by name (e.g. `llama2-70b`), read by perfcast-config and validated.
pub fn model_preset(name: &str) -> Result<ModelSpec> {
    let preset = format!("{PRESET_SCHEME}{name}");
    let fail = |preset: Option<&str>, e: Error| Error::ModelPreset {
        preset: preset.map(str::to_string),
        source: Box::new(e),
    };
    let config = preset_config(name, &Plugins::none()).map_err(|e| fail(None, e.into()))?;
    let model: ModelSpec = config
        .extract("model")
        .map_err(|e| fail(Some(&preset), e.into()))?;
    model
        .validate()
        .map_err(|e| fail(Some(&preset), e.into()))?;
    Ok(model)
}

/// The hardware of a catalog accelerator as perfcast-config sources: its preset (without one, its
/// catalog entry), and the case's settings on top as `key=value` overrides.
#[derive(Debug, Clone)]
pub struct Hardware {
    accelerator: String,
    /// `preset:NAME`; empty when the hardware is built from the catalog.
    files: Vec<String>,
    /// `key.path=value` overrides (perfcast-config's `--set` syntax), lowest first.
    sets: Vec<String>,
}

impl Hardware {
    /// The hardware of `accelerator` (an id of the catalog): its preset, else a table built
    /// from its catalog entry ([`hardware_from_catalog`]).
    pub fn of(accelerator: &str) -> Result<Hardware> {
        let mut hw = Hardware {
            accelerator: accelerator.to_string(),
            files: Vec::new(),
            sets: Vec::new(),
        };
        match hardware_preset(accelerator) {
            Some(name) => hw.files.push(format!("{PRESET_SCHEME}{name}")),
            None => hw.set_table("", &hardware_from_catalog(accelerator)?),
        }
        Ok(hw)
    }

    /// The sources (`preset:NAME` files, then the `key=value` overrides), as one string that
    /// is equal for two values exactly when they compose the same configuration.
    pub fn sources_key(&self) -> String {
        format!("{:?} {:?}", self.files, self.sets)
    }

    /// The files and those overrides whose key starts with `prefix` (what a component's table
    /// is merged from when `prefix` is `components.NAME.`).
    pub fn files_and_sets(&self, prefix: &str) -> (Vec<String>, Vec<String>) {
        let sets = self
            .sets
            .iter()
            .filter(|s| s.starts_with(prefix))
            .cloned()
            .collect();
        (self.files.clone(), sets)
    }

    /// Add `key=value` overrides as the CLI's `--set` takes them (the value read as TOML).
    pub fn set_raw<S: AsRef<str>>(&mut self, sets: impl IntoIterator<Item = S>) {
        self.sets
            .extend(sets.into_iter().map(|s| s.as_ref().to_string()));
    }

    /// Set `key` (a dotted path of the configuration) to `value`, over what is there.
    pub fn set(&mut self, key: &str, value: impl Into<toml::Value>) {
        self.sets.push(format!("{key}={}", value.into()));
    }

    /// Every value of `table` (below `prefix`), one override each.
    fn set_table(&mut self, prefix: &str, table: &toml::Table) {
        for (k, v) in table {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(t) => self.set_table(&key, t),
                other => self.set(&key, other.clone()),
            }
        }
    }

    /// The merged configuration (no `PERFCAST_*` environment: a validation run does not
    /// depend on the shell), its components resolving in `plugins`.
    pub fn config(&self, plugins: &Plugins) -> Result<Config> {
        Config::load(
            &Sources::files(plugins, &self.files)
                .with_sets(&self.sets)
                .without_env(),
        )
        .map_err(|e| self.error(e))
    }

    /// The system, composed by perfcast-config through `plugins`.
    pub fn system(&self, plugins: &Plugins) -> Result<System> {
        self.compose(plugins).map(|(_, s)| s)
    }

    /// The merged configuration and the system composed from it through `plugins`.
    pub fn compose(&self, plugins: &Plugins) -> Result<(Config, System)> {
        let config = self.config(plugins)?;
        let system = config.system().map_err(|e| self.error(e))?;
        Ok((config, system))
    }

    /// Set the scale-out NIC rate per device (Gb/s): `bandwidth_gbps` of every level of
    /// `system.network` whose kind is one of [`SCALEOUT_KINDS`]; with none, an `infiniband`
    /// level of that rate ([`CASE_NIC`]) becomes the outermost level. Returns how many levels
    /// were set (0 when one was added).
    pub fn set_scaleout_nic(&mut self, gbps: f64) -> Result<usize> {
        // Only the network's names and kinds are read: no component is resolved.
        let config = self.config(&Plugins::none())?;
        let mut network: Vec<String> = config
            .extract_opt("system.network")
            .map_err(|e| self.error(e))?
            .unwrap_or_default();
        let mut n = 0;
        for name in &network {
            // A component that is missing or has no plugin name is reported by `system()`.
            let kind: Option<String> = config
                .extract_opt(&format!("components.{name}.kind"))
                .ok()
                .flatten();
            if kind.is_some_and(|k| SCALEOUT_KINDS.contains(&k.as_str())) {
                self.set(&format!("components.{name}.bandwidth_gbps"), gbps);
                n += 1;
            }
        }
        if n == 0 {
            self.set(&format!("components.{CASE_NIC}.kind"), "infiniband");
            self.set(&format!("components.{CASE_NIC}.bandwidth_gbps"), gbps);
            network.push(CASE_NIC.to_string());
            self.set("system.network", network);
        }
        Ok(n)
    }

    /// A perfcast-config error about this hardware ([`Error::Hardware`]: the case key it
    /// concerns and where the hardware came from).
    pub fn error(&self, e: HostError) -> Error {
        let from = match self.files.first() {
            Some(preset) => preset.as_str(),
            None => "built from configs/validation/accelerators.toml",
        };
        Error::Hardware {
            accelerator: self.accelerator.clone(),
            from: from.to_string(),
            source: std::sync::Arc::new(e),
        }
    }
}

/// The median of `values` (none: `None`).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            values[n / 2]
        } else {
            0.5 * (values[n / 2 - 1] + values[n / 2])
        }
    })
}

/// A catalog number, written as a float or an integer.
fn num(v: Option<&toml::Value>) -> Option<f64> {
    v.and_then(|x| x.as_float().or(x.as_integer().map(|i| i as f64)))
}

/// What a datasheet leaves out, from the catalog's parts that publish it: the median compute-
/// unit count (`sm_count`, which only sets the GEMM model's wave quantisation) and the
/// median ratio of the bf16 matrix peak to the fp32 vector peak (which sets the element-wise
/// ops' rate). `(sm_count, bf16 / fp32)`.
fn catalog_medians(gpus: &[toml::Value]) -> (Option<f64>, Option<f64>) {
    let sms = gpus.iter().filter_map(|g| num(g.get("sm_count"))).collect();
    let ratios = gpus
        .iter()
        .filter_map(|g| {
            let p = g.get("peak_tflops_dense")?;
            Some(num(p.get("bf16"))? / num(p.get("fp32"))?)
        })
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    (median(sms), median(ratios))
}

/// A hardware table built from the accelerator catalog for an id without a preset: a `gpu`
/// compute unit with the catalog's dense peaks, `hbm`, an `nvlink` scale-up level and an
/// `infiniband` scale-out level (efficiencies at the plugins' defaults). What the entry does
/// not publish of what a device needs is derived by the catalog-median rule
/// (`catalog_medians`: the compute-unit count, the fp32 vector peak from the bf16 matrix
/// peak), and the device's name says which values were derived.
pub fn hardware_from_catalog(accelerator: &str) -> Result<toml::Table> {
    let cat: toml::Table = toml::from_str(ACCELERATORS)?;
    let all = cat
        .get("gpu")
        .and_then(|g| g.as_array())
        .cloned()
        .unwrap_or_default();
    let (median_sms, median_ratio) = catalog_medians(&all);
    let mut derived: Vec<&str> = Vec::new();
    let gpu = Some(&all)
        .and_then(|a| {
            a.iter()
                .find(|g| g.get("id").and_then(|i| i.as_str()) == Some(accelerator))
        })
        .ok_or_else(|| Error::UnknownAccelerator {
            accelerator: accelerator.to_string(),
        })?;
    let lacks = |what: String| Error::CatalogEntry {
        accelerator: accelerator.to_string(),
        lacks: what,
    };
    let need = |k: &str| gpu.get(k).cloned().ok_or_else(|| lacks(format!("`{k}`")));
    let peaks = need("peak_tflops_dense")?;
    let peaks = peaks.as_table().cloned().unwrap_or_default();
    let mut matrix = toml::Table::new();
    let mut vector = toml::Table::new();
    for (k, v) in &peaks {
        match k.as_str() {
            "bf16" | "fp16" | "tf32" | "fp8" | "fp4" | "int8" => {
                matrix.insert(k.clone(), v.clone());
            }
            "fp32" => {
                vector.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    if vector.is_empty() {
        let bf16 = num(matrix.get("bf16"));
        let (Some(bf16), Some(ratio)) = (bf16, median_ratio) else {
            return Err(lacks(
                "`peak_tflops_dense.fp32` (and a bf16 peak to derive it from)".into(),
            ));
        };
        vector.insert("fp32".into(), (bf16 / ratio).into());
        derived.push("fp32 vector peak");
    }
    let sm_count = match gpu.get("sm_count") {
        Some(v) => v.clone(),
        None => {
            let m = median_sms.ok_or_else(|| lacks("`sm_count`".into()))?;
            derived.push("sm_count");
            toml::Value::Integer(m.round() as i64)
        }
    };
    let name = if derived.is_empty() {
        accelerator.to_string()
    } else {
        format!(
            "{accelerator} (catalog entry; {} DERIVED: the catalog's median)",
            derived.join(", ")
        )
    };
    let mut t = toml::Table::new();
    let mut comps = toml::Table::new();
    let mut c = toml::Table::new();
    c.insert("kind".into(), "gpu".into());
    c.insert("name".into(), name.into());
    c.insert("sm_count".into(), sm_count);
    c.insert("matrix_tflops".into(), toml::Value::Table(matrix));
    c.insert("vector_tflops".into(), toml::Value::Table(vector));
    comps.insert("gpu".into(), toml::Value::Table(c));
    let mut hbm = toml::Table::new();
    hbm.insert("kind".into(), "hbm".into());
    hbm.insert("capacity_gb".into(), need("hbm_gb")?);
    hbm.insert("bandwidth_tbs".into(), need("hbm_bw_tbs")?);
    comps.insert("hbm".into(), toml::Value::Table(hbm));
    let mut nv = toml::Table::new();
    nv.insert("kind".into(), "nvlink".into());
    nv.insert("bandwidth_gbs_bidir".into(), need("scaleup_bw_gbs_bidir")?);
    nv.insert("domain_size".into(), need("scaleup_domain")?);
    comps.insert("scaleup".into(), toml::Value::Table(nv));
    let mut network = vec![toml::Value::from("scaleup")];
    if let Some(bw) = gpu.get("scaleout_gbps_per_gpu") {
        let mut nic = toml::Table::new();
        nic.insert("kind".into(), "infiniband".into());
        nic.insert("bandwidth_gbps".into(), bw.clone());
        comps.insert("nic".into(), toml::Value::Table(nic));
        network.push("nic".into());
    }
    t.insert("components".into(), toml::Value::Table(comps));
    let mut dev = toml::Table::new();
    dev.insert("compute".into(), "gpu".into());
    dev.insert("memory".into(), toml::Value::Array(vec!["hbm".into()]));
    t.insert("device".into(), toml::Value::Table(dev));
    let mut sys = toml::Table::new();
    sys.insert("name".into(), accelerator.into());
    sys.insert("network".into(), toml::Value::Array(network));
    t.insert("system".into(), toml::Value::Table(sys));
    Ok(t)
}

/// Locate a file given relative to the repository root from wherever the process runs: the
/// path as given, then relative to each ancestor of the current directory.
pub fn find_repo_file(path: &Path) -> Option<PathBuf> {
    if path.exists() {
        return Some(path.to_path_buf());
    }
    if path.is_absolute() {
        return None;
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().map(|a| a.join(path)).find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published parameter counts (billions) of every model preset, with the source of each.
    /// Megatron family: Narayanan et al. 2021 Table 1 (counted with tied embeddings);
    /// Korthikanti 2022 Table 3; GPT-3: Brown et al. 2020 Table 2.1 (175.0B; Megatron's
    /// count of the same shape is 174.6B); Llama 2: Touvron et al. 2023 (6.74B, 13.02B,
    /// 68.98B as counted from the released checkpoints); Llama 3/3.1: Llama Team 2024
    /// (8.03B, 70.55B, 405.85B as counted from the released checkpoints).
    const PUBLISHED: &[(&str, f64, f64)] = &[
        // (preset, billions, relative tolerance)
        ("megatron-gpt-1.7b", 1.7, 0.03),
        ("megatron-gpt-3.6b", 3.6, 0.03),
        ("megatron-gpt-7.5b", 7.5, 0.03),
        ("megatron-gpt-18b", 18.4, 0.01),
        ("megatron-gpt-39b", 39.1, 0.01),
        ("megatron-gpt-76b", 76.1, 0.01),
        ("megatron-gpt-145b", 145.6, 0.005),
        ("megatron-gpt-310b", 310.1, 0.005),
        ("megatron-gpt-530b", 529.6, 0.001),
        ("megatron-gpt-1t", 1008.0, 0.001),
        ("gpt3-175b", 174.6, 0.001),
        ("korthikanti-gpt-22b", 22.0, 0.01),
        ("korthikanti-gpt-175b", 174.6, 0.001),
        ("korthikanti-gpt-530b", 529.6, 0.001),
        ("korthikanti-gpt-1t", 1008.0, 0.001),
        ("llama2-7b", 6.74, 0.001),
        ("llama2-13b", 13.02, 0.001),
        ("llama2-70b", 68.98, 0.001),
        ("llama3-8b", 8.03, 0.001),
        ("llama3-70b", 70.55, 0.001),
        ("llama3.1-8b", 8.03, 0.001),
        ("llama3.1-70b", 70.55, 0.001),
        ("llama3.1-405b", 405.85, 0.001),
        // Mixture-of-experts presets: totals and tolerances as in
        // perfcast-scenario/tests/moe_presets.rs (which also checks the active counts).
        ("mixtral-8x7b", 46.7, 0.005),
        ("mixtral-8x22b", 141.0, 0.005),
        ("deepseek-v2", 236.0, 0.005),
        ("deepseek-v3", 671.0, 0.005),
        ("deepseek-r1", 671.0, 0.005),
        ("kimi-k2", 1040.0, 0.015),
        ("qwen3-30b-a3b", 30.5, 0.005),
        ("qwen3-235b-a22b", 235.0, 0.005),
        ("gpt-oss-120b", 116.8, 0.005),
        ("gpt-oss-20b", 20.9, 0.01),
        ("llama4-scout", 109.0, 0.015),
        ("llama4-maverick", 400.0, 0.005),
    ];

    #[test]
    fn every_model_preset_matches_its_published_size() {
        assert_eq!(PUBLISHED.len(), preset_names("models").len());
        for (name, billions, tol) in PUBLISHED {
            let m = model_preset(name).unwrap();
            let p = m.params() as f64 / 1e9;
            assert!(
                (p - billions).abs() / billions <= *tol,
                "{name}: {p:.3}B vs published {billions}B"
            );
        }
        assert!(model_preset("gpt-5")
            .unwrap_err()
            .to_string()
            .contains("llama2-7b"));
    }

    /// The ids of the accelerator catalog.
    fn catalog_ids() -> Vec<String> {
        let cat: toml::Table = toml::from_str(ACCELERATORS).unwrap();
        cat["gpu"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// The system of accelerator `id` with `devices` devices.
    fn system(id: &str, devices: u32) -> System {
        let mut hw = Hardware::of(id).unwrap();
        hw.set("system.devices", devices);
        hw.system(
            &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
        )
        .unwrap()
    }

    #[test]
    fn every_hardware_and_system_preset_builds() {
        let ids = catalog_ids();
        for name in preset_names("hardware") {
            // Every hardware preset is the preset of a catalog accelerator.
            let id = ids
                .iter()
                .find(|id| hardware_preset(id) == Some(name))
                .unwrap_or_else(|| panic!("preset:{name} is the preset of no catalog id"));
            let s = system(id, 16);
            assert_eq!(s.devices, 16);
            assert_eq!(s.network.len(), 2, "{id}");
            assert!(s.memory.device().is_some(), "{id}");
        }
        // (preset, devices, NVLink domain)
        let table = [
            ("dgx-a100", 8, 8),
            ("dgx-h100", 8, 8),
            ("dgx-h200", 8, 8),
            ("dgx-b200", 8, 8),
            ("gb200-nvl72", 72, 72),
        ];
        assert_eq!(table.len(), preset_names("systems").len());
        for (name, devices, domain) in table {
            let s = preset_config(
                name,
                &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                    .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            )
            .unwrap()
            .system()
            .unwrap();
            assert_eq!(s.devices, devices, "{name}");
            assert_eq!(s.network[0].domain_size(), domain, "{name}");
            assert!(
                s.name.contains("DGX") || s.name.contains("NVL72"),
                "{}",
                s.name
            );
        }
    }

    /// A large bf16 GEMM is compute-bound on every preset with a sourced cache bandwidth (the
    /// GEMM tile keeps the L2 traffic below the tensor rate) and reaches the calibrated fraction
    /// of the dense peak.
    #[test]
    fn large_gemms_are_compute_bound_on_every_preset() {
        use perfcast_core::op::{ComputeOp, Gemm};
        use perfcast_core::{DType, Engine, TimeBound};
        // (every NVIDIA preset names its GPU's kernel table: 8192^3 in bf16 is a measured row,
        // at the rated power's clock unless the preset sets a lower limit; the AMD presets
        // have none: their analytical model answers)
        // (accelerator, lowest and highest fraction of the bf16 peak, bound)
        const C: TimeBound = TimeBound::Compute;
        let table = [
            ("A100-SXM4-40GB", 0.80, 0.88, C),
            ("A100-SXM4-80GB", 0.80, 0.88, C),
            ("H100-SXM5-80GB", 0.75, 0.83, C),
            ("H200-SXM-141GB", 0.77, 0.85, C),
            ("H800-SXM-80GB", 0.75, 0.83, C),
            // Grand Teton's 500 W limit lowers the clock (cube law of DVFS).
            ("H100-HBM2e-96GB", 0.65, 0.73, C),
            // TensorRT-LLM's bf16 GEMMs on Blackwell sit 13-14% below the published cuBLAS
            // figures (crates/perfcast-kernel-data/tests/published.rs).
            ("B200-SXM-180GB", 0.62, 0.70, C),
            ("GB200", 0.52, 0.60, C),
            ("B300-SXM", 0.67, 0.75, C),
            ("GB300", 0.71, 0.79, C),
            // No kernel table: the analytical model at the fitted fraction (0.52, 0.62), less
            // the wave quantisation of 1,024 tiles of 256 x 256 on 304 CUs (3.4 waves run as 4).
            ("MI300X", 0.41, 0.46, C),
            ("MI325X", 0.49, 0.54, C),
            // 1,024 tiles fill 256 CUs exactly, and at CDNA4's rate the tile traffic just
            // exceeds the Infinity Cache's bandwidth, the MI300X's (ASSUMPTION in the preset).
            ("MI355X", 0.57, 0.62, TimeBound::Memory(0)),
        ];
        assert_eq!(table.len(), preset_names("hardware").len());
        for (id, lo, hi, bound) in table {
            assert!(hardware_preset(id).is_some(), "{id}");
            let s = system(id, 8);
            let op = ComputeOp::Gemm(Gemm::new(8192, 8192, 8192, DType::Bf16));
            let t = s.compute.op_time(&op, &s.memory).unwrap();
            let peak = s.compute.peak(Engine::Matrix, DType::Bf16).unwrap().0;
            let frac = t.flops.0 / t.time.0 / peak;
            assert_eq!(t.bound, bound, "{id}: {:?}", t.bound);
            assert!(frac >= lo && frac <= hi, "{id}: {frac:.3} of peak");
        }
    }

    #[test]
    fn overrides_and_catalog_fallback() {
        let mut hw = Hardware::of("H100-SXM5-80GB").unwrap();
        let before = hw
            .system(
                &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                    .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            )
            .unwrap()
            .network[1]
            .bandwidth();
        assert_eq!(hw.set_scaleout_nic(200.0).unwrap(), 1);
        let after = hw
            .system(
                &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                    .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            )
            .unwrap()
            .network[1]
            .bandwidth();
        assert!((before.0 / after.0 - 2.0).abs() < 1e-12);
        // MI350X has no preset: built from the catalog.
        assert_eq!(hardware_preset("MI350X"), None);
        let s = system("MI350X", 8);
        assert_eq!(s.network[0].domain_size(), 8);
        // A bad value names the case key, the source of the hardware and the component key.
        let mut hw = Hardware::of("MI350X").unwrap();
        hw.set("components.gpu.sm_count", -1);
        let e = hw
            .system(
                &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
                    .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("system.gpu = \"MI350X\"")
                && e.contains("accelerators.toml")
                && e.contains("components.gpu.sm_count"),
            "{e}"
        );
        // TPU v4 lacks fields the generic GPU model needs: a clear error naming them.
        let e = hardware_from_catalog("TPU-v4").unwrap_err().to_string();
        assert!(e.contains("TPU-v4") && e.contains("lacks"), "{e}");
        assert!(e.contains("scaleup_bw_gbs_bidir"), "{e}");
        // Gaudi 2 publishes neither its compute-unit count nor an fp32 peak: both come from
        // the catalog's medians, and the device's name says so.
        let t = hardware_from_catalog("Gaudi2").unwrap();
        let gpu = &t["components"]["gpu"];
        let name = gpu["name"].as_str().unwrap();
        assert!(
            name.contains("sm_count") && name.contains("fp32") && name.contains("DERIVED"),
            "{name}"
        );
        let fp32 = gpu["vector_tflops"]["fp32"].as_float().unwrap();
        assert!(fp32 > 0.0 && fp32 < 432.0, "{fp32}");
        assert!(gpu["sm_count"].as_integer().unwrap() > 0);
        // A catalog entry that publishes them keeps its own.
        let t = hardware_from_catalog("MI350X").unwrap();
        assert_eq!(t["components"]["gpu"]["sm_count"].as_integer(), Some(256));
        assert_eq!(t["components"]["gpu"]["name"].as_str(), Some("MI350X"));
        assert!(hardware_from_catalog("Z100")
            .unwrap_err()
            .to_string()
            .contains("Z100"));
        assert!(Hardware::of("Z100")
            .unwrap_err()
            .to_string()
            .contains("Z100"));
    }
}
