//! Overlays: configuration keys set on top of every case's configuration (a calibration layer,
//! `perfcast validate --overlay`, and the points `perfcast calibrate` tries).
//!
//! A case's *configuration* ([`CaseKeys`]) is what the harness composes for it: the hardware
//! (`preset:<accelerator>` or the catalog's table) with the case's settings (device count,
//! NIC), and `[options]` as the case's engine reads it, its defaults filled in (so
//! `options.engine.runtime_reserve_gib` exists for every training case,
//! `options.strategy_params.<strategy>` is a table for every strategy in use, and
//! `options.host_launch_us` exists for every inference case). An overlay key **applies** to
//! a case when
//!
//! * it is a key of that configuration ([`Applies::Present`]), or
//! * its parent table is, and the case builds with the key set ([`Applies::Accepted`]): a
//!   plugin or engine parameter left at its default (`components.a100_sxm4_80gb.k_half` where
//!   the preset does not set it). A parent table whose plugin or engine rejects the key (an
//!   unknown field, say) means the key does not apply there.
//!
//! A key `stacks.NAME.KEY` is the `[software]` key `KEY` of the stack profile `NAME`: it is in
//! the configuration of the cases mapped to that stack (where the stack's value lands on one
//! engine option), and sets that option there, as the stack's own value would
//! (`stacks.megatron-lm-2021.efficiency.gemm` is `options.engine.efficiency.gemm` of the
//! Megatron-LM 2021 cases): what fits a parameter per software stack.
//!
//! Keys apply case by case: a layer with H100 and A100 efficiencies, training and inference
//! options changes each case only where its configuration has the key. A key that applies to
//! no case at all is an error (a typo would otherwise be silently ignored).

use crate::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// One key of an overlay and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Dotted key path (`components.h100_sxm5_80gb.matmul_efficiency`).
    pub key: String,
    /// The value (a TOML value: numbers, strings, booleans, arrays, inline tables).
    pub value: toml::Value,
}

impl Entry {
    /// A numeric entry.
    pub fn number(key: &str, v: f64) -> Entry {
        Entry {
            key: key.to_string(),
            value: toml::Value::Float(v),
        }
    }

    /// The entry in perfcast-config's `--set` syntax (`key=value`, the value as TOML).
    pub fn set_arg(&self) -> String {
        format!("{}={}", self.key, self.value)
    }

    /// Whether the key is read by the engine, not by the system composition: below
    /// `[options]`, or a stack's key ([`Entry::stack_key`]).
    pub fn is_option(&self) -> bool {
        self.key == "options" || self.key.starts_with("options.") || self.stack_key().is_some()
    }

    /// `(stack, software key)` of a key `stacks.NAME.KEY`: the value of `[software]` key `KEY`
    /// of the stack profile `NAME` (`configs/stacks/NAME.toml`), for the cases mapped to that
    /// stack only (where the stack's value lands on one engine option:
    /// [`perfcast_scenario::stack::option_key`]).
    pub fn stack_key(&self) -> Option<(&str, &str)> {
        self.key
            .strip_prefix("stacks.")?
            .split_once('.')
            .filter(|(name, key)| !name.is_empty() && !key.is_empty())
    }

    /// The key below `options.` (`None` for other keys).
    pub fn option_path(&self) -> Option<Vec<&str>> {
        self.key
            .strip_prefix("options.")
            .map(|k| k.split('.').collect())
    }
}

/// Keys set on top of every case's configuration, lowest first (a later entry for the same
/// key wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlay {
    /// Where the overlay came from (for messages): a file, or `--set`.
    pub source: String,
    /// The entries, in order.
    pub entries: Vec<Entry>,
}

impl Overlay {
    /// No keys.
    pub fn empty() -> Overlay {
        Overlay::default()
    }

    /// Whether the overlay sets nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries from `key=value` arguments (perfcast-config's `--set` syntax: the value is TOML,
    /// else JSON, else a string).
    pub fn from_sets<S: AsRef<str>>(sets: &[S]) -> Result<Overlay> {
        let mut entries = Vec::new();
        for s in sets {
            let s = s.as_ref();
            let at = |e: Error| Error::OverlayEntry {
                entry: s.to_string(),
                source: Box::new(e),
            };
            let layer = perfcast_config::layers::parse_set(s)?;
            let value = serde_json::to_value(&layer.data).map_err(|e| at(e.into()))?;
            let table: toml::Table = serde_json::from_value(value).map_err(|e| {
                at(Error::Invalid(format!(
                    "the value cannot be written as TOML (a null?): {e}"
                )))
            })?;
            flatten(&table, "", &mut entries);
        }
        Ok(Overlay {
            source: "--set".into(),
            entries,
        })
    }

    /// The keys of a TOML file (tables are walked, arrays and inline values are leaves).
    pub fn load(path: &Path) -> Result<Overlay> {
        let file = path.display().to_string();
        let text = crate::error::read(path, &file)?;
        Overlay::parse(&text, &file)
    }

    /// The keys of TOML `text`; `file` names it in messages.
    pub fn parse(text: &str, file: &str) -> Result<Overlay> {
        let table: toml::Table = crate::error::parse_toml(text, file)?;
        let mut entries = Vec::new();
        flatten(&table, "", &mut entries);
        if entries.is_empty() {
            return Err(Error::File {
                file: file.to_string(),
                message: "the overlay sets no key".into(),
            });
        }
        Ok(Overlay {
            source: file.to_string(),
            entries,
        })
    }

    /// The overlay as a TOML document (tables per key path), for `--out`.
    pub fn to_toml(&self) -> String {
        let mut root = toml::Table::new();
        for e in &self.entries {
            insert(&mut root, &e.key, e.value.clone());
        }
        toml::to_string(&root).unwrap_or_default()
    }
}

/// Every leaf of `t` as an entry `prefix.key`.
fn flatten(t: &toml::Table, prefix: &str, out: &mut Vec<Entry>) {
    for (k, v) in t {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(sub) if !sub.is_empty() => flatten(sub, &key, out),
            other => {
                out.retain(|e| e.key != key);
                out.push(Entry {
                    key,
                    value: other.clone(),
                })
            }
        }
    }
}

/// Set `key` (dotted) in `root`, creating tables on the way (a non-table in the way is
/// replaced: a later key wins, as in the overlay's order).
fn insert(root: &mut toml::Table, key: &str, value: toml::Value) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut t = root;
    for p in parts {
        let slot = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !slot.is_table() {
            *slot = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = slot else {
            return;
        };
        t = next;
    }
    t.insert(last.to_string(), value);
}

/// How an overlay key relates to a case's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// The key is in the case's configuration.
    Present,
    /// Its parent table is, and the case builds with the key set (a parameter at its default).
    Accepted,
    /// Neither.
    No,
}

/// Every key path of a case's configuration (tables and leaves), with the numeric value of
/// the numeric leaves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseKeys {
    /// Key path -> `None` for a table or a non-numeric leaf, `Some(x)` for a number.
    keys: BTreeMap<String, Option<f64>>,
    /// The tables among the keys.
    tables: std::collections::BTreeSet<String>,
}

impl CaseKeys {
    /// The keys of a JSON value (the merged configuration, converted).
    pub fn of(value: &serde_json::Value) -> CaseKeys {
        let mut k = CaseKeys::default();
        k.walk(value, String::new());
        k
    }

    fn walk(&mut self, v: &serde_json::Value, key: String) {
        match v {
            serde_json::Value::Object(m) => {
                if !key.is_empty() {
                    self.keys.insert(key.clone(), None);
                }
                self.tables.insert(key.clone());
                for (k, x) in m {
                    let sub = if key.is_empty() {
                        k.clone()
                    } else {
                        format!("{key}.{k}")
                    };
                    self.walk(x, sub);
                }
            }
            serde_json::Value::Number(n) => {
                self.keys.insert(key, n.as_f64());
            }
            _ => {
                self.keys.insert(key, None);
            }
        }
    }

    /// Whether `key` is in the configuration.
    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    /// The numeric value at `key`, if it is a number.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.keys.get(key).copied().flatten()
    }

    /// Whether the parent table of `key` is in the configuration (the root for a top-level
    /// key).
    pub fn has_parent_table(&self, key: &str) -> bool {
        let parent = key.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
        self.tables.contains(parent)
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Up to `n` keys of the configuration nearest to `key` (by edit distance), for "did
    /// you mean" messages.
    pub fn nearest(&self, key: &str, n: usize) -> Vec<String> {
        let keys = self
            .keys
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.as_str());
        perfcast_core::suggest::closest(key, keys, n, None)
            .into_iter()
            .map(String::from)
            .collect()
    }
}

/// Set `path` (below the root) of a JSON object to `value`, creating objects on the way; an
/// error when a non-object is in the way.
pub fn json_set(
    root: &mut serde_json::Value,
    path: &[&str],
    value: serde_json::Value,
) -> Result<()> {
    let Some((last, parents)) = path.split_last() else {
        *root = value;
        return Ok(());
    };
    let mut v = root;
    for p in parents {
        let serde_json::Value::Object(m) = v else {
            return Err(Error::Invalid(format!(
                "`{p}` is inside a value that is not a table"
            )));
        };
        v = m
            .entry(p.to_string())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
    }
    match v {
        serde_json::Value::Object(m) => {
            m.insert(last.to_string(), value);
            Ok(())
        }
        _ => Err(Error::Invalid(format!(
            "the parent of `{last}` is not a table"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_files_and_round_trip() {
        let o = Overlay::from_sets(&[
            "components.gpu.matmul_efficiency=0.7",
            "options.host_launch_us=12",
            "system.name=\"x\"",
            "components.gpu.matmul_efficiency=0.65",
        ])
        .unwrap();
        let keys: Vec<&str> = o.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "options.host_launch_us",
                "system.name",
                "components.gpu.matmul_efficiency"
            ]
        );
        assert!(o.entries[0].is_option() && !o.entries[1].is_option());
        let text = o.to_toml();
        let back = Overlay::parse(&text, "x.toml").unwrap();
        let mut a = o.entries.clone();
        let mut b = back.entries.clone();
        a.sort_by(|x, y| x.key.cmp(&y.key));
        b.sort_by(|x, y| x.key.cmp(&y.key));
        assert_eq!(a, b);
        let error = |r: Result<Overlay>| r.unwrap_err().to_string();
        assert!(error(Overlay::from_sets(&["=1"])).contains("empty key"));
        assert!(error(Overlay::parse("", "e.toml")).contains("no key"));
        assert!(error(Overlay::parse("a = ", "b.toml")).contains("b.toml: not valid TOML"));
    }

    #[test]
    fn case_keys_parent_and_nearest() {
        let v = serde_json::json!({"components": {"gpu": {"kind": "gpu", "k_half": 64.0}},
                                   "options": {"engine": {"runtime_reserve_gib": 1.0}}});
        let k = CaseKeys::of(&v);
        assert!(k.contains("components.gpu.k_half") && k.contains("components.gpu"));
        assert_eq!(k.number("options.engine.runtime_reserve_gib"), Some(1.0));
        assert_eq!(k.number("components.gpu.kind"), None);
        assert!(k.has_parent_table("components.gpu.matmul_efficiency"));
        assert!(!k.has_parent_table("components.nic.bandwidth_gbps"));
        assert!(k.has_parent_table("stack"));
        assert_eq!(
            k.nearest("components.gpu.k_halff", 1),
            ["components.gpu.k_half"]
        );
        let mut j = serde_json::json!({"a": {"b": 1}});
        json_set(&mut j, &["a", "c", "d"], 2.into()).unwrap();
        assert_eq!(j["a"]["c"]["d"], 2);
        assert!(json_set(&mut j, &["a", "b", "x"], 3.into()).is_err());
        assert_eq!(
            perfcast_core::suggest::edit_distance("kitten", "sitting"),
            3
        );
    }
}
