//! What a plugin says about its parameters: name, type, unit, default, valid range, one line
//! of meaning and where the value comes from ([`ParamSpec`]). Built-ins declare theirs as a
//! `static` slice given to [`builtin!`](crate::builtin!); dynamic plugins through the ABI's
//! descriptors. The registry keeps them in [`PluginInfo::params`](crate::PluginInfo) (`None`:
//! the plugin declared nothing), and hosts print them (`perfcast plugins --describe KIND`,
//! `docs/reference.md`) and fill in the defaults in force (`perfcast config explain --all`).
//!
//! ```
//! use perfcast_core::param_spec::{ParamSpec, ParamType};
//! static PARAMS: &[ParamSpec] = &[
//!     ParamSpec::required("capacity_gb", ParamType::Float, "GB", "> 0",
//!         "capacity, decimal GB", "the datasheet"),
//!     ParamSpec::with_default("efficiency", ParamType::Float, "", "0.9", "(0, 1]",
//!         "achievable fraction of the peak", "STREAM-like copies, Jia et al. 2021"),
//! ];
//! assert_eq!(PARAMS[1].default.value(), Some("0.9"));
//! ```

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// The type of a parameter's value, as a configuration spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ParamType {
    /// A number (TOML float or integer).
    Float,
    /// A whole number.
    Integer,
    /// `true` or `false`.
    Bool,
    /// A string.
    String,
    /// A table (`{ bf16 = 312.0 }`).
    Table,
    /// A list (`[4, 4, 4]`).
    List,
}

impl ParamType {
    /// Every type, in declaration order (its index is the ABI code).
    pub const ALL: [ParamType; 6] = [
        ParamType::Float,
        ParamType::Integer,
        ParamType::Bool,
        ParamType::String,
        ParamType::Table,
        ParamType::List,
    ];
    /// Lower-case name (`float`, `integer`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ParamType::Float => "float",
            ParamType::Integer => "integer",
            ParamType::Bool => "bool",
            ParamType::String => "string",
            ParamType::Table => "table",
            ParamType::List => "list",
        }
    }
    /// The ABI code (the index in [`ParamType::ALL`]).
    pub const fn code(self) -> u32 {
        self as u32
    }
    /// The type of an ABI code, if it is one.
    pub fn from_code(code: u32) -> Option<ParamType> {
        Self::ALL.get(code as usize).copied()
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a parameter is when a configuration leaves it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum ParamDefault {
    /// It must be given.
    Required,
    /// This value, as TOML (`0.8`, `true`, `"ring"`, `[1, 2]`).
    Value(Cow<'static, str>),
    /// Computed when left out; how (`"from node_nm"`, `"unlimited"`).
    Derived(Cow<'static, str>),
}

impl ParamDefault {
    /// The default value as TOML text, when there is a fixed one.
    pub fn value(&self) -> Option<&str> {
        match self {
            ParamDefault::Value(v) => Some(v),
            _ => None,
        }
    }
    /// ABI code: 0 required, 1 a value, 2 derived.
    pub fn code(&self) -> u32 {
        match self {
            ParamDefault::Required => 0,
            ParamDefault::Value(_) => 1,
            ParamDefault::Derived(_) => 2,
        }
    }
    /// The default of ABI code `code` with its text, if the code is one.
    pub fn from_code(code: u32, text: String) -> Option<ParamDefault> {
        match code {
            0 => Some(ParamDefault::Required),
            1 => Some(ParamDefault::Value(Cow::Owned(text))),
            2 => Some(ParamDefault::Derived(Cow::Owned(text))),
            _ => None,
        }
    }
}

impl fmt::Display for ParamDefault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamDefault::Required => f.write_str("required"),
            ParamDefault::Value(v) => f.write_str(v),
            ParamDefault::Derived(how) => write!(f, "({how})"),
        }
    }
}

/// One parameter of a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// The key in the component's table (`matmul_efficiency`).
    pub name: Cow<'static, str>,
    /// Its type.
    pub ty: ParamType,
    /// Its unit (`TFLOP/s`, `GB`, `us`; empty for a pure number or a label).
    pub unit: Cow<'static, str>,
    /// What it is when left out.
    pub default: ParamDefault,
    /// The values allowed (`> 0`, `(0, 1]`, `>= 1`, `one of: ring, tree, auto`; empty: any).
    pub range: Cow<'static, str>,
    /// One line on what it means.
    pub doc: Cow<'static, str>,
    /// Where its default (or its typical value) comes from: a datasheet, a paper, or
    /// "modelling default".
    pub source: Cow<'static, str>,
}

impl ParamSpec {
    /// A parameter that must be given.
    pub const fn required(
        name: &'static str,
        ty: ParamType,
        unit: &'static str,
        range: &'static str,
        doc: &'static str,
        source: &'static str,
    ) -> ParamSpec {
        ParamSpec {
            name: Cow::Borrowed(name),
            ty,
            unit: Cow::Borrowed(unit),
            default: ParamDefault::Required,
            range: Cow::Borrowed(range),
            doc: Cow::Borrowed(doc),
            source: Cow::Borrowed(source),
        }
    }

    /// A parameter whose default is the TOML value `default`.
    pub const fn with_default(
        name: &'static str,
        ty: ParamType,
        unit: &'static str,
        default: &'static str,
        range: &'static str,
        doc: &'static str,
        source: &'static str,
    ) -> ParamSpec {
        ParamSpec {
            name: Cow::Borrowed(name),
            ty,
            unit: Cow::Borrowed(unit),
            default: ParamDefault::Value(Cow::Borrowed(default)),
            range: Cow::Borrowed(range),
            doc: Cow::Borrowed(doc),
            source: Cow::Borrowed(source),
        }
    }

    /// A parameter computed when left out (`how` says from what).
    pub const fn derived(
        name: &'static str,
        ty: ParamType,
        unit: &'static str,
        how: &'static str,
        range: &'static str,
        doc: &'static str,
        source: &'static str,
    ) -> ParamSpec {
        ParamSpec {
            name: Cow::Borrowed(name),
            ty,
            unit: Cow::Borrowed(unit),
            default: ParamDefault::Derived(Cow::Borrowed(how)),
            range: Cow::Borrowed(range),
            doc: Cow::Borrowed(doc),
            source: Cow::Borrowed(source),
        }
    }
}

/// Check `params` (a component's table) against the parameters a plugin declared, without
/// building anything: every key declared, every required one given, each value of its type.
/// Ranges are the plugin's to check when it builds. The error is
/// [`crate::PluginError::Params`] with the key's path, as a plugin's own would be.
pub fn check_params(
    specs: &[ParamSpec],
    params: &serde_json::Value,
) -> Result<(), crate::PluginError> {
    let bad = |path: &str, message: String| crate::PluginError::Params {
        path: path.to_string(),
        message,
    };
    let empty = serde_json::Map::new();
    let table = match params {
        serde_json::Value::Null => &empty,
        serde_json::Value::Object(m) => m,
        other => {
            return Err(bad(
                "",
                format!("expected a table of parameters, got {other}"),
            ))
        }
    };
    for (key, value) in table {
        let Some(spec) = specs.iter().find(|s| s.name == key.as_str()) else {
            return Err(bad(
                key,
                format!(
                    "unknown key `{key}`{}",
                    crate::suggest::did_you_mean(key, specs.iter().map(|s| s.name.as_ref()))
                ),
            ));
        };
        let ok = match spec.ty {
            ParamType::Float => value.is_number(),
            ParamType::Integer => value.is_i64() || value.is_u64(),
            ParamType::Bool => value.is_boolean(),
            ParamType::String => value.is_string(),
            ParamType::Table => value.is_object(),
            ParamType::List => value.is_array(),
        };
        if !ok {
            return Err(bad(
                key,
                format!("expected {}, got {value}", spec.ty.name()),
            ));
        }
    }
    if let Some(missing) = specs
        .iter()
        .find(|s| s.default == ParamDefault::Required && !table.contains_key(s.name.as_ref()))
    {
        return Err(bad(
            &missing.name,
            format!("missing required parameter `{}`", missing.name),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for t in ParamType::ALL {
            assert_eq!(ParamType::from_code(t.code()), Some(t));
        }
        assert_eq!(ParamType::from_code(99), None);
        for d in [
            ParamDefault::Required,
            ParamDefault::Value("0.8".into()),
            ParamDefault::Derived("from node_nm".into()),
        ] {
            let text = d.value().unwrap_or(match &d {
                ParamDefault::Derived(h) => h,
                _ => "",
            });
            assert_eq!(
                ParamDefault::from_code(d.code(), text.to_string()),
                Some(d.clone())
            );
        }
        assert_eq!(ParamDefault::Derived("x".into()).to_string(), "(x)");
    }

    /// A table is checked against the declared parameters alone: unknown keys (with the
    /// nearest), missing required ones, wrong types; a range is not judged here.
    #[test]
    fn params_are_checked_against_the_declaration() {
        static SPECS: &[ParamSpec] = &[
            ParamSpec::required("capacity_gb", ParamType::Float, "GB", "> 0", "", ""),
            ParamSpec::with_default("stacks", ParamType::Integer, "", "4", ">= 1", "", ""),
            ParamSpec::with_default("name", ParamType::String, "", "\"x\"", "", "", ""),
        ];
        let ok = serde_json::json!({"capacity_gb": 80, "stacks": 5});
        assert!(check_params(SPECS, &ok).is_ok());
        // Out of range is the plugin's to judge when it builds.
        assert!(check_params(SPECS, &serde_json::json!({"capacity_gb": -1.0})).is_ok());
        for (params, path, want) in [
            (
                serde_json::json!({"capacity_gb": 1, "stack": 2}),
                "stack",
                "did you mean `stacks`",
            ),
            (
                serde_json::json!({"stacks": 2}),
                "capacity_gb",
                "missing required parameter",
            ),
            (
                serde_json::json!({"capacity_gb": "big"}),
                "capacity_gb",
                "expected float",
            ),
            (
                serde_json::json!({"capacity_gb": 1, "stacks": 2.5}),
                "stacks",
                "expected integer",
            ),
            (serde_json::json!([1]), "", "expected a table"),
        ] {
            match check_params(SPECS, &params) {
                Err(crate::PluginError::Params { path: p, message }) => {
                    assert_eq!(p, path, "{params}");
                    assert!(message.contains(want), "{params}: {message}");
                }
                other => panic!("{params}: {other:?}"),
            }
        }
    }
}
