//! perfcast-config: the configuration every perfcast host (the CLI, later Python bindings or
//! a web page) reads: layers, software stacks, plugin libraries, composition.
//!
//! - [`Plugins`]: the plugins the host chose; every configuration's registry starts from
//!   them (this crate links no built-in).
//! - [`Config`]: figment layering of built-in defaults < config files (TOML, YAML, JSON; with
//!   `include = [...]` of other files or of built-in `preset:NAME`s beneath them) <
//!   `PERFCAST_*` environment < `--set key=value`, every value tagged with its origin.
//! - Composition: named component instances (`[components.NAME] kind = "..."`) resolved
//!   through the [`perfcast_core::Registry`] (the host's plugins plus libraries) into a
//!   [`Device`] or a [`perfcast_core::System`].
//! - [`ops`]: the `[[ops]]` of a configuration (`perfcast roofline` times them:
//!   `perfcast_scenario::roofline`).
//! - [`stacks`]: `stack = "NAME"` puts a software-stack preset's `[software]` table beneath
//!   every file (perfcast-scenario interprets it).
//!
//! Invariant: every error names the key path and where the value came from (a file, an
//! environment variable, a `--set`); nothing here panics on user input, and every number
//! handed to a host for output is finite.

pub mod compose;
pub mod config;
pub mod error;
pub mod layers;
pub mod ops;
pub mod plugins;
pub mod stacks;

pub use compose::Device;
pub use config::{Config, Explained, LibraryPolicy, Sources, SECTIONS};
pub use error::HostError;
pub use layers::STACK_SCHEME;
pub use layers::{
    preset, preset_group, preset_groups, preset_names, LayerOrigin, ENV_PREFIX, PRESET_SCHEME,
    STACKS_GROUP,
};
pub use ops::{NamedOp, OP_KINDS};
/// Reading an input file whole, bounded, regular files only ([`perfcast_kernels::input`]).
pub use perfcast_kernels::input;
/// Plugin isolation (`--isolate`): the options of a plugin host and its server side.
pub use perfcast_loader::isolate;
pub use plugins::{
    describe, plugin_rows, reference_markdown, registry_with, Described, LibraryInfo, ParamRow,
    PluginRow, PluginSpec, Plugins,
};
pub use stacks::stack_names;

#[cfg(test)]
mod tests;
