//! What a plugin call reports when it fails, whichever way it crossed (a C status code, a Rust
//! `FfiError`, a plugin host's wire error), before a category's adapter puts it under the
//! component's name.

use perfcast_abi::codes::ERR_PARAMS;
use perfcast_core::PluginError;

/// An error reported by a plugin call: a status code (`codes::ERR_*`), the parameter key path
/// (parameter errors only) and the plugin's message.
#[derive(Debug, Clone)]
pub(crate) struct CallError {
    pub code: i32,
    pub path: String,
    pub message: String,
}

impl CallError {
    pub fn into_plugin_error(self, plugin: &str) -> PluginError {
        if self.code == ERR_PARAMS {
            PluginError::Params {
                path: self.path,
                message: self.message,
            }
        } else {
            PluginError::Failed {
                plugin: plugin.to_string(),
                message: self.message,
            }
        }
    }
}
