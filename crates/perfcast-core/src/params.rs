//! Parameter parsing for plugin factories: a component's parameters arrive as a JSON value and
//! are deserialised into the plugin's own struct (with `#[serde(deny_unknown_fields)]`), so a
//! mistyped key is an error that names the key path.

use crate::error::PluginError;
use serde::de::DeserializeOwned;

/// Deserialise `params` into `T`, reporting the key path of the first error.
pub fn parse<T: DeserializeOwned>(params: &serde_json::Value) -> Result<T, PluginError> {
    // A component given no parameters is an empty table, not `null`.
    let empty = serde_json::Value::Object(Default::default());
    let v = if params.is_null() { &empty } else { params };
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        PluginError::Params {
            path: if path == "." { String::new() } else { path },
            message: crate::suggest::rewrite_serde(&e.into_inner().to_string()),
        }
    })
}

/// Error unless `v` is finite and strictly positive.
pub fn positive(key: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!("must be a finite number > 0, got {v}"),
        })
    }
}

/// Error unless `v` is a fraction in (0, 1].
pub fn fraction(key: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!("must be in (0, 1], got {v}"),
        })
    }
}

/// Error unless `v` is finite and non-negative.
pub fn non_negative(key: &str, v: f64) -> Result<f64, PluginError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(PluginError::Params {
            path: key.to_string(),
            message: format!("must be a finite number >= 0, got {v}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct P {
        a: f64,
        inner: Inner,
    }
    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        b: u32,
    }

    #[test]
    fn errors_name_the_key_path() {
        let e = parse::<P>(&serde_json::json!({"a": 1.0, "inner": {"b": "x"}})).unwrap_err();
        assert!(
            matches!(&e, PluginError::Params { path, .. } if path == "inner.b"),
            "{e}"
        );
        let e = parse::<P>(&serde_json::json!({"a": 1.0, "inner": {"b": 1, "c": 2}})).unwrap_err();
        assert!(e.to_string().contains("unknown key `c`"), "{e}");
        assert!(positive("x", f64::NAN).is_err());
        assert!(fraction("x", 1.5).is_err());
        assert!(non_negative("x", 0.0).is_ok());
    }
}
