//! Configurations derived from a loaded one with sets on top, without reading its files
//! again (what a host that evaluates many variants of one configuration uses).

use super::Config;
use crate::error::HostError;
use crate::layers::{self, Layer, LayerOrigin};
use figment::value::Value;
use figment::Figment;
use serde::Serialize;
use std::sync::Arc;

impl Config {
    /// This configuration with `sets` (`key=value`, as in [`Sources::sets`]) merged on top,
    /// without reading its files again: the same configuration as loading the sources with
    /// `sets` appended, sharing the registry and the loaded libraries (what a host that
    /// evaluates many variants of one configuration uses). A set below `plugins` is refused:
    /// libraries are loaded by [`Config::load`] only.
    pub fn with_sets<S: AsRef<str>>(&self, sets: &[S]) -> Result<Config, HostError> {
        let layers = sets
            .iter()
            .map(|s| layers::parse_set(s.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        self.with_layers(layers)
    }

    /// [`Config::with_sets`] of sets whose values are typed: `(key, value)` is the set
    /// `key=value` (the value written as JSON in origins and messages), without writing and
    /// parsing text (what a sweep's points use).
    pub fn with_values<V: Serialize>(&self, sets: &[(&str, &V)]) -> Result<Config, HostError> {
        let layers = sets
            .iter()
            .map(|(k, v)| {
                let json = serde_json::to_string(v).unwrap_or_default();
                let arg = format!("{k}={json}");
                let value = Value::serialize(v).map_err(|e| HostError::BadSet {
                    arg: arg.clone(),
                    message: e.to_string(),
                })?;
                layers::set_layer(k, value, &arg)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.with_layers(layers)
    }

    fn with_layers(&self, sets: Vec<Layer>) -> Result<Config, HostError> {
        let mut added = Figment::new();
        let mut origins = self.layers.clone();
        for l in sets {
            if l.data.contains_key("plugins") {
                return Err(HostError::BadSet {
                    arg: match l.origin {
                        LayerOrigin::Set { arg } => arg,
                        other => other.label(),
                    },
                    message: "plugin libraries are loaded from config files or --load, not added to a loaded configuration".into(),
                });
            }
            origins.push(l.origin.clone());
            added = added.merge(l);
        }
        let new = super::merged(&added)?;
        // The layers merged again would give the same value: sets are the top layers (of
        // the global profile, above every file's), and figment's merge is associative.
        let mut value = self.value.clone();
        merge_value(&mut value, new);
        let cfg = Config {
            figment: Arc::clone(&self.figment),
            sets: self.sets.clone().merge(added),
            value,
            layers: origins,
            registry: Arc::clone(&self.registry),
            built: Arc::clone(&self.built),
            plugins: self.plugins.clone(),
            libraries: self.libraries.clone(),
            unloaded: self.unloaded.clone(),
            ignored_env: self.ignored_env.clone(),
            sections: self.sections.clone(),
        };
        cfg.check_top_level(&cfg.sections)?;
        cfg.check_finite()?;
        Ok(cfg)
    }
}

/// `new` merged onto `old` as figment merges a higher layer: tables key by key (taking the
/// higher table's tag), anything else replaced.
fn merge_value(old: &mut Value, new: Value) {
    match (old, new) {
        (Value::Dict(tag, a), Value::Dict(new_tag, b)) => {
            *tag = new_tag;
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(x) => merge_value(x, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (old, new) => *old = new,
    }
}
