//! perfcast-testkit: what perfcast's tests share (a dev-dependency only, never published).
//!
//! - [`models`]: the models the papers use (`gpt`, `llama2`).
//! - [`systems`]: systems built from the real built-in memory and network plugins (through
//!   `perfcast_builtins::registry()`), with a flat-efficiency test GPU for closed-form checks
//!   or the built-in `gpu`.
//! - [`flat`]: A100-like and H100-like systems with a flat-efficiency GPU, for the
//!   inference and serving tests' closed forms.
//! - [`examples`]: parameters and ops for the example plugins of `plugins/examples`.
//! - [`plugins`]: the example Rust cdylibs built with the workspace's own cargo, C plugins and
//!   programs compiled with the system `cc`.
//! - [`process`]: the repository root, the target and temporary directories, running a
//!   command (a binary without the test's own `PERFCAST_*` variables).
//! - [`golden`]: golden-file comparison with a readable diff and an update switch.
//!
//! It depends on `perfcast-core` and `perfcast-builtins` only, never on `perfcast-engine`: the
//! engine's tests use it, and a dependency back on the engine would be a cycle
//! (`tests/layering.rs` holds it to that). Helpers panic
//! with a message on failure: they run inside tests, where a panic is the failure report.

pub mod examples;
pub mod flat;
pub mod golden;
pub mod models;
pub mod plugins;
pub mod process;
pub mod systems;

pub use models::{deepseek_v3, gpt, llama2};
pub use process::{tmpdir, workspace_root};
pub use systems::{a100_from_registry, a100_system, registry};
