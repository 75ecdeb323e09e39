//! Composition: named component instances resolved through the registry into a device (a
//! compute unit and its memory tiers) and a system (a device, a network, a device count).

use crate::config::{lookup, Config};
use crate::error::{HostError, WrongCategory};
use crate::layers::kind_name;
use figment::value::Value;
use perfcast_core::registry::RegistryError;
use perfcast_core::{
    Category, Component, ComputeUnit, Interconnect, MemoryHierarchy, MemoryTier, PluginError,
    System,
};
use serde::Deserialize;
use std::sync::{Arc, Mutex};

/// Components a configuration built, kept for the configurations [`Config::with_sets`]
/// derives from it: a sweep point that leaves a component's table alone gets the component
/// built before (a compute unit timed from kernel tables with its memo warm) instead of
/// building it again. The most recently used [`BUILT_CAPACITY`] are kept.
#[derive(Default)]
pub(crate) struct Built(Mutex<Vec<(BuiltKey, Component)>>);

/// What a component is built from.
#[derive(PartialEq)]
enum BuiltKey {
    /// A registered plugin of a category from its table in `[components]` (compared without
    /// where its values came from).
    Table { category: Category, table: Value },
    /// A compute unit (the address of the one kept beside it) timed from kernel tables.
    Measured { compute: usize, kernels: String },
}

/// Enough for every component a configuration names and a sweep's recent values of the
/// swept ones.
const BUILT_CAPACITY: usize = 32;

impl Built {
    /// The component kept for a key `is_key` accepts, now the most recently used.
    fn find(&self, is_key: impl Fn(&BuiltKey) -> bool) -> Option<Component> {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let i = list.iter().position(|(k, _)| is_key(k))?;
        let entry = list.remove(i);
        let c = entry.1.clone();
        list.push(entry);
        Some(c)
    }

    /// Keep `c`, built from `key` (the least recently used goes when full).
    fn keep(&self, key: BuiltKey, c: &Component) {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() >= BUILT_CAPACITY {
            list.remove(0);
        }
        list.push((key, c.clone()));
    }
}

/// Memory tiers built for a device's slots, each with its component name.
type Tiers = Vec<(String, Arc<dyn MemoryTier>)>;

/// `[device]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// A compute-unit component.
    pub compute: String,
    /// Memory-tier components (any order: they are sorted from on-chip to host).
    pub memory: Vec<String>,
    /// The GPU architecture generation (`volta`, `ampere`, `ada`, `hopper`, `blackwell`):
    /// what a software stack's per-generation choices key on (perfcast-scenario reads and
    /// checks it). Optional.
    #[serde(default)]
    pub generation: Option<String>,
    /// The kernel tables its GEMMs are timed from: a GPU of the host's tables (`perfcast
    /// kernels list`), a folder of `<gpu>/<op>.parquet` files with the GPU after a `#`
    /// (`path/to/tables#npu`), or `none`. Unset: none (the compute unit's own model).
    #[serde(default)]
    pub kernels: Option<String>,
}

/// `[system]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    #[serde(default)]
    pub name: Option<String>,
    /// Interconnect components, innermost (scale-up) first.
    #[serde(default)]
    pub network: Vec<String>,
    /// A topology component (how the levels are wired); none: the hierarchical levels.
    #[serde(default)]
    pub topology: Option<String>,
    /// Devices in the cluster.
    pub devices: u32,
}

/// A device built from `[device]`.
#[derive(Clone)]
pub struct Device {
    /// Component name of the compute unit.
    pub compute_name: String,
    pub compute: Arc<dyn ComputeUnit>,
    /// Tiers sorted from the closest to the compute to the farthest.
    pub memory: MemoryHierarchy,
    /// Component names of `memory.tiers`, index for index.
    pub memory_names: Vec<String>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("compute", &self.compute_name)
            .field("memory", &self.memory_names)
            .finish()
    }
}

impl Device {
    /// Index of the device-memory tier (HBM), or the farthest tier if none is device-level.
    pub fn device_tier(&self) -> usize {
        self.memory
            .device_index()
            .unwrap_or(self.memory.tiers.len().saturating_sub(1))
    }
}

impl Config {
    /// Names of the components defined in `[components]`, sorted.
    pub fn component_names(&self) -> Vec<String> {
        match lookup(self.value(), "components") {
            Some(Value::Dict(_, d)) => d.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// Build component `name` for `slot` (a key path such as `device.compute`, for messages),
    /// which needs a component of `category`.
    pub fn component(
        &self,
        slot: &str,
        name: &str,
        category: Category,
    ) -> Result<Component, HostError> {
        let table = lookup(self.value(), &format!("components.{name}")).ok_or_else(|| {
            HostError::UndefinedComponent {
                slot: slot.to_string(),
                name: name.to_string(),
                origin: self.origin_of(slot),
                defined: self.component_names(),
            }
        })?;
        let hit = |k: &BuiltKey| matches!(k, BuiltKey::Table { category: c, table: t } if *c == category && t == table);
        if let Some(c) = self.built.find(hit) {
            return Ok(c);
        }
        let (kind, params) = self.kind_and_params(name, table)?;
        let registry = self.registry();
        if !registry.contains(category, &kind) {
            let key = format!("components.{name}.kind");
            if let Some(found) = Category::ALL
                .into_iter()
                .find(|c| registry.contains(*c, &kind))
            {
                return Err(HostError::WrongCategory(Box::new(WrongCategory {
                    slot: slot.to_string(),
                    slot_origin: self.origin_of(slot),
                    name: name.to_string(),
                    kind,
                    wanted: category,
                    found,
                    origin: self.origin_of(&key),
                    known: registry.names(category),
                })));
            }
            return Err(HostError::UnknownKind {
                name: name.to_string(),
                kind,
                origin: self.origin_of(&key),
                known: if registry.plugins().next().is_none() {
                    // A host bug rather than a user's: say so instead of listing nothing.
                    "none: no plugins were handed to this configuration (a host passes its \
                     choice, e.g. perfcast-builtins' DefaultPlugins, in its Sources)"
                        .to_string()
                } else {
                    format!("{category}: {}", list(&registry.names(category)))
                },
            });
        }
        self.build(name, table, &kind, category, &params)
    }

    fn kind_and_params(
        &self,
        name: &str,
        table: &Value,
    ) -> Result<(String, serde_json::Value), HostError> {
        let key = format!("components.{name}");
        let Value::Dict(_, d) = table else {
            return Err(HostError::Invalid {
                origin: self.origin_of(&key),
                key,
                message: format!(
                    "expected a table with `kind` and the plugin's parameters, found {}",
                    kind_name(table)
                ),
            });
        };
        let kind = match d.get("kind") {
            Some(Value::String(_, k)) => k.clone(),
            Some(other) => {
                let key = format!("{key}.kind");
                return Err(HostError::Invalid {
                    origin: self.origin_of(&key),
                    key,
                    message: format!("expected a plugin name (string), found {}", kind_name(other)),
                });
            }
            None => {
                return Err(HostError::Invalid {
                    origin: self.origin_of(&key),
                    key,
                    message: "missing `kind` (the registered plugin name, e.g. `gpu`, `hbm`, `nvlink`; see `perfcast plugins`)".into(),
                })
            }
        };
        let mut params = d.clone();
        params.remove("kind");
        let params = serde_json::to_value(&params).map_err(|e| HostError::Invalid {
            origin: self.origin_of(&key),
            key: key.clone(),
            message: e.to_string(),
        })?;
        Ok((kind, params))
    }

    /// Component `name` of `table` (its kind and parameters: `kind`, `params`), kept for the
    /// configurations that share this one's [`Built`].
    fn build(
        &self,
        name: &str,
        table: &Value,
        kind: &str,
        category: Category,
        params: &serde_json::Value,
    ) -> Result<Component, HostError> {
        let c = self
            .registry()
            .build(category, kind, params)
            .map_err(|e| match e {
                RegistryError::Build { source, .. } => {
                    self.build_error(name, kind, category, source)
                }
                other => HostError::Registry(other),
            })?;
        let key = BuiltKey::Table {
            category,
            table: table.clone(),
        };
        self.built.keep(key, &c);
        Ok(c)
    }

    /// A plugin's error about component `name` under the key it is about, with that key's
    /// origin (a failure of the component as a whole where its `kind` was set).
    fn build_error(
        &self,
        name: &str,
        kind: &str,
        category: Category,
        source: PluginError,
    ) -> HostError {
        let base = format!("components.{name}");
        let (key, message) = match source {
            PluginError::Params { path, message } => {
                let mut key = if path.is_empty() {
                    base.clone()
                } else {
                    format!("{base}.{path}")
                };
                // serde reports an unknown field at its parent: name the field.
                if let Some(field) = message
                    .strip_prefix("unknown key `")
                    .or_else(|| message.strip_prefix("unknown field `"))
                    .and_then(|m| m.split('`').next())
                {
                    if !key.ends_with(&format!(".{field}")) {
                        key = format!("{key}.{field}");
                    }
                }
                (key, format!("{message} (parameter of {category} `{kind}`)"))
            }
            other => (base.clone(), other.to_string()),
        };
        let kind_origin = || self.origin_of(&format!("{base}.kind"));
        let origin = if key == base {
            kind_origin()
        } else {
            self.origin_of(&key).or_else(kind_origin)
        };
        HostError::Invalid {
            key,
            origin,
            message,
        }
    }

    /// Check the components no slot uses (catches typos in spare components; `built`: the
    /// names the slots built, not built again), where the kind
    /// names exactly one registered category: a built-in's parameters must build; a library's
    /// are checked against the parameters it declared, without building (no library code
    /// runs for a component nothing uses), and left alone when it declared none. A kind no
    /// category knows is left alone here (a plugin library that is not loaded this time); a
    /// slot that uses it reports it.
    fn check_components(&self, built: &[&str]) -> Result<(), HostError> {
        let Some(Value::Dict(_, d)) = lookup(self.value(), "components") else {
            return Ok(());
        };
        for (name, table) in d.iter().filter(|(n, _)| !built.contains(&n.as_str())) {
            let hit = |k: &BuiltKey| matches!(k, BuiltKey::Table { table: t, .. } if t == table);
            if self.built.find(hit).is_some() {
                continue;
            }
            let (kind, params) = self.kind_and_params(name, table)?;
            let cats: Vec<Category> = Category::ALL
                .into_iter()
                .filter(|c| self.registry().contains(*c, &kind))
                .collect();
            let [one] = cats.as_slice() else { continue };
            let Some(info) = self.registry().info(*one, &kind) else {
                continue;
            };
            match (&info.origin, &info.params) {
                (perfcast_core::Origin::BuiltIn(_), _) => {
                    self.build(name, table, &kind, *one, &params)?;
                }
                (perfcast_core::Origin::Library(_), Some(specs)) => {
                    if let Err(e) = perfcast_core::param_spec::check_params(specs, &params) {
                        return Err(self.build_error(name, &kind, *one, e));
                    }
                }
                (perfcast_core::Origin::Library(_), None) => {}
            }
        }
        Ok(())
    }

    /// The device of `[device]`: its compute unit and memory tiers.
    pub fn device(&self) -> Result<Device, HostError> {
        let (spec, compute, tiers) = self.device_slots()?;
        // The slots first (their errors are the most specific), then the other components.
        let mut built: Vec<&str> = spec.memory.iter().map(String::as_str).collect();
        built.push(&spec.compute);
        self.check_components(&built)?;
        self.assemble_device(spec, compute, tiers)
    }

    /// The components `[device]`'s slots name, built.
    fn device_slots(&self) -> Result<(DeviceSpec, Arc<dyn ComputeUnit>, Tiers), HostError> {
        let spec: DeviceSpec = self.extract("device")?;
        let compute = self.compute_unit(&spec)?;
        if spec.memory.is_empty() {
            return Err(HostError::Invalid {
                key: "device.memory".into(),
                origin: self.origin_of("device.memory"),
                message: "needs at least one memory-tier component (e.g. the device's HBM)".into(),
            });
        }
        let mut tiers: Tiers = Vec::new();
        for (i, name) in spec.memory.iter().enumerate() {
            let slot = format!("device.memory[{i}]");
            match self.component(&slot, name, Category::MemoryTier)? {
                Component::MemoryTier(t) => tiers.push((name.clone(), t)),
                other => return Err(wrong_built(&slot, name, other)),
            }
        }
        Ok((spec, compute, tiers))
    }

    /// The device of its built slots: the tiers in order, the compute unit timed from its
    /// kernel tables.
    fn assemble_device(
        &self,
        spec: DeviceSpec,
        compute: Arc<dyn ComputeUnit>,
        mut tiers: Tiers,
    ) -> Result<Device, HostError> {
        // The same (stable) order MemoryHierarchy::new uses, so names stay index for index.
        tiers.sort_by_key(|(_, t)| t.level());
        let memory_names = tiers.iter().map(|(n, _)| n.clone()).collect();
        let memory = MemoryHierarchy {
            tiers: tiers.into_iter().map(|(_, t)| t).collect(),
        };
        let compute = self.measured(&spec, compute)?;
        Ok(Device {
            compute_name: spec.compute,
            compute,
            memory,
            memory_names,
        })
    }

    /// The compute unit of `[device]` as [`Config::device`] builds it (wrapped in the kernel
    /// tables `device.kernels` names), without the memory tiers: what a caller that changes
    /// only the compute unit's parameters rebuilds.
    pub fn device_compute(&self) -> Result<Arc<dyn ComputeUnit>, HostError> {
        let spec: DeviceSpec = self.extract("device")?;
        let compute = self.compute_unit(&spec)?;
        self.measured(&spec, compute)
    }

    /// The component `device.compute` names.
    fn compute_unit(&self, spec: &DeviceSpec) -> Result<Arc<dyn ComputeUnit>, HostError> {
        match self.component("device.compute", &spec.compute, Category::ComputeUnit)? {
            Component::ComputeUnit(c) => Ok(c),
            other => Err(wrong_built("device.compute", &spec.compute, other)),
        }
    }

    /// `compute` timing its GEMMs (and routed experts, where the GPU has a MoE table) from the
    /// tables `device.kernels` names (itself without them).
    fn measured(
        &self,
        spec: &DeviceSpec,
        compute: Arc<dyn ComputeUnit>,
    ) -> Result<Arc<dyn ComputeUnit>, HostError> {
        Ok(match &spec.kernels {
            None => compute,
            Some(k) if k == "none" => compute,
            Some(k) => {
                let key = BuiltKey::Measured {
                    compute: Arc::as_ptr(&compute) as *const () as usize,
                    kernels: k.clone(),
                };
                if let Some(Component::ComputeUnit(c)) = self.built.find(|x| *x == key) {
                    return Ok(c);
                }
                let (catalog, gpu) = self.kernel_tables(k)?;
                let gemm = catalog
                    .get(&gpu, perfcast_kernels::Op::Gemm)
                    .map_err(|e| self.invalid_kernels(e.to_string()))?;
                let measured: Arc<dyn ComputeUnit> = Arc::new(
                    perfcast_kernels::MeasuredCompute::new(compute, gemm)
                        .with_tables(catalog, &gpu),
                );
                self.built
                    .keep(key, &Component::ComputeUnit(Arc::clone(&measured)));
                measured
            }
        })
    }

    fn invalid_kernels(&self, message: String) -> HostError {
        HostError::Invalid {
            key: "device.kernels".into(),
            origin: self.origin_of("device.kernels"),
            message,
        }
    }

    /// The catalog and GPU `device.kernels = "{name}"` names: the host's tables of GPU `name`,
    /// or a folder's (`path/to/tables#gpu`).
    fn kernel_tables(
        &self,
        name: &str,
    ) -> Result<(Arc<perfcast_kernels::Catalog>, String), HostError> {
        match name.rsplit_once('#') {
            Some((dir, gpu)) => perfcast_kernels::Catalog::dir(std::path::Path::new(dir))
                .map(|c| (Arc::new(c), gpu.to_string()))
                .map_err(|e| self.invalid_kernels(e.to_string())),
            None => match self.plugins().kernels() {
                Some(c) => Ok((c.clone(), name.to_string())),
                None => Err(self.invalid_kernels(format!(
                    "names the kernel tables `{name}`, but this host offers none (set `device.kernels = \"none\"` to time from the compute unit's model, or name a folder: \"path/to/tables#gpu\")"
                ))),
            },
        }
    }

    /// The system of `[device]` and `[system]`.
    pub fn system(&self) -> Result<System, HostError> {
        let (dev, compute, tiers) = self.device_slots()?;
        let spec: SystemSpec = self.extract("system")?;
        if spec.devices == 0 {
            return Err(HostError::Invalid {
                key: "system.devices".into(),
                origin: self.origin_of("system.devices"),
                message: "must be at least 1".into(),
            });
        }
        let mut network: Vec<Arc<dyn Interconnect>> = Vec::new();
        for (i, name) in spec.network.iter().enumerate() {
            let slot = format!("system.network[{i}]");
            match self.component(&slot, name, Category::Interconnect)? {
                Component::Interconnect(n) => network.push(n),
                other => return Err(wrong_built(&slot, name, other)),
            }
        }
        let topology = match &spec.topology {
            None => None,
            Some(name) => match self.component("system.topology", name, Category::Topology)? {
                Component::Topology(t) => Some(t),
                other => return Err(wrong_built("system.topology", name, other)),
            },
        };
        // The slots first (their errors are the most specific), then the other components.
        let mut built: Vec<&str> = dev.memory.iter().map(String::as_str).collect();
        built.push(&dev.compute);
        built.extend(spec.network.iter().map(String::as_str));
        built.extend(spec.topology.as_deref());
        self.check_components(&built)?;
        let device = self.assemble_device(dev, compute, tiers)?;
        Ok(System {
            name: spec.name.unwrap_or_else(|| device.compute_name.clone()),
            compute: device.compute,
            memory: device.memory,
            network,
            topology,
            devices: spec.devices,
        })
    }
}

fn wrong_built(slot: &str, name: &str, c: Component) -> HostError {
    HostError::Invalid {
        key: slot.to_string(),
        origin: None,
        message: format!("component `{name}` built a {}", c.category()),
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
