//! Helpers shared by the end-to-end tests of the `perfcast` binary: the repository root, a
//! fresh temporary directory, and running the binary without the test's own `PERFCAST_*`
//! environment. Each test file adds its own checks of the output on top.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// A new, empty directory `<prefix>-<pid>-<n>` under cargo's temporary directory for tests.
pub fn tmpdir(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `perfcast args` in `dir`, without any `PERFCAST_*` variable of the test's own environment.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_perfcast"));
    cmd.current_dir(dir).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("PERFCAST_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// Run `cmd`: its exit code (-1 if it was killed by a signal), stdout and stderr.
pub fn output(cmd: &mut Command) -> Out {
    let o = cmd.output().expect("run perfcast");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}
