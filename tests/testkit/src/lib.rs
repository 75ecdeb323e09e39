//! perfcast-testkit: what perfcast's tests share (a dev-dependency only, never published).
//!
//! - [`models`]: the models the papers use (`gpt`, `llama2`).
//! - [`systems`]: systems built from the real built-in memory and network plugins (through
//!   `perfcast_builtins::registry()`), with a flat-efficiency test GPU for closed-form checks
//!   or the built-in `gpu`.
//! - [`examples`]: parameters and ops for the example plugins of `plugins/examples`.
//! - [`plugins`]: the example Rust cdylibs built with the workspace's own cargo, C plugins and
//!   programs compiled with the system `cc`.
//! - [`process`]: the repository root, the target and temporary directories, running a
//!   command (a binary without the test's own `PERFCAST_*` variables).
//! - [`golden`]: golden-file comparison with a readable diff and an update switch.
//!
//! It depends on `perfcast-core` and `perfcast-builtins` only, never on `perfcast-engine`: the
//! engine's tests use it, and a dependency back on the engine would be a cycle. Helpers panic
//! with a message on failure: they run inside tests, where a panic is the failure report.

pub mod examples;
pub mod golden;
pub mod models;
pub mod plugins;
pub mod process;
pub mod systems;

pub use models::{gpt, llama2};
pub use process::{tmpdir, workspace_root};
pub use systems::{a100_from_registry, a100_system, registry};

#[cfg(test)]
mod tests {
    /// The engine dev-depends on this crate: a dependency on the engine (or on a crate above
    /// it) would be a cycle that links a second copy of the engine into its own tests.
    #[test]
    fn depends_on_core_and_builtins_only() {
        let manifest = include_str!("../Cargo.toml");
        let deps = manifest
            .split("\n[dependencies]\n")
            .nth(1)
            .and_then(|s| s.split("\n[").next())
            .unwrap_or_default();
        let names: Vec<&str> = deps
            .lines()
            .filter_map(|l| l.split(['=', '.', ' ']).next())
            .filter(|n| n.starts_with("perfcast"))
            .collect();
        assert_eq!(names, ["perfcast-core", "perfcast-builtins"], "{deps}");
    }
}
