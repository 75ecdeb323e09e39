//! Helpers shared by the end-to-end tests of the `perfcast` binary: perfcast-testkit's (the
//! repository root, a fresh temporary directory, running a command), and the one thing only
//! this package can do, running the binary cargo built for these tests without the test's own
//! `PERFCAST_*` environment. Each test file adds its own checks of the output on top.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code, unused_imports)]

pub use perfcast_testkit::process::{output, spawn, Out, Running, DEADLINE};
pub use perfcast_testkit::{tmpdir, workspace_root as repo};
use std::path::Path;
use std::process::Command;

/// `perfcast args` in `dir`, without any `PERFCAST_*` variable of the test's own environment.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    perfcast_testkit::process::command(env!("CARGO_BIN_EXE_perfcast"), dir, args)
}
